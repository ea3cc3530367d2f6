package mutate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/graceguard/graceguard/pkg/budget"
)

// Sidecars are containers that must outlive the app: a database proxy the
// app calls for every request, Vault Agent, an OpenTelemetry collector.
// The rule is the mesh proxies' (mesh.go): a sidecar keeps running until
// the app's last admitted request is done, then gets its SIGTERM, and the
// grace period covers whatever it still runs after the app.
//
// A regular container named as a sidecar is no app container: no routing
// sleep, no probes, not in the routing term. It waits, in a preStop hook,
// the app's whole shutdown (routing + work + cleanup), so the kubelet
// sends its SIGTERM once the app is done. A native sidecar (an init
// container with restartPolicy Always) needs nothing: the kubelet stops it
// after the app containers exited.

// sidecarIntegration is one source of sidecars: how graceguard finds them,
// what is wrong with their settings, and how each outlives the app. The
// settings themselves are read through the registry (Keys and their
// setters), so the webhook's decoder, the size guard, the docs and the
// chart follow from the key's row. graceguard.io/sidecars is the first
// (namedSidecars), Knative's queue-proxy the second (knativeSidecar,
// knative.go); the meshes' proxies (mesh.go) are the ones to move behind
// it next.
type sidecarIntegration interface {
	// check says what is wrong with the settings for t: one finding per
	// annotation, which stops mutation.
	check(t Target, s Settings, p paths) []Finding
	// detect lists the sidecars of t, once check found nothing wrong.
	detect(t Target, s Settings) []container
	// plan decides how sidecar c outlives the app.
	plan(c container, app appShutdown, s Settings) sidecarPlan
}

// sidecarIntegrations are the integrations graceguard plans, in order.
var sidecarIntegrations = []sidecarIntegration{namedSidecars{}, knativeSidecar{}}

// appShutdown is when the app is done after deletion: the budget's routing
// (its hooks counted), work and cleanup; need is that in whole seconds,
// the shortest wait that outlasts it.
type appShutdown struct {
	b    budget.Budget
	end  time.Duration
	need int64
}

func appShutdownOf(b budget.Budget) appShutdown {
	end := b.Routing + b.Work + b.Cleanup
	return appShutdown{b: b, end: end, need: budget.CeilSeconds(end)}
}

// SidecarReport says how one sidecar stops, for the plugin's explain.
type SidecarReport struct {
	// Name is the container's; Key the annotation that names it.
	Name, Key string
	// Native: a native sidecar, which Kubernetes stops after the app.
	Native bool
	// NeedWait is the app's whole shutdown in whole seconds: the least
	// wait that outlasts it.
	NeedWait int64
	// Wait is its preStop as the Pod will run it (Desc describes it, Added
	// when graceguard writes it); WaitKnown is false for a hook graceguard
	// cannot measure (then Wait is a lower bound).
	Wait      time.Duration
	WaitKnown bool
	Desc      string
	Added     bool
	// Why says how it stops, in a sentence.
	Why string
}

// sidecarPlan is what graceguard does about one sidecar.
type sidecarPlan struct {
	report  SidecarReport
	c       container
	addHook *corev1.LifecycleHandler
	// term is how long it runs after the app: the budget's Proxy term,
	// with the mesh's.
	term       time.Duration
	violations []Finding
	warnings   []Finding
}

type sidecarPlans []sidecarPlan

// planSidecars plans every sidecar of t, for the app's budget b (routing
// already raised to the app's own hooks).
func planSidecars(t Target, s Settings, b budget.Budget) sidecarPlans {
	app := appShutdownOf(b)
	var out sidecarPlans
	for _, in := range sidecarIntegrations {
		for _, c := range in.detect(t, s) {
			out = append(out, in.plan(c, app, s))
		}
	}
	return out
}

// term is the longest any sidecar runs after the app.
func (ps sidecarPlans) term() time.Duration {
	var d time.Duration
	for _, p := range ps {
		d = max(d, p.term)
	}
	return d
}

func (ps sidecarPlans) reports() []SidecarReport {
	var out []SidecarReport
	for _, p := range ps {
		out = append(out, p.report)
	}
	return out
}

func (ps sidecarPlans) findings() (violations, warnings []Finding) {
	for _, p := range ps {
		violations = append(violations, p.violations...)
		warnings = append(warnings, p.warnings...)
	}
	return violations, warnings
}

