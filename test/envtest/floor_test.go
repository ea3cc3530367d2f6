package envtest_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// floorDenied expects the native floor's refusal (docs/admission.md#the-native-floor):
// 422 Invalid, from the chart's ValidatingAdmissionPolicy, with graceguard's
// own words.
func floorDenied(err error, parts ...string) {
	GinkgoHelper()
	Expect(err).To(HaveOccurred(), "the API server admitted what the native floor must refuse")
	Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want 422 Invalid, got %v", err)
	Expect(err.Error()).To(ContainSubstring("ValidatingAdmissionPolicy 'graceguard-floor' with binding 'graceguard-floor' denied request: "))
	for _, p := range parts {
		Expect(err.Error()).To(ContainSubstring(p))
	}
}

// unreachable points every graceguard webhook at a port nothing listens
// on, as when both replicas are down, and puts them back after the spec.
func unreachable(ctx context.Context) {
	GinkgoHelper()
	api := kube.AdmissionregistrationV1()
	// Registered first, so it runs last: once every configuration is back.
	DeferCleanup(func(ctx SpecContext) { Expect(cp.WaitMutating(ctx, 30e9)).To(Succeed()) })
	for _, m := range cp.Webhooks.Mutating {
		cur, err := api.MutatingWebhookConfigurations().Get(ctx, m.Name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		saved := cur.DeepCopy()
		for i := range cur.Webhooks {
			cur.Webhooks[i].ClientConfig.URL = ptr.To("https://127.0.0.1:1/down")
		}
		_, err = api.MutatingWebhookConfigurations().Update(ctx, cur, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			cur, err := api.MutatingWebhookConfigurations().Get(ctx, saved.Name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			cur.Webhooks = saved.Webhooks
			_, err = api.MutatingWebhookConfigurations().Update(ctx, cur, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
		})
	}
	for _, v := range cp.Webhooks.Validating {
		cur, err := api.ValidatingWebhookConfigurations().Get(ctx, v.Name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		saved := cur.DeepCopy()
		for i := range cur.Webhooks {
			cur.Webhooks[i].ClientConfig.URL = ptr.To("https://127.0.0.1:1/down")
		}
		_, err = api.ValidatingWebhookConfigurations().Update(ctx, cur, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			cur, err := api.ValidatingWebhookConfigurations().Get(ctx, saved.Name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			cur.Webhooks = saved.Webhooks
			_, err = api.ValidatingWebhookConfigurations().Update(ctx, cur, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
		})
	}
	// The API server sees the change a moment later: until a Pod comes
	// back unmutated, graceguard still answers.
	ns := optedIn(ctx, "down-probe")
	Eventually(func(g Gomega) {
		p, err := kube.CoreV1().Pods(ns).Create(ctx, pod("probe", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.Labels[mutate.LabelTreated]).NotTo(Equal(mutate.LabelTreatedValue))
	}, "30s", "200ms").Should(Succeed())
}

var _ = Describe("while graceguard's webhooks are unreachable", Ordered, func() {
	var ns string
	BeforeAll(func(ctx SpecContext) {
		unreachable(ctx)
		ns = optedIn(ctx, "down")
	})
	app := func(l *corev1.Lifecycle) corev1.Container {
		return corev1.Container{Name: "app", Image: "registry.local/app:1", Lifecycle: l}
	}
	withGrace := func(p *corev1.Pod, g int64) *corev1.Pod {
		p.Spec.TerminationGracePeriodSeconds = &g
		return p
	}

	It("admits an ordinary Pod, one with max-work: 40s and one with a sleep 10 that fits its grace, with graceguard's budget where the mutating floor runs", func(ctx SpecContext) {
		for _, tc := range []struct {
			pod    *corev1.Pod
			record string
			grace  int64
		}{
			{pod("ordinary", nil), "routing=5s work=20s cleanup=2s margin=3s grace=30s", 30},
			{pod("long-work", map[string]string{mutate.AnnotationMaxWork: "40s"}), "routing=5s work=40s cleanup=2s margin=3s grace=50s", 50},
			{withGrace(pod("sleeps", nil, app(&corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 10}}})), 30),
				"routing=10s work=20s cleanup=2s margin=3s grace=35s", 35},
		} {
			got, err := kube.CoreV1().Pods(ns).Create(ctx, tc.pod, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred(), "Pod %s", tc.pod.Name)
			if !cp.MutatingFloor {
				// Kubernetes 1.35: no MutatingAdmissionPolicy; the Pod is
				// admitted as it was sent.
				Expect(got.Annotations).NotTo(HaveKey(mutate.AnnotationBudget))
				continue
			}
			Expect(got.Annotations).To(HaveKeyWithValue(mutate.AnnotationBudget, tc.record), "Pod %s", tc.pod.Name)
			Expect(got.Labels).To(HaveKeyWithValue(mutate.LabelTreated, mutate.LabelTreatedByFloor))
			Expect(*got.Spec.TerminationGracePeriodSeconds).To(Equal(tc.grace))
			Expect(got.Spec.Containers[0].Lifecycle).NotTo(BeNil())
			Expect(got.Spec.Containers[0].Lifecycle.PreStop).NotTo(BeNil())
		}
	})

	It("admits a valid Deployment and a change of its template", func(ctx SpecContext) {
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1"}}},
				},
			},
		}
		_, err := kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() error {
			cur, err := kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec.Template.Spec.Containers[0].Image = "registry.local/app:2"
			_, err = kube.AppsV1().Deployments(ns).Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}).Should(Succeed())
	})

	It("refuses, with graceguard's words, every hook shape it reads that outlasts the grace", func(ctx SpecContext) {
		out := map[string]string{mutate.AnnotationInject: "false"}
		_, err := kube.CoreV1().Pods(ns).Create(ctx, withGrace(pod("exec", out, app(execHook("sleep", "60"))), 30), metav1.CreateOptions{})
		floorDenied(err, `spec.containers[0].lifecycle.preStop: Invalid value: "exec sleep 60": must be shorter than terminationGracePeriodSeconds (30s): the hook runs inside it and is killed at 30s (exit 137); shorten the hook or raise terminationGracePeriodSeconds`)
		_, err = kube.CoreV1().Pods(ns).Create(ctx, withGrace(pod("shell", out, app(execHook("sh", "-c", "sleep 45"))), 30), metav1.CreateOptions{})
		floorDenied(err, `spec.containers[0].lifecycle.preStop: Invalid value: "exec sh -c sleep 45": must be shorter than terminationGracePeriodSeconds (30s)`)

		// A Pod graceguard treats: the mutating floor (1.36+) gives it the
		// budget graceguard gives it, its grace raised past the hook, as the
		// webhook does; without it, the validating floor refuses it.
		got, err := kube.CoreV1().Pods(ns).Create(ctx, withGrace(pod("treated", nil, app(execHook("sleep", "60"))), 30), metav1.CreateOptions{})
		if cp.MutatingFloor {
			Expect(err).NotTo(HaveOccurred())
			Expect(got.Annotations).To(HaveKeyWithValue(mutate.AnnotationBudget, "routing=1m work=20s cleanup=2s margin=3s grace=85s"))
			Expect(*got.Spec.TerminationGracePeriodSeconds).To(Equal(int64(85)))
		} else {
			floorDenied(err, `spec.containers[0].lifecycle.preStop: Invalid value: "exec sleep 60": must be shorter than terminationGracePeriodSeconds (30s)`)
		}
		// The sleep action on an opted-out Pod: the API server's own
		// validation refuses it first (1.34+).
		_, err = kube.CoreV1().Pods(ns).Create(ctx, withGrace(pod("action", out,
			app(&corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 60}}})), 30), metav1.CreateOptions{})
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want 422 Invalid, got %v", err)
	})

	It("refuses an opted-out Deployment whose hook outlasts its grace", func(ctx SpecContext) {
		g := int64(10)
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "doomed"},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "doomed"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "doomed"}, Annotations: map[string]string{mutate.AnnotationInject: "false"}},
					Spec:       corev1.PodSpec{TerminationGracePeriodSeconds: &g, Containers: []corev1.Container{app(execHook("sh", "-c", "sleep 10"))}},
				},
			},
		}
		_, err := kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		floorDenied(err, `spec.template.spec.containers[0].lifecycle.preStop: Invalid value: "exec sh -c sleep 10": must be shorter than terminationGracePeriodSeconds (10s)`)
	})
})
