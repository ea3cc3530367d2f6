package mutate

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/graceguard/graceguard/pkg/budget"
)

// Probe tuning. Readiness withdraws quickly (two failures two seconds apart);
// liveness is slow and independent of draining, so a draining app is not
// restarted.
var (
	readinessTuning = corev1.Probe{PeriodSeconds: 2, FailureThreshold: 2, TimeoutSeconds: 1, SuccessThreshold: 1}
	livenessTuning  = corev1.Probe{InitialDelaySeconds: 10, PeriodSeconds: 10, FailureThreshold: 3, TimeoutSeconds: 1, SuccessThreshold: 1}
)

// Mutate decides what graceguard adds to the target and, in enforce mode,
// adds it to t (in warn mode t is left as it is and the report says what
// would change). It never denies: violations it meets stop it from
// changing anything and are left for Validate to report.
func Mutate(t Target, ns Namespace, opts Options) *Report {
	r, s, bad, p := begin(t, ns, opts, StageMutate)
	if r.Skip != "" {
		return r
	}
	if s.OptOut {
		r.Skip, r.OptedOut = SkipOptedOut, true
		return r
	}
	work := t
	if s.Mode == ModeWarn {
		work = t.deepCopy()
	}
	targets, tbad := selectTargets(work, s, p)
	if bad = append(bad, tbad...); len(bad) > 0 {
		r.Violations = bad
		return r
	}
	decide(work, s, p, targets, r, true).apply(r)
	r.Applied = s.Mode != ModeWarn && len(r.Changes) > 0
	return r
}

// begin starts both webhooks' reports: the target left alone entirely
// (r.Skip), or its settings read, with the findings of those that do not
// parse.
func begin(t Target, ns Namespace, opts Options, stage Stage) (*Report, Settings, []Finding, paths) {
	g := t.grace()
	r := &Report{Stage: stage, Kind: t.Kind, Namespace: t.Namespace, Name: t.Name, GraceBefore: g, Grace: g}
	if r.Skip = skip(t, ns, opts); r.Skip != "" {
		return r, Settings{}, nil, paths{}
	}
	p := newPaths(t.MetaPath, ns.Name)
	s, bad := settingsFor(t, ns, opts, p)
	r.Mode = s.Mode
	return r, s, append(unreadFindings(t), bad...), p
}

// skip says why a target is left alone entirely, or "".
func skip(t Target, ns Namespace, opts Options) Reason {
	switch {
	case slices.Contains(opts.ExcludedNamespaces, ns.Name):
		return SkipExcluded
	case ns.Labels[LabelInject] != LabelInjectEnabled:
		return SkipNotOptedIn
	}
	if _, mirror := t.Meta.Annotations[AnnotationMirror]; mirror {
		return SkipMirrorPod
	}
	return ""
}

// decision is what graceguard decides about one target, resolved once
// from the target as it is: the settings, the app containers it treats,
// the budget (the preStop sleeps it adds counted in), what the mesh proxy
// adds, and the fit against the grace, the cap and the ceilings. Mutate
// applies it; Validate checks the target against it.
type decision struct {
	t       Target
	s       Settings
	p       paths
	targets []container
	plan    meshPlan
	// sidecars are the containers that must outlive the app (sidecar.go).
	sidecars sidecarPlans
	fit      budget.Fit
	// ok is false when a finding (r.Violations) stops mutation.
	ok bool
}

// decide resolves the decision for t, whose treated containers are
// targets, into r: the budget, where its terms came from, the mesh,
// routing profile and ceilings, and the violations that stop mutation.
// withAdvice records the advice about the budget (hooks of unknown
// length, the mesh, the ceilings) in r.Warnings; max-work: auto always
// says what it chose.
func decide(t Target, s Settings, p paths, targets []container, r *Report, withAdvice bool) decision {
	d := decision{t: t, p: p, targets: appTargets(targets)}
	autoWork(t, &s, p, r)
	withoutAppTerms(t, &s)
	warnTo := r
	if !withAdvice {
		warnTo = nil
	}
	if proxies := slices.DeleteFunc(slices.Clone(s.Containers), func(n string) bool { return meshOf(n) == "" }); len(proxies) > 0 && withAdvice {
		r.warn(WarnMeshProxyNamed, p.pod.Key(AnnotationContainers), clip(strings.Join(s.Containers, ",")),
			"%s: a mesh proxy, never treated as an app container", joinQuoted(proxies))
	}
	if proxies := slices.DeleteFunc(slices.Clone(s.Sidecars), func(n string) bool { return meshOf(n) == "" }); len(proxies) > 0 && withAdvice {
		r.warn(WarnMeshProxyNamed, p.pod.Key(AnnotationSidecars), clip(strings.Join(s.Sidecars, ",")),
			"%s: a mesh proxy, which outlives the app as its mesh needs; remove it", joinQuoted(proxies))
	}
	if withAdvice {
		knativeProxyNamed(s.knative, AnnotationContainers, s.Containers, p, r)
		knativeProxyNamed(s.knative, AnnotationSidecars, s.Sidecars, p, r)
	}
	r.Budget, r.Hook = effectiveBudget(s, d.targets, warnTo)
	if withAdvice {
		adviseKnative(s, p, r.Budget, r)
	}
	r.Sources = maps.Clone(s.Sources)
	if r.Budget.Routing > s.Budget.Routing {
		r.Sources[budget.Routing] = FromHook
	}
	d.s = s
	d.plan, d.sidecars, d.fit, d.ok = prepare(t, s, r, withAdvice)
	return d
}

