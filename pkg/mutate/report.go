package mutate

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/graceguard/graceguard/pkg/budget"
)

// Reason is a stable, bounded code for one decision. Reasons label metrics
// and are listed in docs/annotations.md; never build one from user input.
type Reason string

// Why an object was not evaluated at all.
const (
	SkipNotOptedIn    Reason = "namespace-not-opted-in"
	SkipExcluded      Reason = "namespace-excluded"
	SkipMirrorPod     Reason = "mirror-pod"
	SkipOptedOut      Reason = "pod-opted-out"
	SkipNotApplicable Reason = "operation-not-applicable"
)

// What Mutate changed.
const (
	ChangePreStop   Reason = "prestop-added"
	ChangeGrace     Reason = "grace-raised"
	ChangeReadiness Reason = "readiness-probe-added"
	ChangeLiveness  Reason = "liveness-probe-added"
	ChangeBudget    Reason = "budget-recorded"
	ChangeTreated   Reason = "treated-label-added"
	// ChangeProxyWait and ChangeMeshAnnotation make a mesh proxy outlive
	// the app (mesh.go).
	ChangeProxyWait      Reason = "mesh-proxy-wait-added"
	ChangeMeshAnnotation Reason = "mesh-annotation-added"
	// ChangeSidecarWait makes a container graceguard.io/sidecars names
	// outlive the app (sidecar.go).
	ChangeSidecarWait Reason = "sidecar-wait-added"
)

// Advice that does not block admission.
const (
	WarnShellForm           Reason = "shell-form-command"
	WarnLivenessIsReadiness Reason = "liveness-equals-readiness"
	WarnNoReadiness         Reason = "no-readiness-probe"
	WarnHookUnknownLength   Reason = "prestop-unknown-length"
	WarnNoProbePort         Reason = "no-probe-port"
	WarnWouldChange         Reason = "would-change"
	WarnAutoWork            Reason = "max-work-auto"
	WarnMeshProbes          Reason = "mesh-probes-not-added"
	WarnZeroGraceRaised     Reason = "zero-grace-raised"
	WarnOverCeiling         Reason = "over-platform-ceiling"
	// WarnHookBinaryMissing: an exec preStop hook's command may not exist
	// in an image whose name says it has no distribution (images.go).
	WarnHookBinaryMissing Reason = "prestop-binary-may-be-missing"
	// WarnMeshSettingIgnored: a mesh setting the mesh itself ignores
	// (mesh.go); WarnMeshProxyNamed: graceguard.io/containers names a mesh
	// proxy, which is never treated as an app container.
	WarnMeshSettingIgnored Reason = "mesh-setting-ignored"
	WarnMeshProxyNamed     Reason = "mesh-proxy-named"
	// WarnWindowsSleepAction: the exec handler was asked for a Windows
	// Pod, which gets the sleep action instead (windows.go).
	WarnWindowsSleepAction Reason = "windows-sleep-action"
	// WarnUntreated: the validating webhook admitted a Pod graceguard's
	// mutating webhook did not treat (Options.Untreated is UntreatedAdmit).
	WarnUntreated Reason = "admitted-untreated"
	// WarnScaleDownEarly: an Argo Rollouts scaleDownDelaySeconds shorter
	// than the routing term of the Pods it scales down (rollout.go).
	WarnScaleDownEarly Reason = "scale-down-before-routing"
	// WarnKnativeTimeout: a Knative Pod's work term is the cluster's
	// default, shorter than the Revision's timeoutSeconds (knative.go).
	WarnKnativeTimeout Reason = "knative-timeout-over-work"
)

// Why an object is denied (or, in warn mode, would be).
const (
	DenyHookExceedsGrace   Reason = "prestop-exceeds-grace"
	DenyBudgetExceedsGrace Reason = "budget-exceeds-grace"
	DenyBudgetOverCap      Reason = "budget-over-cap"
	DenyInvalidAnnotation  Reason = "invalid-annotation"
	DenyInvalidNamespace   Reason = "invalid-namespace-setting"
	DenyNotMutated         Reason = "not-mutated"
	DenyProxyExitsEarly    Reason = "mesh-proxy-exits-early"
	DenyInvalidMeshSetting Reason = "invalid-mesh-setting"
	// DenySidecarExitsEarly: a named sidecar's own preStop ends before the
	// app's shutdown (sidecar.go).
	DenySidecarExitsEarly Reason = "sidecar-exits-early"
	DenyOverCeiling       Reason = "budget-over-platform-ceiling"
	DenyTooManyContainers Reason = "too-many-containers"
	DenyTooLarge          Reason = "object-too-large"
	// DenyStopSignalKills: a container's lifecycle.stopSignal is one no
	// process can catch (validate.go).
	DenyStopSignalKills Reason = "stop-signal-kills"
)

