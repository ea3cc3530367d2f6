package mutate

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/graceguard/graceguard/pkg/budget"
)

// Mode is how graceguard acts in a namespace.
type Mode string

const (
	// ModeEnforce mutates Pods and denies violations.
	ModeEnforce Mode = "enforce"
	// ModeWarn changes nothing and denies nothing; it returns warnings
	// saying what enforce would have changed or denied.
	ModeWarn Mode = "warn"
)

// Modes lists the accepted modes.
var Modes = []Mode{ModeEnforce, ModeWarn}

// ParseMode accepts "enforce" or "warn".
func ParseMode(s string) (Mode, error) {
	m := Mode(s)
	if !slices.Contains(Modes, m) {
		return "", fmt.Errorf("unsupported mode %q: want %q or %q", s, ModeEnforce, ModeWarn)
	}
	return m, nil
}

// PreStopHandler is how graceguard writes the preStop delay.
type PreStopHandler string

const (
	// PreStopSleep uses the native sleep action (GA in Kubernetes 1.34).
	PreStopSleep PreStopHandler = "sleep"
	// PreStopExec runs ["sleep", "N"]; the image needs a sleep binary.
	PreStopExec PreStopHandler = "exec"
	// PreStopNone adds no hook; the budget still applies and the app must
	// keep serving for the routing delay after SIGTERM itself.
	PreStopNone PreStopHandler = "none"
)

// PreStopHandlers lists the accepted handlers.
var PreStopHandlers = []PreStopHandler{PreStopSleep, PreStopExec, PreStopNone}

// ParsePreStopHandler accepts "sleep", "exec" or "none".
func ParsePreStopHandler(s string) (PreStopHandler, error) {
	h := PreStopHandler(s)
	if !slices.Contains(PreStopHandlers, h) {
		return "", fmt.Errorf("unsupported preStop handler %q: want %q, %q or %q", s, PreStopSleep, PreStopExec, PreStopNone)
	}
	return h, nil
}

// Options are the cluster-wide defaults (the webhook's and the plugin's flags).
type Options struct {
	// Defaults are the budget terms for Pods and Namespaces that set none.
	Defaults budget.Budget
	// PreStop is the default hook handler.
	PreStop PreStopHandler
	// MaxGrace caps the grace period a budget may ask for.
	MaxGrace time.Duration
	// Mode applies to opted-in namespaces without a mode label.
	Mode Mode
	// ExcludedNamespaces are never touched, whatever their labels say
	// (kube-system, graceguard's own namespace).
	ExcludedNamespaces []string
	// Profiles are the routing profiles Pods and Namespaces may name with
	// graceguard.io/routing-profile: the built-in ones with the operator's
	// (budget.MergeProfiles). Nil means the built-in ones.
	Profiles []budget.Profile
	// DefaultProfile, when set, is the routing profile of Pods whose
	// annotations and namespace name none; its routing delay replaces
	// Defaults.Routing.
	DefaultProfile string
	// Ceilings are the platform limits budgets are checked against besides
	// MaxGrace (Karpenter's, graceful node shutdown's).
	Ceilings []budget.Ceiling
	// Untreated is what Validate does with a Pod in enforce mode that
	// graceguard's mutating webhook did not treat (Treated is false): ""
	// or UntreatedDeny, UntreatedAdmit.
	Untreated UntreatedPolicy
}

// UntreatedPolicy is what the Pod validating webhook does with a Pod
// graceguard's mutating webhook did not treat: its call failed or was
// shed, and failed open.
type UntreatedPolicy string

const (
	// UntreatedDeny refuses it as not-mutated, with whatever else its
	// budget breaks: its controller retries, and the retry is mutated.
	// The webhooks fail closed.
	UntreatedDeny UntreatedPolicy = "deny"
	// UntreatedAdmit judges it only as an opted-out Pod is (its hooks
	// against its grace, its stop signals, its annotations) and admits it
	// with the warning admitted-untreated: graceguard degrades, and never
	// refuses a Pod for its own unavailability. The webhooks fail open.
	UntreatedAdmit UntreatedPolicy = "admit"
)

