package budget

import (
	"fmt"
	"strings"
	"time"
)

// Term names one of the four parts of the budget.
type Term string

// The four terms, in the order shutdown spends them.
const (
	Routing Term = "routing"
	Work    Term = "work"
	Cleanup Term = "cleanup"
	Margin  Term = "margin"
	// Proxy is the time a mesh proxy sidecar still runs after the app
	// exited: the part of its wait that outlasts the app, then its own
	// drain. It is not one of Terms: nobody sets it by annotation, it is
	// read from the Pod's mesh and is zero without one.
	Proxy Term = "proxy"
)

// Terms lists the four budget terms people set, in shutdown order.
var Terms = [...]Term{Routing, Work, Cleanup, Margin}

// allTerms is every term a Budget sums, in the order they are printed.
var allTerms = [...]Term{Routing, Work, Cleanup, Proxy, Margin}

// Budget is the time a Pod needs between deletion and exit.
//
// Routing is the time endpoint withdrawal takes to converge; when a preStop
// hook runs, it is the hook's length (the kubelet sends SIGTERM only after
// the hook). Work is the longest admitted work that must finish after
// SIGTERM, Cleanup the time to close pools and flush telemetry, Margin the
// slack kept for everything not measured. Proxy, zero unless the Pod has
// a mesh proxy sidecar, is how long that proxy still runs after the app
// exited (see the Proxy term).
type Budget struct {
	Routing time.Duration
	Work    time.Duration
	Cleanup time.Duration
	Margin  time.Duration
	Proxy   time.Duration
}

// Get returns the value of one term.
func (b Budget) Get(t Term) time.Duration {
	switch t {
	case Routing:
		return b.Routing
	case Work:
		return b.Work
	case Cleanup:
		return b.Cleanup
	case Margin:
		return b.Margin
	case Proxy:
		return b.Proxy
	}
	return 0
}

// Set returns b with one term replaced.
func (b Budget) Set(t Term, d time.Duration) Budget {
	switch t {
	case Routing:
		b.Routing = d
	case Work:
		b.Work = d
	case Cleanup:
		b.Cleanup = d
	case Margin:
		b.Margin = d
	case Proxy:
		b.Proxy = d
	}
	return b
}

// Sum adds the terms (the Proxy term too). Each term is at most MaxTerm
// once validated, but Sum saturates rather than overflows for any input.
func (b Budget) Sum() time.Duration {
	var s time.Duration
	for _, t := range allTerms {
		d := b.Get(t)
		if d < 0 {
			continue
		}
		if s > maxDuration-d {
			return maxDuration
		}
		s += d
	}
	return s
}

const maxDuration = time.Duration(1<<63 - 1)

// Grace is the smallest terminationGracePeriodSeconds that covers the budget.
func (b Budget) Grace() int64 { return CeilSeconds(b.Sum()) }

// Validate checks every term is within [0, MaxTerm].
func (b Budget) Validate() error {
	for _, t := range allTerms {
		d := b.Get(t)
		if d < 0 || d > MaxTerm {
			return fmt.Errorf("%s %s is outside 0..1h", t, Format(d))
		}
	}
	return nil
}

// Arithmetic spells out the sum for people:
// "routing 8s + work 30s + cleanup 2s + margin 5s"; a Proxy term shows only
// when there is one ("... + cleanup 2s + proxy 5s + margin 5s").
func (b Budget) Arithmetic() string {
	parts := make([]string, 0, len(allTerms))
	for _, t := range allTerms {
		if t == Proxy && b.Proxy == 0 {
			continue
		}
		parts = append(parts, string(t)+" "+Format(b.Get(t)))
	}
	return strings.Join(parts, " + ")
}

// Largest returns the term with the longest duration (the first on ties),
// which is the one worth lowering when the budget does not fit.
func (b Budget) Largest() Term {
	best := Terms[0]
	for _, t := range Terms[1:] {
		if b.Get(t) > b.Get(best) {
			best = t
		}
	}
	return best
}

// Annotation renders the budget and the grace it was given in the form
// graceguard writes on every Pod it mutates:
// "routing=8s work=30s cleanup=2s margin=5s grace=45s" (with "proxy=5s"
// before the margin when the Pod has a mesh proxy to wait for).
func (b Budget) Annotation(grace int64) string {
	var sb strings.Builder
	for _, t := range allTerms {
		if t == Proxy && b.Proxy == 0 {
			continue
		}
		sb.WriteString(string(t))
		sb.WriteByte('=')
		sb.WriteString(Format(b.Get(t)))
		sb.WriteByte(' ')
	}
	fmt.Fprintf(&sb, "grace=%ds", grace)
	return sb.String()
}

// Fit is the outcome of checking a budget against a grace period and a cap.
type Fit struct {
	Budget Budget
	// Need is the grace the budget requires, in whole seconds.
	Need int64
	// Grace is the grace period checked against.
	Grace int64
	// Cap is the largest grace allowed (0 means no cap).
	Cap time.Duration
}

// Check compares the budget with a grace period and a cap.
func Check(b Budget, grace int64, limit time.Duration) Fit {
	return Fit{Budget: b, Need: b.Grace(), Grace: grace, Cap: limit}
}

// Fits reports whether the grace covers the budget.
func (f Fit) Fits() bool { return f.Need <= f.Grace }

// OverCap reports whether the budget needs more than the cap allows.
func (f Fit) OverCap() bool {
	return f.Cap > 0 && f.Need > CeilSeconds(f.Cap)
}
