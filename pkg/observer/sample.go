package observer

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/shutdownreport"
)

// Deletion is what the observer saw of a Pod's deletion while the Pod
// shut down: when it was requested and the grace it gave. The Pod's final
// object cannot tell: when the kubelet removes it (grace 0), the API server
// moves deletionTimestamp to that moment and the grace to 0.
type Deletion struct {
	// Requested is deletionTimestamp - deletionGracePeriodSeconds of the
	// first terminating state seen, in whole seconds.
	Requested time.Time
	// Grace is deletionGracePeriodSeconds then (the shortest seen, since a
	// later delete may only shorten it).
	Grace int64
}

// HookFailure is a FailedPreStopHook event: the kubelet records one when a
// container's preStop hook fails, and then sends SIGTERM at once. A hook
// that hangs fails too, but only when its exec is killed with the
// container: the kubelet sent SIGTERM at the end of the grace, after the
// hook had used all of it (measured on the real node: the event came 2 s
// after the grace, at the SIGKILL; docs/e2e.md, scenario 10).
type HookFailure struct {
	Container string
	At        time.Time
}

// Skip says why a deleted Pod yields no sample. The values are bounded:
// they label a metric.
type Skip string

const (
	// SkipDeletionUnseen: the observer never saw the Pod terminating (it
	// was forced, or deleted while the observer was not running).
	SkipDeletionUnseen Skip = "deletion-unseen"
	// SkipNotRunning: no treated container had run and terminated (a Pod
	// deleted while Pending, or whose node was lost).
	SkipNotRunning Skip = "not-running"
	// SkipExitedBefore: the containers had exited before the deletion (a
	// finished Job's Pod, a crash): nothing shut down.
	SkipExitedBefore Skip = "exited-before-deletion"
	// SkipNoWorkload: a Pod without a controlling owner (reports belong
	// to workloads), or whose verified ReplicaSet or Job belongs to a
	// Deployment or CronJob that is gone, and its report with it.
	SkipNoWorkload Skip = "no-workload"
	// SkipBacklog: samples dropped because the workload's report could not
	// be written for longer than it took its Pods to leave 50 more samples.
	SkipBacklog Skip = "backlog"
	// SkipNamespace: a Pod labelled graceguard.io/treated=true in a
	// namespace graceguard does not treat (not labelled
	// graceguard.io/inject=enabled, or excluded): anyone may label a Pod.
	SkipNamespace Skip = "namespace-not-treated"
	// SkipOwnerUnverified: the Pod's controller reference names no object
	// that exists with that UID (forged, or already deleted), or one beyond
	// Kubernetes' limits, or of a kind the observer may not read. Samples go
	// to a workload only through the objects that really own the Pod.
	SkipOwnerUnverified Skip = "owner-unverified"
	// SkipTooManyContainers: more than 32 containers to treat (or a
	// graceguard.io/containers list longer than 4096 bytes): graceguard
	// treats no such Pod, and the observer keeps at most 32 per Pod.
	SkipTooManyContainers Skip = "too-many-containers"
)

// Skips lists every Skip.
var Skips = []Skip{SkipDeletionUnseen, SkipNotRunning, SkipExitedBefore, SkipNoWorkload, SkipBacklog,
	SkipNamespace, SkipOwnerUnverified, SkipTooManyContainers}

// exitSIGKILL is 128 + 9, the exit code of a SIGKILLed process.
const exitSIGKILL = 137

