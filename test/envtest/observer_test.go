package envtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/pkg/cli"
	"github.com/graceguard/graceguard/pkg/config"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/observer"
)

var reportsGVR = schema.GroupVersionResource{Group: "graceguard.io", Version: "v1alpha1", Resource: "shutdownreports"}

// kubelet stands in for the node: envtest runs no kubelet, so the spec
// moves each Pod through deletion as the kubelet does. The Pod's node
// name makes the API server delete it gracefully (an unscheduled Pod goes
// at once).
type kubelet struct{ ns string }

// run marks the Pod's containers running, as the kubelet reports them.
func (k kubelet) run(ctx context.Context, p *corev1.Pod) *corev1.Pod {
	GinkgoHelper()
	p.Status.Phase = corev1.PodRunning
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Hour))}},
		})
	}
	return must(kube.CoreV1().Pods(k.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}))
}

// shutdown deletes the Pod with its grace, lets hookFailed record the
// kubelet's FailedPreStopHook event, writes the container's final state
// (exit code and reason after `after` from the deletion request), and
// removes the Pod as the kubelet does (grace 0, UID precondition).
func (k kubelet) shutdown(ctx context.Context, p *corev1.Pod, code int32, reason string, after time.Duration, hookFailed bool) {
	GinkgoHelper()
	Expect(kube.CoreV1().Pods(k.ns).Delete(ctx, p.Name, metav1.DeleteOptions{})).To(Succeed())
	p = must(kube.CoreV1().Pods(k.ns).Get(ctx, p.Name, metav1.GetOptions{}))
	Expect(p.DeletionTimestamp).NotTo(BeNil(), "the Pod is terminating, not gone")
	requested := p.DeletionTimestamp.Add(-time.Duration(*p.DeletionGracePeriodSeconds) * time.Second)
	if hookFailed {
		at := metav1.NewTime(requested)
		must(kube.CoreV1().Events(k.ns).Create(ctx, &corev1.Event{
			ObjectMeta: metav1.ObjectMeta{GenerateName: p.Name + "."},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: k.ns, Name: p.Name, UID: p.UID, APIVersion: "v1",
				FieldPath: "spec.containers{app}"},
			Reason: observer.FailedPreStopHook, Message: "PreStopHook failed", Type: corev1.EventTypeWarning,
			Source: corev1.EventSource{Component: "kubelet", Host: "node-1"}, FirstTimestamp: at, LastTimestamp: at, Count: 1,
		}, metav1.CreateOptions{}))
	}
	p.Status.Phase = corev1.PodFailed
	if code == 0 {
		p.Status.Phase = corev1.PodSucceeded
	}
	cs := &p.Status.ContainerStatuses[0]
	cs.Ready = false
	cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: code, Reason: reason, StartedAt: cs.State.Running.StartedAt, FinishedAt: metav1.NewTime(requested.Add(after)),
	}}
	p = must(kube.CoreV1().Pods(k.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}))
	Expect(kube.CoreV1().Pods(k.ns).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &p.UID},
	})).To(Succeed())
}

// startObserver runs graceguard's observer against the API server, with a
// registry of its own, until the spec's container ends; edit, when given,
// changes its configuration first.
func startObserver(ctx context.Context, edit ...func(*observer.Config)) *prometheus.Registry {
	GinkgoHelper()
	reg := prometheus.NewRegistry()
	cfg := observer.Default()
	cfg.MetricsBindAddress, cfg.HealthProbeBindAddress = "0", "127.0.0.1:0"
	cfg.LeaderElection = false
	cfg.FlushInterval = 300 * time.Millisecond
	for _, e := range edit {
		e(&cfg)
	}
	Expect(config.ObserverFlags(&cfg).Validate()).To(Succeed())
	octx, cancel := context.WithCancel(logf.IntoContext(context.WithoutCancel(ctx), logr.Discard()))
	done := make(chan error, 1)
	go func() {
		done <- observer.Run(octx, cfg, cp.Config, reg)
	}()
	DeferCleanup(func() {
		cancel()
		Eventually(done).WithTimeout(30 * time.Second).Should(Receive(BeNil()))
	})
	waitWatching(ctx, reg)
	return reg
}

// waitWatching returns once the observer whose metrics are in reg
// watches Pods: a Pod deleted before its informers synced is one it
// never saw, so a spec that starts at once fails alone and passes after
// a slower spec. Watching: its count of treated Pods takes in one
// labelled treated (anyone may label a Pod) after it started.
func waitWatching(ctx context.Context, reg *prometheus.Registry) {
	GinkgoHelper()
	mark := pod("observer-watching", nil)
	mark.Labels = map[string]string{mutate.LabelTreated: mutate.LabelTreatedValue}
	must(kube.CoreV1().Pods(newNamespace(ctx, "watching", nil, nil)).Create(ctx, mark, metav1.CreateOptions{}))
	Eventually(func(g Gomega) {
		cached := metricValue(reg, "graceguard_observer_pods", nil)
		g.Expect(cached).NotTo(BeNil())
		treated := must(kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: mutate.LabelTreated + " in (" + mutate.LabelTreatedValue + "," + mutate.LabelTreatedByFloor + ")"}))
		g.Expect(cached.GetGauge().GetValue()).To(Equal(float64(len(treated.Items))))
	}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
}