// ReasonOK is Report.Reason for a report with nothing to say: not a
// decision, so it is not one of AllReasons, but a metric label.
const ReasonOK Reason = "ok"

// AllReasons lists every reason, for docs and for bounding metric labels.
var AllReasons = []Reason{
	SkipNotOptedIn, SkipExcluded, SkipMirrorPod, SkipOptedOut, SkipNotApplicable,
	ChangePreStop, ChangeGrace, ChangeReadiness, ChangeLiveness, ChangeBudget, ChangeTreated, ChangeProxyWait, ChangeMeshAnnotation, ChangeSidecarWait,
	WarnShellForm, WarnLivenessIsReadiness, WarnNoReadiness, WarnHookUnknownLength, WarnNoProbePort, WarnWouldChange, WarnAutoWork,
	WarnMeshProbes, WarnOverCeiling, WarnMeshSettingIgnored, WarnMeshProxyNamed, WarnZeroGraceRaised, WarnHookBinaryMissing, WarnWindowsSleepAction,
	WarnUntreated, WarnScaleDownEarly, WarnKnativeTimeout,
	DenyHookExceedsGrace, DenyBudgetExceedsGrace, DenyBudgetOverCap, DenyInvalidAnnotation, DenyInvalidNamespace, DenyNotMutated, DenyTooManyContainers, DenyTooLarge,
	DenyProxyExitsEarly, DenyInvalidMeshSetting, DenyOverCeiling, DenyStopSignalKills, DenySidecarExitsEarly,
}

// Change is one addition Mutate made.
type Change struct {
	Reason Reason
	// Path is the field changed, as people read it
	// (spec.containers[0].lifecycle.preStop).
	Path *field.Path
	// Summary says what was written ("sleep 5s", "30 -> 45").
	Summary string
	// Op is the JSON patch operation that makes this change on the raw object.
	Op Operation
}

func (c Change) String() string { return c.Path.String() + ": " + c.Summary }

// Finding is a warning or a violation, carrying its field path and value.
type Finding struct {
	Reason Reason
	Err    *field.Error
}

// Message renders the finding as "path: message" in at most MaxWarningLength
// characters, the form admission warnings use.
func (f Finding) Message() string {
	return shorten(f.Err.Field + ": " + f.Err.Detail)
}

// MaxWarningLength bounds each warning: the apiserver truncates at 256 and
// kubectl output stays readable at 120.
const MaxWarningLength = 120

// MaxDenialWarningLength bounds a warn-mode "enforce would deny" warning: it
// carries the whole denial, up to what the API server keeps of a warning.
const MaxDenialWarningLength = 256

func shorten(s string) string { return shortenTo(s, MaxWarningLength) }

// Bounds on what one review can make graceguard say. Whatever a Pod
// carries (10,000 containers, a megabyte of annotation), an answer stays
// a few kilobytes: the API server keeps at most 4096 bytes of warnings
// anyway, and a person reads the first few problems, fixes them and tries
// again. The CLI reads the Report itself and lists everything.
const (
	// MaxValueLength bounds a user-supplied value quoted in a message.
	MaxValueLength = 64
	// MaxListedViolations bounds the violations a denial lists; the rest
	// are counted in one last line.
	MaxListedViolations = 10
	// MaxRecordedViolations bounds the violations a Report holds; the rest
	// are only counted (Report.Unlisted).
	MaxRecordedViolations = 100
	// MaxListedWarnings bounds the warnings of one answer, likewise.
	MaxListedWarnings = 10
)

// clip shortens a user-supplied value for a message, saying how long it
// really was: "app,proxy,side... (8700 bytes)". A value the webhook's
// decoder clipped (Clipped) says the length of the value it stands for.
func clip(v string) string {
	n, clipped := ValueLength(v)
	if !clipped && n <= MaxValueLength {
		return v
	}
	if clipped {
		v = v[:strings.LastIndex(v, clipMark)]
	}
	return strings.TrimSuffix(shortenTo(v, MaxValueLength), "...") + "... (" + strconv.Itoa(n) + " bytes)"
}

