package envtest_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/pkg/cli"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// endpointOf is a Pod's endpoint as the EndpointSlice controller writes
// it: ready and serving while the Pod runs; once it is deleted ready=false
// and terminating=true, serving still true (KEP-1672).
func endpointOf(p *corev1.Pod, ip string, terminating bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{ip},
		Conditions: discoveryv1.EndpointConditions{Ready: new(!terminating), Serving: new(true), Terminating: new(terminating)},
		NodeName:   new("node-1"),
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID}}
}

// The suite runs a real kube-apiserver and etcd, and no controller
// manager: nothing here writes EndpointSlices but the spec. So the spec
// creates and updates them as the EndpointSlice controller does (its
// labels, one endpoint per Pod with the Pod's UID as targetRef, the
// KEP-1672 conditions). They are real discovery.k8s.io/v1 objects, checked
// by the API server's validation and delivered to the observer by its real
// watch; only who writes them is the spec.
var _ = Describe("the observer times each Pod's withdrawal from its EndpointSlices", func() {
	It("from the deletion to the last slice marking the Pod not ready: one Service, two Services (the later counts), none (no figure)", func(ctx SpecContext) {
		reg := startObserver(ctx)
		ns := optedIn(ctx, "withdraw")
		kl := kubelet{ns}

		By("a Deployment, its ReplicaSet and three of its Pods: one behind Service web, one behind web and canary (routing-delay 2s), one no Service selects")
		labels := map[string]string{"app": "web", "pod-template-hash": "7d9f8c6b5"}
		tpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1"}}}}
		dep := must(kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: tpl}}, metav1.CreateOptions{}))
		rs := must(kube.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: "web-7d9f8c6b5", Labels: labels, OwnerReferences: []metav1.OwnerReference{ownerRef("apps/v1", "Deployment", "web", dep.UID)}},
			Spec:       appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tpl}}, metav1.CreateOptions{}))
		podOf := func(name string, extra map[string]string, podLabels map[string]string) *corev1.Pod {
			GinkgoHelper()
			p := pod(name, extra)
			p.Labels, p.Spec.NodeName = podLabels, "node-1"
			p.OwnerReferences = []metav1.OwnerReference{ownerRef("apps/v1", "ReplicaSet", rs.Name, rs.UID)}
			p = must(kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}))
			Expect(p.Labels).To(HaveKeyWithValue(mutate.LabelTreated, mutate.LabelTreatedValue))
			return kl.run(ctx, p)
		}
		canaryLabels := map[string]string{"app": "web", "pod-template-hash": "7d9f8c6b5", "track": "canary"}
		one := podOf("web-7d9f8c6b5-one", nil, labels)
		two := podOf("web-7d9f8c6b5-two", map[string]string{mutate.AnnotationRoutingDelay: "2s"}, canaryLabels)
		none := podOf("web-7d9f8c6b5-none", nil, map[string]string{"app": "other", "pod-template-hash": "7d9f8c6b5"})
		Expect(one.Annotations[mutate.AnnotationBudget]).To(HavePrefix("routing=5s "))
		Expect(two.Annotations[mutate.AnnotationBudget]).To(HavePrefix("routing=2s "))

		By("their Services, and the EndpointSlices the EndpointSlice controller would write (envtest runs no controller): every endpoint ready")
		service := func(name string, selector map[string]string) {
			GinkgoHelper()
			must(kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: corev1.ServiceSpec{Selector: selector, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{}))
		}
		service("web", map[string]string{"app": "web"})
		service("canary", map[string]string{"track": "canary"})
		slice := func(svc string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
			return &discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{Name: svc + "-abcde", Labels: map[string]string{discoveryv1.LabelServiceName: svc,
					discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
				AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps,
				Ports: []discoveryv1.EndpointPort{{Name: new(""), Port: new(int32(8080)), Protocol: new(corev1.ProtocolTCP)}},
			}
		}
		slices := kube.DiscoveryV1().EndpointSlices(ns)
		web := must(slices.Create(ctx, slice("web", endpointOf(one, "10.1.0.1", false), endpointOf(two, "10.1.0.2", false)), metav1.CreateOptions{}))
		canary := must(slices.Create(ctx, slice("canary", endpointOf(two, "10.1.0.2", false)), metav1.CreateOptions{}))
		// The observer's slice watch delivers them in milliseconds; were it
		// later, the slices' own order still tells the observer when each
		// Pod stopped being ready.
		time.Sleep(time.Second)

		By("the three Pods deleted at once; canary marks two not ready 1s later, web marks one not ready at 3s and two at 5s")
		requested := map[string]time.Time{}
		for _, p := range []*corev1.Pod{one, two, none} {
			Expect(kube.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{})).To(Succeed())
			got := must(kube.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{}))
			Expect(got.DeletionTimestamp).NotTo(BeNil())
			requested[p.Name] = got.DeletionTimestamp.Add(-time.Duration(*got.DeletionGracePeriodSeconds) * time.Second)
		}
		start := time.Now()
		at := func(d time.Duration) {
			time.Sleep(time.Until(start.Add(d)))
		}
		at(time.Second)
		canary.Endpoints = []discoveryv1.Endpoint{endpointOf(two, "10.1.0.2", true)}
		canary = must(slices.Update(ctx, canary, metav1.UpdateOptions{}))
		at(3 * time.Second)
		web.Endpoints = []discoveryv1.Endpoint{endpointOf(one, "10.1.0.1", true), endpointOf(two, "10.1.0.2", false)}
		web = must(slices.Update(ctx, web, metav1.UpdateOptions{}))
		at(5 * time.Second)
		web.Endpoints = []discoveryv1.Endpoint{endpointOf(one, "10.1.0.1", true), endpointOf(two, "10.1.0.2", true)}
		web = must(slices.Update(ctx, web, metav1.UpdateOptions{}))
		marked := time.Since(start)

		By("the kubelet's part: each container exits 10s after its deletion request, the Pod goes; the controller then drops the endpoints")
		for _, p := range []*corev1.Pod{one, two, none} {
			p = must(kube.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{}))
			p.Status.Phase = corev1.PodSucceeded
			cs := &p.Status.ContainerStatuses[0]
			cs.Ready = false
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed",
				StartedAt: cs.State.Running.StartedAt, FinishedAt: metav1.NewTime(requested[p.Name].Add(10 * time.Second))}}
			p = must(kube.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}))
			Expect(kube.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &p.UID}})).To(Succeed())
		}
		web.Endpoints, canary.Endpoints = nil, nil
		must(slices.Update(ctx, web, metav1.UpdateOptions{}))
		must(slices.Update(ctx, canary, metav1.UpdateOptions{}))

		By("the samples: one withdrawn after its 3s, two after web's 5s (not canary's 1s), none with no figure")
		var r v1alpha1.ShutdownReport
		Eventually(func(g Gomega) {
			u, err := dyn.Resource(reportsGVR).Namespace(ns).Get(ctx, "deployment-web", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			b, err := u.MarshalJSON()
			g.Expect(err).NotTo(HaveOccurred())
			r = v1alpha1.ShutdownReport{}
			g.Expect(yaml.Unmarshal(b, &r)).To(Succeed())
			g.Expect(r.Status.Samples).To(HaveLen(3))
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		byPod := map[string]v1alpha1.Sample{}
		for _, s := range r.Status.Samples {
			byPod[s.Pod] = s
			GinkgoWriter.Printf("%s: withdrawal %s %v\n", s.Pod, s.Withdrawal, deref(s.WithdrawalSeconds))
		}
		// Whole seconds: the deletion request is truncated to its second
		// (up to 1s early), the observer's clock too; the updates were
		// written when the spec says, give or take the API server's reply.
		Expect(marked).To(BeNumerically("<", 6*time.Second), "the spec's own updates were on time")
		s1, s2, s0 := byPod[one.Name], byPod[two.Name], byPod[none.Name]
		Expect(s1.Withdrawal).To(Equal(v1alpha1.WithdrawalWithdrawn))
		Expect(s1.WithdrawalSeconds).To(HaveValue(BeNumerically("~", 3.5, 0.5)), "3s after the deletion, or 4s read in whole seconds")
		Expect(s2.Withdrawal).To(Equal(v1alpha1.WithdrawalWithdrawn))
		Expect(s2.WithdrawalSeconds).To(HaveValue(BeNumerically("~", 5.5, 0.5)), "the later of its two slices")
		Expect(s0.Withdrawal).To(Equal(v1alpha1.WithdrawalNotListed))
		Expect(s0.WithdrawalSeconds).To(BeNil(), "no figure, not 0")
		for _, s := range []v1alpha1.Sample{s1, s2, s0} {
			Expect([]any{s.Outcome, s.DrainSeconds}).To(Equal([]any{v1alpha1.OutcomeExited, 10 - s.PreStopSeconds}), s.Pod)
		}

		By("the report's summary: two figures, one Pod no slice listed")
		sum := r.Status.Summary
		Expect([]any{sum.Withdrawn, sum.NotListed, sum.WithdrawalMax}).To(Equal([]any{int32(2), int32(1), fmt.Sprintf("%ds", *s2.WithdrawalSeconds)}))

		By("the histogram of withdrawals: the two figures")
		h := metricValue(reg, "graceguard_observed_withdrawal_seconds", nil).GetHistogram()
		Expect([]float64{float64(h.GetSampleCount()), h.GetSampleSum()}).To(Equal([]float64{2, float64(*s1.WithdrawalSeconds + *s2.WithdrawalSeconds)}))

		By("kubectl graceguard recommend: two's routing term of 2s was below its withdrawal, by how much")
		kubeconf := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		Expect(os.WriteFile(kubeconf, cp.Env.KubeConfig, 0o600)).To(Succeed())
		var out, errOut bytes.Buffer
		Expect(cli.Execute([]string{"recommend", "--kubeconfig", kubeconf, "-n", ns}, strings.NewReader(""), &out, &errOut)).To(Equal(cli.ExitOK), errOut.String())
		GinkgoWriter.Print(out.String())
		w1, w2 := *s1.WithdrawalSeconds, *s2.WithdrawalSeconds
		Expect(out.String()).To(ContainSubstring(fmt.Sprintf("  withdrawal  p50 %ds, p95 %ds, max %ds of 2 (deletion to the last EndpointSlice marking the Pod not ready, as the observer saw it: the control plane's part; proxies follow); no EndpointSlice listed 1 of 3\n", w1, w2, w2)))
		short := fmt.Sprintf("  routing     below the control plane's withdrawal in 1 of 2, by up to %ds (routing 2s, withdrawn after %ds): graceguard.io/routing-delay needs at least %ds, plus the proxies' own delay\n", w2-2, w2, w2)
		Expect(out.String()).To(ContainSubstring(short))
	})
})

func deref(p *int64) any {
	if p == nil {
		return "(none)"
	}
	return *p
}