func ownerRef(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &yes, BlockOwnerDeletion: &yes}
}

// metricValue reads one sample of a gathered metric by its labels.
func metricValue(reg *prometheus.Registry, name string, labels map[string]string) *dto.Metric {
	GinkgoHelper()
	families, err := reg.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue next
				}
			}
			return m
		}
	}
	return nil
}

var _ = Describe("the shutdown observer", Ordered, func() {
	var (
		reg      *prometheus.Registry
		ns       string
		kubeconf string
	)
	BeforeAll(func(ctx SpecContext) {
		reg = startObserver(ctx)
		kubeconf = filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		Expect(os.WriteFile(kubeconf, cp.Env.KubeConfig, 0o600)).To(Succeed())
	})

	It("records killed, clean and failed-hook shutdowns per workload: report, events, metrics and recommend", func(ctx SpecContext) {
		ns = optedIn(ctx, "shop")
		plain := newNamespace(ctx, "plain", nil, nil)
		kl, plainKl := kubelet{ns}, kubelet{plain}

		By("a Deployment with max-work 5s and grace 15s (the budget's sum), its ReplicaSet, and a StatefulSet whose exec preStop will fail")
		labels := map[string]string{"app": "web"}
		grace15 := int64(15)
		tpl := corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{mutate.AnnotationMaxWork: "5s"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1"}}, TerminationGracePeriodSeconds: &grace15},
		}
		dep := must(kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tpl},
		}, metav1.CreateOptions{}))
		rsLabels := map[string]string{"app": "web", "pod-template-hash": "7d9f8c6b5"}
		rsTpl := *tpl.DeepCopy()
		rsTpl.Labels = rsLabels
		rs := must(kube.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: "web-7d9f8c6b5", Labels: rsLabels, OwnerReferences: []metav1.OwnerReference{ownerRef("apps/v1", "Deployment", "web", dep.UID)}},
			Spec:       appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: rsLabels}, Template: rsTpl},
		}, metav1.CreateOptions{}))
		dbLabels := map[string]string{"app": "db"}
		sts := must(kube.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "db"},
			Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: dbLabels}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: dbLabels, Annotations: map[string]string{mutate.AnnotationPreStop: "exec"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.local/db:1"}}},
			}},
		}, metav1.CreateOptions{}))

		podOf := func(namespace, name string, labels, annotations map[string]string, owner *metav1.OwnerReference) *corev1.Pod {
			GinkgoHelper()
			p := pod(name, annotations)
			p.Labels, p.Spec.NodeName = labels, "node-1"
			if annotations[mutate.AnnotationMaxWork] == "5s" {
				p.Spec.TerminationGracePeriodSeconds = &grace15
			}
			if owner != nil {
				p.OwnerReferences = []metav1.OwnerReference{*owner}
			}
			return must(kube.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{}))
		}
		rsRef, stsRef := ownerRef("apps/v1", "ReplicaSet", rs.Name, rs.UID), ownerRef("apps/v1", "StatefulSet", "db", sts.UID)
		webAnn := map[string]string{mutate.AnnotationMaxWork: "5s"}
		killed := podOf(ns, "web-7d9f8c6b5-kill1", rsLabels, webAnn, &rsRef)
		clean := podOf(ns, "web-7d9f8c6b5-clean", rsLabels, webAnn, &rsRef)
		optedOut := podOf(ns, "web-7d9f8c6b5-optout", rsLabels, map[string]string{mutate.AnnotationMaxWork: "5s", mutate.AnnotationInject: "false"}, &rsRef)
		hooked := podOf(ns, "db-0", dbLabels, map[string]string{mutate.AnnotationPreStop: "exec"}, &stsRef)
		bare := podOf(ns, "bare", nil, nil, nil)
		untreated := podOf(plain, "web-1", rsLabels, webAnn, nil)

		Expect(killed.Labels).To(HaveKeyWithValue(mutate.LabelTreated, mutate.LabelTreatedValue))
		Expect(killed.Annotations[mutate.AnnotationBudget]).To(Equal("routing=5s work=5s cleanup=2s margin=3s grace=15s"))
		Expect(optedOut.Labels).NotTo(HaveKey(mutate.LabelTreated))
		Expect(untreated.Labels).NotTo(HaveKey(mutate.LabelTreated))
		Expect(hooked.Spec.Containers[0].Lifecycle.PreStop.Exec.Command).To(Equal([]string{"sleep", "5"}))

		By("the observer caches exactly the treated Pods of the cluster, none of the others")
		Eventually(func(g Gomega) {
			treated := must(kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: mutate.LabelTreated + " in (" + mutate.LabelTreatedValue + "," + mutate.LabelTreatedByFloor + ")"}))
			all := must(kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{}))
			g.Expect(len(all.Items)).To(BeNumerically(">", len(treated.Items)), "untreated Pods exist")
			g.Expect(metricValue(reg, "graceguard_observer_pods", nil).GetGauge().GetValue()).To(Equal(float64(len(treated.Items))))
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())

		By("the kubelet's part: SIGKILL at the 15s grace (10s after SIGTERM), a clean exit 12s after the deletion, a hook that failed at once")
		for _, p := range []*corev1.Pod{killed, clean, optedOut, hooked, bare} {
			kl.run(ctx, p)
		}
		plainKl.run(ctx, untreated)
		kl.shutdown(ctx, killed, 137, "Error", 15*time.Second, false)
		kl.shutdown(ctx, clean, 0, "Completed", 12*time.Second, false)
		kl.shutdown(ctx, optedOut, 137, "Error", 15*time.Second, false)
		kl.shutdown(ctx, hooked, 0, "Completed", 2*time.Second, true)
		kl.shutdown(ctx, bare, 137, "Error", 30*time.Second, false)
		plainKl.shutdown(ctx, untreated, 137, "Error", 15*time.Second, false)

		By("the Deployment's report: two samples, one kill, max-work 21s recommended")
		var web, db v1alpha1.ShutdownReport
		get := func(name string, into *v1alpha1.ShutdownReport) func(Gomega) {
			return func(g Gomega) {
				u, err := dyn.Resource(reportsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				b, err := u.MarshalJSON()
				g.Expect(err).NotTo(HaveOccurred())
				*into = v1alpha1.ShutdownReport{}
				g.Expect(yaml.Unmarshal(b, into)).To(Succeed())
			}
		}
		Eventually(func(g Gomega) {
			get("deployment-web", &web)(g)
			g.Expect(web.Status.Observed).To(Equal(int64(2)))
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			get("statefulset-db", &db)(g)
			g.Expect(db.Status.Observed).To(Equal(int64(1)))
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())

		Expect(web.Spec.Workload).To(Equal(v1alpha1.WorkloadReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}))
		Expect(web.OwnerReferences).To(Equal([]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: dep.UID}}),
			"owned by the Deployment (not the ReplicaSet), so it is garbage-collected with it")
		Expect(web.Status.KillsObserved).To(Equal(int64(1)))
		Expect(web.Status.HookFailuresObserved).To(BeZero())
		Expect(web.Status.Summary).To(Equal(v1alpha1.Summary{Samples: 2, Kills: 1, DrainP50: "7s", DrainP95: "7s", DrainMax: "7s", DrainCut: "10s",
			Budget: "routing=5s work=5s cleanup=2s margin=3s grace=15s", MaxWork: "5s", Grace: 15, NotListed: 2}), "no EndpointSlice listed the Pods")
		Expect(web.Status.Recommendation).To(Equal(&v1alpha1.Recommendation{MaxWork: "21s", Grace: 31, Enough: true,
			Reason: "1 of 2 Pods was SIGKILLed after draining 10s: the drain needed is longer and unknown; twice that, plus 1s for whole-second timestamps"}))
		byPod := map[string]v1alpha1.Sample{}
		for _, s := range web.Status.Samples {
			byPod[s.Pod] = s
		}
		Expect(byPod).To(HaveLen(2), "the opted-out Pod (no label) is not observed")
		k, c := byPod["web-7d9f8c6b5-kill1"], byPod["web-7d9f8c6b5-clean"]
		Expect([]any{k.Container, k.GraceSeconds, k.PreStopSeconds, k.ExitCode, k.Reason, k.Outcome, k.DrainSeconds, k.HookFailed}).
			To(Equal([]any{"app", int64(15), int64(5), int32(137), "Error", v1alpha1.OutcomeKilled, int64(10), false}))
		Expect(k.Exited.Sub(k.Deleted.Time)).To(Equal(15 * time.Second))
		Expect([]any{c.ExitCode, c.Reason, c.Outcome, c.DrainSeconds}).To(Equal([]any{int32(0), "Completed", v1alpha1.OutcomeExited, int64(7)}))

		By("the StatefulSet's report: the failed hook let SIGTERM in at once; too few samples to recommend")
		Expect(db.OwnerReferences[0].UID).To(Equal(sts.UID))
		Expect(db.Status.Samples).To(HaveLen(1))
		h := db.Status.Samples[0]
		Expect([]any{h.PreStopSeconds, h.HookFailed, h.Outcome, h.DrainSeconds}).To(Equal([]any{int64(5), true, v1alpha1.OutcomeExited, int64(2)}))
		Expect(db.Status.Summary).To(Equal(v1alpha1.Summary{Samples: 1, HookFailures: 1, DrainP50: "2s", DrainP95: "2s", DrainMax: "2s",
			Budget: "routing=5s work=20s cleanup=2s margin=3s grace=30s", MaxWork: "20s", Grace: 30, NotListed: 1}))
		Expect(db.Status.Recommendation.Enough).To(BeFalse())

		By("no other report: the bare Pod has no workload, the plain namespace's Pod was never treated")
		all := must(dyn.Resource(reportsGVR).Namespace("").List(ctx, metav1.ListOptions{}))
		var names []string
		for _, r := range all.Items {
			if r.GetNamespace() == ns || r.GetNamespace() == plain {
				names = append(names, r.GetNamespace()+"/"+r.GetName())
			}
		}
		Expect(names).To(ConsistOf(ns+"/deployment-web", ns+"/statefulset-db"))

		By("Warning events on the workloads, naming the budget")
		hint := fmt.Sprintf("kubectl graceguard recommend -n %s", ns)
		Eventually(func(g Gomega) {
			evs := must(kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Deployment,involvedObject.name=web"}))
			g.Expect(evs.Items).To(HaveLen(1))
			e := evs.Items[0]
			g.Expect([]string{e.Type, e.Reason, string(e.InvolvedObject.UID)}).To(Equal([]string{"Warning", observer.ReasonKilled, string(dep.UID)}))
			g.Expect(e.Message).To(Equal("1 Pod SIGKILLed at the end of 15s grace after draining 10s (web-7d9f8c6b5-kill1 container app); " +
				"budget routing=5s work=5s cleanup=2s margin=3s grace=15s; recommended max-work 21s: " + hint))
			g.Expect(e.Related).NotTo(BeNil())
			g.Expect([]string{e.Related.Kind, e.Related.Name}).To(Equal([]string{"ShutdownReport", "deployment-web"}), "the report is the event's related object")
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			evs := must(kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=StatefulSet,involvedObject.name=db"}))
			g.Expect(evs.Items).To(HaveLen(1))
			g.Expect(evs.Items[0].Reason).To(Equal(observer.ReasonHookFailed))
			g.Expect(evs.Items[0].Message).To(Equal("preStop hook failed in 1 Pod (db-0 container app): SIGTERM came at once, before the routing delay; " +
				"budget routing=5s work=20s cleanup=2s margin=3s grace=30s; fix the hook (graceguard.io/prestop: sleep needs no binary in the image): " +
				hint))
			g.Expect(evs.Items[0].Related.Name).To(Equal("statefulset-db"))
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())

		By("metrics: the drain histogram by outcome, kills, failed hooks, and the skipped bare Pod")
		drainExited := metricValue(reg, "graceguard_observed_drain_seconds", map[string]string{"outcome": "exited"}).GetHistogram()
		drainKilled := metricValue(reg, "graceguard_observed_drain_seconds", map[string]string{"outcome": "killed"}).GetHistogram()
		Expect([]float64{float64(drainExited.GetSampleCount()), drainExited.GetSampleSum(), float64(drainKilled.GetSampleCount()), drainKilled.GetSampleSum()}).
			To(Equal([]float64{2, 9, 1, 10}), "exited: 7s + 2s; killed: 10s")
		Expect(metricValue(reg, "graceguard_observed_kills_total", nil).GetCounter().GetValue()).To(Equal(1.0))
		Expect(metricValue(reg, "graceguard_observed_prestop_failures_total", nil).GetCounter().GetValue()).To(Equal(1.0))
		for reason, want := range map[observer.Skip]float64{observer.SkipNoWorkload: 1, observer.SkipDeletionUnseen: 0, observer.SkipNotRunning: 0, observer.SkipExitedBefore: 0, observer.SkipBacklog: 0,
			observer.SkipNamespace: 0, observer.SkipOwnerUnverified: 0, observer.SkipTooManyContainers: 0} {
			Expect(metricValue(reg, "graceguard_observer_skipped_total", map[string]string{"reason": string(reason)}).GetCounter().GetValue()).
				To(Equal(want), "skipped, reason %s", reason)
		}

		By("kubectl graceguard recommend, as text")
		var out, errOut bytes.Buffer
		code := cli.Execute([]string{"recommend", "--kubeconfig", kubeconf, "-n", ns}, strings.NewReader(""), &out, &errOut)
		Expect(code).To(Equal(cli.ExitOK), errOut.String())
		Expect(out.String()).To(Equal(strings.ReplaceAll(`Deployment NS/web: 2 samples (2 observed, 1 SIGKILLed, 0 failed preStop hooks in all)
  budget      routing=5s work=5s cleanup=2s margin=3s grace=15s
  drain       p50 7s, p95 7s, max 7s (SIGTERM to exit, whole seconds)
  killed      1 of 2 at the end of their grace, after draining up to 10s
  withdrawal  no figure: no EndpointSlice listed 2 of 2
  raise       graceguard.io/max-work: 21s (from 5s; grace 15s -> 31s)
  why         1 of 2 Pods was SIGKILLed after draining 10s: the drain needed is longer and unknown; twice that, plus 1s for whole-second timestamps
  apply       kubectl patch deployment web -n NS --type merge -p '{"spec":{"template":{"metadata":{"annotations":{"graceguard.io/max-work":"21s"}}}}}'

StatefulSet NS/db: 1 sample (1 observed, 0 SIGKILLed, 1 failed preStop hooks in all)
  budget      routing=5s work=20s cleanup=2s margin=3s grace=30s
  drain       p50 2s, p95 2s, max 2s (SIGTERM to exit, whole seconds)
  hook failed 1 of 1: SIGTERM came at once, before the routing delay; fix the hook (graceguard.io/prestop: sleep needs no binary in the image)
  withdrawal  no figure: no EndpointSlice listed 1 of 1
  too few samples to recommend (1 of the 5 needed, and no kill); so far they suggest graceguard.io/max-work: 3s
`, "NS", ns)))

		By("kubectl graceguard recommend -o yaml, applied server-side as its help says")
		out.Reset()
		code = cli.Execute([]string{"recommend", "--kubeconfig", kubeconf, "-n", ns, "-o", "yaml"}, strings.NewReader(""), &out, &errOut)
		Expect(code).To(Equal(cli.ExitOK), errOut.String())
		Expect(out.String()).To(Equal(strings.ReplaceAll(`# Deployment NS/web: graceguard.io/max-work 21s: 1 of 2 Pods was SIGKILLed after draining 10s: the drain needed is longer and unknown; twice that, plus 1s for whole-second timestamps
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: NS
spec:
  template:
    metadata:
      annotations:
        graceguard.io/max-work: 21s
# StatefulSet NS/db: too few samples to recommend (1); no change
`, "NS", ns)))
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out.Bytes()), 4096)
		var doc unstructured.Unstructured
		Expect(dec.Decode(&doc.Object)).To(Succeed())
		_, err := dyn.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).Namespace(ns).
			Apply(ctx, doc.GetName(), &doc, metav1.ApplyOptions{FieldManager: "graceguard-recommend", Force: true})
		Expect(err).NotTo(HaveOccurred())
		applied := must(kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}))
		Expect(applied.Spec.Template.Annotations).To(Equal(map[string]string{mutate.AnnotationMaxWork: "21s"}))
		Expect(applied.Spec.Template.Labels).To(Equal(labels), "the rest of the template is left alone")
		Expect(applied.Spec.Template.Spec.Containers).To(HaveLen(1))
	})

	skipped := func(reason observer.Skip) float64 {
		GinkgoHelper()
		return metricValue(reg, "graceguard_observer_skipped_total", map[string]string{"reason": string(reason)}).GetCounter().GetValue()
	}
	report := func(ctx context.Context, namespace, name string) func(Gomega) v1alpha1.ShutdownReport {
		return func(g Gomega) v1alpha1.ShutdownReport {
			u, err := dyn.Resource(reportsGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			b, err := u.MarshalJSON()
			g.Expect(err).NotTo(HaveOccurred())
			var r v1alpha1.ShutdownReport
			g.Expect(yaml.Unmarshal(b, &r)).To(Succeed())
			return r
		}
	}
	ownedPod := func(ctx context.Context, namespace, name string, labels, annotations map[string]string, ref metav1.OwnerReference, containers ...corev1.Container) *corev1.Pod {
		GinkgoHelper()
		p := pod(name, annotations, containers...)
		p.Labels, p.Spec.NodeName, p.OwnerReferences = labels, "node-1", []metav1.OwnerReference{ref}
		return must(kube.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{}))
	}
	statefulSet := func(ctx context.Context, namespace, name string) *appsv1.StatefulSet {
		GinkgoHelper()
		l := map[string]string{"app": name}
		return must(kube.AppsV1().StatefulSets(namespace).Create(ctx, &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: l}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1"}}},
			}},
		}, metav1.CreateOptions{}))
	}

	It("ignores Pods labelled treated in a namespace that did not opt in", func(ctx SpecContext) {
		plain := newNamespace(ctx, "hostile", nil, nil)
		kl := kubelet{plain}
		sts := statefulSet(ctx, plain, "db")
		before := skipped(observer.SkipNamespace)

		By("anyone may label a Pod graceguard.io/treated=true, with a real owner")
		p := ownedPod(ctx, plain, "db-0", map[string]string{mutate.LabelTreated: mutate.LabelTreatedValue, "app": "db"}, nil,
			ownerRef("apps/v1", "StatefulSet", "db", sts.UID))
		Expect(p.Labels).To(HaveKeyWithValue(mutate.LabelTreated, mutate.LabelTreatedValue))
		Expect(p.Annotations).NotTo(HaveKey(mutate.AnnotationBudget), "graceguard never saw it")
		Eventually(func(g Gomega) {
			treated := must(kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: mutate.LabelTreated + " in (" + mutate.LabelTreatedValue + "," + mutate.LabelTreatedByFloor + ")"}))
			g.Expect(metricValue(reg, "graceguard_observer_pods", nil).GetGauge().GetValue()).To(Equal(float64(len(treated.Items))))
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		kl.run(ctx, p)
		kl.shutdown(ctx, p, 137, "Error", 30*time.Second, false)

		By("no sample, counted as namespace-not-treated; no report")
		Eventually(func() float64 { return skipped(observer.SkipNamespace) }).WithContext(ctx).WithTimeout(20 * time.Second).Should(Equal(before + 1))
		Consistently(func() int {
			return len(must(dyn.Resource(reportsGVR).Namespace(plain).List(ctx, metav1.ListOptions{})).Items)
		}).WithContext(ctx).WithTimeout(2 * time.Second).Should(BeZero())
	})

	It("attributes no sample of a Pod whose ReplicaSet is made up to the Deployment its name points at", func(ctx SpecContext) {
		shop := optedIn(ctx, "forged")
		kl := kubelet{shop}
		labels := map[string]string{"app": "web"}
		dep := must(kube.AppsV1().Deployments(shop).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1"}}},
			}},
		}, metav1.CreateOptions{}))
		rsLabels := map[string]string{"app": "web", "pod-template-hash": "7d9f8c6b5"}
		rs := must(kube.AppsV1().ReplicaSets(shop).Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: "web-7d9f8c6b5", Labels: rsLabels, OwnerReferences: []metav1.OwnerReference{ownerRef("apps/v1", "Deployment", "web", dep.UID)}},
			Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: rsLabels}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: rsLabels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1"}}},
			}},
		}, metav1.CreateOptions{}))

		By("a real Pod of the Deployment, drained cleanly: its report")
		real := ownedPod(ctx, shop, "web-7d9f8c6b5-a1b2c", rsLabels, nil, ownerRef("apps/v1", "ReplicaSet", rs.Name, rs.UID))
		kl.run(ctx, real)
		kl.shutdown(ctx, real, 0, "Completed", 3*time.Second, false)
		var web v1alpha1.ShutdownReport
		Eventually(func(g Gomega) {
			web = report(ctx, shop, "deployment-web")(g)
			g.Expect(web.Status.Observed).To(Equal(int64(1)))
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		Expect(web.Status.KillsObserved).To(BeZero())

		By("Pods naming a ReplicaSet that does not exist, with a matching pod-template-hash, or the real one's name with another UID, all SIGKILLed")
		before := skipped(observer.SkipOwnerUnverified)
		madeUp := map[string]string{"app": "web", "pod-template-hash": "5f6d7c8b9"}
		forged := []*corev1.Pod{
			ownedPod(ctx, shop, "web-5f6d7c8b9-evil1", madeUp, nil, ownerRef("apps/v1", "ReplicaSet", "web-5f6d7c8b9", "0f6ad2c4-8b0e-4b6e-9d55-7b1f0e0c1a2b")),
			ownedPod(ctx, shop, "web-7d9f8c6b5-evil2", rsLabels, nil, ownerRef("apps/v1", "ReplicaSet", rs.Name, "5c1d9a8e-7f0b-4c1e-8a4d-2e9b6f3c7d10")),
			ownedPod(ctx, shop, "web-evil3", labels, nil, ownerRef("apps/v1", "Deployment", "web", "a0c4f1d2-3b5e-4f67-8a9b-0c1d2e3f4a5b")),
		}
		for _, p := range forged {
			Expect(p.Labels).To(HaveKeyWithValue(mutate.LabelTreated, mutate.LabelTreatedValue))
			kl.run(ctx, p)
			kl.shutdown(ctx, p, 137, "Error", 30*time.Second, false)
		}

		By("counted as owner-unverified; the Deployment's report is unchanged, and so is what max-work: auto reads")
		Eventually(func() float64 { return skipped(observer.SkipOwnerUnverified) }).WithContext(ctx).WithTimeout(20 * time.Second).Should(Equal(before + 3))
		Consistently(func(g Gomega) {
			after := report(ctx, shop, "deployment-web")(g)
			g.Expect(after.Status).To(Equal(web.Status))
		}).WithContext(ctx).WithTimeout(2 * time.Second).Should(Succeed())
		all := must(dyn.Resource(reportsGVR).Namespace(shop).List(ctx, metav1.ListOptions{}))
		Expect(all.Items).To(HaveLen(1), "no report for the made-up ReplicaSet either")
		evs := must(kube.CoreV1().Events(shop).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Deployment,involvedObject.name=web"}))
		Expect(evs.Items).To(BeEmpty(), "no ShutdownKilled event on the Deployment")
	})

	It("files an Argo Rollout's Pods under the Rollout's report, through Argo's real CRD", func(ctx SpecContext) {
		shop := optedIn(ctx, "rollout-owner")
		kl := kubelet{shop}
		rollouts := schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}
		ro := &unstructured.Unstructured{}
		Expect(json.Unmarshal([]byte(`{"apiVersion":"argoproj.io/v1alpha1","kind":"Rollout","metadata":{"name":"canary"},`+
			`"spec":{"replicas":1,"selector":{"matchLabels":{"app":"canary"}},"strategy":{"canary":{"steps":[{"setWeight":50}]}},`+
			`"template":{"metadata":{"labels":{"app":"canary"}},"spec":{"containers":[{"name":"app","image":"registry.local/app:1"}]}}}}`), &ro.Object)).To(Succeed())
		ro = must(dyn.Resource(rollouts).Namespace(shop).Create(ctx, ro, metav1.CreateOptions{}))
		rsLabels := map[string]string{"app": "canary", mutate.LabelRolloutsPodTemplateHash: "6b7c8d9f5"}
		rs := must(kube.AppsV1().ReplicaSets(shop).Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: "canary-6b7c8d9f5", Labels: rsLabels, OwnerReferences: []metav1.OwnerReference{ownerRef("argoproj.io/v1alpha1", "Rollout", "canary", ro.GetUID())}},
			Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: rsLabels}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: rsLabels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1"}}},
			}},
		}, metav1.CreateOptions{}))

		By("a Pod of the Rollout's ReplicaSet, drained cleanly: the Rollout's report, owned by the Rollout")
		p := ownedPod(ctx, shop, "canary-6b7c8d9f5-a1b2c", rsLabels, nil, ownerRef("apps/v1", "ReplicaSet", rs.Name, rs.UID))
		kl.run(ctx, p)
		kl.shutdown(ctx, p, 0, "Completed", 3*time.Second, false)
		Eventually(func(g Gomega) {
			r := report(ctx, shop, "rollout-canary")(g)
			g.Expect(r.Status.Observed).To(Equal(int64(1)))
			g.Expect(r.Spec.Workload).To(Equal(v1alpha1.WorkloadReference{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "canary"}))
			g.Expect(r.OwnerReferences).To(ContainElement(HaveField("UID", ro.GetUID())))
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		all := must(dyn.Resource(reportsGVR).Namespace(shop).List(ctx, metav1.ListOptions{}))
		Expect(all.Items).To(HaveLen(1), "no report of the ReplicaSet's own")
	})

	It("records a Pod with a 1 MiB preStop exec and a 250 KiB budget with bounded fields", func(ctx SpecContext) {
		big := newNamespace(ctx, "big", map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled, mutate.LabelMode: string(mutate.ModeWarn)}, nil)
		kl := kubelet{big}
		sts := statefulSet(ctx, big, "big")

		By("a Pod labelled treated by hand in a warn-mode namespace (graceguard changes nothing there), a megabyte of hook, a quarter megabyte of budget")
		script := "sleep 5; " + strings.Repeat("x", 1<<20)
		hook := &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", script}}}}
		huge := "routing=5s work=5s cleanup=2s margin=3s grace=15s " + strings.Repeat("x", 250<<10)
		name := "big-" + strings.Repeat("p", 59)
		p := ownedPod(ctx, big, name, map[string]string{mutate.LabelTreated: mutate.LabelTreatedValue, "app": "big"},
			map[string]string{mutate.AnnotationBudget: huge}, ownerRef("apps/v1", "StatefulSet", "big", sts.UID),
			corev1.Container{Name: strings.Repeat("c", 63), Image: "registry.local/app:1", Lifecycle: hook})
		Expect(p.Annotations[mutate.AnnotationBudget]).To(Equal(huge), "warn mode leaves the budget as it is")
		kl.run(ctx, p)
		kl.shutdown(ctx, p, 137, "Error", 30*time.Second, false)

		By("the sample: bounded fields, no budget (250 KiB does not parse), the hook's length unknown")
		var r v1alpha1.ShutdownReport
		Eventually(func(g Gomega) {
			r = report(ctx, big, "statefulset-big")(g)
			g.Expect(r.Status.Samples).To(HaveLen(1))
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		s := r.Status.Samples[0]
		Expect([]any{s.Pod, s.Container, s.Budget, s.PreStopEstimated, s.Outcome, s.GraceSeconds}).
			To(Equal([]any{name, strings.Repeat("c", 63), "", true, v1alpha1.OutcomeKilled, int64(30)}))
		u := must(dyn.Resource(reportsGVR).Namespace(big).Get(ctx, "statefulset-big", metav1.GetOptions{}))
		b := must(u.MarshalJSON())
		GinkgoWriter.Printf("the stored report, managedFields included: %d bytes\n", len(b))
		Expect(len(b)).To(BeNumerically("<", 4<<10))
	})

	It("says where there is nothing to recommend from, and refuses bad flags", func(ctx SpecContext) {
		empty := optedIn(ctx, "empty")
		var out, errOut bytes.Buffer
		Expect(cli.Execute([]string{"recommend", "--kubeconfig", kubeconf, "-n", empty}, strings.NewReader(""), &out, &errOut)).To(Equal(cli.ExitOK))
		Expect(out.String()).To(BeEmpty())
		Expect(errOut.String()).To(Equal("No ShutdownReports in namespace " + empty + ": graceguard's observer writes one per workload once a treated Pod of it is deleted.\n"))
		errOut.Reset()
		Expect(cli.Execute([]string{"recommend", "--kubeconfig", kubeconf, "-o", "json"}, strings.NewReader(""), &out, &errOut)).To(Equal(cli.ExitUsage))
		Expect(errOut.String()).To(ContainSubstring(`invalid argument "json" for "-o, --output" flag: "json" is not one of text, yaml`))
	})
})