// clipMark starts the end of a clipped value or list.
const clipMark = "\u2026["

// Clipped is how a value longer than graceguard reads is kept by the
// webhook's decoder, which never materializes the rest: its first bytes,
// then its length and a hash of its JSON, "/readyz…[300 bytes #9f3a]". Two
// clipped values are equal only if their values are (up to the hash), a
// clipped value never parses as a duration, number or name, and a message
// can still say how long it was (clip).
func Clipped(prefix string, length int, sum uint64) string {
	return prefix + clipMark + strconv.Itoa(length) + " bytes #" + strconv.FormatUint(sum, 16) + "]"
}

// ClippedList is the last element of a list of which the decoder keeps
// only the first elements: how many more there were and a hash of them, so
// that such a list never reads as a shorter one (a `sleep 1 1 1 ...` of
// unknown length, not of the kept arguments' sum) and two are equal only
// if the lists are.
func ClippedList(more int, sum uint64) string {
	return clipMark + strconv.Itoa(more) + " more #" + strconv.FormatUint(sum, 16) + "]"
}

// ValueLength is the length of the value v stands for: its own, or, for a
// Clipped value, the length of the value it was clipped from (clipped true).
func ValueLength(v string) (n int, clipped bool) {
	i := strings.LastIndex(v, clipMark)
	if i < 0 || !strings.HasSuffix(v, "]") {
		return len(v), false
	}
	num, rest, ok := strings.Cut(v[i+len(clipMark):], " bytes #")
	if !ok || strings.ContainsAny(rest[:len(rest)-1], " ]") {
		return len(v), false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 {
		return len(v), false
	}
	return n, true
}

func shortenTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - 3
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// Stage says which webhook a report is for: mutation never denies and
// only validation does.
type Stage string

const (
	StageMutate   Stage = "mutate"
	StageValidate Stage = "validate"
)

// Report is the whole decision for one Pod or Pod template.
type Report struct {
	Stage Stage
	// Kind, Namespace and Name identify the object ("Deployment", "shop", "web").
	Kind, Namespace, Name string
	Mode                  Mode
	// Skip is set when the object was left alone entirely; then the rest is empty.
	Skip Reason
	// OptedOut is set when the Pod opted out of mutation and the budget
	// check; its hooks are still checked against its grace.
	OptedOut bool
	// Applied reports whether Changes were made to the object (enforce mode)
	// or only described (warn mode).
	Applied bool
	// Budget is the effective budget; its Routing term is the longest of the
	// routing delay and the preStop hooks of the treated containers.
	Budget budget.Budget
	// Sources says where each Budget term came from (empty when Budget
	// was not computed). The routing term is FromHook when a preStop hook
	// longer than the routing delay set it.
	Sources map[budget.Term]Source
	// Hook is the longest preStop hook of the treated containers.
	Hook time.Duration
	// Stops say how each treated container stops once the changes are
	// made, in order: the kubelet runs a container's own preStop hook and
	// then sends it SIGTERM, so containers with different hooks get
	// SIGTERM at different times.
	Stops []ContainerStop
	// Profile is the routing profile that applied, if any; GraceFloor its
	// floor in seconds (0 for none).
	Profile    *ProfileUse
	GraceFloor int64
	// Mesh is what graceguard found and decided about a mesh proxy (nil
	// without a mesh). Its part of the budget is Budget.Proxy.
	Mesh *MeshReport
	// Sidecars says how each container graceguard.io/sidecars names stops
	// (sidecar.go). What they run past the app is in Budget.Proxy too.
	Sidecars []SidecarReport
	// Ceilings are the platform ceilings configured (for the chart of
	// `kubectl graceguard explain`); exceeding them is a warning or a
	// violation.
	Ceilings []budget.Ceiling
	// GraceBefore and Grace are the grace period as received and as left.
	GraceBefore, Grace int64
	Changes            []Change
	Warnings           []Finding
	Violations         []Finding
	// Unlisted counts the violations found beyond MaxRecordedViolations,
	// which are not in Violations.
	Unlisted int
}

// ContainerStop is how one treated container stops: the preStop hook it
// runs before its SIGTERM.
type ContainerStop struct {
	Name string
	// Hook is the hook's length: exact when Known, else a lower bound;
	// 0 with Known for no hook.
	Hook  time.Duration
	Known bool
	// Desc describes the hook ("sleep 5s", "exec /wait-shutdown"); "" for none.
	Desc string
	// Added is set when the hook is graceguard's (Changes holds it).
	Added bool
	// Signal is the container's lifecycle.stopSignal, which the kubelet
	// sends instead of SIGTERM once the hook is done; "" when it sets
	// none (the image's STOPSIGNAL, else SIGTERM).
	Signal string
}

// Denied reports whether admission must be refused.
func (r *Report) Denied() bool {
	return r.Stage == StageValidate && r.Mode != ModeWarn && len(r.Violations) > 0
}

// ViolationCount is the number of violations found, recorded or not.
func (r *Report) ViolationCount() int { return len(r.Violations) + r.Unlisted }

// Patch is the JSON patch that applies the report's changes, or nil when
// nothing was applied.
func (r *Report) Patch() []Operation {
	if !r.Applied || len(r.Changes) == 0 {
		return nil
	}
	ops := make([]Operation, len(r.Changes))
	for i, c := range r.Changes {
		ops[i] = c.Op
	}
	return ops
}

// Notice is one admission warning in full: what the API server shows, before
// AdmissionWarnings bounds its length and number. The kubectl plugin
// prints these.
type Notice struct {
	Reason Reason
	// Field is the field path the warning is about.
	Field string
	// Text is the whole warning: "path: message", "enforce would set ...",
	// "enforce would deny: ...".
	Text string
	// Denial marks what enforce mode would deny (warn mode).
	Denial bool
}

// Notices are the admission warnings in full and all of them: advice,
// plus, in warn mode, what enforce mode would have changed or denied. Each
// is what AdmissionWarnings shortens.
func (r *Report) Notices() []Notice {
	var out []Notice
	for _, f := range r.Warnings {
		out = append(out, Notice{Reason: f.Reason, Field: f.Err.Field, Text: f.Err.Field + ": " + f.Err.Detail})
	}
	if r.Mode != ModeWarn {
		return out
	}
	switch r.Stage {
	case StageMutate:
		for _, c := range r.Changes {
			if c.Reason != ChangeBudget {
				out = append(out, Notice{Reason: c.Reason, Field: c.Path.String(), Text: "enforce would set " + c.String()})
			}
		}
	case StageValidate:
		for _, v := range r.Violations {
			out = append(out, Notice{Reason: v.Reason, Field: v.Err.Field, Text: "enforce would deny: " + v.Err.Error(), Denial: true})
		}
	}
	return out
}

// Findings is everything the two webhooks' reports on one object say
// against it, in full, as `kubectl graceguard check` lists it and the
// policy reports record it: the violations that deny it (enforce mode),
// then every notice of both (in warn mode they include what enforce mode
// would change or deny), each once: for templates the validating webhook
// repeats the mutating one's advice. Either report may be nil.
func Findings(mutation, validation *Report) (denials []Finding, warnings []Notice) {
	if validation != nil && validation.Err() != nil {
		denials = validation.Violations
	}
	seen := map[string]bool{}
	for _, r := range []*Report{mutation, validation} {
		if r == nil {
			continue
		}
		for _, n := range r.Notices() {
			if !seen[n.Text] {
				seen[n.Text] = true
				warnings = append(warnings, n)
			}
		}
	}
	return denials, warnings
}

// AdmissionWarnings is what the API server shows the client: advice, plus,
// in warn mode, what enforce mode would have changed or denied.
//
// At most MaxListedWarnings are returned; one last warning counts the rest.
func (r *Report) AdmissionWarnings() []string {
	var out []string
	more := 0
	say := func(w string) {
		if len(out) < MaxListedWarnings {
			out = append(out, w)
		} else {
			more++
		}
	}
	for _, f := range r.Warnings {
		say(f.Message())
	}
	if r.Mode == ModeWarn {
		switch r.Stage {
		case StageMutate:
			for _, c := range r.Changes {
				// The budget annotation and the observer's label only
				// record what the other changes do.
				if c.Reason != ChangeBudget && c.Reason != ChangeTreated {
					say(shorten("enforce would set " + c.String()))
				}
			}
		case StageValidate:
			// The whole denial, value included: a person must be able to fix
			// it from the warning alone. The API server keeps up to 256.
			for _, v := range r.Violations {
				say(shortenTo("enforce would deny: "+v.Err.Error(), MaxDenialWarningLength))
			}
		}
	}
	if more > 0 {
		out = append(out, fmt.Sprintf("%d more warnings not listed; kubectl graceguard check lists them all", more))
	}
	return out
}

// Err is the error to deny with: a 422 Invalid status carrying the
// violations with their field paths (the first MaxListedViolations, and a
// count of the rest), or nil when admission is allowed.
func (r *Report) Err() error {
	if !r.Denied() {
		return nil
	}
	n := min(len(r.Violations), MaxListedViolations)
	errs := make(field.ErrorList, n, n+1)
	for i, v := range r.Violations[:n] {
		errs[i] = bounded(v.Err)
	}
	if more := r.ViolationCount() - n; more > 0 {
		// apimachinery joins the causes into the message with string
		// concatenation, quadratic in their number: never hand it thousands.
		errs = append(errs, &field.Error{Type: field.ErrorTypeTooMany, Field: r.Violations[n].Err.Field, BadValue: int64(more),
			Detail: fmt.Sprintf("violations from here on not listed (a denial lists the first %d)", n)})
	}
	gk := schema.GroupKind{Kind: r.Kind}
	if w, ok := LookupWorkload(r.Kind); ok {
		gk.Group = w.Group
	}
	name := r.Name
	if name == "" {
		name = "(generated)"
	}
	return apierrors.NewInvalid(gk, name, errs)
}

// Bounds on each violation of a denial, whatever built it: a value quoted
// from the object is clipped (clip), and a message that quotes what a
// parser said of it is cut. With MaxListedViolations, they bound every
// denial's size by construction.
const (
	MaxDetailLength = 512
	maxFieldLength  = 320
)

// maxClippedLength is the longest value clip returns.
const maxClippedLength = MaxValueLength + len(" (18446744073709551615 bytes)")

func bounded(e *field.Error) *field.Error {
	c := *e
	if v, ok := c.BadValue.(string); ok && len(v) > maxClippedLength {
		// Not quoted through clip where it was found.
		c.BadValue = clip(v)
	}
	c.Detail = shortenTo(c.Detail, MaxDetailLength)
	c.Field = shortenTo(c.Field, maxFieldLength)
	return &c
}

// Reason is the single most relevant reason code: the first violation, else
// the skip reason, else the first change, for metrics labels.
func (r *Report) Reason() Reason {
	switch {
	case len(r.Violations) > 0:
		return r.Violations[0].Reason
	case r.Skip != "":
		return r.Skip
	case r.OptedOut:
		return SkipOptedOut
	case len(r.Changes) > 0 && r.Stage == StageMutate:
		// A validation report's changes are only simulated.
		return r.Changes[0].Reason
	case len(r.Warnings) > 0:
		return r.Warnings[0].Reason
	}
	return ReasonOK
}

func (r *Report) warn(reason Reason, path *field.Path, value any, format string, args ...any) {
	r.Warnings = append(r.Warnings, Finding{Reason: reason, Err: field.Invalid(path, value, fmt.Sprintf(format, args...))})
}

// full reports whether the report holds MaxRecordedViolations already.
func (r *Report) full() bool { return len(r.Violations) >= MaxRecordedViolations }

func (r *Report) deny(reason Reason, err *field.Error) {
	if len(r.Violations) >= MaxRecordedViolations {
		r.Unlisted++
		return
	}
	r.Violations = append(r.Violations, Finding{Reason: reason, Err: err})
}

// ObjectRef is "Kind namespace/name" for people.
func (r *Report) ObjectRef() string {
	name := r.Name
	if name == "" {
		name = "(generated name)"
	}
	if r.Namespace == "" {
		return r.Kind + " " + name
	}
	return r.Kind + " " + r.Namespace + "/" + name
}

// maxQuoted bounds the names joinQuoted lists.
const maxQuoted = 5

// joinQuoted renders names as `"a", "b"` for messages: at most maxQuoted
// of them, then how many more.
func joinQuoted(names []string) string {
	n := min(len(names), maxQuoted)
	q := make([]string, n)
	for i, name := range names[:n] {
		q[i] = strconv.Quote(name)
	}
	out := strings.Join(q, ", ")
	if more := len(names) - n; more > 0 {
		out += fmt.Sprintf(" and %d more", more)
	}
	return out
}
