//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/test/e2e/evidence"
	"github.com/graceguard/graceguard/test/harness/apiserver"
)

// Scenario 18 (issue 43): Argo Rollouts' real controller runs a canary on
// the node under load. hack/argo-rollouts.sh builds its rollouts-controller
// from the Go module proxy (GG_E2E_ARGO_ROLLOUTS names the binary), at the
// version whose CRDs the suite installs (test/harness/apiserver); it runs on
// the node as a host process with the admin kubeconfig, as the controller
// manager does. A Rollout of the drain app, behind the suite's router and
// Service, moves to a new revision through setWeight steps and pauses,
// with no traffic router: Argo splits traffic by replica counts, scaling
// the canary ReplicaSet up and the stable one down, and the ReplicaSet
// controller deletes the old Pods. The chart registers the workload
// webhook's Rollout rule with webhooks.validateWorkloads.argoRollouts:
// always (installValues): Argo is installed after graceguard here.
const (
	argoReplicas = 4
	argoPause    = 5 * time.Second
	// argoShortDelay is the blue-green Rollout's scaleDownDelaySeconds,
	// shorter than its Pods' routing term (rolloutRouting).
	argoShortDelay = 2
)

// argoWeights are the canary's setWeight steps, each followed by a pause
// of argoPause; 100 % follows the last.
var argoWeights = []int{25, 50, 75}

var rolloutsGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}

