package shutdownreport

import (
	"fmt"
	"strings"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
)

// The sentences that say what went wrong in a workload's shutdowns: the
// observer's Warning events on the workload and the results of its
// policy reports (pkg/policyreport) say it alike.

// MaxNoteLength bounds an event's note: the API server cuts notes at 1 KiB. The
// notes' worst case, every value at its bound, is under it (TestEventNotes),
// so the cut only guards against what this file may come to print.
const MaxNoteLength = 1000

// KilledNote says how many Pods were SIGKILLed, after what, and what to do.
func KilledNote(ns, recommended string, killed []v1alpha1.Sample) string {
	last := killed[len(killed)-1]
	return Cut(fmt.Sprintf("%s SIGKILLed at the end of %ds grace after draining %ds (%s); budget %s; recommended max-work %s: %s",
		podCount(len(killed)), last.GraceSeconds, last.DrainSeconds, podNames(killed), budgetOrNone(last.Budget), recommended, hint(ns)), MaxNoteLength)
}

// FailedNote says which Pods' preStop hooks failed, how (at once, or by
// running out the grace: HookHung), and what to do.
func FailedNote(ns string, failed []v1alpha1.Sample) string {
	last := failed[len(failed)-1]
	hung := 0
	for _, s := range failed {
		if HookHung(s) {
			hung++
		}
	}
	how, fix := "SIGTERM came at once, before the routing delay", "fix the hook (graceguard.io/prestop: sleep needs no binary in the image)"
	switch {
	case hung == len(failed):
		how = fmt.Sprintf("it ran out the %ds grace, so SIGTERM came only at its end, with the kubelet's 2s left", last.GraceSeconds)
	case hung > 0:
		how = fmt.Sprintf("%d failed at once (SIGTERM before the routing delay), %d ran out the grace (SIGTERM only at its end, 2s left)", len(failed)-hung, hung)
	}
	if hung > 0 {
		fix = "make the hook finish within the grace, or use a sleep graceguard can count (graceguard.io/prestop: sleep)"
	}
	return Cut(fmt.Sprintf("preStop hook failed in %s (%s): %s; budget %s; %s: %s",
		podCount(len(failed)), podNames(failed), how, budgetOrNone(last.Budget), fix, hint(ns)), MaxNoteLength)
}

func hint(ns string) string { return "kubectl graceguard recommend -n " + ns }

func budgetOrNone(b string) string {
	if b == "" {
		return "(none recorded)"
	}
	return b
}

func podCount(n int) string {
	if n == 1 {
		return "1 Pod"
	}
	return fmt.Sprintf("%d Pods", n)
}

// podNames lists up to three Pods and their container.
func podNames(samples []v1alpha1.Sample) string {
	var names []string
	for i, s := range samples {
		if i == 3 {
			names = append(names, fmt.Sprintf("and %d more", len(samples)-3))
			break
		}
		names = append(names, s.Pod+" container "+s.Container)
	}
	return strings.Join(names, ", ")
}
