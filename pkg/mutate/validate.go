package mutate

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
//
// Every container's stop signal must be one the app can catch, even in
// Pods that opted out: like a hook the kubelet kills, SIGKILL or SIGSTOP
// is about the Pod itself, not its budget, and graceguard's mutation and
// budget change nothing about it. A Pod opts out of what graceguard adds
// and counts, not of the check that it can stop gracefully at all.
func Validate(t Target, ns Namespace, opts Options) *Report {
	r := validate(t, ns, opts)
	if r.Skip == "" {
		// Mutation never changes a stop signal: Pods and templates, in
		// enforce and warn mode, are checked as they are.
		checkStopSignals(t, r)
		if !r.Denied() {
			checkScaleDown(t, r)
		}
	}
	return r
}

// ValidateMutated is Validate of a target graceguard's mutating webhook
// has just decided on (Mutate, or the webhook refusing it): treated,
// whatever opts.Untreated says, as the mutating webhook itself and the
// plugin's simulation of both webhooks judge it.
func ValidateMutated(t Target, ns Namespace, opts Options) *Report {
	opts.Untreated = UntreatedDeny
	return Validate(t, ns, opts)
}

func validate(t Target, ns Namespace, opts Options) *Report {
	r, s, bad, p := begin(t, ns, opts, StageValidate)
	if r.Skip != "" {
		return r
	}
	if s.OptOut {
		r.OptedOut = true
		// Its hooks are checked, so what was not read of them is a finding.
		r.Violations = append(r.Violations, unreadFindings(t)...)
		checkHooks(t, r)
		checkMeshWait(t, s, r)
		return r
	}
	if opts.Untreated == UntreatedAdmit && !t.Template && s.Mode == ModeEnforce && !Treated(t.Meta.Annotations) {
		// graceguard's mutating webhook failed open for it: judged as an
		// opted-out Pod is, so graceguard's own unavailability never
		// refuses a Pod (what its annotations say wrong still does, as the
		// mutating webhook would have).
		r.Violations = bad
		checkHooks(t, r)
		checkMeshWait(t, s, r)
		if !r.Denied() {
			r.warn(WarnUntreated, t.MetaPath.Child("annotations").Key(AnnotationBudget), "",
				"mutating webhook did not run (down or overloaded): no budget added")
		}
		return r
	}
	// A template, and a warn-mode Pod, are checked as mutation would leave
	// them: the decision is applied to a copy, into a report of its own.
	simulated := t.Template || s.Mode == ModeWarn
	work, into := t, r
	if simulated {
		work, into = t.deepCopy(), &Report{Grace: r.Grace}
	}
	targets, tbad := selectTargets(work, s, p)
	switch {
	case len(bad) > 0:
		// Everything wrong at once, not one fix per round trip: the
		// containers named, and, on a Pod mutation left as it was, the
		// hooks that outlast its grace. (A template's or a warn-mode Pod's
		// grace would be raised once the annotations parse.)
		r.Violations = append(bad, tbad...)
		if !simulated {
			checkHooks(t, r)
		}
		return r
	case len(tbad) > 0:
		if !simulated {
			checkHooks(t, r)
		}
		r.Violations = append(r.Violations, tbad...)
		return r
	}
	if !simulated {
		checkHooks(t, r)
	}
	d := decide(work, s, p, targets, into, simulated)
	if simulated {
		d.apply(into)
		r.Changes = into.Changes
		if t.Template {
			r.Warnings = into.Warnings
		}
		if len(into.Violations) > 0 {
			r.Violations = into.Violations
			return r
		}
		// Mutation raised the grace to what the budget needs; the hooks,
		// graceguard's own included, must still end within it.
		r.Grace = work.grace()
		checkHooks(work, r)
		r.Budget, r.Hook, r.Mesh, r.Profile, r.GraceFloor, r.Ceilings = into.Budget, into.Hook, into.Mesh, into.Profile, into.GraceFloor, into.Ceilings
		r.Sidecars = into.Sidecars
		return r
	}
	// Over the cap or a denying ceiling: mutation refuses such a Pod, so a
	// missing hook says nothing.
	if !d.ok {
		return r
	}
	d.checkMutated(r)
	if !d.fit.Fits() {
		r.deny(DenyBudgetExceedsGrace, field.Invalid(t.SpecPath.Child("terminationGracePeriodSeconds"), r.Grace,
			fmt.Sprintf("must be at least %s; raise it or lower %s", needText(d.fit, s, ""), KeyFor(d.fit.Budget.Largest()))))
	}
	return r
}

