package observer

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
)

// series is what a scrape would show of a counter: its value per label set
// ("" for none, else the namespace).
func series(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			ns := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "namespace" {
					ns = l.GetValue()
				}
			}
			out[ns] = m.GetCounter().GetValue()
		}
	}
	return out
}

// GraceguardObservedKills is increase(graceguard_observed_kills_total[15m]) > 0:
// Prometheus sees an increase only between two samples of a series, so a
// series whose first scrape already says 1 never fires it. The counters
// are scraped at 0 before the first kill: from the start without the
// namespace label, from the first cached Pod of a namespace with it.
func TestTheFirstKillIsAnIncreasePrometheusCanSee(t *testing.T) {
	killed := v1alpha1.Sample{Outcome: v1alpha1.OutcomeKilled, HookFailed: true, DrainSeconds: 15}

	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"graceguard_observed_kills_total", "graceguard_observed_prestop_failures_total"} {
		if got := series(t, reg, name); len(got) != 1 || got[""] != 0 {
			t.Errorf("%s before any shutdown: %v, want one series at 0", name, got)
		}
	}
	m.sample("shop", killed)
	if got := series(t, reg, "graceguard_observed_kills_total"); got[""] != 1 {
		t.Errorf("after a kill: %v, want 1", got)
	}

	reg = prometheus.NewRegistry()
	if m, err = NewMetrics(reg, true); err != nil {
		t.Fatal(err)
	}
	if got := series(t, reg, "graceguard_observed_kills_total"); len(got) != 0 {
		t.Errorf("with the namespace label, before any Pod: %v, want no series", got)
	}
	m.seen("shop")
	m.seen("shop")
	for _, name := range []string{"graceguard_observed_kills_total", "graceguard_observed_prestop_failures_total"} {
		if got := series(t, reg, name); len(got) != 1 || got["shop"] != 0 {
			t.Errorf("%s once a Pod of shop is cached: %v, want shop at 0", name, got)
		}
	}
	m.sample("shop", killed)
	m.seen("shop") // a later Pod of the namespace leaves the count alone
	if got := series(t, reg, "graceguard_observed_kills_total"); got["shop"] != 1 {
		t.Errorf("after a kill in shop: %v, want 1", got)
	}
	var none *Metrics
	none.seen("shop") // records nothing, as the other methods of a nil *Metrics
}

func TestTheWithdrawalHistogramCountsFiguresOnly(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, false)
	if err != nil {
		t.Fatal(err)
	}
	m.sample("shop", v1alpha1.Sample{Outcome: v1alpha1.OutcomeExited, Withdrawal: v1alpha1.WithdrawalWithdrawn, WithdrawalSeconds: new(int64(3))})
	m.sample("shop", v1alpha1.Sample{Outcome: v1alpha1.OutcomeExited, Withdrawal: v1alpha1.WithdrawalWithdrawn, WithdrawalSeconds: new(int64(0))})
	m.sample("shop", v1alpha1.Sample{Outcome: v1alpha1.OutcomeExited, Withdrawal: v1alpha1.WithdrawalNotListed})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "graceguard_observed_withdrawal_seconds" {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != 2 || h.GetSampleSum() != 3 || h.GetBucket()[0].GetUpperBound() != 0 || h.GetBucket()[0].GetCumulativeCount() != 1 {
			t.Errorf("withdrawal histogram: %d samples summing %v, first bucket %v; want 2 (the Pod no slice listed is not one), 3s, le=0 holding 1",
				h.GetSampleCount(), h.GetSampleSum(), h.GetBucket()[0])
		}
		return
	}
	t.Error("no graceguard_observed_withdrawal_seconds")
}
