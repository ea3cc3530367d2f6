package mutate

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/graceguard/graceguard/pkg/budget"
)

// Validate decides whether the target may be admitted as it is.
//
// A Pod is checked as received: in enforce mode the mutating webhook has
// already run. A workload's Pod template, and a Pod in warn mode, are
// checked as the Pod would be after mutation, so the report says what
// enforce mode would deny; the target itself is never changed.
//
// Every container's preStop hook must be shorter than the grace it runs
// within, even in Pods that opted out. Unless opted out, the budget must
// fit the grace period and the cap, and every graceguard annotation must
// parse.
func Validate(t Target, ns Namespace, opts Options) *Report {
	r := newReport(t, StageValidate)
	if r.Skip = skip(t, ns, opts); r.Skip != "" {
		return r
	}
	p := newPaths(t.MetaPath, ns.Name)
	s, bad := settingsFor(t, ns, opts, p)
	r.Mode = s.Mode
	if s.OptOut {
		r.OptedOut = true
		checkHooks(t, r)
		checkMeshWait(t, s, r)
		return r
	}
	if len(bad) > 0 {
		// Everything wrong at once, not one fix per round trip: the
		// containers named, and, on a Pod mutation left as it was, the
		// hooks that outlast its grace. (A template's or a warn-mode Pod's
		// grace would be raised once the annotations parse.)
		_, tbad := selectTargets(t, s, p)
		r.Violations = append(bad, tbad...)
		if !t.Template && s.Mode != ModeWarn {
			checkHooks(t, r)
		}
		return r
	}
	if _, tbad := selectTargets(t, s, p); len(tbad) > 0 {
		// Before any copy is made: the containers named cannot be treated.
		if !t.Template && s.Mode != ModeWarn {
			checkHooks(t, r)
		}
		r.Violations = append(r.Violations, tbad...)
		return r
	}
	simulated := t.Template || s.Mode == ModeWarn
	if simulated {
		sim := t.deepCopy()
		m := &Report{Grace: r.Grace}
		mutate(sim, s, p, nil, m)
		r.Changes = m.Changes
		if t.Template {
			r.Warnings = m.Warnings
		}
		if len(m.Violations) > 0 {
			r.Violations = m.Violations
			return r
		}
		t = sim
		r.Grace = t.grace()
	}
	checkHooks(t, r)
	targets, tbad := selectTargets(t, s, p)
	targets = appTargets(targets)
	if len(tbad) > 0 {
		r.Violations = append(r.Violations, tbad...)
		return r
	}
	autoWork(t, &s, p, r)
	r.Budget, r.Hook = effectiveBudget(s, targets, nil)
	// Over the cap or a denying ceiling: mutation refuses such a Pod, so a
	// missing hook says nothing.
	plan, f, ok := prepare(t, s, r, false)
	if !ok {
		return r
	}
	if !simulated {
		checkMutated(s, targets, r)
		plan.checkMutated(s, r)
	}
	if !f.Fits() {
		r.deny(DenyBudgetExceedsGrace, field.Invalid(t.SpecPath.Child("terminationGracePeriodSeconds"), r.Grace,
			fmt.Sprintf("must be at least %s; raise it or lower %s", needText(f, s, ""), KeyFor(f.Budget.Largest()))))
	}
	return r
}

// checkMutated denies a Pod that should have been given a preStop sleep
// and was not: the mutating webhook did not run for it (failurePolicy
// Ignore during an outage). The Pod's controller retries, and the retry is
// mutated; a Pod without the sleep would get SIGTERM while routes still
// point at it.
func checkMutated(s Settings, targets []container, r *Report) {
	sleep := budget.CeilSeconds(s.Budget.Routing)
	if s.PreStop == PreStopNone || sleep == 0 {
		return
	}
	for _, c := range targets {
		if c.c.Lifecycle == nil || c.c.Lifecycle.PreStop == nil {
			r.deny(DenyNotMutated, field.Required(c.path.Child("lifecycle", "preStop"),
				fmt.Sprintf("graceguard's mutating webhook adds a %ds preStop sleep here and did not run for this Pod (unavailable?); create it again", sleep)))
		}
	}
}

// checkHooks denies preStop hooks that cannot finish within the grace they
// run in: the Pod's, or a liveness/startup probe's own grace when that
// probe kills the container. Past MaxRecordedViolations it only counts, so
// a Pod of 10,000 such containers costs little more than one of 100.
func checkHooks(t Target, r *Report) {
	grace := t.grace()
	check := func(c *corev1.Container, path func() *field.Path) {
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
			return
		}
		hl := preStopLength(c.Lifecycle.PreStop)
		if hl.D == 0 {
			return
		}
		if hl.D >= secs(grace) {
			if r.full() {
				r.Unlisted++
			} else {
				r.deny(DenyHookExceedsGrace, field.Invalid(path().Child("lifecycle", "preStop"), hl.Desc,
					fmt.Sprintf("must be shorter than terminationGracePeriodSeconds (%ds): the hook runs inside it and is killed at %ds (exit 137); shorten the hook or raise terminationGracePeriodSeconds",
						grace, grace)))
			}
		}
		for _, pr := range []struct {
			name  string
			probe *corev1.Probe
		}{{"livenessProbe", c.LivenessProbe}, {"startupProbe", c.StartupProbe}} {
			if pr.probe == nil || pr.probe.TerminationGracePeriodSeconds == nil {
				continue
			}
			pg := *pr.probe.TerminationGracePeriodSeconds
			if hl.D < secs(pg) {
				continue
			}
			if r.full() {
				r.Unlisted++
				continue
			}
			r.deny(DenyHookExceedsGrace, field.Invalid(path().Child(pr.name, "terminationGracePeriodSeconds"), pg,
				fmt.Sprintf("must be longer than the preStop hook (%s): a %s kill gives the container only this long, hook included",
					formatHook(hl.D), pr.name)))
		}
	}
	for i := range t.Spec.InitContainers {
		if c := &t.Spec.InitContainers[i]; isSidecar(c) {
			check(c, func() *field.Path { return t.SpecPath.Child("initContainers").Index(i) })
		}
	}
	for i := range t.Spec.Containers {
		check(&t.Spec.Containers[i], func() *field.Path { return t.SpecPath.Child("containers").Index(i) })
	}
}