func must[T any](o T, err error) T {
	GinkgoHelper()
	Expect(err).NotTo(HaveOccurred())
	return o
}

var _ = Describe("graceguard.io/max-work: auto", func() {
	It("takes the work term from the workload's ShutdownReport at Pod creation, within the floor and the ceiling", func(ctx SpecContext) {
		ns := optedIn(ctx, "auto")
		w := newWarningClient()
		dep := must(kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "api"},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "api"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1"}}},
			}},
		}, metav1.CreateOptions{}))

		By("a report recommending 21s from 9 samples, as the observer writes it")
		report := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "graceguard.io/v1alpha1", "kind": "ShutdownReport",
			"metadata": map[string]any{"name": "deployment-api", "namespace": ns},
			"spec":     map[string]any{"workload": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"}},
		}}
		report = must(dyn.Resource(reportsGVR).Namespace(ns).Create(ctx, report, metav1.CreateOptions{}))
		setRecommendation := func(maxWork string, enough bool, samples int64) {
			GinkgoHelper()
			r := must(dyn.Resource(reportsGVR).Namespace(ns).Get(ctx, "deployment-api", metav1.GetOptions{}))
			r.Object["status"] = map[string]any{
				"observed":       samples,
				"summary":        map[string]any{"samples": samples, "kills": int64(0), "hookFailures": int64(0)},
				"recommendation": map[string]any{"maxWork": maxWork, "grace": int64(0), "enough": enough, "reason": "test"},
			}
			must(dyn.Resource(reportsGVR).Namespace(ns).UpdateStatus(ctx, r, metav1.UpdateOptions{}))
		}
		setRecommendation("21s", true, 9)
		_ = report

		autoPod := func(name, rs, hash string, extra map[string]string) *corev1.Pod {
			GinkgoHelper()
			ann := map[string]string{mutate.AnnotationMaxWork: mutate.MaxWorkAuto}
			for k, v := range extra {
				ann[k] = v
			}
			p := pod(name, ann)
			p.Labels = map[string]string{"app": "api", "pod-template-hash": hash}
			yes := true
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs, UID: dep.UID, Controller: &yes}}
			return must(w.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}))
		}
		budgetOf := func(p *corev1.Pod) []any {
			return []any{p.Annotations[mutate.AnnotationBudget], *p.Spec.TerminationGracePeriodSeconds}
		}

		By("enough samples: the recommendation")
		p := autoPod("api-1", "api-5f6d7c8b9", "5f6d7c8b9", nil)
		Expect(budgetOf(p)).To(Equal([]any{"routing=5s work=21s cleanup=2s margin=3s grace=31s", int64(31)}))
		Expect(w.Warnings()).To(ContainElement("metadata.annotations[graceguard.io/max-work]: auto is 21s: observed in 9 shutdowns (floor 20s, ceiling 2m)"))

		By("a ceiling below it: the ceiling")
		p = autoPod("api-2", "api-5f6d7c8b9", "5f6d7c8b9", map[string]string{mutate.AnnotationMaxWorkFloor: "5s", mutate.AnnotationMaxWorkCeiling: "15s"})
		Expect(budgetOf(p)).To(Equal([]any{"routing=5s work=15s cleanup=2s margin=3s grace=30s", int64(30)}))
		Expect(w.Warnings()).To(ContainElement("metadata.annotations[graceguard.io/max-work]: auto is 15s: the ceiling; observed: 21s"))

		By("too few samples: the floor")
		setRecommendation("13s", false, 2)
		p = autoPod("api-3", "api-5f6d7c8b9", "5f6d7c8b9", nil)
		Expect(budgetOf(p)).To(Equal([]any{"routing=5s work=20s cleanup=2s margin=3s grace=30s", int64(30)}))
		Expect(w.Warnings()).To(ContainElement("metadata.annotations[graceguard.io/max-work]: auto is 20s: the floor, 2 samples are too few (ceiling 2m)"))

		By("a workload without a report: the floor")
		p = autoPod("other-1", "other-7c9d", "7c9d", nil)
		Expect(budgetOf(p)).To(Equal([]any{"routing=5s work=20s cleanup=2s margin=3s grace=30s", int64(30)}))
		Expect(w.Warnings()).To(ContainElement("metadata.annotations[graceguard.io/max-work]: auto is 20s: the floor, no shutdown report yet (ceiling 2m)"))
	})

	It("finds an Argo Rollout's report from its Pod's rollouts-pod-template-hash", func(ctx SpecContext) {
		ns := optedIn(ctx, "auto-rollout")
		w := newWarningClient()
		r := must(dyn.Resource(reportsGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "graceguard.io/v1alpha1", "kind": "ShutdownReport",
			"metadata": map[string]any{"name": "rollout-canary", "namespace": ns},
			"spec":     map[string]any{"workload": map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "canary"}},
		}}, metav1.CreateOptions{}))
		r.Object["status"] = map[string]any{
			"observed":       int64(9),
			"summary":        map[string]any{"samples": int64(9), "kills": int64(0), "hookFailures": int64(0)},
			"recommendation": map[string]any{"maxWork": "24s", "grace": int64(0), "enough": true, "reason": "test"},
		}
		must(dyn.Resource(reportsGVR).Namespace(ns).UpdateStatus(ctx, r, metav1.UpdateOptions{}))

		p := pod("canary-6b7c8d9f5-x1", map[string]string{mutate.AnnotationMaxWork: mutate.MaxWorkAuto})
		p.Labels = map[string]string{"app": "canary", mutate.LabelRolloutsPodTemplateHash: "6b7c8d9f5"}
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "canary-6b7c8d9f5", UID: "5e1c0a9b-6d7f-4e2a-9b3c-1f0e2d3c4b5a", Controller: &yes}}
		p = must(w.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}))
		Expect(p.Annotations[mutate.AnnotationBudget]).To(Equal("routing=5s work=24s cleanup=2s margin=3s grace=34s"))
		Expect(w.Warnings()).To(ContainElement(ContainSubstring("auto is 24s: observed in 9 shutdowns")))
	})
})