// apply gives each sidecar graceguard's wait and records it in r.
func (ps sidecarPlans) apply(r *Report) {
	for _, p := range ps {
		if p.addHook == nil {
			continue
		}
		r.Changes = append(r.Changes, Change{Reason: ChangeSidecarWait, Path: p.c.path.Child("lifecycle", "preStop"),
			Summary: preStopLength(p.addHook).Desc + ": sidecar " + strconv.Quote(p.c.c.Name) + " gets SIGTERM after the app is done",
			Op:      setPreStop(p.c, p.addHook)})
	}
}

// advise warns where a sidecar's exec hook, graceguard's or its own,
// runs a binary its image may lack (distroless proxies have no sleep:
// cloud-sql-proxy#1333), as for app containers.
func (ps sidecarPlans) advise(r *Report) {
	for _, p := range ps {
		if !p.report.Native {
			adviseHookBinary(p.c, p.addHook != nil, r)
		}
	}
}

// checkMutated denies, in enforce mode, a sidecar still without
// graceguard's wait: the mutating webhook did not run (an outage under
// Ignore); the controller retries and the retry is mutated.
func (ps sidecarPlans) checkMutated(s Settings, r *Report) {
	if s.Mode == ModeWarn {
		return
	}
	for _, p := range ps {
		if p.addHook != nil {
			r.deny(DenyNotMutated, field.Required(p.c.path.Child("lifecycle", "preStop"),
				fmt.Sprintf("graceguard's mutating webhook adds a %s wait here so sidecar %q outlives the app, and did not run for this Pod (unavailable?); create it again",
					preStopLength(p.addHook).Desc, p.c.c.Name)))
		}
	}
}

// waitHandler is the preStop graceguard writes to wait seconds: the sleep
// action, which needs no binary in the image (distroless sidecars have
// none: cloud-sql-proxy#1333), or ["sleep", "N"] where the handler exec
// asks for it (not on Windows Pods, whose images have no sleep).
func (s Settings) waitHandler(seconds int64) *corev1.LifecycleHandler {
	if s.PreStop == PreStopExec && !s.windowsSleep() {
		return &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", strconv.FormatInt(seconds, 10)}}}
	}
	return &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: seconds}}
}

// namedSidecars are the containers graceguard.io/sidecars names.
type namedSidecars struct{}

func (namedSidecars) check(t Target, s Settings, p paths) []Finding {
	if s.Sidecars == nil {
		return nil
	}
	all := t.containers()
	byName := make(map[string]bool, len(all))
	for _, c := range all {
		byName[c.c.Name] = true
	}
	named := make(map[string]bool, len(s.Sidecars))
	var missing, both []string
	for _, n := range s.Sidecars {
		named[n] = true
		switch {
		case meshOf(n) != "" || s.knative.is(n):
			// Planned by its mesh, and not there yet before injection:
			// skipped in both webhook orders (decide warns). Knative's
			// queue-proxy is Knative's to stop (knative.go).
		case !byName[n]:
			missing = append(missing, n)
		case slices.Contains(s.Containers, n):
			both = append(both, n)
		}
	}
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, missingSidecars(t, all, missing))
	}
	if len(both) > 0 {
		parts = append(parts, joinQuoted(both)+plural(both, " is", " are")+" also in "+AnnotationContainers+
			", which treats it as an app container; a container is an app or a sidecar: remove it from one list")
	}
	if len(missing) == 0 && s.Containers == nil {
		apps := 0
		for i := range t.Spec.Containers {
			if n := t.Spec.Containers[i].Name; !named[n] && meshOf(n) == "" && !s.knative.is(n) {
				apps++
			}
		}
		if apps == 0 {
			parts = append(parts, "names every app container; a sidecar outlives the app, and none would be left: name only the containers the app needs until its last request, or opt the Pod out with "+
				AnnotationInject+": \"false\"")
		}
	}
	if len(parts) == 0 {
		return nil
	}
	return []Finding{{DenyInvalidAnnotation, field.Invalid(p.pod.Key(AnnotationSidecars),
		clip(t.Meta.Annotations[AnnotationSidecars]), strings.Join(parts, "; "))}}
}

// missingSidecars explains names that are no container a sidecar can be.
func missingSidecars(t Target, all []container, missing []string) string {
	return explainMissing(t, all, missing, missingWhy{
		init:      "it ends before the app starts (a native sidecar has restartPolicy: Always)",
		ephemeral: "the API allows no preStop hook there",
		listed:    "the Pod's containers and native sidecars",
	})
}

func (namedSidecars) detect(t Target, s Settings) []container {
	if s.Sidecars == nil {
		return nil
	}
	var out []container
	for _, c := range t.containers() {
		if meshOf(c.c.Name) == "" && !s.knative.is(c.c.Name) && slices.Contains(s.Sidecars, c.c.Name) {
			out = append(out, c)
		}
	}
	return out
}

