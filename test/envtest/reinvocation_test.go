package envtest_test

import (
	"encoding/json"
	"net/http"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// lateSidecar is a test-only mutating webhook that runs after graceguard
// (webhook configurations are called in name order) and adds a container,
// as a sidecar injector would.
type lateSidecar struct {
	container corev1.Container
	calls     atomic.Int32
}

func (l *lateSidecar) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.calls.Add(1)
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var pod corev1.Pod
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	if err := json.Unmarshal(review.Request.Object.Raw, &pod); err == nil {
		has := false
		for _, c := range pod.Spec.Containers {
			has = has || c.Name == l.container.Name
		}
		if !has {
			patch, _ := json.Marshal([]map[string]any{{"op": "add", "path": "/spec/containers/-", "value": l.container}})
			pt := admissionv1.PatchTypeJSONPatch
			resp.Patch, resp.PatchType = patch, &pt
		}
	}
	review.Request, review.Response = nil, resp
	_ = json.NewEncoder(w).Encode(review)
}

// startLateSidecar serves l with the envtest webhook certificate and
// registers it for Pods labelled with label=yes.
func startLateSidecar(ctx SpecContext, name, label string, l *lateSidecar) {
	GinkgoHelper()
	serveTestMutator(ctx, name, "late-sidecar", "/add", label, admissionregv1.NeverReinvocationPolicy, l)
}

// serveTestMutator serves h with the envtest webhook certificate and
// registers it (webhook hook.test.graceguard.io, at path) as a mutating
// webhook for Pod creations labelled label=yes, in a configuration of its
// own named name: webhooks are called in the order of their
// configurations' names, so "zz-..." comes after graceguard's.
func serveTestMutator(ctx SpecContext, name, hook, path, label string, reinvocation admissionregv1.ReinvocationPolicyType, h http.Handler) {
	GinkgoHelper()
	base, stop, err := cp.ServeTLS(h)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(stop)
	url := base + path
	none, fail := admissionregv1.SideEffectClassNone, admissionregv1.Fail
	cfg := &admissionregv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregv1.MutatingWebhook{{
			Name:                    hook + ".test.graceguard.io",
			ClientConfig:            admissionregv1.WebhookClientConfig{URL: &url, CABundle: cp.CA},
			Rules:                   []admissionregv1.RuleWithOperations{{Operations: []admissionregv1.OperationType{admissionregv1.Create}, Rule: admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{label: "yes"}},
			SideEffects:             &none,
			ReinvocationPolicy:      &reinvocation,
			FailurePolicy:           &fail,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	api := kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	_, err = api.Create(ctx, cfg, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) { _ = api.Delete(ctx, name, metav1.DeleteOptions{}) })
}

// createWhenServed creates the Pod, retrying until the test webhook just
// registered is served (its configuration reaches the API server's
// admission chain a moment after it is created).
func createWhenServed(ctx SpecContext, ns string, p *corev1.Pod) *corev1.Pod {
	GinkgoHelper()
	var got *corev1.Pod
	Eventually(func() error {
		var err error
		got, err = kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		return err
	}).Should(Succeed())
	return got
}

var _ = Describe("reinvocation after a later webhook adds a container", func() {
	It("treats the added container and doubles nothing", func(ctx SpecContext) {
		l := &lateSidecar{container: corev1.Container{Name: "late-sidecar", Image: "registry.local/sidecar:1"}}
		startLateSidecar(ctx, "zz-late-sidecar", "test.graceguard.io/late-sidecar", l)
		ns := optedIn(ctx, "reinvoke")
		p := pod("meshed", nil)
		p.Labels = map[string]string{"test.graceguard.io/late-sidecar": "yes"}
		got := createWhenServed(ctx, ns, p)
		Expect(l.calls.Load()).To(BeNumerically(">=", 1))
		Expect(got.Spec.Containers).To(HaveLen(2))
		for _, c := range got.Spec.Containers {
			Expect(c.Lifecycle).NotTo(BeNil(), "container %s was not treated", c.Name)
			Expect(c.Lifecycle.PreStop.Sleep).To(Equal(&corev1.SleepAction{Seconds: 5}), "container %s", c.Name)
		}
		Expect(got.Annotations[mutate.AnnotationBudget]).To(Equal("routing=5s work=20s cleanup=2s margin=3s grace=30s"))
		Expect(*got.Spec.TerminationGracePeriodSeconds).To(Equal(int64(30)))
	})

	It("raises the grace when the added container brings a longer preStop", func(ctx SpecContext) {
		l := &lateSidecar{container: corev1.Container{Name: "slow-proxy", Image: "registry.local/proxy:1",
			Lifecycle: execHook("sleep", "60")}}
		startLateSidecar(ctx, "zz-slow-proxy", "test.graceguard.io/slow-proxy", l)
		ns := optedIn(ctx, "reinvoke-slow")
		p := pod("meshed", nil)
		p.Labels = map[string]string{"test.graceguard.io/slow-proxy": "yes"}
		got := createWhenServed(ctx, ns, p)
		// Without reinvocation the validating webhook would deny this Pod
		// (hook 60s + 25s > grace 30s); reinvoked, graceguard fixes it.
		Expect(*got.Spec.TerminationGracePeriodSeconds).To(Equal(int64(85)))
		Expect(got.Annotations[mutate.AnnotationBudget]).To(Equal("routing=1m work=20s cleanup=2s margin=3s grace=85s"))
		Expect(got.Spec.Containers[1].Lifecycle.PreStop.Exec.Command).To(Equal([]string{"sleep", "60"}))
	})
})
