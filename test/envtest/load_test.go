package envtest_test

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/mutate"
)

var _ = Describe("load through the API server", func() {
	It("admits and mutates 500 Pods created by 20 concurrent clients with zero errors", func(ctx SpecContext) {
		const clients, perClient = 20, 25
		ns := optedIn(ctx, "load")
		var (
			wg               sync.WaitGroup
			mu               sync.Mutex
			errs             []error
			mutated, created int
		)
		for c := 0; c < clients; c++ {
			wg.Add(1)
			go func(c int) {
				defer GinkgoRecover()
				defer wg.Done()
				for i := 0; i < perClient; i++ {
					got, err := kube.CoreV1().Pods(ns).Create(ctx, pod(fmt.Sprintf("load-%d-%d", c, i), map[string]string{mutate.AnnotationMaxWork: "40s"}), metav1.CreateOptions{})
					mu.Lock()
					if err != nil {
						errs = append(errs, err)
					} else {
						created++
						if got.Annotations[mutate.AnnotationBudget] == "routing=5s work=40s cleanup=2s margin=3s grace=50s" &&
							*got.Spec.TerminationGracePeriodSeconds == 50 && got.Spec.Containers[0].Lifecycle != nil {
							mutated++
						}
					}
					mu.Unlock()
				}
			}(c)
		}
		wg.Wait()
		Expect(errs).To(BeEmpty())
		Expect(created).To(Equal(clients * perClient))
		Expect(mutated).To(Equal(clients * perClient))

		count, p99 := webhookLatency(ctx, "mutate-pods.graceguard.io")
		Expect(count).To(BeNumerically(">=", clients*perClient))
		AddReportEntry("apiserver_admission_webhook_admission_duration_seconds{name=mutate-pods.graceguard.io}",
			fmt.Sprintf("count=%d p99 bucket <= %gs", count, p99))
		GinkgoWriter.Printf("graceguard mutating webhook, as the API server measured it: %d calls, p99 <= %gs\n", count, p99)
	})
})

// webhookLatency reads the API server's own admission-latency histogram for
// one webhook: the number of calls and the upper bound of the bucket
// holding the 99th percentile.
func webhookLatency(ctx SpecContext, webhook string) (uint64, float64) {
	GinkgoHelper()
	fam, ok := apiserverMetrics(ctx)["apiserver_admission_webhook_admission_duration_seconds"]
	Expect(ok).To(BeTrue(), "the API server exports no webhook admission histogram")
	var count uint64
	buckets := map[float64]uint64{}
	for _, m := range fam.GetMetric() {
		if label(m, "name") != webhook {
			continue
		}
		h := m.GetHistogram()
		count += h.GetSampleCount()
		for _, b := range h.GetBucket() {
			buckets[b.GetUpperBound()] += b.GetCumulativeCount()
		}
	}
	bounds := make([]float64, 0, len(buckets))
	for b := range buckets {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	p99 := math.Inf(1)
	for _, b := range bounds {
		if float64(buckets[b]) >= 0.99*float64(count) {
			p99 = b
			break
		}
	}
	return count, p99
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// apiserverMetrics scrapes the API server's own /metrics.
func apiserverMetrics(ctx SpecContext) map[string]*dto.MetricFamily {
	GinkgoHelper()
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	Expect(err).NotTo(HaveOccurred())
	return families
}

// counter sums a counter's series whose labels include all of match.
func counter(fams map[string]*dto.MetricFamily, name string, match map[string]string) float64 {
	var sum float64
	fam, ok := fams[name]
	if !ok {
		return 0
	}
next:
	for _, m := range fam.GetMetric() {
		for k, v := range match {
			if label(m, k) != v {
				continue next
			}
		}
		sum += m.GetCounter().GetValue()
	}
	return sum
}
