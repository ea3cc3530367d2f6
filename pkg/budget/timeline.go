package budget

import (
	"cmp"
	"slices"
	"time"
)

// MinimumGraceAfterHook is the kubelet's minimumGracePeriodInSeconds: when a
// preStop hook leaves less than this, the kubelet still gives the container
// this long after SIGTERM before SIGKILL.
const MinimumGraceAfterHook = 2 * time.Second

// Event is a moment in a Pod's deletion.
type Event struct {
	At   time.Duration
	Name string
}

// Timeline is what the kubelet will do when a Pod with this budget is
// deleted: the preStop hook (endpoint withdrawal) from t=0, SIGTERM when the
// hook ends, the drain of admitted work, cleanup, and the SIGKILL deadline.
type Timeline struct {
	Budget Budget
	// Hook is the preStop hook length (0 when there is none; then the app
	// itself must keep serving for the routing term after SIGTERM).
	Hook time.Duration
	// Grace is the Pod's terminationGracePeriodSeconds.
	Grace int64

	SIGTERM time.Duration // when the container receives SIGTERM
	Drained time.Duration // when the longest admitted work is done
	Exited  time.Duration // when cleanup is done and the process exits
	// ProxyExited is when the Pod's mesh proxy exits: Exited plus the
	// budget's Proxy term (Exited itself without a proxy).
	ProxyExited time.Duration
	Deadline    time.Duration // when the kubelet sends SIGKILL
	// HookCut is true when the hook itself outlasts the grace period and
	// is cut short by the kubelet.
	HookCut bool
	// Sidecars are the containers that must outlive the app, each
	// waiting from deletion until its SIGTERM (set by the caller).
	Sidecars []Sidecar
	// ProxyIsSidecar: the Proxy term is a sidecar's wait past the app, not
	// a mesh proxy's; its SIGTERM event marks its end.
	ProxyIsSidecar bool
}

// Sidecar is a container that waits Wait, from deletion, before its
// SIGTERM, so that it serves the app to the end.
type Sidecar struct {
	Name string
	Wait time.Duration
}

// NewTimeline models a deletion with the kubelet's rules: the hook runs
// inside the grace period, the kubelet subtracts the whole seconds it took,
// and never gives less than MinimumGraceAfterHook after SIGTERM.
func NewTimeline(b Budget, hook time.Duration, grace int64) Timeline {
	if grace < 0 {
		grace = 0
	}
	// Keep grace * 1s within time.Duration; nothing real comes close.
	if limit := int64(maxDuration/time.Second) / 4; grace > limit {
		grace = limit
	}
	if hook < 0 {
		hook = 0
	}
	g := time.Duration(grace) * time.Second
	tl := Timeline{Budget: b, Hook: hook, Grace: grace}
	hookEnd := hook
	if hookEnd > g {
		hookEnd, tl.HookCut = g, true
	}
	tl.SIGTERM = hookEnd
	remaining := g - hookEnd.Truncate(time.Second)
	if hook > 0 && remaining < MinimumGraceAfterHook {
		remaining = MinimumGraceAfterHook
	}
	tl.Deadline = hookEnd.Truncate(time.Second) + remaining
	// Without a hook the routing term is spent by the app after SIGTERM.
	start := tl.SIGTERM
	if hook == 0 {
		start += b.Routing
	}
	tl.Drained = sat(start, b.Work)
	tl.Exited = sat(tl.Drained, b.Cleanup)
	tl.ProxyExited = sat(tl.Exited, max(b.Proxy, 0))
	return tl
}

// Fits reports whether the process (and its mesh proxy after it) exits,
// with its margin, before SIGKILL and the hook was not cut.
func (t Timeline) Fits() bool {
	return !t.HookCut && t.ProxyExited+t.Budget.Margin <= t.Deadline
}

// Slack is the time left between the last exit (the app's, or its mesh
// proxy's) and SIGKILL (negative when something would be killed).
func (t Timeline) Slack() time.Duration { return t.Deadline - t.ProxyExited }

func sat(a, b time.Duration) time.Duration {
	if a > maxDuration-b {
		return maxDuration
	}
	return a + b
}

// Events lists the moments of the deletion in time order (when SIGKILL
// comes first, the moments after it are listed after it).
func (t Timeline) Events() []Event {
	ev := []Event{{0, "delete: endpoints turn ready=false"}}
	if t.Hook > 0 {
		ev[0].Name += ", preStop starts"
	}
	ev = append(ev, Event{t.SIGTERM, "SIGTERM"})
	ev = append(ev, Event{t.Drained, "admitted work done"})
	ev = append(ev, Event{t.Exited, "cleanup done, exit"})
	if t.ProxyExited > t.Exited && !t.ProxyIsSidecar {
		ev = append(ev, Event{t.ProxyExited, "mesh proxy exits"})
	}
	for _, sc := range t.Sidecars {
		ev = append(ev, Event{sc.Wait, "SIGTERM to sidecar " + sc.Name})
	}
	ev = append(ev, Event{t.Deadline, "SIGKILL deadline"})
	slices.SortStableFunc(ev, func(a, b Event) int { return cmp.Compare(a.At, b.At) })
	return ev
}