func argoCanary(ctx context.Context) {
	a := &evidence.ArgoRollout{Started: ev.Started, Env: ev.Env, Replicas: argoReplicas, RouterLag: evidence.S(routerLag),
		Rate: rolloutRate, Work: evidence.S(rolloutWork), ClientTimeout: evidence.S(rolloutTimeout), Version: apiserver.ArgoRolloutsVersion}
	evMu.Lock()
	ev.ArgoRollout = a
	evMu.Unlock()
	bin := os.Getenv("GG_E2E_ARGO_ROLLOUTS")
	Expect(bin).NotTo(BeEmpty(), "GG_E2E_ARGO_ROLLOUTS must name Argo Rollouts' controller (make e2e builds it with hack/argo-rollouts.sh)")
	a.Controller = versionLine(ctx, bin, "--version")

	By("installing Argo Rollouts' CRDs from the pinned module")
	dir := must(apiserver.FindArgoCRDs(ctx))
	crds := must(envtest.InstallCRDs(cl.RESTConfig, envtest.CRDInstallOptions{Paths: []string{dir}}))
	for _, c := range crds {
		a.CRDs = append(a.CRDs, c.Name)
	}
	slices.Sort(a.CRDs)
	DeferCleanup(func() {
		if os.Getenv("GG_E2E_KEEP") != "1" {
			_ = envtest.UninstallCRDs(cl.RESTConfig, envtest.CRDInstallOptions{Paths: []string{dir}})
		}
	})
	argoLog := startArgoController(ctx, bin)

	vwc := must(kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, fullname, metav1.GetOptions{}))
	a.WebhookRule = "none"
	for _, w := range vwc.Webhooks {
		for _, r := range w.Rules {
			if slices.Contains(r.APIGroups, "argoproj.io") && slices.Contains(r.Resources, "rollouts") {
				a.WebhookRule = fmt.Sprintf("%s: %s/%s %s", w.Name, rolloutsGVR.Group, strings.Join(r.APIVersions, ","), strings.Join(r.Resources, ","))
			}
		}
	}

	annotations := map[string]string{
		"graceguard.io/routing-delay":  rolloutRouting.String(),
		"graceguard.io/max-work":       "2s",
		"graceguard.io/readiness-path": "/ready",
		"graceguard.io/liveness-path":  "/live",
	}
	a.Annotations = annotationList(annotations)
	var steps []any
	for _, w := range argoWeights {
		steps = append(steps, map[string]any{"setWeight": int64(w)}, map[string]any{"pause": map[string]any{"duration": argoPause.String()}})
		a.Steps = append(a.Steps, fmt.Sprintf("setWeight %d", w), "pause "+argoPause.String())
	}
	canary := map[string]any{"canary": map[string]any{"maxSurge": int64(1), "maxUnavailable": int64(0), "steps": steps}}
	a.Strategy = "canary maxSurge=1 maxUnavailable=0, no trafficRouting"

	arms := []*evidence.ArgoArm{
		{Arm: evidence.Arm{Name: "A: graceguard", Namespace: nsArgoA, OptedIn: true}},
		{Arm: evidence.Arm{Name: "B: no graceguard", Namespace: nsArgoB, OptedIn: false}},
	}
	warns := &warningLog{}
	cfg := rest.CopyConfig(cl.RESTConfig)
	cfg.WarningHandler = warns
	dyn := must(dynamic.NewForConfig(cfg))
	By("creating both Rollouts and their Services")
	var pods []*podLog
	for _, arm := range arms {
		pods = append(pods, logPods(ctx, arm.Namespace))
		var ann map[string]string
		if arm.OptedIn {
			ann = annotations
		}
		must(dyn.Resource(rolloutsGVR).Namespace(arm.Namespace).Create(ctx, argoRollout(arm.Namespace, "web", ann, !arm.OptedIn, canary), metav1.CreateOptions{}))
		must(kube.CoreV1().Services(arm.Namespace).Create(ctx, appService(arm.Namespace, "web", map[string]string{"app": "web"}), metav1.CreateOptions{}))
		a.Arms = append(a.Arms, arm)
	}
	for _, arm := range arms {
		arm.FromHash = waitArgoHealthy(ctx, dyn, arm, "", 3*time.Minute)
	}
	for _, arm := range arms {
		By("moving " + arm.Name + " to a new revision under load")
		t0 := time.Now()
		runArmWith(ctx, &arm.Arm, armLoad{rate: rolloutRate, work: rolloutWork, timeout: rolloutTimeout}, argoReplicas, func() {
			restartRollout(ctx, dyn, arm.Namespace, "web")
			arm.ToHash = waitArgoHealthy(ctx, dyn, arm, arm.FromHash, 5*time.Minute)
		})
		arm.StepEvents = stepEvents(argoLog, arm.Namespace, t0)
	}
	canaryWarnings := warns.take()
	for i, arm := range arms {
		arm.Pods = pods[i].stop()
	}

	By("creating a blue-green Rollout whose scaleDownDelaySeconds is shorter than its Pods' routing term")
	bg := argoRollout(nsArgoA, "blue-green", annotations, false, map[string]any{"blueGreen": map[string]any{
		"activeService": "blue-green", "scaleDownDelaySeconds": int64(argoShortDelay)}})
	Expect(unstructured.SetNestedField(bg.Object, int64(0), "spec", "replicas")).To(Succeed())
	must(dyn.Resource(rolloutsGVR).Namespace(nsArgoA).Create(ctx, bg, metav1.CreateOptions{}))
	a.Warning = evidence.ArgoWarning{Strategy: fmt.Sprintf("blueGreen scaleDownDelaySeconds=%d", argoShortDelay),
		Routing: rolloutRouting.String(), Warnings: warns.take()}
	Expect(dyn.Resource(rolloutsGVR).Namespace(nsArgoA).Delete(ctx, "blue-green", metav1.DeleteOptions{})).To(Succeed())

	want := budget.Budget{Routing: rolloutRouting, Work: 2 * time.Second, Cleanup: 2 * time.Second, Margin: 3 * time.Second}
	wantBudget := want.Annotation(max(want.Grace(), 30))
	A, B := arms[0], arms[1]
	ck := &a.Checks
	ck.Add("Argo Rollouts' controller built from the pinned module", apiserver.ArgoRolloutsVersion,
		strings.HasPrefix(a.Controller, apiserver.ArgoRolloutsVersion), "%s", a.Controller)
	ck.Add("the chart registered the workload webhook for Rollouts", "validate-workloads.graceguard.io: argoproj.io rollouts",
		strings.HasPrefix(a.WebhookRule, "validate-workloads.graceguard.io:"), "%s", a.WebhookRule)
	for _, arm := range arms {
		ck.Add(arm.Name+": the Rollout reached Healthy at the new revision", "Healthy, a new stable ReplicaSet, revision 2",
			arm.Phase == "Healthy" && arm.ToHash != "" && arm.ToHash != arm.FromHash && arm.Revision == "2",
			"%s, %s -> %s, revision %s", arm.Phase, arm.FromHash, arm.ToHash, arm.Revision)
		ck.Add(arm.Name+": Argo completed every canary step, in order", fmt.Sprintf("%d RolloutStepCompleted events, steps 1..%d", 2*len(argoWeights), 2*len(argoWeights)),
			stepsInOrder(arm.StepEvents, 2*len(argoWeights)), "%s; status seen: %s", strings.Join(arm.StepEvents, "; "), progressString(arm.Progress))
		ck.Add(arm.Name+": every Pod replaced under load", fmt.Sprintf("%d replaced, > %d requests sent", argoReplicas, rolloutRate*5),
			arm.Replaced == argoReplicas && arm.Sent > rolloutRate*5, "%d replaced, %d sent over %s", arm.Replaced, arm.Sent, arm.Load)
	}
	budgets := map[string]int{}
	for _, p := range A.Pods {
		budgets[p.Budget]++
	}
	ck.Add("A: every Pod created (both revisions) carries graceguard's budget", fmt.Sprintf("%d Pods, each %s", 2*argoReplicas, wantBudget),
		len(A.Pods) == 2*argoReplicas && budgets[wantBudget] == len(A.Pods), "%d Pods: %v", len(A.Pods), budgets)
	ck.Add("A: Pods carry graceguard's preStop sleep", "sleep 5s", A.PreStop == "sleep 5s", "%s; %s", A.PreStop, A.Budget)
	ck.Add("B: Pods have no preStop", "none", B.PreStop == "none", "%s, grace %d", B.PreStop, B.Grace)
	ck.Add("A (graceguard): no failed request", "0 failed", A.Failed == 0 && A.Sent > 0,
		"%d failed of %d (%s)", A.Failed, A.Sent, evidence.KindList(A.ByKind))
	ck.Add("B (no graceguard): requests fail", "> 0 failed", B.Failed > 0,
		"%d failed of %d (%s)", B.Failed, B.Sent, evidence.KindList(B.ByKind))
	ck.Add("no scale-down warning for the canary without trafficRouting (Argo ignores the delay there)", "none",
		!slices.ContainsFunc(canaryWarnings, func(w string) bool { return strings.Contains(w, "scaleDownDelaySeconds") }), "%q", canaryWarnings)
	wantWarn := fmt.Sprintf("spec.strategy.blueGreen.scaleDownDelaySeconds: %ds < routing %s: scaled down before routes move; raise to %d",
		argoShortDelay, budget.Format(rolloutRouting), budget.CeilSeconds(rolloutRouting))
	ck.Add("blue-green, scaleDownDelaySeconds shorter than the routing term: graceguard's warning from the API server", wantWarn,
		slices.Contains(a.Warning.Warnings, wantWarn), "%q", a.Warning.Warnings)
	Expect(a.Checks.Failed()).To(BeEmpty())
}

