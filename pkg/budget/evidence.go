package budget

import (
	"fmt"
	"slices"
	"time"
)

// Observation is one Pod's shutdown as graceguard's observer saw it. The
// API records times in whole seconds, so every duration here is whole
// seconds and may be off by one.
type Observation struct {
	// Drain runs from SIGTERM to the exit of the Pod's last treated
	// container. For a killed container it runs to the SIGKILL: a lower
	// bound of the drain the Pod needed, not the drain itself.
	Drain time.Duration
	// Killed: a treated container was SIGKILLed at the end of its grace.
	Killed bool
	// HookFailed: a treated container's preStop hook failed, so SIGTERM
	// came at once instead of after the routing delay.
	HookFailed bool
	// HookHung: the hook failed by running out the grace, so SIGTERM came
	// only at its end, with the kubelet's 2 s left. Such a drain says
	// nothing of the work the Pod needs: it counts as a hook failure,
	// never as a drain or a kill.
	HookHung bool
	// Withdrawal, when Withdrawn, is the control plane's part of the Pod's
	// routing withdrawal: from the deletion request to the last
	// EndpointSlice that listed it ready marking it not ready. Proxies
	// apply it later, so the Pod's real withdrawal is at least this.
	Withdrawal time.Duration
	Withdrawn  bool
	// Routing, when RoutingKnown, is the routing term of the Pod's budget.
	Routing      time.Duration
	RoutingKnown bool
}

// Evidence summarises observations.
type Evidence struct {
	Samples, Kills, HookFailures int
	// HooksHung counts the samples whose hook ran out the grace (of the
	// HookFailures); their drains are not among the others.
	HooksHung int
	// P50, P95 and Max are over the drains that ended on their own (the
	// Pods that were not killed); zero when every Pod was killed.
	P50, P95, Max time.Duration
	// Cut is the longest drain a SIGKILL cut short: those Pods needed more.
	Cut time.Duration
	// Withdrawn counts the observations with a withdrawal;
	// WithdrawalP50, WithdrawalP95 and WithdrawalMax are over them.
	Withdrawn                                   int
	WithdrawalP50, WithdrawalP95, WithdrawalMax time.Duration
	// Routing compares each Pod's routing term with its withdrawal.
	Routing RoutingEvidence
}

// RoutingEvidence compares the routing term of each Pod's budget with its
// control-plane withdrawal.
type RoutingEvidence struct {
	// Compared counts the observations with both; Short those whose
	// routing term was below the withdrawal.
	Compared, Short int
	// By is the most a routing term was short by; Term and Withdrawal
	// are that observation's.
	By, Term, Withdrawal time.Duration
}

// Summarize reduces observations to their evidence. Percentiles are
// nearest-rank over whole seconds.
func Summarize(obs []Observation) Evidence {
	var e Evidence
	var clean, withdrawals []time.Duration
	for _, o := range obs {
		if o.Withdrawn {
			w := max(o.Withdrawal, 0)
			withdrawals = append(withdrawals, w)
			if o.RoutingKnown {
				r := &e.Routing
				r.Compared++
				if by := w - o.Routing; by > 0 {
					r.Short++
					if by > r.By {
						r.By, r.Term, r.Withdrawal = by, o.Routing, w
					}
				}
			}
		}
	}
	if e.Withdrawn = len(withdrawals); e.Withdrawn > 0 {
		slices.Sort(withdrawals)
		e.WithdrawalP50, e.WithdrawalP95, e.WithdrawalMax = rank(withdrawals, 50), rank(withdrawals, 95), withdrawals[len(withdrawals)-1]
	}
	for _, o := range obs {
		e.Samples++
		if o.HookFailed || o.HookHung {
			e.HookFailures++
		}
		if o.HookHung {
			e.HooksHung++
			continue
		}
		if o.Killed {
			e.Kills++
			e.Cut = max(e.Cut, o.Drain)
			continue
		}
		clean = append(clean, o.Drain)
	}
	if len(clean) == 0 {
		return e
	}
	slices.Sort(clean)
	e.P50, e.P95, e.Max = rank(clean, 50), rank(clean, 95), clean[len(clean)-1]
	return e
}

