package mutate

import (
	"fmt"
	"time"

	"github.com/graceguard/graceguard/pkg/budget"
)

// MaxWorkAuto is the graceguard.io/max-work value that takes the work term
// from what graceguard's observer saw of the workload's shutdowns.
const MaxWorkAuto = "auto"

// DefaultMaxWorkCeiling bounds graceguard.io/max-work: auto when
// graceguard.io/max-work-ceiling is not set (or the cluster default
// max-work, when that is longer).
const DefaultMaxWorkCeiling = 2 * time.Minute

// Observed is what graceguard's observer recorded for a Pod's workload, as
// the webhook reads it from the workload's ShutdownReport for
// graceguard.io/max-work: auto.
type Observed struct {
	// Report names the ShutdownReport, for messages.
	Report string
	// Work is the max-work the report recommends: at least the longest
	// drain it saw, or twice one a SIGKILL cut short.
	Work time.Duration
	// Enough is false when the report has too few samples and no kill.
	Enough  bool
	Samples int
}

// WantsAutoWork reports whether a Pod with these annotations, in a
// namespace with these, asks for graceguard.io/max-work: auto; only then
// does the webhook read the workload's report.
func WantsAutoWork(pod, namespace map[string]string) bool {
	if v, ok := pod[AnnotationMaxWork]; ok {
		return v == MaxWorkAuto
	}
	return namespace[AnnotationMaxWork] == MaxWorkAuto
}

// autoWork sets the work term of graceguard.io/max-work: auto and says in
// a warning where it came from. A Pod that already records a budget (the
// mutating webhook's, seen again on reinvocation or by the validating
// webhook) keeps the work it recorded, so both webhooks agree however the
// report changes between them. Otherwise: the report's recommendation
// within [floor, ceiling] when it has enough samples, else the floor; and
// never so much that the budget would exceed the cap or a denying platform
// ceiling, which would deny every Pod of the workload.
func autoWork(t Target, s *Settings, p paths, r *Report) {
	if !s.AutoWork {
		return
	}
	path := p.pod.Key(AnnotationMaxWork)
	if s.Sources[budget.Work] == FromNamespace {
		path = p.ns.Key(AnnotationMaxWork)
	}
	if b, _, err := budget.ParseAnnotation(t.Meta.Annotations[AnnotationBudget]); err == nil {
		s.Budget.Work = b.Work
		s.Sources[budget.Work] = FromAuto
		return
	}
	floor, ceiling := budget.Format(s.WorkFloor), budget.Format(s.WorkCeiling)
	w, how := s.WorkFloor, ""
	// Kept short: the path takes half of a warning's 120 characters.
	switch o := t.Observed; {
	case t.Template:
		// Checked with the floor; said without it, to fit.
		s.Budget.Work = w
		s.Sources[budget.Work] = FromAuto
		r.warn(WarnAutoWork, path, MaxWorkAuto, "auto: per Pod from its shutdown report, %s to %s", floor, ceiling)
		return
	case o == nil:
		how = fmt.Sprintf("the floor, no shutdown report yet (ceiling %s)", ceiling)
	case !o.Enough:
		how = fmt.Sprintf("the floor, %d samples are too few (ceiling %s)", o.Samples, ceiling)
	case o.Work > s.WorkCeiling:
		w = s.WorkCeiling
		how = fmt.Sprintf("the ceiling; observed: %s", budget.Format(o.Work))
	case o.Work < s.WorkFloor:
		how = fmt.Sprintf("the floor; observed: %s", budget.Format(o.Work))
	default:
		w = o.Work
		how = fmt.Sprintf("observed in %d shutdowns (floor %s, ceiling %s)", o.Samples, floor, ceiling)
	}
	// The cap and every platform ceiling configured to deny: a value over
	// them would deny every Pod of the workload.
	limit := s.maxGrace
	for _, c := range s.ceilings {
		if c.Deny && c.Limit > 0 && (limit <= 0 || c.Limit < limit) {
			limit = c.Limit
		}
	}
	if limit > 0 {
		b := s.Budget
		b.Work = 0
		if room := time.Duration(budget.CeilSeconds(limit))*time.Second - b.Sum(); w > room && room >= 0 {
			w = room
			how = "cut to fit --max-grace-period and the platform ceilings"
		}
	}
	s.Budget.Work = w
	s.Sources[budget.Work] = FromAuto
	r.warn(WarnAutoWork, path, MaxWorkAuto, "auto is %s: %s", budget.Format(w), how)
}
