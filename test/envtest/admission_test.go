package envtest_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/graceguard/graceguard/pkg/mutate"
)

var _ = Describe("an opted-in namespace", func() {
	It("stores the Pod with the preStop sleep, grace, probes and budget its annotations ask for", func(ctx SpecContext) {
		ns := optedIn(ctx, "shop")
		p := pod("api", map[string]string{
			mutate.AnnotationRoutingDelay:  "8",
			mutate.AnnotationMaxWork:       "30s",
			mutate.AnnotationSafetyMargin:  "5s",
			mutate.AnnotationReadinessPath: "/readyz",
			mutate.AnnotationLivenessPath:  "/livez",
		}, corev1.Container{Name: "app", Image: "registry.local/app:1", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}})
		_, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		// What `kubectl get pod -o yaml` shows: the stored object.
		got, err := kube.CoreV1().Pods(ns).Get(ctx, "api", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Annotations).To(HaveKeyWithValue(mutate.AnnotationBudget, "routing=8s work=30s cleanup=2s margin=5s grace=45s"))
		Expect(*got.Spec.TerminationGracePeriodSeconds).To(Equal(int64(45)))
		c := got.Spec.Containers[0]
		Expect(c.Lifecycle).NotTo(BeNil())
		Expect(c.Lifecycle.PreStop.Sleep).To(Equal(&corev1.SleepAction{Seconds: 8}))
		Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
		Expect(c.ReadinessProbe.HTTPGet.Port).To(Equal(intstr.FromString("http")))
		Expect(c.ReadinessProbe.PeriodSeconds).To(Equal(int32(2)))
		Expect(c.ReadinessProbe.FailureThreshold).To(Equal(int32(2)))
		Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/livez"))
	})

	It("gives a Pod without annotations a 5s preStop sleep and keeps grace 30", func(ctx SpecContext) {
		ns := optedIn(ctx, "plain")
		got, err := kube.CoreV1().Pods(ns).Create(ctx, pod("plain", nil), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Spec.Containers[0].Lifecycle.PreStop.Sleep.Seconds).To(Equal(int64(5)))
		Expect(*got.Spec.TerminationGracePeriodSeconds).To(Equal(int64(30)))
		Expect(got.Annotations[mutate.AnnotationBudget]).To(Equal("routing=5s work=20s cleanup=2s margin=3s grace=30s"))
	})

	It("applies namespace annotations as defaults and lets Pod annotations override them", func(ctx SpecContext) {
		ns := newNamespace(ctx, "payments", map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}, map[string]string{
			mutate.AnnotationRoutingDelay: "10s",
			mutate.AnnotationMaxWork:      "40s",
		})
		got, err := kube.CoreV1().Pods(ns).Create(ctx, pod("ledger", map[string]string{mutate.AnnotationMaxWork: "25s"}), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Annotations[mutate.AnnotationBudget]).To(Equal("routing=10s work=25s cleanup=2s margin=3s grace=40s"))
		Expect(got.Spec.Containers[0].Lifecycle.PreStop.Sleep.Seconds).To(Equal(int64(10)))
		Expect(*got.Spec.TerminationGracePeriodSeconds).To(Equal(int64(40)))
	})

	It("answers a dryRun=All create with the mutated Pod and stores nothing", func(ctx SpecContext) {
		ns := optedIn(ctx, "dry")
		got, err := kube.CoreV1().Pods(ns).Create(ctx, pod("dry", map[string]string{mutate.AnnotationMaxWork: "45s"}),
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		Expect(err).NotTo(HaveOccurred())
		Expect(*got.Spec.TerminationGracePeriodSeconds).To(Equal(int64(55)))
		Expect(got.Spec.Containers[0].Lifecycle.PreStop.Sleep.Seconds).To(Equal(int64(5)))
		_, err = kube.CoreV1().Pods(ns).Get(ctx, "dry", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "dry run stored the Pod: %v", err)
	})
})