// UntreatedPolicies lists the accepted policies.
var UntreatedPolicies = []UntreatedPolicy{UntreatedDeny, UntreatedAdmit}

// Treated reports whether a Pod's annotations carry graceguard's record,
// which its mutating webhook writes on every Pod it admits in enforce
// mode.
func Treated(annotations map[string]string) bool {
	return annotations[AnnotationBudget] != ""
}

// DefaultOptions are the documented defaults: the budget sums to 30s, the
// Kubernetes default grace period, and the cap is the cluster autoscaler's.
func DefaultOptions() Options {
	return Options{
		Defaults: budget.Budget{
			Routing: 5 * time.Second,
			Work:    20 * time.Second,
			Cleanup: 2 * time.Second,
			Margin:  3 * time.Second,
		},
		PreStop:            PreStopSleep,
		MaxGrace:           10 * time.Minute,
		Mode:               ModeEnforce,
		Untreated:          UntreatedDeny,
		ExcludedNamespaces: []string{"kube-system"},
		Profiles:           budget.BuiltinProfiles(),
	}
}

// KeyFor returns the annotation key that sets a budget term.
func KeyFor(t budget.Term) string {
	for _, k := range Keys {
		if k.Term == t && t != "" {
			return k.Name
		}
	}
	return ""
}

// Namespace is what graceguard reads from a Pod's namespace.
type Namespace struct {
	Name        string
	Labels      map[string]string
	Annotations map[string]string
}

// Source says where a setting came from.
type Source string

const (
	FromCluster   Source = "cluster default"
	FromNamespace Source = "namespace"
	FromPod       Source = "pod"
	// FromHook marks a routing term set by a preStop hook longer than the
	// routing delay: the kubelet sends SIGTERM only after the hook.
	FromHook Source = "preStop hook"
	// FromAuto marks a work term set by graceguard.io/max-work: auto.
	FromAuto Source = "max-work: auto"
	// FromProxyOnly marks a work or cleanup term of 0 on a Pod that runs
	// only mesh proxies: the namespace's and cluster's describe apps.
	FromProxyOnly Source = "proxy-only Pod"
)

// Settings are the resolved per-Pod settings: Pod annotations over
// namespace annotations over cluster options.
type Settings struct {
	Mode    Mode
	OptOut  bool
	Budget  budget.Budget
	Sources map[budget.Term]Source
	PreStop PreStopHandler
	// Containers names the containers to treat; nil means every regular
	// container.
	Containers []string
	// Sidecars names the containers that must outlive the app
	// (graceguard.io/sidecars, sidecar.go); nil for none.
	Sidecars      []string
	ReadinessPath string
	LivenessPath  string
	// ProbePort is nil when the first declared port is to be used.
	ProbePort *intstr.IntOrString
	// AutoWork is set by graceguard.io/max-work: auto; the work term is
	// then taken from the workload's observed shutdowns (auto.go), between
	// WorkFloor and WorkCeiling.
	AutoWork               bool
	WorkFloor, WorkCeiling time.Duration
	// Profile is the routing profile that applies, if any.
	Profile *ProfileUse
	mesh    meshSettings
	// knative is the Pod's Knative Revision, when queue-proxy is Knative's
	// (knative.go); nil otherwise.
	knative *knativeRevision
	// windows is set for a Pod whose spec.os.name is windows, or whose node
	// selector asks for kubernetes.io/os: windows: its
	// images have no sleep command, so an exec handler is written as the
	// sleep action, which the kubelet runs itself.
	windows bool
	// preStopAt is where graceguard.io/prestop set PreStop; nil when it is
	// the cluster's --prestop-handler.
	preStopAt *field.Path
	maxGrace  time.Duration
	ceilings  []budget.Ceiling
	profiles  []budget.Profile
	// floorAt and ceilingAt are where max-work: auto's floor and ceiling
	// were set (a zero at: their default).
	floorAt, ceilingAt at
	// nsProfile and podProfile are the routing profiles the namespace and
	// the Pod name, when found.
	nsProfile, podProfile *budget.Profile
}