// sleepFor is the preStop sleep graceguard gives container c, or nil: one
// to every treated container without a preStop hook, of the routing delay
// in whole seconds, unless the handler is none or the delay rounds to 0.
// Mutate writes it, the budget counts it and Validate denies its absence.
func (s Settings) sleepFor(c container) *corev1.LifecycleHandler {
	if c.c.Lifecycle != nil && c.c.Lifecycle.PreStop != nil {
		return nil
	}
	seconds := budget.CeilSeconds(s.Budget.Routing)
	if s.PreStop == PreStopNone || seconds == 0 {
		return nil
	}
	return s.waitHandler(seconds)
}

// apply makes the decision's changes on its target and records each in r:
// the preStop sleeps, the mesh proxy's wait, the probes, the grace, the
// budget annotation and the observer's label. When a violation stops
// mutation it only records how the containers stop.
func (d decision) apply(r *Report) {
	t, s := d.t, d.s
	var firstHook *field.Path
	for _, c := range d.targets {
		h := s.sleepFor(c)
		if h == nil || !d.ok {
			r.Stops = append(r.Stops, s.stopOf(c, false))
			continue
		}
		summary := preStopLength(h).Desc
		if s.windowsSleep() {
			summary += " (the sleep action, not exec: a Windows image has no sleep command)"
		}
		path := c.path.Child("lifecycle", "preStop")
		if firstHook == nil {
			firstHook = path
		}
		r.Changes = append(r.Changes, Change{Reason: ChangePreStop, Path: path, Summary: summary,
			Op: setPreStop(c, h)})
		r.Stops = append(r.Stops, s.stopOf(c, true))
	}
	if firstHook != nil {
		warnWindowsSleep(s, firstHook, r)
	}
	if !d.ok {
		return
	}

	d.plan.apply(t, r)
	d.sidecars.apply(r)
	if !d.plan.skipProbes(d.p, r) {
		addProbes(d.targets, s, d.p, r)
	}

	if need := d.fit.Need; need > r.Grace {
		if g := t.Spec.TerminationGracePeriodSeconds; g != nil && *g == 0 {
			// 0 kills at once: no routing window, no drain, which is
			// what graceguard is there to give. Raised, and said so.
			r.warn(WarnZeroGraceRaised, t.SpecPath.Child("terminationGracePeriodSeconds"), "0",
				"0 raised to %d: 0 kills at once, no drain; opt the Pod out to keep 0", need)
		}
		r.Changes = append(r.Changes, Change{
			Reason:  ChangeGrace,
			Path:    t.SpecPath.Child("terminationGracePeriodSeconds"),
			Summary: fmt.Sprintf("%d -> %s", r.Grace, needText(d.fit, s, "")),
			Op:      add(t.specPointer()+"/terminationGracePeriodSeconds", need),
		})
		t.Spec.TerminationGracePeriodSeconds = &need
		r.Grace = need
	}

	// Knative's queue-proxy probes a Knative app itself (Knative removes
	// its HTTP readiness probe): no advice to add one.
	advise(d.targets, s.ReadinessPath != "" || s.knative != nil, r)
	d.sidecars.advise(r)

	if note := r.Budget.Annotation(r.Grace); t.Meta.Annotations[AnnotationBudget] != note {
		r.Changes = append(r.Changes, Change{Reason: ChangeBudget, Path: t.MetaPath.Child("annotations").Key(AnnotationBudget), Summary: note,
			Op: setMeta(t, "annotations", &t.Meta.Annotations, AnnotationBudget, note)})
	}

	// The shutdown observer selects Pods by this label, so that it never
	// watches all Pods. A value already there is kept (Mutate only adds),
	// but the mutating floor's, which says the webhook did not answer.
	// Only Pods: on a template it would be noise in the manifests people
	// keep (the Pods get it at admission anyway).
	if v, ok := t.Meta.Labels[LabelTreated]; (!ok || v == LabelTreatedByFloor) && !t.Template {
		r.Changes = append(r.Changes, Change{Reason: ChangeTreated, Path: t.MetaPath.Child("labels").Key(LabelTreated), Summary: LabelTreatedValue,
			Op: setMeta(t, "labels", &t.Meta.Labels, LabelTreated, LabelTreatedValue)})
	}
}