// checkMutated denies a Pod that should have been given a preStop sleep,
// or a mesh proxy its wait, and was not: the mutating webhook did not run
// for it (failurePolicy Ignore during an outage), or not after the mesh's
// injector. The Pod's controller retries, and the retry is mutated; a Pod
// without the sleep would get SIGTERM while routes still point at it.
func (d decision) checkMutated(r *Report) {
	for _, c := range d.targets {
		if sleep := d.s.sleepFor(c); sleep != nil {
			r.deny(DenyNotMutated, field.Required(c.path.Child("lifecycle", "preStop"),
				fmt.Sprintf("graceguard's mutating webhook adds a %s preStop sleep here and did not run for this Pod (unavailable?); create it again",
					formatHook(preStopLength(sleep).D))))
		}
	}
	d.plan.checkMutated(d.s, r)
	d.sidecars.checkMutated(d.s, r)
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
					MsgHookExceedsGrace.Fill("{grace}", strconv.FormatInt(grace, 10))))
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
				MsgHookExceedsProbeGrace.Fill("{hook}", formatHook(hl.D), "{probe}", pr.name)))
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

// NoDrainSignals are the stop signals no process can catch or ignore, with
// what each does: with either, the app never drains. SIGKILL ends it at
// once; SIGSTOP freezes it, requests in flight, until the runtime's SIGKILL
// at the end of the grace period. pkg/cel reads the same table.
var NoDrainSignals = map[corev1.Signal]string{
	corev1.SIGKILL: "it dies at once, its admitted work lost",
	corev1.SIGSTOP: "it freezes mid-request until SIGKILL at the grace's end",
}

// The fixes stop-signal-kills offers, on Linux and on Windows Pods.
const (
	StopSignalFix        = "remove it or use a signal the app drains on (SIGTERM, SIGINT, SIGQUIT)"
	StopSignalFixWindows = "remove it or use SIGTERM (Windows allows no other)"
)

// StopSignalDrains reports whether a container stopped with signal (a
// lifecycle.stopSignal, "" for none) can drain at all: false for SIGKILL
// and SIGSTOP, which stop-signal-kills denies.
func StopSignalDrains(signal string) bool {
	_, never := NoDrainSignals[corev1.Signal(signal)]
	return !never
}

// stopSignal is the signal a container's lifecycle.stopSignal sends
// instead of SIGTERM, or "" for none.
func stopSignal(c *corev1.Container) string {
	if c.Lifecycle == nil || c.Lifecycle.StopSignal == nil {
		return ""
	}
	return string(*c.Lifecycle.StopSignal)
}

// checkStopSignals denies a stop signal that gives the app no drain, on
// every regular container and native sidecar (the API allows none on
// other init containers and ephemeral ones). Any other signal is the
// app's choice (one it drains on: SIGQUIT for nginx, SIGINT for many
// runtimes), and the budget holds for it as for SIGTERM.
func checkStopSignals(t Target, r *Report) {
	fix := StopSignalFix
	if t.Spec.OS != nil && t.Spec.OS.Name == corev1.Windows {
		fix = StopSignalFixWindows
	}
	check := func(c *corev1.Container, path func() *field.Path) {
		sig := stopSignal(c)
		what, ok := NoDrainSignals[corev1.Signal(sig)]
		if !ok {
			return
		}
		r.deny(DenyStopSignalKills, field.Invalid(path().Child("lifecycle", "stopSignal"), sig,
			MsgStopSignalKills.Fill("{name}", strconv.Quote(clip(c.Name)), "{signal}", sig, "{what}", what, "{fix}", fix)))
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

// Message is the detail of a denial the native floor shares with the
// webhook (pkg/cel), with named holes: Go fills them (Fill), pkg/cel
// splices CEL into them, so both say the same words.
type Message string

// The messages the native floor shares with the webhook.
const (
	// MsgHookExceedsGrace: {grace} is the grace in whole seconds.
	MsgHookExceedsGrace Message = "must be shorter than terminationGracePeriodSeconds ({grace}s): the hook runs inside it and is killed at {grace}s (exit 137); shorten the hook or raise terminationGracePeriodSeconds"
	// MsgHookExceedsProbeGrace: {hook} is the hook's length ("40s"),
	// {probe} livenessProbe or startupProbe.
	MsgHookExceedsProbeGrace Message = "must be longer than the preStop hook ({hook}): a {probe} kill gives the container only this long, hook included"
	// MsgStopSignalKills: {name} is the container's name, quoted; {signal}
	// the signal, {what} what it does (NoDrainSignals), {fix} the fix.
	MsgStopSignalKills Message = "container {name} gets {signal}, which no process can catch: {what}; {fix}"
	// MsgLinkerdWaitExceedsGrace: {grace} is the grace in whole seconds.
	MsgLinkerdWaitExceedsGrace Message = "must be shorter than terminationGracePeriodSeconds ({grace}s): Linkerd makes it the proxy's preStop sleep, which the kubelet kills at {grace}s (exit 137); shorten it or raise terminationGracePeriodSeconds"
)

// Fill replaces each hole (a "{name}" of oldnew's pairs) by its value.
func (m Message) Fill(oldnew ...string) string {
	return strings.NewReplacer(oldnew...).Replace(string(m))
}
