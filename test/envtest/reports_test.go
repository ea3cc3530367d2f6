package envtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/graceguard/graceguard/pkg/cli"
	"github.com/graceguard/graceguard/pkg/config"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/observer"
	"github.com/graceguard/graceguard/pkg/policyreport"
	"github.com/graceguard/graceguard/test/harness/apiserver"
)

// installReportCRD installs one report kind's CRDs (as published, pinned:
// apiserver.FindReportCRDs) for the rest of the container, and removes
// them after it, waiting until the API server no longer serves the kind.
func installReportCRD(ctx context.Context, k policyreport.Kind) {
	GinkgoHelper()
	crds := must(apiserver.FindReportCRDs(ctx))
	dir := crds.OpenReports
	if k == policyreport.PolicyReport {
		dir = crds.PolicyReport
	}
	opts := envtest.CRDInstallOptions{Paths: []string{dir}}
	installed := must(envtest.InstallCRDs(cp.Config, opts))
	DeferCleanup(func(ctx SpecContext) {
		Expect(envtest.UninstallCRDs(cp.Config, opts)).To(Succeed())
		// Gone, not only unserved: a CRD being deleted cannot be installed again.
		crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
		for _, crd := range installed {
			Eventually(func() bool {
				_, err := dyn.Resource(crds).Get(ctx, crd.Name, metav1.GetOptions{})
				return apierrors.IsNotFound(err)
			}).WithTimeout(time.Minute).Should(BeTrue(), "CRD %s still there", crd.Name)
		}
		Eventually(func() bool { return served(k) }).WithTimeout(time.Minute).Should(BeFalse(), "%s still served", k)
	})
	Eventually(func() bool { return served(k) }).WithTimeout(time.Minute).Should(BeTrue(), "%s served", k)
}

func served(k policyreport.Kind) bool {
	gvk := k.GroupVersionKind()
	list, err := kube.Discovery().ServerResourcesForGroupVersion(gvk.GroupVersion().String())
	if err != nil {
		return false
	}
	for _, r := range list.APIResources {
		if r.Name == k.Resource() {
			return true
		}
	}
	return false
}

func reportResource(k policyreport.Kind) schema.GroupVersionResource {
	return k.GroupVersionKind().GroupVersion().WithResource(k.Resource())
}

// checked is what `audit -o json` says of each object: its findings, by
// "Kind namespace/name".
func checked(ctx SpecContext, args ...string) map[string][]result {
	GinkgoHelper()
	_, stdout, _ := audit(ctx, append(args, "-o", "json", "--fail-on", "none")...)
	var report struct {
		Objects []struct {
			Kind, Namespace, Name, Verdict string
			Findings                       []struct{ Level, Reason, Message string }
		}
	}
	Expect(json.Unmarshal([]byte(stdout), &report)).To(Succeed())
	out := map[string][]result{}
	for _, o := range report.Objects {
		if o.Verdict == "skipped" {
			continue
		}
		rs := []result{}
		for _, f := range o.Findings {
			r := result{Rule: f.Reason, Result: "warn", Message: f.Message}
			if f.Level == "denial" {
				r.Result = "fail"
			}
			rs = append(rs, r)
		}
		out[o.Kind+" "+o.Namespace+"/"+o.Name] = rs
	}
	return out
}

// result is what a report's result says, as a person compares it with check.
type result struct{ Rule, Result, Message string }

// findingsOf are a stored report's admission results other than passes,
// in order, and the rules that pass.
func findingsOf(u *unstructured.Unstructured) (found []result, passed []string) {
	found = []result{}
	results, _, _ := unstructured.NestedSlice(u.Object, "results")
	for _, x := range results {
		m := x.(map[string]any)
		r := result{Rule: str(m["rule"]), Result: str(m["result"]), Message: str(m["message"])}
		switch {
		case m["category"] != policyreport.CategoryAdmission:
		case r.Result == "pass":
			passed = append(passed, r.Rule)
		default:
			found = append(found, r)
		}
	}
	return found, passed
}

func str(v any) string { s, _ := v.(string); return s }

// scopeOf is a stored report's scope, "Kind namespace/name".
func scopeOf(u *unstructured.Unstructured) string {
	s, _, _ := unstructured.NestedStringMap(u.Object, "scope")
	return s["kind"] + " " + s["namespace"] + "/" + s["name"]
}