// setPreStop gives c the preStop hook h and returns the operation that
// does it on the raw object.
func setPreStop(c container, h *corev1.LifecycleHandler) Operation {
	if c.c.Lifecycle == nil {
		c.c.Lifecycle = &corev1.Lifecycle{PreStop: h}
		return add(c.pointer+"/lifecycle", c.c.Lifecycle)
	}
	c.c.Lifecycle.PreStop = h
	return add(c.pointer+"/lifecycle/preStop", h)
}

// setMeta sets key in one of t's metadata maps (field "annotations" or
// "labels", at m) and returns the operation that does it on the raw
// object: creating the map, or the metadata of an empty template, when
// there is none.
func setMeta(t Target, field string, m *map[string]string, key, value string) Operation {
	var op Operation
	switch {
	case t.Template && equality.Semantic.DeepEqual(*t.Meta, metav1.ObjectMeta{}):
		op = add(t.metaPointer(), map[string]any{field: map[string]string{key: value}})
		*m = map[string]string{}
	case *m == nil:
		op = add(t.metaPointer()+"/"+field, map[string]string{key: value})
		*m = map[string]string{}
	default:
		op = add(t.metaPointer()+"/"+field+"/"+escape(key), value)
	}
	(*m)[key] = value
	return op
}

func (s Settings) stopOf(c container, added bool) ContainerStop {
	hl := s.hookOf(c)
	return ContainerStop{Name: c.c.Name, Hook: hl.D, Known: hl.Known, Desc: hl.Desc, Added: added, Signal: stopSignal(c.c)}
}

// MaxTreatedContainers bounds the containers graceguard treats in one Pod,
// and with it the size of a patch: a few hundred bytes for each treated
// container keeps the largest answer under 64 KiB. Real Pods treat one to a
// handful (the app and its proxies).
const MaxTreatedContainers = 32

// selectTargets picks the containers to treat: the ones named in
// graceguard.io/containers (regular containers or native sidecars), else
// every regular container. Names that match no treatable container make
// one finding for the annotation, however many there are.
func selectTargets(t Target, s Settings, p paths) ([]container, []Finding) {
	targets, bad := selectApps(t, s, p)
	for _, in := range sidecarIntegrations {
		bad = append(bad, in.check(t, s, p)...)
	}
	return withoutSidecars(targets, s), bad
}

