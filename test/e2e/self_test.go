//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/test/e2e/evidence"
)

// graceguard's own rollout while Pods are created.
const (
	churnClients = 4
	// churnPause is each client's pause between creates (~10/s each).
	churnPause = 100 * time.Millisecond
	churnGate  = "graceguard.io/e2e-hold"
)

func selfRollout(ctx context.Context) {
	s := &evidence.SelfRollout{Clients: churnClients}
	evMu.Lock()
	ev.SelfRollout = s
	evMu.Unlock()

	metrics := func() map[string]map[string]float64 {
		return map[string]map[string]float64{
			"requests":  apiserverCounters(ctx, "apiserver_admission_webhook_request_total"),
			"failOpen":  apiserverCounters(ctx, "apiserver_admission_webhook_fail_open_count"),
			"rejection": apiserverCounters(ctx, "apiserver_admission_webhook_rejection_count"),
			"skipped":   apiserverCounters(ctx, "apiserver_admission_match_condition_exclusions_total"),
		}
	}
	before := metrics()
	old := readyPods(ctx, releaseNS, webhookLabel)
	oldLogs := map[string]*logFollower{}
	for _, p := range old {
		s.OldPods = append(s.OldPods, p.Name)
		// The old replicas' logs to their end: graceguard's own shutdown.
		oldLogs[p.Name] = followContainerLog(ctx, releaseNS, p.Name, "webhook")
	}
	defer func() {
		for name, lf := range oldLogs {
			lf.waitEnd(10 * time.Second)
			lf.save("webhook-rollout-" + name)
		}
		saveLogs(ctx, releaseNS, webhookLabel, "webhook-after-rollout")
	}()
	// After the rollout: what the old replicas logged about their shutdown.
	shutdownLog := func() {
		names := slices.Sorted(maps.Keys(oldLogs))
		for _, name := range names {
			lf := oldLogs[name]
			lf.waitEnd(10 * time.Second)
			lf.mu.Lock()
			for _, line := range lf.raw {
				var l struct {
					TS  string `json:"ts"`
					Msg string `json:"msg"`
				}
				if json.Unmarshal([]byte(line), &l) == nil && strings.HasPrefix(l.Msg, "shutdown") {
					s.Shutdown = append(s.Shutdown, fmt.Sprintf("%s %s: %s", l.TS, name, l.Msg))
				}
			}
			lf.mu.Unlock()
		}
	}
	sort.Strings(s.OldPods)

	// Real creates of real Pods in an opted-in namespace; a scheduling gate
	// keeps them from running (admission is what is under test).
	var (
		mu        sync.Mutex
		latencies []time.Duration
		wg        sync.WaitGroup
	)
	stop := make(chan struct{})
	start := time.Now()
	for i := range churnClients {
		wg.Add(1)
		go func() {
			defer GinkgoRecover()
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				p := appPod(nsChurn, "", map[string]string{"app": "churn"}, nil)
				p.GenerateName = fmt.Sprintf("churn-%d-", i)
				p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: churnGate}}
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				t := time.Now()
				created, err := kube.CoreV1().Pods(nsChurn).Create(cctx, p, metav1.CreateOptions{})
				d := time.Since(t)
				cancel()
				mu.Lock()
				latencies = append(latencies, d)
				switch {
				case err != nil:
					s.Failed++
					if len(s.Errors) < 10 {
						s.Errors = append(s.Errors, fmt.Sprintf("at %s: %s", evidence.S(t.Sub(start)), trimErr(err)))
					}
				case created.Annotations[budgetKey] == "":
					s.Created++
					s.Unmutated++
					if len(s.Errors) < 10 {
						s.Errors = append(s.Errors, fmt.Sprintf("at %s: %s created without %s (fail-open)", evidence.S(t.Sub(start)), created.Name, budgetKey))
					}
				default:
					s.Created++
				}
				mu.Unlock()
				time.Sleep(churnPause)
			}
		}()
	}

	time.Sleep(baseline)
	restart := time.Now()
	restartTemplate(ctx, releaseNS, fullname)
	waitDeploymentDone(ctx, releaseNS, fullname, 5*time.Minute)
	s.Rollout = evidence.S(time.Since(restart))
	time.Sleep(baseline)
	close(stop)
	wg.Wait()
	s.Load = evidence.S(time.Since(start))
	after := metrics()
	shutdownLog()

	for _, p := range readyPods(ctx, releaseNS, webhookLabel) {
		s.NewPods = append(s.NewPods, p.Name)
	}
	sort.Strings(s.NewPods)
	slices.Sort(latencies)
	if n := len(latencies); n > 0 {
		s.P50, s.P99, s.Max = evidence.S(latencies[n/2]), evidence.S(latencies[(n*99)/100]), evidence.S(latencies[n-1])
	}
	for _, name := range graceguardWebhooks {
		s.Metrics = append(s.Metrics, evidence.WebhookMetrics{Name: name,
			Requests:  after["requests"][name] - before["requests"][name],
			FailOpen:  after["failOpen"][name] - before["failOpen"][name],
			Rejection: after["rejection"][name] - before["rejection"][name],
			Skipped:   after["skipped"][name] - before["skipped"][name],
		})
	}

	// Every Pod stored, whoever created it, carries the budget.
	pods, err := kube.CoreV1().Pods(nsChurn).List(ctx, metav1.ListOptions{LabelSelector: "app=churn"})
	Expect(err).NotTo(HaveOccurred())
	var stored, withBudget int
	for _, p := range pods.Items {
		stored++
		if p.Annotations[budgetKey] != "" {
			withBudget++
		}
	}

	ck := &s.Checks
	replaced := len(s.NewPods) == len(s.OldPods) && len(s.NewPods) > 0
	for _, n := range s.NewPods {
		if slices.Contains(s.OldPods, n) {
			replaced = false
		}
	}
	ck.Add("both webhook replicas were replaced while Pods were created", "2 new replicas", replaced, "old %s → new %s in %s", strings.Join(s.OldPods, ","), strings.Join(s.NewPods, ","), s.Rollout)
	ck.Add("no Pod create failed", "0 failed", s.Failed == 0 && s.Created > 0, "%d created, %d failed %v", s.Created, s.Failed, s.Errors)
	ck.Add("every stored Pod carries "+budgetKey, fmt.Sprintf("%d of %d", s.Created, s.Created), stored == s.Created && withBudget == stored, "%d of %d stored (%d unmutated at create)", withBudget, stored, s.Unmutated)
	var fo, rej, mut, val, valSkipped float64
	for _, m := range s.Metrics {
		fo += m.FailOpen
		rej += m.Rejection
		switch m.Name {
		case "mutate-pods.graceguard.io":
			mut = m.Requests
		case "validate-pods.graceguard.io":
			val, valSkipped = m.Requests, m.Skipped
		}
	}
	ck.Add("apiserver_admission_webhook_fail_open_count delta (graceguard's webhooks)", "0", fo == 0, "%g", fo)
	ck.Add("apiserver_admission_webhook_rejection_count delta (graceguard's webhooks)", "0", rej == 0, "%g", rej)
	// Every create meets the mutating webhook; validate-pods is called
	// unless its CEL condition proves the stored Pod (docs/admission.md).
	ck.Add("the apiserver called graceguard's mutating webhook for every create, and validate-pods or its proof for every stored Pod",
		fmt.Sprintf(">= %d mutate calls, >= %d validate-pods calls or skips", s.Created+s.Failed, s.Created),
		mut >= float64(s.Created+s.Failed) && val+valSkipped >= float64(s.Created), "%g mutate, %g validate-pods calls + %g skipped", mut, val, valSkipped)

	By("deleting the created Pods")
	zero := int64(0)
	Expect(kube.CoreV1().Pods(nsChurn).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{LabelSelector: "app=churn"})).To(Succeed())
	Expect(s.Checks.Failed()).To(BeEmpty())
}
