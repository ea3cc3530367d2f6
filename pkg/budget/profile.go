package budget

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Profile is what graceguard knows about one way traffic reaches a Pod:
// how long routing withdrawal takes after the Pod is deleted (the routing
// term) and, when its vendor asks for one, the smallest grace period to
// give (GraceFloor). A Pod or Namespace names one with
// graceguard.io/routing-profile instead of re-learning the numbers.
type Profile struct {
	Name string
	// Routing is the routing delay the profile supplies (the preStop sleep).
	Routing time.Duration
	// GraceFloor, when not zero, is the least terminationGracePeriodSeconds
	// a Pod using the profile gets, whatever its budget sums to.
	GraceFloor time.Duration
	// Basis says what kind of number Routing is: BasisMeasurement,
	// BasisRecommendation, BasisDerived or BasisOperator.
	Basis string
	// Source says where the numbers come from, short enough for a line of
	// `kubectl graceguard explain` (docs/routing-profiles.md has the rest).
	Source string
}

// What a profile's numbers rest on.
const (
	// BasisMeasurement: someone measured it and published how.
	BasisMeasurement = "measurement"
	// BasisRecommendation: a vendor's or project's advice, not a measurement.
	BasisRecommendation = "recommendation"
	// BasisDerived: graceguard's arithmetic on documented defaults.
	BasisDerived = "derived"
	// BasisOperator: set by the cluster's operators (--routing-profile).
	BasisOperator = "operator"
)

// Names of the built-in profiles.
const (
	ProfileKubeProxy    = "kube-proxy"
	ProfileIngressNginx = "ingress-nginx"
	ProfileAWSALBIP     = "aws-alb-ip"
	ProfileAWSNLBIP     = "aws-nlb-ip"
	ProfileGKENEG       = "gke-neg"
	ProfileAzureAGIC    = "azure-agic"
	ProfileIstioAmbient = "istio-ambient"
	// Gateway API data planes: the profiles are for the backend Pods a
	// gateway routes to, not for the gateway's own proxies (their
	// controllers write those Pods' hooks and grace).
	ProfileEnvoyGateway = "envoy-gateway"
	ProfileIstioGateway = "istio-gateway"
	ProfileContour      = "contour"
	// ProfileTraefik is Traefik's Kubernetes Ingress provider, measured on
	// the e2e node (scenario 13).
	ProfileTraefik = "traefik"
)

// BuiltinProfiles returns the profiles graceguard ships, in a fixed order.
// Every number has its source in docs/routing-profiles.md; a test holds
// that page to this table.
func BuiltinProfiles() []Profile {
	return []Profile{
		{Name: ProfileKubeProxy, Routing: 5 * time.Second, Basis: BasisDerived,
			Source: "graceguard default: slice update + kube-proxy sync (kubernetes#92836); e2e scenario 17: <=0.97s"},
		{Name: ProfileIngressNginx, Routing: 10 * time.Second, Basis: BasisDerived,
			Source: "ingress-nginx --sync-rate-limit 0.3/s (<=3.3s) + 1s Lua backend sync, doubled"},
		{Name: ProfileAWSALBIP, Routing: time.Minute, Basis: BasisMeasurement,
			Source: "user reports: 40s rare 502s, 70s none (aws-load-balancer-controller#2106)"},
		{Name: ProfileAWSNLBIP, Routing: 2 * time.Minute, Basis: BasisMeasurement,
			Source: "NLB IP targets deregister in >=2 min (aws-load-balancer-controller#2366, #3270)"},
		{Name: ProfileGKENEG, Routing: time.Minute, GraceFloor: time.Minute, Basis: BasisRecommendation,
			Source: "GKE docs: grace >= 60s for NEG programming latency (ingress-gce#1072)"},
		{Name: ProfileAzureAGIC, Routing: 90 * time.Second, GraceFloor: 101 * time.Second, Basis: BasisRecommendation,
			Source: "AGIC recipe: preStop sleep 90, grace 101 (application-gateway-kubernetes-ingress#726)"},
		{Name: ProfileIstioAmbient, Routing: 15 * time.Second, Basis: BasisRecommendation,
			Source: "a user's workaround, untested: preStop sleep 15s for ztunnel (istio#58514, ztunnel#1191)"},
		{Name: ProfileEnvoyGateway, Routing: 10 * time.Second, Basis: BasisMeasurement,
			Source: "a user measured endpoint pushes <=4s on EG v1.6 (gateway#7366); EG's own minDrainDuration 10s"},
		{Name: ProfileIstioGateway, Routing: 15 * time.Second, Basis: BasisDerived,
			Source: "istiod debounces EDS pushes up to PILOT_DEBOUNCE_MAX 10s; +5s for the slice update and push"},
		{Name: ProfileContour, Routing: 5 * time.Second, Basis: BasisDerived,
			Source: "Contour sends EndpointSlice changes to Envoy at once (no DAG holdoff): kube-proxy's 5s"},
		{Name: ProfileTraefik, Routing: 4 * time.Second, Basis: BasisMeasurement,
			Source: "graceguard measured: delete to last request <=2.08s in 24 deletions +1s (e2e scenarios 13, 17)"},
	}
}