// expectSaysWhatCheckSays holds a stored report to check's findings for
// its workload: the same rules, messages and verdicts, every other rule
// passing.
func expectSaysWhatCheckSays(u *unstructured.Unstructured, check map[string][]result) {
	GinkgoHelper()
	want, ok := check[scopeOf(u)]
	Expect(ok).To(BeTrue(), "check says nothing of %s", scopeOf(u))
	found, passed := findingsOf(u)
	Expect(found).To(Equal(want), "%s: the report's findings, and check's", scopeOf(u))
	rules := map[string]bool{}
	for _, r := range want {
		rules[r.Rule] = true
	}
	for _, r := range policyreport.Rules() {
		if !rules[string(r)] {
			Expect(passed).To(ContainElement(string(r)), "%s: %s found nothing", scopeOf(u), r)
		}
	}
}

// reportWorkloads creates, in a namespace not opted in (so the webhook
// lets them in as they are), a Deployment that enforce mode denies (a
// stop signal no process catches) with two warnings, one that passes
// every rule, and a StatefulSet whose budget is over the cap.
func reportWorkloads(ctx context.Context, ns string) {
	GinkgoHelper()
	api := deployment("api", 1, corev1.Container{Name: "app", Image: "registry.local/api:1", Command: []string{"sh", "-c", "/api --port=8080"},
		Ports: []corev1.ContainerPort{{ContainerPort: 8080}}, Lifecycle: &corev1.Lifecycle{StopSignal: ptr.To(corev1.SIGKILL)}})
	api.Spec.Template.Spec.OS = &corev1.PodOS{Name: corev1.Linux} // the API server's condition for a stop signal
	must(kube.AppsV1().Deployments(ns).Create(ctx, api, metav1.CreateOptions{}))
	web := deployment("web", 1, corev1.Container{Name: "app", Image: "registry.local/web:1", Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080)}}}})
	must(kube.AppsV1().Deployments(ns).Create(ctx, web, metav1.CreateOptions{}))
	labels := map[string]string{"app": "db"}
	db := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: appsv1.StatefulSetSpec{
		ServiceName: "db", Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{mutate.AnnotationMaxWork: "15m"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "postgres", Image: "registry.local/postgres:16", Ports: []corev1.ContainerPort{{ContainerPort: 5432}}}}}},
	}}
	must(kube.AppsV1().StatefulSets(ns).Create(ctx, db, metav1.CreateOptions{}))
}

// decodeStream reads the YAML documents audit prints.
func decodeStream(out string) []*unstructured.Unstructured {
	GinkgoHelper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs
		}
		Expect(err).NotTo(HaveOccurred())
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

var _ = Describe("kubectl graceguard audit -o openreports and -o policyreport on the real CRDs", Ordered, func() {
	var ns string
	BeforeAll(func(ctx SpecContext) {
		ns = newNamespace(ctx, "audit-reports", nil, nil)
		reportWorkloads(ctx, ns)
	})

	for _, k := range policyreport.Kinds {
		It("prints "+k.String()+"s the API server stores as they are (strict field validation), saying what check says", func(ctx SpecContext) {
			installReportCRD(ctx, k)
			code, stdout, stderr := audit(ctx, "-n", ns, "-o", string(k))
			Expect(stderr).To(BeEmpty())
			Expect(code).To(Equal(cli.ExitFindings), "api is denied")
			objs := decodeStream(stdout)
			Expect(objs).To(HaveLen(3))
			check := checked(ctx, "-n", ns)
			for _, u := range objs {
				Expect(u.GetAPIVersion() + " " + u.GetKind()).To(Equal(k.String()))
				// What kubectl apply does: the server refuses unknown fields.
				stored, err := dyn.Resource(reportResource(k)).Namespace(ns).Create(ctx, u, metav1.CreateOptions{FieldValidation: "Strict"})
				Expect(err).NotTo(HaveOccurred(), "creating %s", u.GetName())
				expectSaysWhatCheckSays(stored, check)
				Expect(stored.GetOwnerReferences()).To(HaveLen(1), "owned by its workload")
			}
			api := must(dyn.Resource(reportResource(k)).Namespace(ns).Get(ctx, "graceguard-deployment-api", metav1.GetOptions{}))
			fails, _, _ := unstructured.NestedInt64(api.Object, "summary", "fail")
			Expect(fails).To(Equal(int64(1)))
			found, _ := findingsOf(api)
			Expect(found).To(ContainElement(result{Rule: string(mutate.DenyStopSignalKills), Result: "fail",
				Message: `spec.template.spec.containers[0].lifecycle.stopSignal: Invalid value: "SIGKILL": container "app" gets SIGKILL, which no process can catch: it dies at once, its admitted work lost; remove it or use a signal the app drains on (SIGTERM, SIGINT, SIGQUIT)`}))
		})
	}
})