// paths locate where settings are read from, for error messages.
type paths struct {
	pod *field.Path // the Pod's (or template's) metadata.annotations
	ns  *field.Path // the namespace's metadata.annotations
	nsL *field.Path // the namespace's metadata.labels
}

func newPaths(metaPath *field.Path, ns string) paths {
	nsRoot := field.NewPath("Namespace").Key(ns).Child("metadata")
	return paths{
		pod: metaPath.Child("annotations"),
		ns:  nsRoot.Child("annotations"),
		nsL: nsRoot.Child("labels"),
	}
}

// resolve reads the settings: for each key of the registry (Keys) that
// has a setter, the namespace's value, then the Pod's, which wins. Both
// are checked: a namespace's typo is reported even where a Pod sets its
// own. Every value that does not parse is a finding naming the key, the
// value and the accepted forms; nothing is ignored.
func resolve(podAnn map[string]string, ns Namespace, opts Options, p paths) (Settings, []Finding) {
	var bad []Finding
	s := Settings{
		Mode:     opts.Mode,
		Budget:   opts.Defaults,
		PreStop:  opts.PreStop,
		Sources:  map[budget.Term]Source{},
		maxGrace: opts.MaxGrace,
		ceilings: opts.Ceilings,
		profiles: opts.profiles(),
		// max-work: auto's bounds by default.
		WorkFloor:   opts.Defaults.Work,
		WorkCeiling: max(DefaultMaxWorkCeiling, opts.Defaults.Work),
	}
	if s.Mode == "" {
		s.Mode = ModeEnforce
	}
	for _, t := range budget.Terms {
		s.Sources[t] = FromCluster
	}
	layers := [...]struct {
		where Where
		m     map[string]string
		at    at
	}{
		{NamespaceLabel, ns.Labels, at{p.nsL, DenyInvalidNamespace, FromNamespace}},
		{NamespaceAnnotation, ns.Annotations, at{p.ns, DenyInvalidNamespace, FromNamespace}},
		{PodAnnotation, podAnn, at{p.pod, DenyInvalidAnnotation, FromPod}},
	}
	for _, k := range Keys {
		if k.set == nil {
			continue
		}
		for _, l := range layers {
			if k.Where&l.where == 0 {
				continue
			}
			if v, ok := l.m[k.Name]; ok {
				if f := k.set(&s, v, l.at.key(k.Name)); f != nil {
					bad = append(bad, *f)
				}
			}
		}
	}
	if s.AutoWork && s.WorkFloor > s.WorkCeiling {
		bad = append(bad, floorOverCeiling(s.WorkFloor, s.WorkCeiling, s.floorAt.path, s.floorAt.reason, s.ceilingAt.path, s.ceilingAt.reason))
	}
	return s, bad
}

// at is where a value was read: its field path (a map's, until key), the
// reason a bad value denies with, and the source of the setting it sets.
type at struct {
	path   *field.Path
	reason Reason
	src    Source
}

func (a at) key(name string) at { a.path = a.path.Key(name); return a }

// A setter reads one key's value into the settings (a row of Keys), or
// returns the finding that says what is wrong with it and what is accepted.
type setter func(s *Settings, v string, a at) *Finding

func setMode(s *Settings, v string, a at) *Finding {
	m, err := ParseMode(v)
	if err != nil {
		return &Finding{a.reason, field.NotSupported(a.path, clip(v), []string{string(ModeEnforce), string(ModeWarn)})}
	}
	s.Mode = m
	return nil
}

func setInject(s *Settings, v string, a at) *Finding {
	switch v {
	case "false":
		s.OptOut = true
	case "true":
	default:
		return &Finding{a.reason, field.NotSupported(a.path, clip(v), []string{"true", "false"})}
	}
	return nil
}

