package envtest_test

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// standIn is a test-only mutating webhook: patch returns the JSON patch
// operations for the Pod it is sent.
type standIn struct {
	patch   func(pod *corev1.Pod) []map[string]any
	mu      sync.Mutex
	patched int
}

func (s *standIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	var pod corev1.Pod
	if err := json.Unmarshal(review.Request.Object.Raw, &pod); err == nil {
		if ops := s.patch(&pod); len(ops) > 0 {
			patch, _ := json.Marshal(ops)
			pt := admissionv1.PatchTypeJSONPatch
			resp.Patch, resp.PatchType = patch, &pt
			s.mu.Lock()
			s.patched++
			s.mu.Unlock()
		}
	}
	review.Request, review.Response = nil, resp
	_ = json.NewEncoder(w).Encode(review)
}

// patches is how many Pods s has patched.
func (s *standIn) patches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.patched
}

// touch is a later webhook (reinvocationPolicy Never) that labels a Pod,
// and roundTwo one (IfNeeded) that acts on a Pod only once it is labelled:
// it is registered before touch, so that happens when the API server calls
// it again because of touch's change, in the reinvocation round, after
// graceguard's own second call. graceguard never sees what it adds.
func touch() *standIn {
	return &standIn{patch: func(pod *corev1.Pod) []map[string]any {
		if pod.Labels["touched"] != "" {
			return nil
		}
		return []map[string]any{{"op": "add", "path": "/metadata/labels/touched", "value": "yes"}}
	}}
}

func roundTwo(c corev1.Container) *standIn {
	return &standIn{patch: func(pod *corev1.Pod) []map[string]any {
		if pod.Labels["touched"] == "" {
			return nil
		}
		for _, have := range pod.Spec.Containers {
			if have.Name == c.Name {
				return nil
			}
		}
		return []map[string]any{{"op": "add", "path": "/spec/containers/-", "value": c}}
	}}
}

// registerStandIn serves s and registers it, for Pods labelled label=yes,
// in a configuration of its own named name (after graceguard's).
func registerStandIn(ctx SpecContext, name, label string, reinvocation admissionregv1.ReinvocationPolicyType, s *standIn) {
	GinkgoHelper()
	serveTestMutator(ctx, name, name, "/", label, reinvocation, s)
}

// admissionCounts are the API server's own counts of what it did with
// graceguard's webhooks: calls, and skips by a matchCondition, by webhook.
type admissionCounts struct {
	calls, skipped map[string]float64
	celErrors      float64
}

func countAdmissions(ctx SpecContext) admissionCounts {
	GinkgoHelper()
	fams := apiserverMetrics(ctx)
	c := admissionCounts{calls: map[string]float64{}, skipped: map[string]float64{}}
	for _, name := range []string{"mutate-pods.graceguard.io", "validate-pods.graceguard.io", "validate-pods-warn.graceguard.io"} {
		c.calls[name] = counter(fams, "apiserver_admission_webhook_request_total", map[string]string{"name": name})
		c.skipped[name] = counter(fams, "apiserver_admission_match_condition_exclusions_total", map[string]string{"name": name})
	}
	c.celErrors = counter(fams, "apiserver_admission_match_condition_evaluation_errors_total", nil)
	return c
}

// since is what the API server did between two counts.
func (c admissionCounts) since(before admissionCounts) admissionCounts {
	d := admissionCounts{calls: map[string]float64{}, skipped: map[string]float64{}, celErrors: c.celErrors - before.celErrors}
	for k, v := range c.calls {
		d.calls[k] = v - before.calls[k]
	}
	for k, v := range c.skipped {
		d.skipped[k] = v - before.skipped[k]
	}
	return d
}