func (namedSidecars) plan(c container, app appShutdown, s Settings) sidecarPlan {
	p := sidecarPlan{c: c, report: SidecarReport{Name: c.c.Name, Key: AnnotationSidecars, Native: c.sidecar, NeedWait: app.need, WaitKnown: true}}
	sr := &p.report
	if c.sidecar {
		sr.Why = "native sidecar: Kubernetes sends its SIGTERM after the app containers exited; graceguard adds nothing"
		return p
	}
	var hook *corev1.LifecycleHandler
	if c.c.Lifecycle != nil {
		hook = c.c.Lifecycle.PreStop
	}
	preStop := c.path.Child("lifecycle", "preStop")
	switch {
	case hook == nil && app.need == 0:
		sr.Why = "SIGTERM at deletion: the app's shutdown takes 0s"
	case hook == nil:
		p.addHook = s.waitHandler(app.need)
		hl := preStopLength(p.addHook)
		sr.Wait, sr.Desc, sr.Added = hl.D, hl.Desc, true
		sr.Why = fmt.Sprintf("waits %s, the app's whole shutdown, then SIGTERM", formatHook(hl.D))
	default:
		// A hook of its own is kept, as an app container's is; it must
		// last as long as the app's shutdown.
		hl := preStopLength(hook)
		sr.Wait, sr.WaitKnown, sr.Desc = hl.D, hl.Known, hl.Desc
		sr.Why = "its own preStop (" + hl.Desc + "), then SIGTERM"
		switch {
		case !hl.Known:
			p.warnings = append(p.warnings, Finding{WarnHookUnknownLength, field.Invalid(preStop, hl.Desc,
				fmt.Sprintf("sidecar wait of unknown length; it must outlast the app's %ds", app.need))})
		case hl.D < secs(app.need):
			p.violations = append(p.violations, Finding{DenySidecarExitsEarly, field.Invalid(preStop, hl.Desc,
				fmt.Sprintf("sidecar %q gets SIGTERM at %s, before the app is done at %ds (routing %s + work %s + cleanup %s), and cuts its last requests; make the hook at least %ds (e.g. sleep: {seconds: %d}) or remove it (graceguard adds one)",
					c.c.Name, formatHook(hl.D), app.need, budget.Format(app.b.Routing), budget.Format(app.b.Work), budget.Format(app.b.Cleanup), app.need, app.need))})
		}
	}
	p.term = max(sr.Wait-app.end, 0)
	if sr.Wait > 0 && app.b.Margin == 0 {
		// The margin is the sidecar's time to exit after its SIGTERM.
		// Without one the grace would end with the wait, and a hook as
		// long as its grace is killed (prestop-exceeds-grace): the least
		// whole second is counted for the exit.
		p.term += time.Second
	}
	return p
}

// withoutSidecars drops the containers graceguard.io/sidecars names, and
// Knative's queue-proxy, from the app containers to treat.
func withoutSidecars(targets []container, s Settings) []container {
	if s.Sidecars == nil && s.knative == nil {
		return targets
	}
	out := targets[:0:0]
	for _, c := range targets {
		if !slices.Contains(s.Sidecars, c.c.Name) && !s.knative.is(c.c.Name) {
			out = append(out, c)
		}
	}
	return out
}

// setSidecars reads graceguard.io/sidecars: container names, each once.
func setSidecars(s *Settings, v string, a at) *Finding {
	names, err := parseSidecars(v)
	if err != nil {
		return &Finding{a.reason, field.Invalid(a.path, clip(v), err.Error())}
	}
	s.Sidecars = names
	return nil
}

// sidecarsAccepted says what graceguard.io/sidecars accepts.
const sidecarsAccepted = "want a comma-separated list of container names, each once, e.g. cloud-sql-proxy,vault-agent"

// parseSidecars reads a comma-separated list of container names. Unlike
// graceguard.io/containers it refuses an empty item and a repeated name: a
// list that says something twice, or nothing, was not meant. Linear in
// the length of v.
func parseSidecars(v string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	i := 0
	for n := range strings.SplitSeq(v, ",") {
		i++
		n = strings.TrimSpace(n)
		switch {
		case n == "":
			return nil, fmt.Errorf("item %d is empty; %s", i, sidecarsAccepted)
		case len(validation.IsDNS1123Label(n)) > 0:
			return nil, fmt.Errorf("container name %q is not valid; %s", clip(n), sidecarsAccepted)
		case seen[n]:
			return nil, fmt.Errorf("names %q twice; %s", n, sidecarsAccepted)
		}
		seen[n] = true
		out = append(out, n)
	}
	return out, nil
}
