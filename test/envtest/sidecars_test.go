package envtest_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/mutate"
)

var _ = Describe("graceguard.io/sidecars", func() {
	app := corev1.Container{Name: "app", Image: "registry.local/app:1", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}
	proxy := corev1.Container{Name: "db-proxy", Image: "gcr.io/cloud-sql-connectors/cloud-sql-proxy:2.14.0"}

	It("stores a named sidecar with a wait of the app's whole shutdown, and the app as before", func(ctx SpecContext) {
		ns := optedIn(ctx, "sidecars")
		_, err := kube.CoreV1().Pods(ns).Create(ctx, pod("api", map[string]string{
			mutate.AnnotationSidecars:      "db-proxy",
			mutate.AnnotationMaxWork:       "30s",
			mutate.AnnotationReadinessPath: "/readyz",
		}, app, proxy), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		got, err := kube.CoreV1().Pods(ns).Get(ctx, "api", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		// routing 5s + work 30s + cleanup 2s: the sidecar's SIGTERM comes
		// when the app is done; grace 40 covers it and the 3s margin.
		Expect(*got.Spec.TerminationGracePeriodSeconds).To(Equal(int64(40)))
		Expect(got.Annotations).To(HaveKeyWithValue(mutate.AnnotationBudget, "routing=5s work=30s cleanup=2s margin=3s grace=40s"))
		a, s := got.Spec.Containers[0], got.Spec.Containers[1]
		Expect(a.Lifecycle.PreStop.Sleep).To(Equal(&corev1.SleepAction{Seconds: 5}))
		Expect(a.ReadinessProbe).NotTo(BeNil())
		Expect(s.Lifecycle.PreStop.Sleep).To(Equal(&corev1.SleepAction{Seconds: 37}))
		Expect(s.ReadinessProbe).To(BeNil())
	})

	It("denies a name that is no container of the Pod, listing the Pod's containers", func(ctx SpecContext) {
		ns := optedIn(ctx, "sidecars-typo")
		_, err := kube.CoreV1().Pods(ns).Create(ctx, pod("api", map[string]string{mutate.AnnotationSidecars: "dbproxy"}, app, proxy), metav1.CreateOptions{})
		denied(err, "mutate-pods.graceguard.io",
			`metadata.annotations[graceguard.io/sidecars]: Invalid value: "dbproxy": no container named "dbproxy"; the Pod's containers and native sidecars: "app", "db-proxy"`)
	})
})
