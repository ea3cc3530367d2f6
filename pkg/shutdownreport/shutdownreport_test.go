package shutdownreport

import (
	"testing"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
)

// sample is a Pod that drained 3s on its own, with what the observer saw
// of its EndpointSlices.
func sample(w v1alpha1.Withdrawal, seconds *int64) v1alpha1.Sample {
	return v1alpha1.Sample{Pod: "web-1", Container: "app", Outcome: v1alpha1.OutcomeExited, DrainSeconds: 3,
		Budget: "routing=5s work=30s cleanup=2s margin=5s grace=42s", Withdrawal: w, WithdrawalSeconds: seconds}
}

func withdrawn(s int64) v1alpha1.Sample { return sample(v1alpha1.WithdrawalWithdrawn, &s) }

// TestTheSummaryOfWithdrawals: a report's summary gives the control
// plane's withdrawal over the Pods that have a figure (count, median,
// p95, max), and counts the Pods no EndpointSlice listed apart: no
// figure for them, never a 0.
func TestTheSummaryOfWithdrawals(t *testing.T) {
	notListed := sample(v1alpha1.WithdrawalNotListed, nil)
	for _, tc := range []struct {
		name    string
		samples []v1alpha1.Sample
		// want: withdrawn, p50, p95, max, notListed
		withdrawn, notListed int32
		p50, p95, max        string
	}{
		{name: "Pods no Service selects: no figure, and the summary says how many",
			samples: []v1alpha1.Sample{notListed, notListed, notListed}, notListed: 3},
		{name: "figures over the withdrawn Pods only: a Pod behind one Service, one behind two, one behind none, one still ready, one never ready",
			samples:   []v1alpha1.Sample{withdrawn(3), withdrawn(5), notListed, sample(v1alpha1.WithdrawalStillReady, nil), sample(v1alpha1.WithdrawalNeverReady, nil), withdrawn(1)},
			withdrawn: 3, notListed: 1, p50: "3s", p95: "5s", max: "5s"},
		{name: "withdrawn before the deletion (readiness failed first): a figure of 0s, not none",
			samples: []v1alpha1.Sample{withdrawn(0), notListed}, withdrawn: 1, notListed: 1, p50: "0s", p95: "0s", max: "0s"},
		{name: "the median and p95 of twenty by nearest rank",
			samples: func() (s []v1alpha1.Sample) {
				for i := range 20 {
					s = append(s, withdrawn(int64(i+1)))
				}
				return s
			}(), withdrawn: 20, p50: "10s", p95: "19s", max: "20s"},
		{name: "samples written before the observer timed withdrawals: neither a figure nor not listed",
			samples: []v1alpha1.Sample{sample("", nil), sample("", nil)}},
		{name: "a figure without its state, or the state without a figure (a report edited by hand): no figure",
			samples: []v1alpha1.Sample{sample("", new(int64(4))), sample(v1alpha1.WithdrawalWithdrawn, nil), sample(v1alpha1.WithdrawalStillReady, new(int64(9)))}},
		{name: "a negative figure (edited by hand) reads 0s",
			samples: []v1alpha1.Sample{withdrawn(-7), withdrawn(2)}, withdrawn: 2, p50: "0s", p95: "2s", max: "2s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum, rec := Summarize(tc.samples, DefaultMinSamples)
			got := []any{sum.Withdrawn, sum.WithdrawalP50, sum.WithdrawalP95, sum.WithdrawalMax, sum.NotListed}
			want := []any{tc.withdrawn, tc.p50, tc.p95, tc.max, tc.notListed}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("withdrawn, p50, p95, max, notListed = %v, want %v", got, want)
					break
				}
			}
			// The withdrawal is evidence for the routing term only: the
			// work's recommendation is the same without it.
			if rec == nil || rec.MaxWork != "4s" || sum.Samples != int32(len(tc.samples)) || sum.DrainMax != "3s" {
				t.Errorf("samples %d, drain max %q, recommendation %+v: want every sample's 3s drain, max-work 4s", sum.Samples, sum.DrainMax, rec)
			}
		})
	}
}

// TestAddKeepsTheWithdrawalOfTheWindow: the summary a report carries is
// over the samples it keeps, so a figure falls out with its sample.
func TestAddKeepsTheWithdrawalOfTheWindow(t *testing.T) {
	var st v1alpha1.ShutdownReportStatus
	Add(&st, []v1alpha1.Sample{withdrawn(40)}, DefaultMinSamples)
	if st.Summary.WithdrawalMax != "40s" || st.Summary.Withdrawn != 1 {
		t.Fatalf("after one sample: %+v", st.Summary)
	}
	var more []v1alpha1.Sample
	for range v1alpha1.MaxSamples {
		more = append(more, sample(v1alpha1.WithdrawalNotListed, nil))
	}
	Add(&st, more, DefaultMinSamples)
	if s := st.Summary; s.Withdrawn != 0 || s.WithdrawalMax != "" || s.NotListed != v1alpha1.MaxSamples || st.Observed != v1alpha1.MaxSamples+1 {
		t.Errorf("after %d Pods no Service selects: withdrawn %d, max %q, not listed %d, observed %d; want 0, none, %d, %d",
			v1alpha1.MaxSamples, s.Withdrawn, s.WithdrawalMax, s.NotListed, st.Observed, v1alpha1.MaxSamples, v1alpha1.MaxSamples+1)
	}
}