// startArgoController runs rollouts-controller on the node, watching every
// namespace with the admin kubeconfig, until the spec ends. It returns the
// path of its log (JSON lines).
func startArgoController(ctx context.Context, bin string) string {
	GinkgoHelper()
	healthz, metrics := freePort(), freePort()
	log := filepath.Join(outDir, "argo-rollouts.log")
	p := &hostProcs{}
	p.start(ctx, log, bin, "--kubeconfig", cl.Kubeconfig, "--leader-elect=false",
		"--healthzPort", strconv.Itoa(healthz), "--metricsPort", strconv.Itoa(metrics), "--loglevel", "info", "--logformat", "json")
	DeferCleanup(p.stop)
	Eventually(func() error {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", healthz))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/healthz: %s", resp.Status)
		}
		return nil
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(500*time.Millisecond).Should(Succeed(), "Argo Rollouts' controller healthy (%s)", log)
	return log
}

// argoRollout is a Rollout of the drain app (appDeployment's template),
// with graceguard's annotations when given, or its own probes.
func argoRollout(ns, name string, annotations map[string]string, ownProbe bool, strategy map[string]any) *unstructured.Unstructured {
	GinkgoHelper()
	dep := appDeployment(ns, name, argoReplicas, annotations)
	if ownProbe {
		ownProbes(&dep.Spec.Template.Spec.Containers[0])
	}
	tpl := must(runtime.DefaultUnstructuredConverter.ToUnstructured(&dep.Spec.Template))
	unstructured.RemoveNestedField(tpl, "metadata", "creationTimestamp")
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"replicas": int64(argoReplicas),
			"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
			"template": tpl,
			"strategy": strategy,
		},
	}}
}

