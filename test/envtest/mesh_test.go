package envtest_test

import (
	"context"
	"encoding/json"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/internal/meshtest"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// orderLabel selects which of the stand-in injector's two webhook
// configurations reviews a Pod: the API server calls mutating webhook
// configurations in name order, "aa-..." before graceguard's "graceguard",
// "zz-..." after it.
const orderLabel = "test.graceguard.io/order"

// startMeshInjector serves a stand-in mesh injector (internal/meshtest)
// with the envtest webhook certificate and registers it twice, before and
// after graceguard, like the mesh's own webhook: CREATE of Pods,
// reinvocationPolicy Never (the meshes' default), failurePolicy Fail.
func startMeshInjector(ctx SpecContext, name string, in meshtest.Injector) *meshtest.Webhook {
	GinkgoHelper()
	wh := &meshtest.Webhook{Injector: in, Namespaces: func(ctx context.Context, ns string) (map[string]string, map[string]string, error) {
		n, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		return n.Labels, n.Annotations, nil
	}}
	base, stop, err := cp.ServeTLS(wh)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(stop)
	url := base + "/inject"
	none, never, fail := admissionregv1.SideEffectClassNone, admissionregv1.NeverReinvocationPolicy, admissionregv1.Fail
	api := kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	for _, order := range []struct{ config, value string }{{"aa-" + name, "injector-first"}, {"zz-" + name, "graceguard-first"}} {
		cfg := &admissionregv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: order.config},
			Webhooks: []admissionregv1.MutatingWebhook{{
				Name:                    "inject." + name + ".test.graceguard.io",
				ClientConfig:            admissionregv1.WebhookClientConfig{URL: &url, CABundle: cp.CA},
				Rules:                   []admissionregv1.RuleWithOperations{{Operations: []admissionregv1.OperationType{admissionregv1.Create}, Rule: admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
				ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{orderLabel: order.value}},
				SideEffects:             &none,
				ReinvocationPolicy:      &never,
				FailurePolicy:           &fail,
				AdmissionReviewVersions: []string{"v1"},
			}},
		}
		_, err = api.Create(ctx, cfg, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { _ = api.Delete(ctx, order.config, metav1.DeleteOptions{}) })
	}
	return wh
}

// meshedPod is the Pod a team writes: nothing about the mesh but what its
// namespace says, a 30s request budget.
func meshedPod(name, order string) *corev1.Pod {
	p := pod(name, map[string]string{mutate.AnnotationMaxWork: "30s"}, corev1.Container{
		Name: "app", Image: "registry.local/app:1", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
	})
	p.Labels = map[string]string{orderLabel: order, "app": "web"}
	// A cluster's ServiceAccount admission plugin (off in envtest) sets it
	// before any webhook; the injectors' projected token volumes need it.
	p.Spec.ServiceAccountName = "default"
	return p
}

// comparable is a stored Pod without what differs by name or order only:
// its name, UID and versions, the order label, the API server's
// service-account volume with its random suffix.
func comparable(p *corev1.Pod) string {
	GinkgoHelper()
	c := p.DeepCopy()
	delete(c.Labels, orderLabel)
	keep := c.Spec.Volumes[:0]
	for _, v := range c.Spec.Volumes {
		if !strings.HasPrefix(v.Name, "kube-api-access-") {
			keep = append(keep, v)
		}
	}
	c.Spec.Volumes = keep
	for _, list := range [][]corev1.Container{c.Spec.InitContainers, c.Spec.Containers} {
		for i := range list {
			mounts := list[i].VolumeMounts[:0]
			for _, m := range list[i].VolumeMounts {
				if !strings.HasPrefix(m.Name, "kube-api-access-") {
					mounts = append(mounts, m)
				}
			}
			list[i].VolumeMounts = mounts
		}
	}
	b, err := json.MarshalIndent(struct {
		Labels, Annotations map[string]string
		Spec                corev1.PodSpec
	}{c.Labels, c.Annotations, c.Spec}, "", "  ")
	Expect(err).NotTo(HaveOccurred())
	return string(b)
}

