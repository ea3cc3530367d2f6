package mutate

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/graceguard/graceguard/pkg/budget"
)

// AnnotationRoutingProfile names a routing profile (docs/routing-profiles.md)
// on a Pod or a Namespace: the routing delay and grace floor of the way
// traffic reaches the Pod, instead of numbers each team re-learns.
const AnnotationRoutingProfile = "graceguard.io/routing-profile"

// ProfileUse is the routing profile that applies to a Pod and where it was
// named.
type ProfileUse struct {
	budget.Profile
	// From is where it was named: FromPod, FromNamespace or FromCluster
	// (--default-routing-profile).
	From Source
	// Label is the label that selected it, key=value, when From is
	// FromPodLabel or FromNamespaceLabel.
	Label string
	// SetsRouting is false when an explicit graceguard.io/routing-delay
	// (on the Pod, or on the namespace for a namespace's profile) wins
	// over the profile's routing delay; the grace floor still applies.
	SetsRouting bool
}

// FromPodLabel and FromNamespaceLabel are where a label selected a routing
// profile: istio.io/dataplane-mode=ambient selects istio-ambient, and
// gateway.istio.io/managed=istio.io-mesh-controller (an Istio waypoint's
// Pod) istio-gateway.
const (
	FromPodLabel       Source = "pod label"
	FromNamespaceLabel Source = "namespace label"
)

// FromProfile is the Source of a routing term a routing profile supplied:
// "profile aws-nlb-ip".
func FromProfile(name string) Source { return Source("profile " + name) }

// ProfileName returns the profile a Source names, if it is FromProfile's.
func (s Source) ProfileName() (string, bool) { return strings.CutPrefix(string(s), "profile ") }

// profiles is the table the options name, built-in when unset.
func (o Options) profiles() []budget.Profile {
	if o.Profiles == nil {
		return budget.BuiltinProfiles()
	}
	return o.Profiles
}

// settingsFor reads everything graceguard needs about a target: the
// annotations (resolve), the routing profile, and the Pod's mesh. Every
// value that does not parse is a finding; nothing is ignored.
func settingsFor(t Target, ns Namespace, opts Options, p paths) (Settings, []Finding) {
	// A value longer than its key's bound is a finding and read by none of
	// them.
	podAnn, bad := withoutOversized(t.Meta.Annotations, PodAnnotation, p.pod, DenyInvalidAnnotation, nil)
	ns.Annotations, bad = withoutOversized(ns.Annotations, NamespaceAnnotation, p.ns, DenyInvalidNamespace, bad)
	s, rbad := resolve(podAnn, ns, opts, p)
	bad = append(bad, rbad...)
	var mbad []Finding
	s.mesh, mbad = readMesh(t, podAnn, ns, p)
	applyProfile(&s, podAnn, ns, opts)
	s.knative = knativeOf(t)
	// A Windows Pod says so in spec.os.name, or only by its node selector.
	s.windows = (t.Spec.OS != nil && t.Spec.OS.Name == corev1.Windows) || t.Spec.NodeSelector[corev1.LabelOSStable] == string(corev1.Windows)
	return s, append(bad, mbad...)
}

// applyProfile finds the routing profile (Pod annotation over namespace
// annotation over --default-routing-profile) and lets it supply the
// routing term unless an explicit graceguard.io/routing-delay at the same
// level or closer to the Pod wins.
func applyProfile(s *Settings, podAnn map[string]string, ns Namespace, opts Options) {
	var use *ProfileUse
	_, onPod := podAnn[AnnotationRoutingProfile]
	_, onNS := ns.Annotations[AnnotationRoutingProfile]
	switch {
	case s.podProfile != nil:
		use = &ProfileUse{Profile: *s.podProfile, From: FromPod, SetsRouting: s.Sources[budget.Routing] != FromPod}
	case s.nsProfile != nil && !onPod:
		use = &ProfileUse{Profile: *s.nsProfile, From: FromNamespace, SetsRouting: s.Sources[budget.Routing] == FromCluster}
	}
	table := s.profiles
	switch {
	case onPod || onNS:
	case opts.DefaultProfile != "":
		if pr, ok := budget.FindProfile(table, opts.DefaultProfile); ok {
			use = &ProfileUse{Profile: pr, From: FromCluster, SetsRouting: s.Sources[budget.Routing] == FromCluster}
		}
	case s.mesh.waypoint && s.Sources[budget.Routing] == FromCluster:
		// An Istio waypoint: ztunnels send to it until istiod's debounced
		// push withdraws it, as for the Pods behind a gateway.
		if pr, ok := budget.FindProfile(table, budget.ProfileIstioGateway); ok {
			use = &ProfileUse{Profile: pr, From: FromPodLabel, Label: LabelIstioManagedGateway + "=" + istioWaypointController, SetsRouting: true}
		}
	case s.mesh.ambient && s.Sources[budget.Routing] == FromCluster:
		// Istio's ambient data plane: ztunnel withdraws the Pod, unless
		// the Pod or namespace says how traffic reaches it.
		if pr, ok := budget.FindProfile(table, budget.ProfileIstioAmbient); ok {
			use = &ProfileUse{Profile: pr, From: s.mesh.ambientFrom, Label: LabelIstioDataplaneMode + "=ambient", SetsRouting: true}
		}
	}
	if use != nil {
		s.Profile = use
		if use.SetsRouting {
			s.Budget.Routing = use.Routing
			s.Sources[budget.Routing] = FromProfile(use.Name)
		}
	}
}

// floor is the least grace the Pod's routing profile asks for, in seconds.
func (s Settings) floor() int64 {
	if s.Profile == nil {
		return 0
	}
	return budget.CeilSeconds(s.Profile.GraceFloor)
}

// fitOf checks a budget against the grace and the cap, with the routing
// profile's grace floor as the least need.
func fitOf(b budget.Budget, s Settings, grace int64) budget.Fit {
	f := budget.Check(b, grace, s.maxGrace)
	f.Need = max(f.Need, s.floor())
	return f
}

// needText says why a Pod needs f.Need seconds, for messages: the budget's
// arithmetic, or the profile's floor when that is more. unit follows the
// number ("s" or "").
func needText(f budget.Fit, s Settings, unit string) string {
	if s.floor() > f.Budget.Grace() {
		return fmt.Sprintf("%d%s (grace floor of routing profile %s; the budget alone needs %d: %s)",
			f.Need, unit, s.Profile.Name, f.Budget.Grace(), f.Budget.Arithmetic())
	}
	return fmt.Sprintf("%d%s (%s)", f.Need, unit, f.Budget.Arithmetic())
}
