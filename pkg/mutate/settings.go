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
		ExcludedNamespaces: []string{"kube-system"},
		Profiles:           budget.BuiltinProfiles(),
	}
}

// termKeys maps budget terms to their annotation keys.
var termKeys = [...]struct {
	term budget.Term
	key  string
}{
	{budget.Routing, AnnotationRoutingDelay},
	{budget.Work, AnnotationMaxWork},
	{budget.Cleanup, AnnotationCleanup},
	{budget.Margin, AnnotationSafetyMargin},
}

// KeyFor returns the annotation key that sets a budget term.
func KeyFor(t budget.Term) string {
	for _, tk := range termKeys {
		if tk.term == t {
			return tk.key
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
	Containers    []string
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
	// windows is set for a Pod whose spec.os.name is windows, or whose node
	// selector asks for kubernetes.io/os: windows: its
	// images have no sleep command, so an exec handler is written as the
	// sleep action, which the kubelet runs itself.
	windows  bool
	maxGrace time.Duration
	ceilings []budget.Ceiling
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

// resolve reads the settings. Every value that does not parse is an error
// naming the key, the value and the accepted forms; nothing is ignored.
func resolve(podAnn map[string]string, ns Namespace, opts Options, p paths) (Settings, []Finding) {
	var bad []Finding
	s := Settings{
		Mode:     opts.Mode,
		Budget:   opts.Defaults,
		PreStop:  opts.PreStop,
		Sources:  map[budget.Term]Source{},
		maxGrace: opts.MaxGrace,
		ceilings: opts.Ceilings,
	}
	if s.Mode == "" {
		s.Mode = ModeEnforce
	}
	if v, ok := ns.Labels[LabelMode]; ok {
		m, err := ParseMode(v)
		if err != nil {
			bad = append(bad, Finding{DenyInvalidNamespace, field.NotSupported(p.nsL.Key(LabelMode), clip(v), []string{string(ModeEnforce), string(ModeWarn)})})
		} else {
			s.Mode = m
		}
	}
	if v, ok := podAnn[AnnotationInject]; ok {
		switch v {
		case "false":
			s.OptOut = true
		case "true":
		default:
			bad = append(bad, Finding{DenyInvalidAnnotation, field.NotSupported(p.pod.Key(AnnotationInject), clip(v), []string{"true", "false"})})
		}
	}

	// Budget terms: pod over namespace over cluster.
	for _, tk := range termKeys {
		s.Sources[tk.term] = FromCluster
		for _, layer := range []struct {
			ann  map[string]string
			path *field.Path
			src  Source
			dr   Reason
		}{{ns.Annotations, p.ns, FromNamespace, DenyInvalidNamespace}, {podAnn, p.pod, FromPod, DenyInvalidAnnotation}} {
			v, ok := layer.ann[tk.key]
			if !ok {
				continue
			}
			if tk.term == budget.Work && v == MaxWorkAuto {
				s.AutoWork = true
				s.Sources[tk.term] = layer.src
				continue
			}
			d, f := parseDuration(v, layer.path.Key(tk.key), layer.dr)
			if f != nil {
				bad = append(bad, *f)
				continue
			}
			s.Budget = s.Budget.Set(tk.term, d)
			s.Sources[tk.term] = layer.src
			if tk.term == budget.Work {
				// A Pod's duration overrides its namespace's auto.
				s.AutoWork = false
			}
		}
	}

	str := func(key string) (string, *field.Path, Reason, bool) {
		if v, ok := podAnn[key]; ok {
			return v, p.pod.Key(key), DenyInvalidAnnotation, true
		}
		if v, ok := ns.Annotations[key]; ok {
			return v, p.ns.Key(key), DenyInvalidNamespace, true
		}
		return "", nil, "", false
	}
	s.WorkFloor, s.WorkCeiling = opts.Defaults.Work, max(DefaultMaxWorkCeiling, opts.Defaults.Work)
	// Where each bound was set (nil: the default), for the finding when
	// the floor passes the ceiling.
	var bound [2]struct {
		path *field.Path
		r    Reason
	}
	for i, b := range []struct {
		key string
		dst *time.Duration
	}{{AnnotationMaxWorkFloor, &s.WorkFloor}, {AnnotationMaxWorkCeiling, &s.WorkCeiling}} {
		v, path, r, ok := str(b.key)
		if !ok {
			continue
		}
		d, f := parseDuration(v, path, r)
		if f != nil {
			bad = append(bad, *f)
			continue
		}
		*b.dst = d
		bound[i].path, bound[i].r = path, r
	}
	if s.AutoWork && s.WorkFloor > s.WorkCeiling {
		bad = append(bad, floorOverCeiling(s.WorkFloor, s.WorkCeiling, bound[0].path, bound[0].r, bound[1].path, bound[1].r))
	}
	if v, path, r, ok := str(AnnotationPreStop); ok {
		h, err := ParsePreStopHandler(v)
		if err != nil {
			bad = append(bad, Finding{r, field.NotSupported(path, clip(v), []string{string(PreStopSleep), string(PreStopExec), string(PreStopNone)})})
		} else {
			s.PreStop = h
		}
	}
	for _, probe := range []struct {
		key string
		dst *string
	}{{AnnotationReadinessPath, &s.ReadinessPath}, {AnnotationLivenessPath, &s.LivenessPath}} {
		v, path, r, ok := str(probe.key)
		if !ok {
			continue
		}
		if !validProbePath(v) {
			bad = append(bad, Finding{r, field.Invalid(path, clip(v), fmt.Sprintf(
				"must be an HTTP path starting with /, of printable ASCII without spaces, at most %d characters, e.g. /readyz", MaxProbePathLength))})
			continue
		}
		*probe.dst = v
	}
	if v, path, r, ok := str(AnnotationProbePort); ok {
		port, err := parsePort(v)
		if err != nil {
			bad = append(bad, Finding{r, field.Invalid(path, clip(v), err.Error())})
		} else {
			s.ProbePort = &port
		}
	}
	if v, ok := podAnn[AnnotationContainers]; ok {
		names, err := parseNames(v)
		if err != nil {
			bad = append(bad, Finding{DenyInvalidAnnotation, field.Invalid(p.pod.Key(AnnotationContainers), clip(v), err.Error())})
		} else {
			s.Containers = names
		}
	}
	return s, bad
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