// observe derives the shutdown sample of a deleted Pod from the record of
// its final object, its deletion, the FailedPreStopHook events naming it
// and its withdrawal from the EndpointSlices that listed it.
//
// For each treated container (graceguard.io/containers, else the regular
// containers), SIGTERM came at Requested + its preStop hook's length (or
// when the hook failed, or at the grace if the hook outlasted it); the drain
// runs from SIGTERM to the container's exit. A container that exited with
// 137 (not OOMKilled) at the end of its grace was SIGKILLed. The sample is
// the container that exited last, or a killed one. Arithmetic is in whole
// seconds and cannot overflow, whatever the Pod says.
//
// The withdrawal runs from the deletion request to when the observer saw
// the last slice that routed to the Pod stop (w.stopped, its own clock),
// 0 when that was before the request (readiness had failed first); a Pod
// no slice listed, one still routed to, or one never seen routed to has
// no figure, and the sample says which.
func observe(r *record, del Deletion, hooks []HookFailure, w withdrawal) (v1alpha1.Sample, Skip) {
	s := r.shutdown
	if s == nil {
		return v1alpha1.Sample{}, SkipNotRunning
	}
	if s.tooMany {
		return v1alpha1.Sample{}, SkipTooManyContainers
	}
	requested := del.Requested.Unix()
	var best *v1alpha1.Sample
	ran, anyFailed := false, false
	for _, c := range s.containers {
		if !c.exited {
			continue
		}
		ran = true
		if c.finishedAt < requested {
			continue
		}
		hook := c.hook
		if !c.hookKnown && s.budgetOK {
			// The budget counted its routing term for the hook.
			hook = max(hook, s.budget.Routing)
		}
		// At most 9,223,372,037 (a saturated hook) and the grace.
		hookSecs := min(budget.CeilSeconds(hook), del.Grace)
		sigterm := requested + hookSecs
		failed := false
		for _, h := range hooks {
			at := h.At.Unix()
			if h.Container != c.name || at < requested {
				continue
			}
			failed, anyFailed = true, true
			if at-requested >= del.Grace-1 {
				// It failed as the grace ran out (whole seconds: at
				// grace-1 at worst): the hook hung and held SIGTERM until
				// the end of the grace.
				hookSecs, sigterm = del.Grace, requested+del.Grace
				continue
			}
			sigterm = min(sigterm, at)
		}
		smp := v1alpha1.Sample{
			Pod:              shutdownreport.SampleName(r.name),
			Container:        c.name,
			Deleted:          metav1.NewTime(unixTime(requested)),
			GraceSeconds:     del.Grace,
			PreStopSeconds:   hookSecs,
			PreStopEstimated: !c.hookKnown && hookSecs < del.Grace,
			HookFailed:       failed,
			Exited:           metav1.NewTime(unixTime(c.finishedAt)),
			ExitCode:         c.exitCode,
			Reason:           c.reason,
			Outcome:          v1alpha1.OutcomeExited,
			DrainSeconds:     max(c.finishedAt-sigterm, 0),
		}
		if s.budgetOK {
			smp.Budget = s.budget.Annotation(s.budgetGrace)
		}
		// Whole-second times: a kill at the grace reads as grace-1 at worst.
		if c.exitCode == exitSIGKILL && !c.oomKilled && c.finishedAt-requested >= del.Grace-1 {
			smp.Outcome = v1alpha1.OutcomeKilled
		}
		if best == nil || better(smp, *best) {
			best = &smp
		}
	}
	switch {
	case best != nil:
		// A failed hook anywhere in the Pod let SIGTERM in early.
		best.HookFailed = anyFailed
		best.Withdrawal, best.WithdrawalSeconds = w.observed(requested)
		return *best, ""
	case ran:
		return v1alpha1.Sample{}, SkipExitedBefore
	}
	return v1alpha1.Sample{}, SkipNotRunning
}

// better picks the sample that speaks for the Pod: a killed container over
// one that exited, then the later exit, then the name (deterministic).
func better(a, b v1alpha1.Sample) bool {
	if (a.Outcome == v1alpha1.OutcomeKilled) != (b.Outcome == v1alpha1.OutcomeKilled) {
		return a.Outcome == v1alpha1.OutcomeKilled
	}
	if !a.Exited.Equal(&b.Exited) {
		return b.Exited.Before(&a.Exited)
	}
	return a.Container < b.Container
}

// observed is the withdrawal a sample records of a Pod whose deletion was
// requested at requested (Unix seconds).
func (w withdrawal) observed(requested int64) (v1alpha1.Withdrawal, *int64) {
	switch {
	case !w.listed:
		return v1alpha1.WithdrawalNotListed, nil
	case w.routed:
		return v1alpha1.WithdrawalStillReady, nil
	case w.stopped == 0:
		return v1alpha1.WithdrawalNeverReady, nil
	}
	// Both within minUnix..maxUnix: no overflow.
	s := max(clampUnix(w.stopped)-clampUnix(requested), 0)
	return v1alpha1.WithdrawalWithdrawn, &s
}