// selectApps picks the containers graceguard.io/containers names, or every
// regular container; selectTargets leaves the sidecars out.
func selectApps(t Target, s Settings, p paths) ([]container, []Finding) {
	if s.Containers == nil {
		// Counted before anything is built for them: a Pod of 10,000
		// containers costs one finding (the reader's, when it did not read
		// them all: it says how many there are).
		if n := len(t.Spec.Containers); n > MaxTreatedContainers && !t.unread(t.SpecPath.Child("containers")) {
			return nil, []Finding{{DenyTooManyContainers, &field.Error{Type: field.ErrorTypeTooMany,
				Field: t.SpecPath.Child("containers").String(), BadValue: int64(n),
				Detail: fmt.Sprintf("graceguard treats at most %d containers of a Pod; name the ones that serve traffic in %s, or opt the Pod out with %s: \"false\"",
					MaxTreatedContainers, AnnotationContainers, AnnotationInject)}}}
		}
		return t.regularContainers(), nil
	}
	all := t.containers()
	byName := make(map[string]int, len(all))
	for i, c := range all {
		if _, dup := byName[c.c.Name]; !dup {
			byName[c.c.Name] = i
		}
	}
	var out []container
	var missing []string
	for _, name := range s.Containers {
		if meshOf(name) != "" || s.knative.is(name) {
			// A mesh proxy is never an app container, and it is not there
			// yet when graceguard runs before the injector: skipped, in
			// both orders (decide warns). Nor is Knative's queue-proxy.
			continue
		}
		if i, ok := byName[name]; ok {
			out = append(out, all[i])
		} else {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		// Names are unique, so at most MaxAnnotationValueLength/2 of them.
		if len(out) > MaxTreatedContainers {
			return nil, []Finding{{DenyTooManyContainers, field.Invalid(p.pod.Key(AnnotationContainers), clip(strings.Join(s.Containers, ",")),
				fmt.Sprintf("names %d containers; graceguard treats at most %d containers of a Pod", len(out), MaxTreatedContainers))}}
		}
		return out, nil
	}
	return out, []Finding{{DenyInvalidAnnotation, field.Invalid(p.pod.Key(AnnotationContainers),
		clip(strings.Join(s.Containers, ",")), missingContainers(t, all, missing))}}
}

// missingContainers explains names that match no treatable container,
// grouped by why (a regular init container, an ephemeral container, no
// container at all), listing a few names of each group and the treatable
// containers.
func missingContainers(t Target, all []container, missing []string) string {
	return explainMissing(t, all, missing, missingWhy{
		init:      "the API allows no preStop hook or probes there (only native sidecars, restartPolicy: Always)",
		ephemeral: "the API allows no preStop hook or probes there",
		listed:    "treatable containers",
	})
}

// missingWhy is what an annotation naming containers says of a name that
// is a regular init container, of one that is an ephemeral container, and
// how it calls the containers it lists instead.
type missingWhy struct{ init, ephemeral, listed string }

// explainMissing explains names of missing that are no container all
// holds, grouped by why, for the annotation why describes.
func explainMissing(t Target, all []container, missing []string, why missingWhy) string {
	kind := make(map[string]string, len(t.Spec.InitContainers)+len(t.Spec.EphemeralContainers))
	for _, c := range t.Spec.InitContainers {
		kind[c.Name] = "init"
	}
	for _, c := range t.Spec.EphemeralContainers {
		kind[c.Name] = "ephemeral"
	}
	var unknown, init, ephemeral []string
	for _, n := range missing {
		switch kind[n] {
		case "init":
			init = append(init, n)
		case "ephemeral":
			ephemeral = append(ephemeral, n)
		default:
			unknown = append(unknown, n)
		}
	}
	var parts []string
	if len(unknown) > 0 {
		parts = append(parts, plural(unknown, "no container named ", "no containers named ")+joinQuoted(unknown))
	}
	if len(init) > 0 {
		parts = append(parts, joinQuoted(init)+plural(init, " is a regular init container", " are regular init containers")+": "+why.init)
	}
	if len(ephemeral) > 0 {
		parts = append(parts, joinQuoted(ephemeral)+plural(ephemeral, " is an ephemeral container", " are ephemeral containers")+": "+why.ephemeral)
	}
	return strings.Join(parts, "; ") + "; " + why.listed + ": " + joinQuoted(names(all))
}

func plural(list []string, one, many string) string {
	if len(list) == 1 {
		return one
	}
	return many
}

func names(cs []container) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.c.Name
	}
	return out
}

// effectiveBudget replaces the routing term by the longest preStop hook of
// the treated containers where that is longer: the kubelet sends SIGTERM
// only after the hook. A hook graceguard will add counts as the whole
// seconds it will sleep, so the result is the same before and after
// mutation. Hooks of unknown length are warned about (when r is not nil)
// and count with their known lower bound.
func effectiveBudget(s Settings, targets []container, r *Report) (budget.Budget, time.Duration) {
	var hook time.Duration
	for _, c := range targets {
		if sleep := s.sleepFor(c); sleep != nil {
			hook = max(hook, preStopLength(sleep).D)
			continue
		}
		if c.c.Lifecycle == nil || c.c.Lifecycle.PreStop == nil {
			continue
		}
		hl := s.hookOf(c)
		if !hl.Known && r != nil {
			least := ""
			if hl.D > 0 {
				least = " (at least " + formatHook(hl.D) + ")"
			}
			r.warn(WarnHookUnknownLength, c.path.Child("lifecycle", "preStop"), hl.Desc,
				"unknown length%s; budget counts %s for it", least, budget.Format(max(s.Budget.Routing, hl.D)))
		}
		hook = max(hook, hl.D)
	}
	b := s.Budget
	b.Routing = max(b.Routing, hook)
	return b, hook
}