// setTerm sets a budget term to a duration.
func setTerm(t budget.Term) setter {
	return func(s *Settings, v string, a at) *Finding {
		d, f := parseDuration(v, a.path, a.reason)
		if f != nil {
			return f
		}
		s.Budget = s.Budget.Set(t, d)
		s.Sources[t] = a.src
		return nil
	}
}

// setMaxWork sets the work term to a duration, or to auto (auto.go).
func setMaxWork(s *Settings, v string, a at) *Finding {
	if v == MaxWorkAuto {
		s.AutoWork = true
		s.Sources[budget.Work] = a.src
		return nil
	}
	f := setTerm(budget.Work)(s, v, a)
	if f == nil {
		// A Pod's duration overrides its namespace's auto.
		s.AutoWork = false
	}
	return f
}

// setWorkBound sets a bound of max-work: auto (bound returns it and where
// it was set), and remembers where, for the finding when the floor passes
// the ceiling.
func setWorkBound(bound func(*Settings) (*time.Duration, *at)) setter {
	return func(s *Settings, v string, a at) *Finding {
		d, f := parseDuration(v, a.path, a.reason)
		if f != nil {
			return f
		}
		dst, where := bound(s)
		*dst, *where = d, a
		return nil
	}
}

func setPreStopHandler(s *Settings, v string, a at) *Finding {
	h, err := ParsePreStopHandler(v)
	if err != nil {
		return &Finding{a.reason, field.NotSupported(a.path, clip(v), []string{string(PreStopSleep), string(PreStopExec), string(PreStopNone)})}
	}
	s.PreStop, s.preStopAt = h, a.path
	return nil
}

// setProbePath sets the probe path path returns.
func setProbePath(path func(*Settings) *string) setter {
	return func(s *Settings, v string, a at) *Finding {
		if !validProbePath(v) {
			return &Finding{a.reason, field.Invalid(a.path, clip(v), fmt.Sprintf(
				"must be an HTTP path starting with /, of printable ASCII without spaces, at most %d characters, e.g. /readyz", MaxProbePathLength))}
		}
		*path(s) = v
		return nil
	}
}

func setProbePort(s *Settings, v string, a at) *Finding {
	port, err := parsePort(v)
	if err != nil {
		return &Finding{a.reason, field.Invalid(a.path, clip(v), err.Error())}
	}
	s.ProbePort = &port
	return nil
}

func setContainers(s *Settings, v string, a at) *Finding {
	names, err := parseNames(v)
	if err != nil {
		return &Finding{a.reason, field.Invalid(a.path, clip(v), err.Error())}
	}
	s.Containers = names
	return nil
}

// setProfile looks the named routing profile up; applyProfile decides,
// once the mesh is known, which profile applies.
func setProfile(s *Settings, v string, a at) *Finding {
	pr, ok := budget.FindProfile(s.profiles, v)
	if !ok {
		return &Finding{a.reason, field.NotSupported(a.path, clip(v), budget.ProfileNames(s.profiles))}
	}
	if a.src == FromPod {
		s.podProfile = &pr
	} else {
		s.nsProfile = &pr
	}
	return nil
}

// floorOverCeiling is the finding for a floor of max-work: auto above its
// ceiling, at the bound set closest to the Pod (the Pod's ceiling, the Pod's
// floor, the namespace's ceiling, the namespace's floor), with that bound's
// reason: a namespace's setting is the namespace's finding, never the
// Pod's. A nil path is a bound left at its default; both never are (the
// default floor is at most the default ceiling).
func floorOverCeiling(floor, ceiling time.Duration, floorPath *field.Path, floorR Reason, ceilPath *field.Path, ceilR Reason) Finding {
	atCeiling := ceilPath != nil && (ceilR == DenyInvalidAnnotation || floorPath == nil || floorR != DenyInvalidAnnotation)
	if atCeiling {
		return Finding{ceilR, field.Invalid(ceilPath, budget.Format(ceiling),
			fmt.Sprintf("the ceiling of graceguard.io/max-work: auto must be at least its floor (%s)", budget.Format(floor)))}
	}
	where := ""
	if ceilPath == nil {
		where = ", the default"
	}
	return Finding{floorR, field.Invalid(floorPath, budget.Format(floor),
		fmt.Sprintf("the floor of graceguard.io/max-work: auto must be at most its ceiling (%s%s)", budget.Format(ceiling), where))}
}

