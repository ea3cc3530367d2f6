package observer

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/mutate"
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

// DeletionOf reads the deletion from a terminating Pod; ok is false when
// the Pod is not terminating gracefully (no deletionTimestamp, or a grace
// of 0: the final state, or a forced deletion).
func DeletionOf(pod *corev1.Pod) (Deletion, bool) {
	if pod.DeletionTimestamp == nil || pod.DeletionGracePeriodSeconds == nil || *pod.DeletionGracePeriodSeconds <= 0 {
		return Deletion{}, false
	}
	g := *pod.DeletionGracePeriodSeconds
	return Deletion{Requested: pod.DeletionTimestamp.Add(-time.Duration(g) * time.Second), Grace: g}, true
}

// HookFailure is a FailedPreStopHook event: the kubelet records one when a
// container's preStop hook fails, and then sends SIGTERM at once.
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
	// SkipNoWorkload: a Pod without a controlling owner; reports belong
	// to workloads.
	SkipNoWorkload Skip = "no-workload"
	// SkipBacklog: samples dropped because the workload's report could not
	// be written for longer than it took its Pods to leave 50 more samples.
	SkipBacklog Skip = "backlog"
)

// Skips lists every Skip.
var Skips = []Skip{SkipDeletionUnseen, SkipNotRunning, SkipExitedBefore, SkipNoWorkload, SkipBacklog}

// exitSIGKILL is 128 + 9, the exit code of a SIGKILLed process.
const exitSIGKILL = 137

// Observe derives the shutdown sample of a deleted Pod from its final
// object, its deletion and the FailedPreStopHook events naming it.
//
// For each treated container (graceguard.io/containers, else the regular
// containers), SIGTERM came at Requested + its preStop hook's length (or
// when the hook failed, or at the grace if the hook outlasted it); the drain
// runs from SIGTERM to the container's exit. A container that exited with
// 137 (not OOMKilled) at the end of its grace was SIGKILLed. The sample is
// the container that exited last, or a killed one.
func Observe(pod *corev1.Pod, del Deletion, hooks []HookFailure) (v1alpha1.Sample, Skip) {
	b, _, budgetErr := budget.ParseAnnotation(pod.Annotations[mutate.AnnotationBudget])
	var best *v1alpha1.Sample
	ran, anyFailed := false, false
	for _, c := range treated(pod) {
		t := terminated(pod, c.Name)
		if t == nil || t.FinishedAt.IsZero() {
			continue
		}
		ran = true
		exited := t.FinishedAt.Time
		if exited.Before(del.Requested) {
			continue
		}
		hook, known := time.Duration(0), true
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
			hook, known = mutate.PreStopLength(c.Lifecycle.PreStop)
			if !known && budgetErr == nil {
				// The budget counted its routing term for the hook.
				hook = max(hook, b.Routing)
			}
		}
		hookSecs := min(budget.CeilSeconds(hook), del.Grace)
		sigterm := del.Requested.Add(time.Duration(hookSecs) * time.Second)
		failed := false
		for _, h := range hooks {
			if h.Container == c.Name && !h.At.Before(del.Requested) {
				failed, anyFailed = true, true
				if h.At.Before(sigterm) {
					sigterm = h.At
				}
			}
		}
		s := v1alpha1.Sample{
			Pod:              pod.Name,
			Container:        c.Name,
			Deleted:          metav1.NewTime(del.Requested),
			GraceSeconds:     del.Grace,
			PreStopSeconds:   hookSecs,
			PreStopEstimated: !known,
			HookFailed:       failed,
			Exited:           metav1.NewTime(exited),
			ExitCode:         t.ExitCode,
			Reason:           t.Reason,
			Outcome:          v1alpha1.OutcomeExited,
			DrainSeconds:     max(int64(exited.Sub(sigterm)/time.Second), 0),
			Budget:           pod.Annotations[mutate.AnnotationBudget],
		}
		// Whole-second times: a kill at the grace reads as grace-1 at worst.
		if t.ExitCode == exitSIGKILL && t.Reason != "OOMKilled" && exited.Sub(del.Requested) >= time.Duration(del.Grace-1)*time.Second {
			s.Outcome = v1alpha1.OutcomeKilled
		}
		if best == nil || better(s, *best) {
			best = &s
		}
	}
	switch {
	case best != nil:
		// A failed hook anywhere in the Pod let SIGTERM in early.
		best.HookFailed = anyFailed
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

// treated lists the containers graceguard budgeted: those named in
// graceguard.io/containers (regular containers or native sidecars), else
// every regular container. The webhook refused Pods whose annotation does
// not parse, so a name that matches nothing is only skipped here.
func treated(pod *corev1.Pod) []corev1.Container {
	v, ok := pod.Annotations[mutate.AnnotationContainers]
	if !ok {
		return pod.Spec.Containers
	}
	var out []corev1.Container
	all := append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...)
	for _, name := range strings.Split(v, ",") {
		name = strings.TrimSpace(name)
		if i := slices.IndexFunc(all, func(c corev1.Container) bool { return c.Name == name }); i >= 0 {
			out = append(out, all[i])
		}
	}
	return out
}

func terminated(pod *corev1.Pod, name string) *corev1.ContainerStateTerminated {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return list[i].State.Terminated
			}
		}
	}
	return nil
}