// restartRollout changes the Rollout's template, as `kubectl argo rollouts
// restart` does not (it only recreates Pods): a new revision.
func restartRollout(ctx context.Context, dyn dynamic.Interface, ns, name string) {
	GinkgoHelper()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"gg-e2e/revision":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
	_, err := dyn.Resource(rolloutsGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	Expect(err).NotTo(HaveOccurred(), "new revision of %s/%s", ns, name)
}

// waitArgoHealthy waits until the Rollout "web" is Healthy at a stable
// ReplicaSet other than from, with every replica updated and available and
// no older Pod left, noting each change of its step and phase. It returns
// the stable ReplicaSet's hash.
func waitArgoHealthy(ctx context.Context, dyn dynamic.Interface, arm *evidence.ArgoArm, from string, timeout time.Duration) string {
	GinkgoHelper()
	start := time.Now()
	var stable string
	last := ""
	Eventually(func(g Gomega) {
		u, err := dyn.Resource(rolloutsGVR).Namespace(arm.Namespace).Get(ctx, "web", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		str := func(path ...string) string {
			v, _, _ := unstructured.NestedFieldNoCopy(u.Object, append([]string{"status"}, path...)...)
			if v == nil {
				return ""
			}
			return fmt.Sprint(v)
		}
		phase, step, msg := str("phase"), str("currentStepIndex"), str("message")
		if from != "" {
			if now := phase + "/" + step + "/" + msg; now != last {
				last = now
				arm.Progress = append(arm.Progress, evidence.ArgoStep{At: evidence.S(time.Since(start)), Phase: phase, Step: step, Message: msg,
					Updated: str("updatedReplicas"), Ready: str("readyReplicas")})
			}
		}
		arm.Phase, arm.Revision = phase, u.GetAnnotations()["rollout.argoproj.io/revision"]
		g.Expect(str("observedGeneration")).To(Equal(strconv.FormatInt(u.GetGeneration(), 10)))
		g.Expect(phase).To(Equal("Healthy"), "%s/web: %s %s", arm.Namespace, phase, msg)
		g.Expect(str("stableRS")).NotTo(Equal(from))
		g.Expect(str("stableRS")).To(Equal(str("currentPodHash")))
		want := strconv.Itoa(argoReplicas)
		g.Expect([]string{str("replicas"), str("updatedReplicas"), str("readyReplicas"), str("availableReplicas")}).To(HaveEach(want))
		pods, err := kube.CoreV1().Pods(arm.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods.Items).To(HaveLen(argoReplicas), "only the new Pods are left in %s", arm.Namespace)
		stable = str("stableRS")
	}).WithContext(ctx).WithTimeout(timeout).WithPolling(250 * time.Millisecond).Should(Succeed())
	return stable
}

// podLog records every Pod of a namespace as it is first seen: its name
// and the budget graceguard wrote on it.
type podLog struct {
	mu   sync.Mutex
	pods map[string]string
	w    watch.Interface
	done chan struct{}
}

func logPods(ctx context.Context, ns string) *podLog {
	GinkgoHelper()
	pl := &podLog{pods: map[string]string{}, done: make(chan struct{})}
	pl.w = must(kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "app=web"}))
	go func() {
		defer close(pl.done)
		for e := range pl.w.ResultChan() {
			p, ok := e.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			pl.mu.Lock()
			if _, seen := pl.pods[p.Name]; !seen {
				pl.pods[p.Name] = p.Annotations[budgetKey]
			}
			pl.mu.Unlock()
		}
	}()
	return pl
}

func (pl *podLog) stop() []evidence.ArgoPod {
	pl.w.Stop()
	<-pl.done
	pl.mu.Lock()
	defer pl.mu.Unlock()
	var out []evidence.ArgoPod
	for name, b := range pl.pods {
		out = append(out, evidence.ArgoPod{Pod: name, Budget: b})
	}
	slices.SortFunc(out, func(x, y evidence.ArgoPod) int { return strings.Compare(x.Pod, y.Pod) })
	return out
}

// stepEvents are the messages of the RolloutStepCompleted events Argo's
// controller logged for the Rollout "web" of ns since t0, in order. Its
// log, not the API: client-go's event recorder drops an object's events
// past a burst of 25, which one Rollout's two revisions reach.
func stepEvents(log, ns string, t0 time.Time) []string {
	GinkgoHelper()
	var out []string
	for _, line := range strings.Split(string(must(os.ReadFile(log))), "\n") {
		var l struct {
			Time      time.Time `json:"time"`
			Msg       string    `json:"msg"`
			Reason    string    `json:"event_reason"`
			Namespace string    `json:"namespace"`
			Rollout   string    `json:"rollout"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Reason != "RolloutStepCompleted" || l.Namespace != ns || l.Rollout != "web" {
			continue
		}
		if !l.Time.Before(t0.Truncate(time.Second)) {
			out = append(out, l.Msg)
		}
	}
	return out
}

// stepsInOrder tells whether msgs are "Rollout step i/n completed (...)"
// for i = 1..n.
func stepsInOrder(msgs []string, n int) bool {
	if len(msgs) != n {
		return false
	}
	for i, m := range msgs {
		if !strings.HasPrefix(m, fmt.Sprintf("Rollout step %d/%d completed", i+1, n)) {
			return false
		}
	}
	return true
}

func progressString(p []evidence.ArgoStep) string {
	var parts []string
	for _, s := range p {
		parts = append(parts, fmt.Sprintf("%.1f s %s step %s", float64(s.At), s.Phase, s.Step))
	}
	if len(parts) == 0 {
		return "none seen"
	}
	return strings.Join(parts, "; ")
}