// logLines records what a logger says, a line per call.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
	}, funcr.Options{})
}

// with lists the lines that say s.
func (l *logLines) with(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// startReporting runs the observer with policy reports on (auto, a sweep
// a second unless edit says otherwise) and a registry and log of its
// own; stop ends it (and the spec's end does, if not called).
func startReporting(ctx context.Context, edit func(*observer.Config), wrap ...transport.WrapperFunc) (reg *prometheus.Registry, logs *logLines, stop func()) {
	GinkgoHelper()
	rc := rest.CopyConfig(cp.Config)
	for _, w := range wrap {
		rc.Wrap(w)
	}
	reg, logs = prometheus.NewRegistry(), &logLines{}
	cfg := observer.Default()
	cfg.MetricsBindAddress, cfg.HealthProbeBindAddress = "0", "127.0.0.1:0"
	cfg.LeaderElection = false
	cfg.FlushInterval = 300 * time.Millisecond
	cfg.Reports.Kind, cfg.Reports.Interval = observer.ReportsAuto, time.Second
	if edit != nil {
		edit(&cfg)
	}
	Expect(config.ObserverFlags(&cfg).Validate()).To(Succeed())
	octx, cancel := context.WithCancel(logf.IntoContext(context.WithoutCancel(ctx), logs.logger()))
	done := make(chan error, 1)
	go func() { done <- observer.Run(octx, cfg, rc, reg) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			Eventually(done).WithTimeout(30 * time.Second).Should(Receive(BeNil()))
		})
	}
	DeferCleanup(stop)
	return reg, logs, stop
}

// writes is how many reports of kind k the observer has applied (or
// deleted, op "delete"): -1 until it registers its metrics.
func writes(reg *prometheus.Registry, k policyreport.Kind, op string) float64 {
	GinkgoHelper()
	m := metricValue(reg, "graceguard_observer_policy_report_writes_total", map[string]string{"kind": string(k), "operation": op})
	if m == nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// optIn labels a namespace graceguard.io/inject=enabled, after its
// workloads were let in as they are.
func optIn(ctx context.Context, ns string, on bool) {
	GinkgoHelper()
	n := must(kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}))
	if on {
		n.Labels = map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}
	} else {
		delete(n.Labels, mutate.LabelInject)
	}
	must(kube.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{}))
}

// stored lists the reports of kind k in namespace ns, by scope.
func stored(ctx context.Context, k policyreport.Kind, ns string) map[string]*unstructured.Unstructured {
	GinkgoHelper()
	if !served(k) {
		return nil
	}
	list, err := dyn.Resource(reportResource(k)).Namespace(ns).List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	out := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		out[scopeOf(&list.Items[i])] = &list.Items[i]
	}
	return out
}

