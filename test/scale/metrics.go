package scale

import (
	"context"
	"math"
	"slices"
	"strings"

	"github.com/graceguard/graceguard/test/harness/promscrape"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/kubernetes"
)

// exposition is one scrape of a /metrics endpoint, by metric family.
type exposition map[string]*dto.MetricFamily

// scrape reads a process's /metrics over HTTP.
func scrape(ctx context.Context, url string) (exposition, error) {
	f, err := promscrape.Get(ctx, url)
	return exposition(f), err
}

// scrapeAPIServer reads the API server's /metrics as the admin.
func scrapeAPIServer(ctx context.Context, kube kubernetes.Interface) (exposition, error) {
	f, err := promscrape.APIServer(ctx, kube)
	return exposition(f), err
}

// label is the value of a metric's label, "" when it has none.
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// matches says whether m's labels have the values of want (a label it
// does not carry has the value "").
func matches(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		if label(m, k) != v {
			return false
		}
	}
	return true
}

// value is a counter's or gauge's value, or a histogram's count.
func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return 0
}

// sum adds the values of the series of a family whose labels match want;
// 0 when it is absent.
func (e exposition) sum(name string, want map[string]string) float64 {
	var total float64
	for _, m := range e[name].GetMetric() {
		if matches(m, want) {
			total += value(m)
		}
	}
	return total
}

// max is the largest value of a family's series (every replica's), 0
// when it is absent.
func (e exposition) max(name string) float64 {
	var out float64
	for _, m := range e[name].GetMetric() {
		out = math.Max(out, value(m))
	}
	return out
}

// by sums the series of a family whose labels match want by the values of
// the labels named, joined with "/".
func (e exposition) by(name string, want map[string]string, labels ...string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range e[name].GetMetric() {
		if !matches(m, want) {
			continue
		}
		key := make([]string, len(labels))
		for i, l := range labels {
			key[i] = label(m, l)
		}
		out[strings.Join(key, "/")] += value(m)
	}
	return out
}

// histogram sums the histograms of a family whose labels match want.
func (e exposition) histogram(name string, want map[string]string) Histogram {
	var h Histogram
	for _, m := range e[name].GetMetric() {
		if m.Histogram == nil || !matches(m, want) {
			continue
		}
		ph := m.GetHistogram()
		h.Count += float64(ph.GetSampleCount())
		h.Sum += ph.GetSampleSum()
		for _, b := range ph.GetBucket() {
			le := b.GetUpperBound()
			if math.IsInf(le, 1) {
				continue
			}
			i, found := slices.BinarySearchFunc(h.Buckets, le, func(x Bucket, le float64) int {
				switch {
				case x.Le < le:
					return -1
				case x.Le > le:
					return 1
				}
				return 0
			})
			if !found {
				h.Buckets = slices.Insert(h.Buckets, i, Bucket{Le: le})
			}
			h.Buckets[i].Count += float64(b.GetCumulativeCount())
		}
	}
	return h
}