// parseDuration reads a duration annotation at path; a value that does not
// parse is a finding saying what is wrong and what is accepted.
func parseDuration(v string, path *field.Path, r Reason) (time.Duration, *Finding) {
	d, err := budget.ParseDuration(v)
	if err == nil {
		return d, nil
	}
	detail := "want " + budget.AcceptedForms
	if pe, ok := err.(*budget.ParseError); ok {
		detail = pe.Problem()
	}
	return 0, &Finding{r, field.Invalid(path, clip(v), detail)}
}

// MaxAnnotationValueLength bounds the value of every annotation graceguard
// reads. The longest sensible one, a list of container names, needs a few
// hundred bytes; the API server refuses a Pod whose annotations together
// pass 256 KiB only after the webhooks ran, so without this bound a
// megabyte of annotation would reach the parsers.
const MaxAnnotationValueLength = 4096

// withoutOversized reports each annotation graceguard reads in where
// (Keys: its own and the meshes') that is longer than its key's
// MaxLength, and returns ann without them (a copy, only when there are
// any), so nothing is parsed from them. A finding always stops mutation
// and denies, so leaving them out never admits them.
func withoutOversized(ann map[string]string, where Where, path *field.Path, r Reason, bad []Finding) (map[string]string, []Finding) {
	var out map[string]string
	for _, k := range Keys {
		if k.Where&where == 0 {
			continue
		}
		v, ok := ann[k.Name]
		if !ok {
			continue
		}
		if n, _ := ValueLength(v); n <= k.MaxLength {
			continue
		}
		bad = append(bad, Finding{r, field.Invalid(path.Key(k.Name), clip(v),
			fmt.Sprintf("longer than %d bytes, the most graceguard reads from this annotation", k.MaxLength))})
		if out == nil {
			out = maps.Clone(ann)
		}
		delete(out, k.Name)
	}
	if out == nil {
		return ann, bad
	}
	return out, bad
}

// MaxProbePathLength bounds the probe paths graceguard writes into Pods.
const MaxProbePathLength = 256

func validProbePath(v string) bool {
	if !strings.HasPrefix(v, "/") || len(v) > MaxProbePathLength {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] <= ' ' || v[i] > '~' {
			return false
		}
	}
	return true
}

func parsePort(v string) (intstr.IntOrString, error) {
	const accepted = "must be a port number 1-65535 or a declared port name (IANA_SVC_NAME, e.g. http)"
	if n, err := strconv.Atoi(v); err == nil {
		if n < 1 || n > 65535 {
			return intstr.IntOrString{}, fmt.Errorf("%s", accepted)
		}
		return intstr.FromInt32(int32(n)), nil
	}
	if errs := validation.IsValidPortName(v); len(errs) > 0 {
		return intstr.IntOrString{}, fmt.Errorf("%s", accepted)
	}
	return intstr.FromString(v), nil
}

// parseNames reads a comma-separated list of container names, in order,
// without duplicates. Linear in the length of v, whatever it holds.
func parseNames(v string) ([]string, error) {
	var names []string
	seen := map[string]bool{}
	for n := range strings.SplitSeq(v, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			return nil, fmt.Errorf("container name %q is not valid: want a comma-separated list of container names, e.g. app,proxy", clip(n))
		}
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("names no container: want a comma-separated list of container names, e.g. app,proxy")
	}
	return names, nil
}
