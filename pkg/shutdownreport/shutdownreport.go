// Package shutdownreport is what a ShutdownReport says, apart from any
// cluster: samples kept within the CRD's bounds, the window, the summary
// and the recommendation. The observer writes reports with it; the kubectl
// plugin reads them with it.
package shutdownreport

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/pkg/budget"
)

// DefaultMinSamples is how many samples a recommendation needs when no Pod
// was killed (a kill is evidence enough on its own).
const DefaultMinSamples = 5

// Add records new samples in a report's status: the counters grow, the
// window keeps the last v1alpha1.MaxSamples samples, and the summary and
// recommendation are computed again from the window. Every string of the
// status is then within the CRD's bounds, those of samples written
// before there were bounds included.
func Add(st *v1alpha1.ShutdownReportStatus, samples []v1alpha1.Sample, minSamples int) {
	for _, s := range samples {
		st.Observed++
		if s.Outcome == v1alpha1.OutcomeKilled {
			st.KillsObserved++
		}
		if s.HookFailed {
			st.HookFailuresObserved++
		}
		if st.LastObserved == nil || st.LastObserved.Before(&s.Deleted) {
			d := s.Deleted
			st.LastObserved = &d
		}
	}
	st.Samples = append(st.Samples, samples...)
	if n := len(st.Samples); n > v1alpha1.MaxSamples {
		st.Samples = append([]v1alpha1.Sample(nil), st.Samples[n-v1alpha1.MaxSamples:]...)
	}
	for i := range st.Samples {
		st.Samples[i] = Bounded(st.Samples[i])
	}
	st.Summary, st.Recommendation = Summarize(st.Samples, minSamples)
	if r := st.Recommendation; r != nil {
		r.Reason = Cut(r.Reason, v1alpha1.MaxMessageLength)
	}
}

// Observations turns samples into the pure core's observations.
func Observations(samples []v1alpha1.Sample) []budget.Observation {
	obs := make([]budget.Observation, len(samples))
	for i, s := range samples {
		obs[i] = budget.Observation{
			Drain:      seconds(s.DrainSeconds),
			Killed:     s.Outcome == v1alpha1.OutcomeKilled,
			HookFailed: s.HookFailed,
			HookHung:   HookHung(s),
		}
		if s.Withdrawal == v1alpha1.WithdrawalWithdrawn && s.WithdrawalSeconds != nil {
			obs[i].Withdrawal, obs[i].Withdrawn = seconds(*s.WithdrawalSeconds), true
		}
		if b, _, err := budget.ParseAnnotation(s.Budget); err == nil {
			obs[i].Routing, obs[i].RoutingKnown = b.Routing, true
		}
	}
	return obs
}

// seconds converts whole seconds to a duration, saturating at
// budget.Infinity instead of wrapping to a negative drain (a report's
// numbers are whatever was written into it).
func seconds(n int64) time.Duration {
	switch {
	case n <= 0:
		return 0
	case n > int64(budget.Infinity/time.Second):
		return budget.Infinity
	}
	return time.Duration(n) * time.Second
}

// Current is the budget of the most recent sample that records one.
func Current(samples []v1alpha1.Sample) (b budget.Budget, grace int64, annotation string, ok bool) {
	for i := len(samples) - 1; i >= 0; i-- {
		if b, g, err := budget.ParseAnnotation(samples[i].Budget); err == nil {
			return b, g, samples[i].Budget, true
		}
	}
	return budget.Budget{}, 0, "", false
}

// Summarize computes a report's summary and recommendation from its
// samples: `kubectl graceguard recommend` calls it too, so both agree.
func Summarize(samples []v1alpha1.Sample, minSamples int) (v1alpha1.Summary, *v1alpha1.Recommendation) {
	e := budget.Summarize(Observations(samples))
	sum := v1alpha1.Summary{Samples: int32(e.Samples), Kills: int32(e.Kills), HookFailures: int32(e.HookFailures)}
	if e.Samples-e.HooksHung > e.Kills {
		// Some drain ended on its own (hung hooks' drains are not drains).
		sum.DrainP50, sum.DrainP95, sum.DrainMax = budget.Format(e.P50), budget.Format(e.P95), budget.Format(e.Max)
	}
	if e.Kills > 0 {
		sum.DrainCut = budget.Format(e.Cut)
	}
	sum.Withdrawn = int32(e.Withdrawn)
	if e.Withdrawn > 0 {
		sum.WithdrawalP50, sum.WithdrawalP95, sum.WithdrawalMax = budget.Format(e.WithdrawalP50), budget.Format(e.WithdrawalP95), budget.Format(e.WithdrawalMax)
	}
	for _, s := range samples {
		if s.Withdrawal == v1alpha1.WithdrawalNotListed {
			sum.NotListed++
		}
	}
	cur, grace, ann, ok := Current(samples)
	if ok {
		sum.Budget, sum.MaxWork, sum.Grace = ann, budget.Format(cur.Work), grace
	}
	if e.Samples == e.HooksHung {
		// No sample, or none whose drain speaks of the work.
		return sum, nil
	}
	a := budget.Recommend(e, minSamples)
	rec := &v1alpha1.Recommendation{MaxWork: budget.Format(a.Work), Enough: a.Enough, Reason: a.Why}
	if ok {
		rec.Grace = max(a.Grace(cur), 0)
	}
	return sum, rec
}

// SampleName is a Pod's name as a sample records it: as it is up to
// v1alpha1.MaxPodNameLength bytes (every built-in controller's Pods), else
// cut and ended in a hash of the whole, so that two long names stay apart.
func SampleName(name string) string {
	if len(name) <= v1alpha1.MaxPodNameLength {
		return name
	}
	h := sha256.Sum256([]byte(name))
	suffix := "-" + hex.EncodeToString(h[:])[:10]
	return strings.TrimRight(name[:v1alpha1.MaxPodNameLength-len(suffix)], "-.") + suffix
}

// Bounded returns s within the bounds the CRD states. The observer makes
// its samples so; reports written before those bounds may hold longer
// values, and the API server would refuse the whole status with them.
func Bounded(s v1alpha1.Sample) v1alpha1.Sample {
	s.Pod = SampleName(s.Pod)
	s.Container = Cut(s.Container, v1alpha1.MaxContainerNameLength)
	s.Reason = Cut(s.Reason, v1alpha1.MaxReasonLength)
	if len(s.Budget) > v1alpha1.MaxBudgetLength {
		s.Budget = ""
	}
	return s
}

// Cut returns s, or its first n bytes ending on a whole UTF-8 character.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// HookHung says whether a sample's preStop hook failed by running out its
// grace: SIGTERM came only at its end, and its drain says nothing of the
// work the Pod needs.
func HookHung(s v1alpha1.Sample) bool {
	return s.HookFailed && s.GraceSeconds > 0 && s.PreStopSeconds >= s.GraceSeconds
}