var _ = Describe("the observer's policy reports", Ordered, func() {
	var ns, out string
	BeforeAll(func(ctx SpecContext) {
		for _, k := range policyreport.Kinds {
			Expect(served(k)).To(BeFalse(), "%s served before the specs install it", k)
		}
		// Let in as they are, then opted in: the webhook never sees them
		// again, the observer evaluates them as they would be now.
		ns = newNamespace(ctx, "reported", nil, nil)
		reportWorkloads(ctx, ns)
		optIn(ctx, ns, true)
		out = newNamespace(ctx, "not-reported", nil, nil)
		must(kube.AppsV1().Deployments(out).Create(ctx, deployment("web", 1, corev1.Container{Name: "app", Image: "registry.local/web:1"}), metav1.CreateOptions{}))
	})

	It("writes nothing when neither CRD is served, and says so once, not at every sweep", func(ctx SpecContext) {
		reg, logs, _ := startReporting(ctx, nil)
		none := "the API server serves neither openreports.io/v1alpha1 Report nor wgpolicyk8s.io/v1alpha2 PolicyReport: no policy reports are written until one's CRD is installed (asked again every --reports-interval)"
		Eventually(func() []string { return logs.with(none) }).WithTimeout(10 * time.Second).Should(HaveLen(1))
		Consistently(func() []string { return logs.with(none) }).WithTimeout(3500*time.Millisecond).Should(HaveLen(1), "three more sweeps, no more lines")
		Expect(logs.with(`"error"`)).To(BeEmpty(), "no error, and no error loop")
		for _, k := range policyreport.Kinds {
			Expect(writes(reg, k, "apply")).To(BeZero())
			Expect(writes(reg, k, "delete")).To(BeZero())
		}
	})

	It("refuses to write a kind asked for by name that is not served: one error naming it and what is served", func(ctx SpecContext) {
		installReportCRD(ctx, policyreport.OpenReports)
		reg, logs, _ := startReporting(ctx, func(c *observer.Config) { c.Reports.Kind = string(policyreport.PolicyReport) })
		msg := "--reports=policyreport: the API server does not serve wgpolicyk8s.io/v1alpha2 PolicyReport (its CRD is not installed); it serves openreports.io/v1alpha1 Report: install the CRD, or set --reports=auto"
		Eventually(func() []string { return logs.with(msg) }).WithTimeout(10 * time.Second).Should(HaveLen(1))
		Consistently(func() []string { return logs.with(msg) }).WithTimeout(3500 * time.Millisecond).Should(HaveLen(1))
		Expect(logs.with(msg)[0]).To(ContainSubstring(`"msg"="writing no policy reports"`), "an error, with what is wrong in it")
		Expect(writes(reg, policyreport.OpenReports, "apply")).To(BeZero(), "not the other kind instead")
		Expect(stored(ctx, policyreport.OpenReports, ns)).To(BeEmpty())
	})

	It("writes a Report per workload of the treated namespaces saying what check says, at the write rate, and the observed SIGKILL at once", func(ctx SpecContext) {
		installReportCRD(ctx, policyreport.OpenReports)
		start := time.Now()
		// One sweep in this spec: what comes after it comes from the
		// ShutdownReport written.
		var applies requestClock
		reg, logs, _ := startReporting(ctx, func(c *observer.Config) { c.Reports.Interval, c.Reports.WritesPerSecond = time.Minute, 2 },
			applies.wrap(http.MethodPatch, "/reports/"))

		By("a report per workload, none for the namespace that is not opted in, at most 2 writes a second")
		Eventually(func() float64 { return writes(reg, policyreport.OpenReports, "apply") }).WithTimeout(30 * time.Second).Should(BeNumerically(">=", 3))
		// The writes are timed as the observer sends them, not as a poller
		// of the write counter sees them: on a loaded machine the poller
		// wakes late and sees two writes at once. The sweep also writes
		// the reports of namespaces earlier specs opted in: every write is
		// held to the rate.
		at := applies.times()
		Expect(len(at)).To(BeNumerically(">=", 3))
		for i := 1; i < len(at); i++ {
			Expect(at[i].Sub(at[i-1])).To(BeNumerically(">=", 450*time.Millisecond), "write %d was sent %s after the one before: over 2 a second", i, at[i].Sub(at[i-1]))
		}
		Expect(stored(ctx, policyreport.OpenReports, ns)).To(HaveLen(3))
		Expect(stored(ctx, policyreport.OpenReports, out)).To(BeEmpty())
		Expect(logs.with(`"msg"="writing policy reports" "kind"="openreports.io/v1alpha1 Report"`)).To(HaveLen(1))

		check := checked(ctx, "-n", ns)
		reports := stored(ctx, policyreport.OpenReports, ns)
		for _, u := range reports {
			expectSaysWhatCheckSays(u, check)
			Expect(u.GetLabels()).To(HaveKeyWithValue(policyreport.LabelWriter, policyreport.WriterObserver))
			Expect(u.GetOwnerReferences()).To(HaveLen(1))
		}
		api := reports["Deployment "+ns+"/api"]
		found, _ := findingsOf(api)
		Expect(found[0].Result).To(Equal("fail"), "the stop signal denied")

		By("a Pod of web SIGKILLed at its grace: the ShutdownReport, then web's report says it, before any sweep")
		web := must(kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}))
		rsLabels := map[string]string{"app": "web", "pod-template-hash": "5d8f7"}
		tpl := *web.Spec.Template.DeepCopy()
		tpl.Labels = rsLabels
		rs := must(kube.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: "web-5d8f7", Labels: rsLabels, OwnerReferences: []metav1.OwnerReference{ownerRef("apps/v1", "Deployment", "web", web.UID)}},
			Spec:       appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: rsLabels}, Template: tpl},
		}, metav1.CreateOptions{}))
		p := pod("web-5d8f7-kill1", nil, tpl.Spec.Containers...)
		p.Labels, p.Spec.NodeName = rsLabels, "node-1"
		p.OwnerReferences = []metav1.OwnerReference{ownerRef("apps/v1", "ReplicaSet", rs.Name, rs.UID)}
		p = must(kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}))
		Expect(p.Labels).To(HaveKeyWithValue(mutate.LabelTreated, mutate.LabelTreatedValue))
		kl := kubelet{ns}
		kl.shutdown(ctx, kl.run(ctx, p), 137, "Error", time.Duration(*p.Spec.TerminationGracePeriodSeconds)*time.Second, false)
		Eventually(func(g Gomega) {
			r, err := dyn.Resource(reportResource(policyreport.OpenReports)).Namespace(ns).Get(ctx, "graceguard-deployment-web", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			results, _, _ := unstructured.NestedSlice(r.Object, "results")
			first := results[0].(map[string]any)
			g.Expect(first["rule"]).To(Equal(string(policyreport.RuleKilled)))
			g.Expect(first["result"]).To(Equal("fail"))
			g.Expect(first["message"]).To(HavePrefix("In the last shutdown observed: 1 Pod SIGKILLed at the end of 30s grace after draining 25s (web-5d8f7-kill1 container app)"))
		}).WithTimeout(20 * time.Second).Should(Succeed())
		Expect(time.Since(start)).To(BeNumerically("<", time.Minute), "before the next sweep")
		// The observer counts a write once its apply returned: the report
		// can be read a moment before the metric says so.
		Eventually(func() float64 { return writes(reg, policyreport.OpenReports, "apply") }).WithTimeout(5 * time.Second).Should(Equal(4.0))
		Consistently(func() float64 { return writes(reg, policyreport.OpenReports, "apply") }).WithTimeout(1500*time.Millisecond).Should(Equal(4.0), "the other reports are unchanged: not written again")
	})

	It("holds a report of many findings to its bounds: N results, fails first, messages cut at M with their length", func(ctx SpecContext) {
		installReportCRD(ctx, policyreport.OpenReports)
		many := newNamespace(ctx, "many-findings", nil, nil)
		var cs []corev1.Container
		for i := range 20 {
			cs = append(cs, corev1.Container{Name: fmt.Sprintf("c%d", i), Image: "registry.local/app:1", Command: []string{"sh", "-c", "run"},
				Ports: []corev1.ContainerPort{{ContainerPort: int32(8000 + i)}}})
		}
		d := deployment("busy", 1, cs[0])
		d.Spec.Template.Spec.Containers = cs
		// Denied: a stop signal no process catches.
		d.Spec.Template.Spec.OS = &corev1.PodOS{Name: corev1.Linux}
		d.Spec.Template.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{StopSignal: ptr.To(corev1.SIGKILL)}
		must(kube.AppsV1().Deployments(many).Create(ctx, d, metav1.CreateOptions{}))
		optIn(ctx, many, true)
		startReporting(ctx, func(c *observer.Config) { c.Reports.Bounds = policyreport.Bounds{MaxResults: 10, MaxMessageLength: 64} })

		var r *unstructured.Unstructured
		Eventually(func(g Gomega) {
			var err error
			r, err = dyn.Resource(reportResource(policyreport.OpenReports)).Namespace(many).Get(ctx, "graceguard-deployment-busy", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
		}).WithTimeout(30 * time.Second).Should(Succeed())
		check := checked(ctx, "-n", many)["Deployment "+many+"/busy"]
		Expect(len(check)).To(BeNumerically(">", 10), "more findings than the bound")
		results, _, _ := unstructured.NestedSlice(r.Object, "results")
		Expect(results).To(HaveLen(10))
		found := map[string]bool{}
		for _, f := range check {
			found[f.Rule] = true
		}
		passes := len(policyreport.Rules()) - len(found) // every rule that found nothing
		Expect(r.GetAnnotations()).To(HaveKeyWithValue(policyreport.AnnotationUnlisted, fmt.Sprint(len(check)+passes-10)))
		summary, _, _ := unstructured.NestedMap(r.Object, "summary")
		Expect(summary).To(HaveKeyWithValue("fail", int64(1)))
		Expect(summary).To(HaveKeyWithValue("warn", int64(len(check)-1)), "the summary counts every result, listed or not")
		Expect(summary).To(HaveKeyWithValue("pass", int64(passes)))
		for i, x := range results {
			m := x.(map[string]any)
			msg := str(m["message"])
			Expect(len(msg)).To(BeNumerically("<=", 64), "message %d: %q", i, msg)
			if want := check[i].Message; len(want) > 64 {
				Expect(msg).To(Equal(want[:len(msg)-len(fmt.Sprintf("...[cut from %d bytes]", len(want)))] + fmt.Sprintf("...[cut from %d bytes]", len(want))))
			} else {
				Expect(msg).To(Equal(want))
			}
			Expect(m["rule"]).To(Equal(check[i].Rule), "the first results are check's first findings: the denial, then warnings")
		}
	})

	It("writes the kind asked for when both are served, and deletes those of the kind it wrote before", func(ctx SpecContext) {
		installReportCRD(ctx, policyreport.OpenReports)
		installReportCRD(ctx, policyreport.PolicyReport)
		_, _, stop := startReporting(ctx, nil)
		Eventually(func() map[string]*unstructured.Unstructured { return stored(ctx, policyreport.OpenReports, ns) }).
			WithTimeout(30*time.Second).Should(HaveLen(3), "auto: OpenReports first")
		Expect(stored(ctx, policyreport.PolicyReport, ns)).To(BeEmpty())
		stop()

		reg, _, _ := startReporting(ctx, func(c *observer.Config) { c.Reports.Kind = string(policyreport.PolicyReport) })
		Eventually(func() map[string]*unstructured.Unstructured { return stored(ctx, policyreport.PolicyReport, ns) }).
			WithTimeout(30 * time.Second).Should(HaveLen(3))
		Eventually(func() map[string]*unstructured.Unstructured { return stored(ctx, policyreport.OpenReports, ns) }).
			WithTimeout(30*time.Second).Should(BeEmpty(), "one kind at a time")
		// The observer counts a delete once its call returned: the API
		// server may list the report gone a moment before.
		Eventually(func() float64 { return writes(reg, policyreport.OpenReports, "delete") }).
			WithTimeout(5 * time.Second).Should(BeNumerically(">=", 3))
		check := checked(ctx, "-n", ns)
		for _, u := range stored(ctx, policyreport.PolicyReport, ns) {
			Expect(u.GetAPIVersion()).To(Equal("wgpolicyk8s.io/v1alpha2"))
			expectSaysWhatCheckSays(u, check)
		}
	})

	It("deletes the reports it wrote that no longer stand, and leaves those applied by hand", func(ctx SpecContext) {
		installReportCRD(ctx, policyreport.OpenReports)
		startReporting(ctx, nil)
		Eventually(func() map[string]*unstructured.Unstructured { return stored(ctx, policyreport.OpenReports, ns) }).
			WithTimeout(30 * time.Second).Should(HaveLen(3))

		By("audit's report of the namespace that is not opted in, applied by hand")
		_, stdout, _ := audit(ctx, "-n", out, "-o", "openreports")
		for _, u := range decodeStream(stdout) {
			must(dyn.Resource(reportResource(policyreport.OpenReports)).Namespace(out).Create(ctx, u, metav1.CreateOptions{}))
		}

		By("a workload deleted: its report goes at the next sweep (with a garbage collector, at once: it owns it)")
		Expect(kube.AppsV1().StatefulSets(ns).Delete(ctx, "db", metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() map[string]*unstructured.Unstructured { return stored(ctx, policyreport.OpenReports, ns) }).
			WithTimeout(30 * time.Second).Should(And(HaveLen(2), Not(HaveKey("StatefulSet "+ns+"/db"))))

		By("the namespace opted out: its reports go")
		optIn(ctx, ns, false)
		Eventually(func() map[string]*unstructured.Unstructured { return stored(ctx, policyreport.OpenReports, ns) }).
			WithTimeout(30 * time.Second).Should(BeEmpty())
		Consistently(func() map[string]*unstructured.Unstructured { return stored(ctx, policyreport.OpenReports, out) }).
			WithTimeout(2*time.Second).Should(HaveLen(1), "audit's report is not the observer's to delete")
	})
})

// requestClock records when requests of one method whose path holds a
// string leave a client.
type requestClock struct {
	mu sync.Mutex
	at []time.Time
}

func (c *requestClock) wrap(method, pathPart string) transport.WrapperFunc {
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			if r.Method == method && strings.Contains(r.URL.Path, pathPart) {
				c.mu.Lock()
				c.at = append(c.at, time.Now())
				c.mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	}
}

func (c *requestClock) times() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.at)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