var _ = Describe("what graceguard leaves alone", func() {
	untouched := func(got *corev1.Pod) {
		GinkgoHelper()
		Expect(got.Annotations).NotTo(HaveKey(mutate.AnnotationBudget))
		Expect(got.Spec.Containers[0].Lifecycle).To(BeNil())
		Expect(*got.Spec.TerminationGracePeriodSeconds).To(Equal(int64(5)))
	}
	short := func(name string, ann map[string]string) *corev1.Pod {
		p := pod(name, ann)
		g := int64(5)
		p.Spec.TerminationGracePeriodSeconds = &g
		return p
	}

	It("does not touch a namespace that is not opted in", func(ctx SpecContext) {
		ns := newNamespace(ctx, "elsewhere", nil, nil)
		got, err := kube.CoreV1().Pods(ns).Create(ctx, short("web", nil), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		untouched(got)
	})

	It("does not touch a namespace labelled with anything but enabled", func(ctx SpecContext) {
		ns := newNamespace(ctx, "almost", map[string]string{mutate.LabelInject: "true"}, nil)
		got, err := kube.CoreV1().Pods(ns).Create(ctx, short("web", nil), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		untouched(got)
	})

	It("never touches kube-system, even labelled", func(ctx SpecContext) {
		patchLabel(ctx, "kube-system")
		got, err := kube.CoreV1().Pods("kube-system").Create(ctx, short("sys-web", nil), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = kube.CoreV1().Pods("kube-system").Delete(ctx, "sys-web", metav1.DeleteOptions{})
		})
		untouched(got)
	})

	It("never touches its own namespace, even labelled, so it cannot block its own start", func(ctx SpecContext) {
		own := cp.ServerConfig.Namespace
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: own}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		patchLabel(ctx, own)
		got, err := kube.CoreV1().Pods(own).Create(ctx, short("self", nil), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { _ = kube.CoreV1().Pods(own).Delete(ctx, "self", metav1.DeleteOptions{}) })
		untouched(got)
	})

	It("never touches mirror Pods", func(ctx SpecContext) {
		ns := optedIn(ctx, "mirror")
		p := short("static-web", map[string]string{"kubernetes.io/config.mirror": "abc"})
		p.Spec.NodeName = "node1" // the API requires it of mirror Pods
		got, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		untouched(got)
	})

	It("leaves a Pod that opted out unchanged", func(ctx SpecContext) {
		ns := optedIn(ctx, "optout")
		got, err := kube.CoreV1().Pods(ns).Create(ctx, short("hands-off", map[string]string{mutate.AnnotationInject: "false"}), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		untouched(got)
	})
})

var _ = Describe("warn mode", func() {
	It("stores the Pod unchanged and tells the client what enforce would have done", func(ctx SpecContext) {
		ns := newNamespace(ctx, "trial", map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled, mutate.LabelMode: "warn"}, nil)
		wc := newWarningClient()
		p := pod("web", map[string]string{mutate.AnnotationMaxWork: "40s", mutate.AnnotationCleanup: "ten"})
		got, err := wc.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred(), "warn mode must deny nothing")
		Expect(got.Annotations).NotTo(HaveKey(mutate.AnnotationBudget))
		Expect(got.Spec.Containers[0].Lifecycle).To(BeNil())
		Expect(*got.Spec.TerminationGracePeriodSeconds).To(Equal(int64(30)))
		Expect(wc.Warnings()).To(ContainElement(And(
			HavePrefix("enforce would deny: metadata.annotations[graceguard.io/cleanup]"),
			ContainSubstring(`"ten"`))))

		wc = newWarningClient()
		_, err = wc.CoreV1().Pods(ns).Create(ctx, pod("web2", map[string]string{mutate.AnnotationMaxWork: "40s"}), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.Join(wc.Warnings(), "\n")).To(And(
			ContainSubstring("enforce would set spec.containers[0].lifecycle.preStop: sleep 5s"),
			ContainSubstring("enforce would set spec.terminationGracePeriodSeconds: 30 -> 50")))
	})
})

func patchLabel(ctx SpecContext, ns string) {
	GinkgoHelper()
	n, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[mutate.LabelInject] = mutate.LabelInjectEnabled
	_, err = kube.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		n, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err == nil {
			delete(n.Labels, mutate.LabelInject)
			_, _ = kube.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{})
		}
	})
}