// profileName is a DNS-1123 label: profile names appear in annotations,
// flags and metrics-free messages, and must be easy to type.
var profileName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// ProfileSpecForm describes, for error messages, what ParseProfile accepts.
const ProfileSpecForm = "NAME=ROUTING[,grace-floor=DURATION], e.g. corp-lb=45s or aws-nlb-ip=150s,grace-floor=3m"

// ParseProfile reads an operator's profile, as given to --routing-profile:
// "NAME=ROUTING" or "NAME=ROUTING,grace-floor=DURATION". Durations are what
// ParseDuration accepts. Its Source is left to the caller, who knows where
// the text came from (pkg/optionflags: the flag).
func ParseProfile(spec string) (Profile, error) {
	name, rest, ok := strings.Cut(strings.TrimSpace(spec), "=")
	if !ok || rest == "" {
		return Profile{}, fmt.Errorf("%q: want %s", spec, ProfileSpecForm)
	}
	p := Profile{Name: name, Basis: BasisOperator}
	parts := strings.Split(rest, ",")
	d, err := ParseDuration(parts[0])
	if err != nil {
		return Profile{}, durationError(spec, "routing delay", parts[0], err)
	}
	p.Routing = d
	for _, kv := range parts[1:] {
		k, v, _ := strings.Cut(kv, "=")
		if strings.TrimSpace(k) != "grace-floor" {
			return Profile{}, fmt.Errorf("%q: unknown setting %q; want %s", spec, k, ProfileSpecForm)
		}
		if p.GraceFloor, err = ParseDuration(v); err != nil {
			return Profile{}, durationError(spec, "grace-floor", v, err)
		}
	}
	if err := p.Validate(); err != nil {
		return Profile{}, fmt.Errorf("%q: %w", spec, err)
	}
	return p, nil
}

// durationError names the spec, the setting and the value, and says what
// is accepted.
func durationError(spec, what, value string, err error) error {
	var pe *ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("%q: %s %q is %s", spec, what, value, pe.Problem())
	}
	return fmt.Errorf("%q: %s: %w", spec, what, err)
}

// Validate checks the name and both durations.
func (p Profile) Validate() error {
	var errs []error
	if len(p.Name) > 63 || !profileName.MatchString(p.Name) {
		errs = append(errs, fmt.Errorf("name %q is not a DNS-1123 label (lower-case letters, digits and '-', up to 63)", p.Name))
	}
	if p.Routing < 0 || p.Routing > MaxTerm {
		errs = append(errs, fmt.Errorf("routing delay %s is outside 0..1h", Format(p.Routing)))
	}
	if p.GraceFloor < 0 || p.GraceFloor > MaxTerm {
		errs = append(errs, fmt.Errorf("grace floor %s is outside 0..1h", Format(p.GraceFloor)))
	}
	return errors.Join(errs...)
}

// String renders the profile the way ParseProfile reads it.
func (p Profile) String() string {
	s := p.Name + "=" + Format(p.Routing)
	if p.GraceFloor > 0 {
		s += ",grace-floor=" + Format(p.GraceFloor)
	}
	return s
}

// MergeProfiles returns the built-in profiles with the operator's added or,
// for a built-in name, replaced. Naming a profile twice among the
// operator's is an error: one of the two would be silently lost.
func MergeProfiles(builtin, operator []Profile) ([]Profile, error) {
	out := slices.Clone(builtin)
	seen := map[string]bool{}
	for _, p := range operator {
		if seen[p.Name] {
			return nil, fmt.Errorf("routing profile %q is given twice", p.Name)
		}
		seen[p.Name] = true
		if i := slices.IndexFunc(out, func(b Profile) bool { return b.Name == p.Name }); i >= 0 {
			out[i] = p
		} else {
			out = append(out, p)
		}
	}
	return out, nil
}

// FindProfile returns the profile named name.
func FindProfile(ps []Profile, name string) (Profile, bool) {
	i := slices.IndexFunc(ps, func(p Profile) bool { return p.Name == name })
	if i < 0 {
		return Profile{}, false
	}
	return ps[i], true
}

// ProfileNames lists the names, in order.
func ProfileNames(ps []Profile) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}