var _ = Describe("beside a mesh's sidecar injector, in either webhook order", func() {
	for _, tc := range []struct {
		name      string
		injector  meshtest.Injector
		nsLabels  map[string]string
		nsAnn     map[string]string
		proxyInit bool // the proxy is a native sidecar
		grace     int64
		budget    string
	}{
		{name: "istio-classic", injector: meshtest.Injector{Mesh: meshtest.Istio}, nsLabels: map[string]string{mutate.LabelIstioInjection: "enabled"},
			grace: 45, budget: "routing=5s work=30s cleanup=2s proxy=5s margin=3s grace=45s"},
		{name: "istio-native", injector: meshtest.Injector{Mesh: meshtest.Istio, Native: true}, nsLabels: map[string]string{mutate.LabelIstioInjection: "enabled"},
			proxyInit: true, grace: 45, budget: "routing=5s work=30s cleanup=2s proxy=5s margin=3s grace=45s"},
		{name: "linkerd-classic", injector: meshtest.Injector{Mesh: meshtest.Linkerd}, nsAnn: map[string]string{mutate.AnnotationLinkerdInject: "enabled"},
			grace: 40, budget: "routing=5s work=30s cleanup=2s margin=3s grace=40s"},
		{name: "linkerd-native", injector: meshtest.Injector{Mesh: meshtest.Linkerd, Native: true}, nsAnn: map[string]string{mutate.AnnotationLinkerdInject: "enabled"},
			proxyInit: true, grace: 40, budget: "routing=5s work=30s cleanup=2s margin=3s grace=40s"},
	} {
		It("stores the same "+tc.name+" Pod whichever runs first, and applying it again changes nothing", func(ctx SpecContext) {
			wh := startMeshInjector(ctx, tc.name, tc.injector)
			labels := map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}
			for k, v := range tc.nsLabels {
				labels[k] = v
			}
			ns := newNamespace(ctx, tc.name, labels, tc.nsAnn)

			injectorFirst := createWhenServed(ctx, ns, meshedPod("injector-first", "injector-first"))
			graceguardFirst := createWhenServed(ctx, ns, meshedPod("graceguard-first", "graceguard-first"))
			Expect(wh.Calls.Load()).To(BeNumerically(">=", 2), "the stand-in injector reviewed both Pods")

			Expect(comparable(graceguardFirst)).To(Equal(comparable(injectorFirst)))

			// What graceguard and the mesh made of it.
			got := injectorFirst
			proxies := got.Spec.Containers
			if tc.proxyInit {
				proxies = got.Spec.InitContainers
			}
			var proxy *corev1.Container
			for i := range proxies {
				if proxies[i].Name == mutate.ContainerIstioProxy || proxies[i].Name == mutate.ContainerLinkerdProxy {
					proxy = &proxies[i]
				}
			}
			Expect(proxy).NotTo(BeNil(), "the proxy is injected")
			Expect(*got.Spec.TerminationGracePeriodSeconds).To(Equal(tc.grace))
			Expect(got.Annotations[mutate.AnnotationBudget]).To(Equal(tc.budget))
			switch tc.name {
			case "istio-classic":
				Expect(proxy.Lifecycle.PreStop.Sleep).To(Equal(&corev1.SleepAction{Seconds: 37}), "istio-proxy waits for the app's 37s")
			case "linkerd-classic":
				Expect(proxy.Lifecycle.PreStop.Exec.Command).To(Equal([]string{"/bin/sleep", "37"}), "Linkerd's own shape")
				Expect(got.Annotations[mutate.AnnotationLinkerdWaitBeforeExit]).To(Equal("37"))
			case "istio-native":
				Expect(proxy.Lifecycle.PreStop.Exec.Command).To(Equal([]string{"sh", "-c", "sleep 5 && exec pilot-agent request --debug-port=15020 POST drain"}),
					"Istio's own drain request, after the 5s routing window")
			case "linkerd-native":
				Expect(proxy.Lifecycle).To(BeNil())
			}

			By("applying the stored Pod again")
			again, err := kube.CoreV1().Pods(ns).Update(ctx, got, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(again.ResourceVersion).To(Equal(got.ResourceVersion), "an unchanged Pod is a no-op")

			By("asking graceguard about the stored Pod, as a reinvocation would")
			nsObj, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			r := mutate.Mutate(mutate.ForPod(got.DeepCopy()), mutate.Namespace{Name: ns, Labels: nsObj.Labels, Annotations: nsObj.Annotations}, mutate.DefaultOptions())
			Expect(r.Changes).To(BeEmpty())

			By("creating the same manifest again")
			third := createWhenServed(ctx, ns, meshedPod("graceguard-first-again", "graceguard-first"))
			Expect(comparable(third)).To(Equal(comparable(injectorFirst)))
		})
	}
})