func overCap(t Target, f budget.Fit, s Settings) Finding {
	if f.Budget.Routing == infinite {
		return Finding{DenyBudgetOverCap, field.Invalid(t.SpecPath.Child("terminationGracePeriodSeconds"), "infinity",
			"a preStop hook that never ends fits no grace period; make it finish")}
	}
	fix := "lower " + KeyFor(f.Budget.Largest())
	if f.Budget.Largest() == budget.Routing && f.Budget.Routing > s.Budget.Routing {
		// The routing term is a preStop hook's length (effectiveBudget):
		// the routing delay is not what to lower.
		fix = "shorten the preStop hook, whose " + budget.Format(f.Budget.Routing) + " is the routing term"
	}
	return Finding{DenyBudgetOverCap, field.Invalid(t.SpecPath.Child("terminationGracePeriodSeconds"), f.Need,
		fmt.Sprintf("the budget needs %s, over the cluster cap of %s (--max-grace-period, the cluster autoscaler's limit); %s",
			needText(f, s, "s"), budget.Format(f.Cap), fix))}
}

// addProbes adds readiness and liveness probes from the annotations to
// treated containers that have none; existing probes are never changed.
func addProbes(targets []container, s Settings, p paths, r *Report) {
	for _, pr := range []struct {
		path, field string
		key         string
		reason      Reason
		tuning      corev1.Probe
		get         func(*corev1.Container) **corev1.Probe
	}{
		{s.ReadinessPath, "readinessProbe", AnnotationReadinessPath, ChangeReadiness, readinessTuning, func(c *corev1.Container) **corev1.Probe { return &c.ReadinessProbe }},
		{s.LivenessPath, "livenessProbe", AnnotationLivenessPath, ChangeLiveness, livenessTuning, func(c *corev1.Container) **corev1.Probe { return &c.LivenessProbe }},
	} {
		if pr.path == "" {
			continue
		}
		covered := false
		for _, c := range targets {
			slot := pr.get(c.c)
			if *slot != nil {
				covered = true
				continue
			}
			port, ok := probePort(c.c, s.ProbePort)
			if !ok {
				continue
			}
			probe := pr.tuning
			probe.ProbeHandler = corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: pr.path, Port: port, Scheme: corev1.URISchemeHTTP}}
			*slot = &probe
			covered = true
			r.Changes = append(r.Changes, Change{
				Reason:  pr.reason,
				Path:    c.path.Child(pr.field),
				Summary: "httpGet " + pr.path + " port " + port.String(),
				Op:      add(c.pointer+"/"+pr.field, &probe),
			})
		}
		if !covered {
			if s.ProbePort != nil {
				r.warn(WarnNoProbePort, p.pod.Key(pr.key), pr.path, "no container declares port %q; no probe added", s.ProbePort.String())
				continue
			}
			r.warn(WarnNoProbePort, p.pod.Key(pr.key), pr.path, "no port to probe; set %s; no probe added", AnnotationProbePort)
		}
	}
}

// probePort is the port to probe on c: the annotation's number, its name if
// c declares it, or c's first declared port.
func probePort(c *corev1.Container, want *intstr.IntOrString) (intstr.IntOrString, bool) {
	switch {
	case want != nil && want.Type == intstr.Int:
		return *want, true
	case want != nil:
		for _, p := range c.Ports {
			if p.Name == want.StrVal {
				return *want, true
			}
		}
		return intstr.IntOrString{}, false
	case len(c.Ports) > 0:
		if c.Ports[0].Name != "" {
			return intstr.FromString(c.Ports[0].Name), true
		}
		return intstr.FromInt32(c.Ports[0].ContainerPort), true
	}
	return intstr.IntOrString{}, false
}

// advise adds the warnings about the final containers. asked says a
// readiness path is set: then a container left without a probe is
// already explained (no port to probe), not told to set the path.
func advise(targets []container, asked bool, r *Report) {
	for i, c := range targets {
		adviseHookBinary(c, i < len(r.Stops) && r.Stops[i].Added, r)
		if isShellForm(c.c) {
			f := "command"
			if len(c.c.Command) == 0 {
				f = "args"
			}
			r.warn(WarnShellForm, c.path.Child(f), strings.Join(append(append([]string{}, c.c.Command...), c.c.Args...), " "),
				"shell form may not forward SIGTERM; use exec form or exec in the script")
		}
		if c.c.ReadinessProbe != nil && c.c.LivenessProbe != nil &&
			equality.Semantic.DeepEqual(c.c.ReadinessProbe.ProbeHandler, c.c.LivenessProbe.ProbeHandler) {
			r.warn(WarnLivenessIsReadiness, c.path.Child("livenessProbe"), "",
				"same check as readinessProbe; draining would trigger restarts")
		}
		if len(c.c.Ports) > 0 && c.c.ReadinessProbe == nil && !asked {
			r.warn(WarnNoReadiness, c.path.Child("readinessProbe"), "",
				"serving container has none; set %s", AnnotationReadinessPath)
		}
	}
}