// rank is the nearest-rank percentile of sorted values.
func rank(sorted []time.Duration, p int) time.Duration {
	i := (p*len(sorted)+99)/100 - 1
	return sorted[max(i, 0)]
}

// Precision is added to every recommendation: the API's timestamps are
// whole seconds, so an observed drain may be a second short.
const Precision = time.Second

// Advice is the max-work the evidence supports.
type Advice struct {
	// Work is the graceguard.io/max-work that covers every drain seen;
	// zero without any observation.
	Work time.Duration
	// Enough is false when there are fewer than the minimum samples and
	// no kill: Work is then only an indication. A kill is enough on its
	// own: it proves the budget too short.
	Enough bool
	// Why explains Work in one sentence.
	Why string
}

// Grace is the grace period the budget needs with Work as its work term.
func (a Advice) Grace(current Budget) int64 {
	b := current
	b.Work = a.Work
	return b.Grace()
}

// Recommend says what max-work the evidence supports.
//
// Pods that drained on their own show what the work needs: the longest of
// them, plus Precision. A Pod killed at the end of its grace shows only
// that its drain was longer than what it got; when no Pod that drained on
// its own took longer than that, the drain needed is unknown and the advice
// is twice what was cut short, so that each round of kills at least
// doubles the budget until Pods drain on their own and are measured.
func Recommend(e Evidence, minSamples int) (a Advice) {
	if e.Samples == 0 {
		return Advice{Why: "no shutdown observed yet"}
	}
	// Only the drains that began when they should speak of the work.
	hung := min(max(e.HooksHung, 0), e.Samples)
	e.Samples -= hung
	if e.Samples == 0 {
		return Advice{Why: fmt.Sprintf("%s observed had its preStop hook run out the grace: no drain measured says anything of the work; make the hook finish",
			plural(hung, "the 1 Pod", "all %d Pods"))}
	}
	defer func() {
		if hung > 0 {
			a.Why += fmt.Sprintf("; %s whose preStop hook ran out the grace not counted", pods(hung))
		}
	}()
	// Any drain past MaxTerm advises MaxTerm: clamped first, the
	// arithmetic cannot overflow (a report's numbers are whatever was
	// written into it).
	cut, longest := min(e.Cut, MaxTerm), min(e.Max, MaxTerm)
	switch {
	case e.Kills > 0 && e.Cut >= e.Max:
		a.Work = CeilDuration(2*cut) + Precision
		a.Why = fmt.Sprintf("%s SIGKILLed after draining %s: the drain needed is longer and unknown; twice that, plus %s for whole-second timestamps",
			killed(e), Format(e.Cut), Format(Precision))
	case e.Kills > 0:
		a.Work = CeilDuration(longest) + Precision
		a.Why = fmt.Sprintf("%s SIGKILLed after draining %s, and the others drained in at most %s: that, plus %s for whole-second timestamps",
			killed(e), Format(e.Cut), Format(e.Max), Format(Precision))
	default:
		a.Work = CeilDuration(longest) + Precision
		a.Why = fmt.Sprintf("%s drained after SIGTERM in at most %s (p50 %s, p95 %s): that, plus %s for whole-second timestamps",
			pods(e.Samples), Format(e.Max), Format(e.P50), Format(e.P95), Format(Precision))
	}
	a.Work = min(a.Work, MaxTerm)
	a.Enough = e.Kills > 0 || e.Samples >= minSamples
	if !a.Enough {
		a.Why = fmt.Sprintf("too few samples: %d of the %d needed, and no kill; %s", e.Samples, minSamples, a.Why)
	}
	return a
}

// CeilDuration rounds d up to whole seconds.
func CeilDuration(d time.Duration) time.Duration { return time.Duration(CeilSeconds(d)) * time.Second }

// killed says "1 of 3 Pods was" or "2 of 3 Pods were".
func killed(e Evidence) string {
	if e.Samples == 1 {
		return "the 1 Pod observed was"
	}
	if e.Kills == 1 {
		return fmt.Sprintf("1 of %d Pods was", e.Samples)
	}
	return fmt.Sprintf("%d of %d Pods were", e.Kills, e.Samples)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return fmt.Sprintf(many, n)
}

func pods(n int) string {
	if n == 1 {
		return "1 Pod"
	}
	return fmt.Sprintf("%d Pods", n)
}