var _ = Describe("one webhook call per Pod", func() {
	It("calls only the mutating webhook for a Pod graceguard treats: the API server's CEL proves the rest", func(ctx SpecContext) {
		ns := optedIn(ctx, "onecall")
		before := countAdmissions(ctx)
		p := pod("web", map[string]string{mutate.AnnotationMaxWork: "40s", mutate.AnnotationReadinessPath: "/readyz", mutate.AnnotationProbePort: "8080"},
			corev1.Container{Name: "app", Image: "registry.local/app:1", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}},
			corev1.Container{Name: "shipper", Image: "registry.local/shipper:1", Lifecycle: execHook("sleep", "3")})
		got, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Annotations[mutate.AnnotationBudget]).To(Equal("routing=5s work=40s cleanup=2s margin=3s grace=50s"))
		d := countAdmissions(ctx).since(before)
		Expect(d.calls).To(Equal(map[string]float64{"mutate-pods.graceguard.io": 1, "validate-pods.graceguard.io": 0, "validate-pods-warn.graceguard.io": 0}))
		Expect(d.skipped["validate-pods.graceguard.io"]).To(Equal(1.0))
		Expect(d.celErrors).To(BeZero())
	})

	It("refuses a Pod a later webhook changed after graceguard's last call: the floor its hook, the validating webhook its budget", func(ctx SpecContext) {
		late := roundTwo(corev1.Container{Name: "late-proxy", Image: "registry.local/proxy:1", Lifecycle: execHook("sleep", "60")})
		registerStandIn(ctx, "zz-late-round2", "test.graceguard.io/round2", admissionregv1.IfNeededReinvocationPolicy, late)
		registerStandIn(ctx, "zzz-touch", "test.graceguard.io/round2", admissionregv1.NeverReinvocationPolicy, touch())
		ns := optedIn(ctx, "round2")
		p := pod("meshed", nil)
		p.Labels = map[string]string{"test.graceguard.io/round2": "yes"}
		var err error
		Eventually(func() int {
			_, err = kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return late.patches()
		}).WithTimeout(30*time.Second).Should(BeNumerically(">=", 1), "the later webhooks are not served yet")
		// The hook outlasts the grace: the native floor, which the API
		// server runs before the validating webhooks, refuses it.
		floorDenied(err, `spec.containers[1].lifecycle.preStop: Invalid value: "exec sleep 60": must be shorter than terminationGracePeriodSeconds (30s)`)

	})

	It("sends a Pod a later webhook changed within its grace but past graceguard's budget to the validating webhook, which refuses it", func(ctx SpecContext) {
		late := roundTwo(corev1.Container{Name: "late-proxy", Image: "registry.local/proxy:1", Lifecycle: execHook("sleep", "20")})
		registerStandIn(ctx, "zz-late-round2-budget", "test.graceguard.io/round2-budget", admissionregv1.IfNeededReinvocationPolicy, late)
		registerStandIn(ctx, "zzz-touch-budget", "test.graceguard.io/round2-budget", admissionregv1.NeverReinvocationPolicy, touch())
		ns := optedIn(ctx, "round2-budget")
		p := pod("meshed", nil)
		p.Labels = map[string]string{"test.graceguard.io/round2-budget": "yes"}
		var err error
		Eventually(func() int {
			_, err = kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return late.patches()
		}).WithTimeout(30*time.Second).Should(BeNumerically(">=", 1), "the later webhooks are not served yet")
		// The hook fits the grace, so the floor admits it; the proof sends
		// it to the validating webhook, which counts it in the budget.
		denied(err, "validate-pods.graceguard.io", "spec.terminationGracePeriodSeconds: Invalid value: 30: must be at least 45 (routing 20s + work 20s + cleanup 2s + margin 3s)")
	})

	It("skips the validating webhook for a later webhook's change that keeps within graceguard's budget", func(ctx SpecContext) {
		late := roundTwo(corev1.Container{Name: "late-proxy", Image: "registry.local/proxy:1",
			Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}})
		registerStandIn(ctx, "zz-late-round2-fits", "test.graceguard.io/round2-fits", admissionregv1.IfNeededReinvocationPolicy, late)
		registerStandIn(ctx, "zzz-touch-fits", "test.graceguard.io/round2-fits", admissionregv1.NeverReinvocationPolicy, touch())
		ns := optedIn(ctx, "round2-fits")
		p := pod("meshed", nil)
		p.Labels = map[string]string{"test.graceguard.io/round2-fits": "yes"}
		Eventually(func() []corev1.Container {
			got, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				return nil
			}
			return got.Spec.Containers
		}).WithTimeout(30*time.Second).Should(HaveLen(2), "the later webhooks are not served yet")
		before := countAdmissions(ctx)
		p.Name = "meshed-2"
		got, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Spec.Containers).To(HaveLen(2))
		Expect(got.Labels).To(HaveKeyWithValue("touched", "yes"))
		d := countAdmissions(ctx).since(before)
		Expect(d.calls["validate-pods.graceguard.io"]).To(BeZero())
		Expect(d.skipped["validate-pods.graceguard.io"]).To(Equal(1.0))
		// graceguard was called again for the label, and had nothing to add.
		Expect(d.calls["mutate-pods.graceguard.io"]).To(Equal(2.0))
	})

	It("calls the validating webhook for every Pod in a warn-mode namespace, even one carrying a budget record", func(ctx SpecContext) {
		// A Pod copied, with graceguard's record and hooks, from an
		// enforce-mode namespace into a warn-mode one whose defaults do not
		// parse: CEL, which cannot see namespaces, would prove it; warn mode
		// must still say what enforce would deny.
		ns := newNamespace(ctx, "copied", map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled, mutate.LabelMode: "warn"},
			map[string]string{mutate.AnnotationMaxWork: "sixty"})
		p := pod("copy", map[string]string{mutate.AnnotationBudget: "routing=5s work=20s cleanup=2s margin=3s grace=30s"},
			corev1.Container{Name: "app", Image: "registry.local/app:1", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}})
		wc := newWarningClient()
		before := countAdmissions(ctx)
		_, err := wc.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred(), "warn mode must deny nothing")
		d := countAdmissions(ctx).since(before)
		Expect(d.calls["validate-pods-warn.graceguard.io"]).To(Equal(1.0))
		Expect(d.calls["validate-pods.graceguard.io"] + d.skipped["validate-pods.graceguard.io"]).To(BeZero())
		Expect(wc.Warnings()).To(ContainElement(And(HavePrefix("enforce would deny: Namespace["),
			ContainSubstring(`metadata.annotations[graceguard.io/max-work]: Invalid value: "sixty"`))))
	})

	It("does not call the mutating webhook for an opted-out Pod, and refuses its hook longer than its grace", func(ctx SpecContext) {
		ns := optedIn(ctx, "optout")
		out := map[string]string{mutate.AnnotationInject: "false"}
		before := countAdmissions(ctx)
		_, err := kube.CoreV1().Pods(ns).Create(ctx, pod("fits", out, corev1.Container{Name: "app", Image: "registry.local/app:1", Lifecycle: execHook("sleep", "29")}), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		d := countAdmissions(ctx).since(before)
		Expect(d.calls).To(Equal(map[string]float64{"mutate-pods.graceguard.io": 0, "validate-pods.graceguard.io": 0, "validate-pods-warn.graceguard.io": 0}))
		Expect(d.skipped["mutate-pods.graceguard.io"]).To(Equal(1.0))

		_, err = kube.CoreV1().Pods(ns).Create(ctx, pod("doomed", out, corev1.Container{Name: "app", Image: "registry.local/app:1", Lifecycle: execHook("sleep", "30")}), metav1.CreateOptions{})
		// The native floor refuses it inside the API server, before any
		// validating webhook is called.
		floorDenied(err, `spec.containers[0].lifecycle.preStop: Invalid value: "exec sleep 30": must be shorter than terminationGracePeriodSeconds (30s)`)
	})
})
