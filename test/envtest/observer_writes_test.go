package envtest_test

import (
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/observer"
)

// The observer writes ShutdownReports at most --flush-writes-per-second,
// every workload's together: a rollout across many workloads at once is
// recorded whole, spread over time, not in one burst of writes.
var _ = Describe("the observer's ShutdownReport writes", func() {
	It("are spread at --flush-writes-per-second and record every shutdown", func(ctx SpecContext) {
		const workloads = 6
		reg := startObserver(ctx, func(c *observer.Config) {
			c.FlushWritesPerSecond = 1
			c.FlushInterval = 100 * time.Millisecond
		})
		ns := optedIn(ctx, "writes")
		kl := kubelet{ns}
		By(fmt.Sprintf("%d StatefulSets of one running Pod each", workloads))
		var pods []*corev1.Pod
		for i := range workloads {
			name := fmt.Sprintf("db%d", i)
			labels := map[string]string{"app": name}
			sts := must(kube.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.local/db:1"}}},
				}},
			}, metav1.CreateOptions{}))
			p := pod(name+"-0", nil)
			p.Labels, p.Spec.NodeName = labels, "node-1"
			p.OwnerReferences = []metav1.OwnerReference{ownerRef("apps/v1", "StatefulSet", name, sts.UID)}
			pods = append(pods, kl.run(ctx, must(kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}))))
		}
		// The observer caches every treated Pod of the cluster (other
		// specs' too): once it holds as many as there are, it has seen
		// these running, and will see them go.
		treated := must(kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: mutate.LabelTreated + " in (" + mutate.LabelTreatedValue + "," + mutate.LabelTreatedByFloor + ")"}))
		Eventually(func() float64 {
			if m := metricValue(reg, "graceguard_observer_pods", nil); m != nil {
				return m.GetGauge().GetValue()
			}
			return 0
		}).WithTimeout(30*time.Second).Should(BeEquivalentTo(len(treated.Items)), "the observer caches the treated Pods")
		By("every Pod shut down at once")
		for _, p := range pods {
			kl.shutdown(ctx, p, 0, "Completed", 2*time.Second, false)
		}
		By("one report per workload, each with its shutdown, created at least a second apart")
		var created []time.Time
		Eventually(func(g Gomega) {
			list, err := dyn.Resource(reportsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			created = created[:0]
			observed := map[string]int64{}
			for _, it := range list.Items {
				n, _, err := unstructured.NestedInt64(it.Object, "status", "observed")
				g.Expect(err).NotTo(HaveOccurred())
				observed[it.GetName()] = n
				created = append(created, it.GetCreationTimestamp().Time)
			}
			g.Expect(observed).To(HaveLen(workloads), "reports and their samples: %v", observed)
			for name, n := range observed {
				g.Expect(n).To(BeEquivalentTo(1), "report %s", name)
			}
		}).WithTimeout(60*time.Second).WithPolling(250*time.Millisecond).Should(Succeed(), func() string {
			families, _ := reg.Gather()
			var out []string
			for _, f := range families {
				if strings.HasPrefix(f.GetName(), "graceguard_observ") {
					for _, m := range f.GetMetric() {
						out = append(out, fmt.Sprintf("%s %v %v %v", f.GetName(), m.GetLabel(), m.GetCounter().GetValue(), m.GetGauge().GetValue()))
					}
				}
			}
			return "the observer's metrics:\n" + strings.Join(out, "\n")
		})
		slices.SortFunc(created, func(a, b time.Time) int { return a.Compare(b) })
		// Six writes at one a second span five seconds at least; the
		// timestamps have whole seconds, so allow one for rounding. All
		// at once they would span well under a second.
		Expect(created[len(created)-1].Sub(created[0])).To(BeNumerically(">=", 4*time.Second),
			"the first report was created at %s, the last at %s", created[0], created[len(created)-1])
	})
})
