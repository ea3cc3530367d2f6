//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/test/e2e/evidence"
)

// Scenario 15 (issue 41): graceguard degrades, never blocks.
const (
	degradeReps = 10
	// degradeHogs is how many busy processes run on the node while the
	// webhook is held to its CPU request, at degradeHogNice.
	degradeHogs    = 2
	degradeHogNice = 5
)

func degrade(ctx context.Context) {
	d := &evidence.Degrade{Replicas: degradeReps, RouterLag: evidence.S(routerLag), Rate: rolloutRate, Work: evidence.S(rolloutWork), ClientTimeout: evidence.S(rolloutTimeout)}
	evMu.Lock()
	ev.Degrade = d
	evMu.Unlock()
	ck := &d.Checks

	By("a Deployment of 10 in an opted-in namespace, while graceguard is up")
	// Its own probes: the budget (the preStop sleep, the grace) is what
	// the mutating floor gives while graceguard is down; the probes
	// graceguard would add from annotations are the webhook's alone.
	dep := appDeployment(nsDegrade, "web", degradeReps, map[string]string{
		"graceguard.io/routing-delay": rolloutRouting.String(),
		"graceguard.io/max-work":      "2s",
	})
	ownProbes(&dep.Spec.Template.Spec.Containers[0])
	must(kube.AppsV1().Deployments(nsDegrade).Create(ctx, dep, metav1.CreateOptions{}))
	must(kube.CoreV1().Services(nsDegrade).Create(ctx, appService(nsDegrade, "web", map[string]string{"app": "web"}), metav1.CreateOptions{}))
	waitDeploymentDone(ctx, nsDegrade, "web", 5*time.Minute)

	arms := []struct {
		arm     *evidence.DegradeArm
		disrupt func() (restore func())
	}{
		{&evidence.DegradeArm{Arm: evidence.Arm{Name: "a: graceguard down", Namespace: nsDegrade, OptedIn: true},
			Disruption: "both webhook replicas SIGKILLed (deleted with grace 0), the Deployment at 0: kept down"}, func() func() { return webhookDown(ctx) }},
		{&evidence.DegradeArm{Arm: evidence.Arm{Name: "b: graceguard starved", Namespace: nsDegrade, OptedIn: true}}, nil},
	}
	arms[1].disrupt = func() func() {
		restore, request := webhookHeldToRequest(ctx)
		stopHogs := cpuHogs(ctx)
		arms[1].arm.Disruption = fmt.Sprintf("both webhook replicas held to their CPU request (%s, a cgroup quota), %d CPU hogs at nice %d on the node", request, degradeHogs, degradeHogNice)
		return func() { stopHogs(); restore() }
	}
	for _, a := range arms {
		By(a.arm.Name + ": a rollout restart under load")
		d.Arms = append(d.Arms, a.arm)
		restore := a.disrupt()
		before := degradeCounters(ctx)
		start := time.Now()
		runArm(ctx, &a.arm.Arm, func() {
			restartTemplate(ctx, nsDegrade, "web")
			waitDeploymentDone(ctx, nsDegrade, "web", 8*time.Minute)
		})
		after := degradeCounters(ctx)
		a.arm.FailOpen = after.failOpen - before.failOpen
		a.arm.Shed = shedSince(ctx, start)
		a.arm.Refused = failedCreates(ctx, nsDegrade, start)
		for _, p := range readyPods(ctx, nsDegrade, "app=web") {
			switch p.Labels[mutate.LabelTreated] {
			case mutate.LabelTreatedValue:
				a.arm.ByWebhook++
			case mutate.LabelTreatedByFloor:
				a.arm.ByFloor++
			}
			if p.Annotations[budgetKey] == "" {
				a.arm.NoBudget++
			}
			if hookPastGrace(&p) {
				a.arm.HookOverGrace++
			}
		}
		if a.arm.Name == arms[0].arm.Name {
			By("GraceguardNoReadyWebhook fires while graceguard stays down")
			Eventually(func(g Gomega) {
				x, err := mon.alertState(ctx, "GraceguardNoReadyWebhook", nil)
				g.Expect(err).NotTo(HaveOccurred())
				a.arm.Alert = x.State
				g.Expect(x.State).To(Equal("firing"))
			}).WithContext(ctx).WithTimeout(4 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		}
		restore()
	}

	for _, a := range d.Arms {
		ck.Add(a.Name+": every Pod replaced under load", fmt.Sprintf("%d replaced, > %d requests sent", degradeReps, rolloutRate*5),
			a.Replaced == degradeReps && a.Sent > rolloutRate*5, "%d replaced, %d sent over %s", a.Replaced, a.Sent, a.Load)
		ck.Add(a.Name+": no Pod creation refused", "0 FailedCreate", a.Refused == 0, "%d FailedCreate events", a.Refused)
		ck.Add(a.Name+": no new Pod whose hook outlasts its grace", "0", a.HookOverGrace == 0, "%d", a.HookOverGrace)
		ck.Add(a.Name+": every new Pod carries graceguard's budget (the webhook's or the mutating floor's)", fmt.Sprintf("%d of %d", degradeReps, degradeReps),
			a.NoBudget == 0 && a.ByWebhook+a.ByFloor == degradeReps, "webhook %d, floor %d, none %d", a.ByWebhook, a.ByFloor, a.NoBudget)
		ck.Add(a.Name+": no failed request", "0 failed", a.Failed == 0 && a.Sent > 0, "%d failed of %d (%s)", a.Failed, a.Sent, evidence.KindList(a.ByKind))
	}
	A := d.Arms[0]
	ck.Add("a: while graceguard is down, the mutating floor gave every new Pod its budget", fmt.Sprintf("%d by the floor", degradeReps),
		A.ByFloor == degradeReps, "%d by the floor, %d by the webhook", A.ByFloor, A.ByWebhook)
	ck.Add("a: GraceguardNoReadyWebhook fires", "firing", A.Alert == "firing", "%s", evidence.OrNone(A.Alert))
	Expect(ck.Failed()).To(BeEmpty())
}

// webhookDown SIGKILLs both webhook replicas and keeps them down: the
// Deployment scaled to 0 and its Pods deleted with grace 0. restore scales
// it back and waits until Pods are mutated again.
func webhookDown(ctx context.Context) (restore func()) {
	GinkgoHelper()
	scale := must(kube.AppsV1().Deployments(releaseNS).GetScale(ctx, fullname, metav1.GetOptions{}))
	replicas := scale.Spec.Replicas
	pods := must(kube.CoreV1().Pods(releaseNS).List(ctx, metav1.ListOptions{LabelSelector: webhookLabel}))
	scale.Spec.Replicas = 0
	must(kube.AppsV1().Deployments(releaseNS).UpdateScale(ctx, fullname, scale, metav1.UpdateOptions{}))
	zero := int64(0)
	for _, p := range pods.Items {
		_ = kube.CoreV1().Pods(releaseNS).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	}
	Eventually(func() []corev1.Pod {
		return must(kube.CoreV1().Pods(releaseNS).List(ctx, metav1.ListOptions{LabelSelector: webhookLabel})).Items
	}).WithContext(ctx).WithTimeout(time.Minute).Should(BeEmpty(), "graceguard's replicas are gone")
	waitUnmutated(ctx)
	return func() {
		s := must(kube.AppsV1().Deployments(releaseNS).GetScale(ctx, fullname, metav1.GetOptions{}))
		s.Spec.Replicas = replicas
		must(kube.AppsV1().Deployments(releaseNS).UpdateScale(ctx, fullname, s, metav1.UpdateOptions{}))
		waitDeploymentDone(ctx, releaseNS, fullname, 3*time.Minute)
		waitMutated(ctx)
	}
}

// webhookHeldToRequest gives the webhook container a CPU limit equal to its
// request, so the kernel (a cgroup quota) holds each replica to it, and
// waits for graceguard's rollout. restore removes the limit.
func webhookHeldToRequest(ctx context.Context) (restore func(), request string) {
	GinkgoHelper()
	dep := must(kube.AppsV1().Deployments(releaseNS).Get(ctx, fullname, metav1.GetOptions{}))
	i := slices.IndexFunc(dep.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == "webhook" })
	Expect(i).To(BeNumerically(">=", 0), "the webhook container")
	req := dep.Spec.Template.Spec.Containers[i].Resources.Requests.Cpu().String()
	patch := func(limit string) {
		body := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"webhook","resources":{"limits":{"cpu":%s}}}]}}}}`, limit)
		must(kube.AppsV1().Deployments(releaseNS).Patch(ctx, fullname, types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}))
		waitDeploymentDone(ctx, releaseNS, fullname, 5*time.Minute)
	}
	patch(`"` + req + `"`)
	return func() { patch("null"); waitMutated(ctx) }, req
}

// cpuHogs starts busy processes on the node (this machine), niced, and
// returns what stops them.
func cpuHogs(ctx context.Context) (stop func()) {
	GinkgoHelper()
	var cmds []*exec.Cmd
	for range degradeHogs {
		c := exec.CommandContext(ctx, "nice", "-n", fmt.Sprint(degradeHogNice), "sh", "-c", "while :; do :; done")
		Expect(c.Start()).To(Succeed())
		cmds = append(cmds, c)
	}
	return func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
}

// waitUnmutated waits until a dry-run Pod in an opted-in namespace comes
// back without graceguard's webhook ("true" label): the API server sees
// no replica.
func waitUnmutated(ctx context.Context) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		p, err := kube.CoreV1().Pods(nsDegrade).Create(ctx, appPod(nsDegrade, "down-probe", nil, nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		g.Expect(err).NotTo(HaveOccurred(), "a Pod create while graceguard is down")
		g.Expect(p.Labels[mutate.LabelTreated]).NotTo(Equal(mutate.LabelTreatedValue))
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
}

// waitMutated waits until graceguard's webhook treats Pods again.
func waitMutated(ctx context.Context) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		p, err := kube.CoreV1().Pods(nsDegrade).Create(ctx, appPod(nsDegrade, "up-probe", nil, nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.Labels[mutate.LabelTreated]).To(Equal(mutate.LabelTreatedValue))
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
}

// failedCreates counts the FailedCreate events of ns since start: Pod
// creations a controller had refused.
func failedCreates(ctx context.Context, ns string, since time.Time) int {
	GinkgoHelper()
	n := 0
	for _, e := range must(kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedCreate"})).Items {
		last := e.LastTimestamp.Time
		if last.IsZero() {
			last = e.EventTime.Time
		}
		if !last.Before(since) {
			n += int(max(e.Count, 1))
		}
	}
	return n
}

// hookPastGrace reports whether a container's preStop hook (as graceguard
// reads it) lasts as long as the Pod's grace.
func hookPastGrace(p *corev1.Pod) bool {
	g := int64(30)
	if p.Spec.TerminationGracePeriodSeconds != nil {
		g = *p.Spec.TerminationGracePeriodSeconds
	}
	for _, c := range p.Spec.Containers {
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
			continue
		}
		if d, _ := mutate.PreStopLength(c.Lifecycle.PreStop); d >= time.Duration(g)*time.Second {
			return true
		}
	}
	return false
}

type degradeCount struct{ failOpen float64 }

// degradeCounters reads the API server's fail-open calls of graceguard's
// webhooks.
func degradeCounters(ctx context.Context) degradeCount {
	GinkgoHelper()
	var c degradeCount
	for name, v := range apiserverCounters(ctx, "apiserver_admission_webhook_fail_open_count") {
		if strings.HasSuffix(name, ".graceguard.io") {
			c.failOpen += v
		}
	}
	return c
}

// shedSince is how many reviews graceguard's replicas shed (429) or let
// expire since start, as Prometheus scraped them (counters of replicas
// that restarted meanwhile included, by increase()).
func shedSince(ctx context.Context, start time.Time) float64 {
	GinkgoHelper()
	time.Sleep(promSettle)
	q := fmt.Sprintf(`sum(increase(graceguard_admission_decisions_total{reason=~"overloaded|deadline-exceeded"}[%ds]))`, int(time.Since(start).Seconds())+1)
	x, _, err := mon.value(ctx, q)
	Expect(err).NotTo(HaveOccurred())
	return x
}
