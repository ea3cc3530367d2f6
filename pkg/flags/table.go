package flags

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/pkg/budget"
)

// The flag table. A flag is named here and nowhere else; one whose values
// are a range is named by that range (Port.Name), so its bounds are data
// the owner's Validate reads rather than numbers it repeats.

// The cluster defaults, bound by pkg/optionflags and validated by
// mutate.Options.
const (
	MaxGracePeriod                      = "max-grace-period"
	PreStopHandler                      = "prestop-handler"
	DefaultMode                         = "default-mode"
	ExcludedNamespaces                  = "excluded-namespaces"
	RoutingProfile                      = "routing-profile"
	DefaultRoutingProfile               = "default-routing-profile"
	KarpenterTerminationGracePeriod     = "karpenter-termination-grace-period"
	KarpenterCeilingAction              = "karpenter-ceiling-action"
	NodeShutdownGracePeriod             = "node-shutdown-grace-period"
	NodeShutdownGracePeriodCriticalPods = "node-shutdown-grace-period-critical-pods"
	NodeShutdownCeilingAction           = "node-shutdown-ceiling-action"
	UntreatedPods                       = "untreated-pods"
)

// termDefaults names the flag of each budget term's cluster default: the
// annotation's name after "graceguard.io/", so a person who knows one
// knows the other (TestTermDefaultFlagsAreTheAnnotationsNames in
// pkg/mutate holds them to the annotations).
var termDefaults = map[budget.Term]string{
	budget.Routing: "default-routing-delay",
	budget.Work:    "default-max-work",
	budget.Cleanup: "default-cleanup",
	budget.Margin:  "default-safety-margin",
}

// TermDefault is the name of the flag that sets a budget term's cluster
// default: "default-max-work".
func TermDefault(t budget.Term) string { return termDefaults[t] }

// TermDefaultRange is the range of a budget term's cluster default: a
// term, 0 to budget.MaxTerm.
func TermDefaultRange(t budget.Term) DurationRange {
	return DurationRange{Name: termDefaults[t], Min: 0, Max: budget.MaxTerm}
}

// MaxGrace is --max-grace-period's range: a Pod needs at least 1s to stop
// at all, and the flag reads a duration of at most budget.MaxTerm.
var MaxGrace = DurationRange{Name: MaxGracePeriod, Min: time.Second, Max: budget.MaxTerm}

// DefaultFlag is TermDefault as messages write it: "--default-max-work".
func DefaultFlag(t budget.Term) string { return "--" + termDefaults[t] }

// DefaultProfileFlag is the flag naming the cluster's default routing
// profile, as messages write it.
const DefaultProfileFlag = "--" + DefaultRoutingProfile

// MaxCeiling bounds the ceiling flags (CeilingDuration): a NodePool may
// allow days, but a ceiling above --max-grace-period (at most 1h) never
// binds.
const MaxCeiling = 30 * 24 * time.Hour

// The webhook server's, validated by server.Config (the review limits by
// webhook.Limits).
const (
	CertDir                        = "cert-dir"
	Namespace                      = "namespace"
	CertMode                       = "cert-mode"
	CertSecretName                 = "cert-secret-name"
	ServiceName                    = "service-name"
	MutatingWebhookConfiguration   = "mutating-webhook-configuration"
	ValidatingWebhookConfiguration = "validating-webhook-configuration"
	MaxInflightReviewBytes         = "max-inflight-review-bytes"
	EnableHTTP2                    = "enable-http2"
)

// maxConnections bounds --max-connections, and --max-pending-connections
// one below it.
const maxConnections = 65536

var (
	Port          = IntRange{Name: "port", Min: 1, Max: 65535}
	ShutdownDelay = DurationRange{Name: "shutdown-delay", Min: 0, Max: 5 * time.Minute}
	DrainTimeout  = DurationRange{Name: "drain-timeout", Min: time.Second, Max: 5 * time.Minute}
	// WebhookTimeout is the range of a webhook configuration's
	// timeoutSeconds.
	WebhookTimeout = DurationRange{Name: "webhook-timeout", Min: time.Second, Max: 30 * time.Second, Why: ", the range of a webhook's timeoutSeconds"}
	// MaxConcurrentReviews' 0 derives the number from GOMAXPROCS
	// (webhook.Limits.Slots; its Why is held to those constants there).
	MaxConcurrentReviews  = IntRange{Name: "max-concurrent-reviews", Min: 0, Max: 10000, Why: " (0: 2 per GOMAXPROCS, at least 4)"}
	MaxConnections        = IntRange{Name: "max-connections", Min: 16, Max: maxConnections}
	MaxPendingConnections = IntRange{Name: "max-pending-connections", Min: 1, Max: maxConnections - 1}
)

// The observer's, validated by observer.Config.
const (
	LeaderElect           = "leader-elect"
	MetricsNamespaceLabel = "metrics-namespace-label"
)

var (
	FlushInterval        = DurationRange{Name: "flush-interval", Min: 10 * time.Millisecond, Max: 10 * time.Minute, GoSyntax: true}
	FlushWritesPerSecond = IntRange{Name: "flush-writes-per-second", Min: 1, Max: 1000}
)

// The observer's policy reports, validated by observer.Config; the
// bounds of a report (pkg/policyreport.Bounds): one of ReportsMaxResults
// results of ReportsMaxMessageLength bytes each stays far under the API
// server's 1.5 MiB (TestTheLargestReportIsBounded).
const Reports = "reports"

var (
	ReportsInterval         = DurationRange{Name: "reports-interval", Min: time.Second, Max: 24 * time.Hour, GoSyntax: true}
	ReportsWritesPerSecond  = IntRange{Name: "reports-writes-per-second", Min: 1, Max: 100}
	ReportsMaxResults       = IntRange{Name: "reports-max-results", Min: 1, Max: 200}
	ReportsMaxMessageLength = IntRange{Name: "reports-max-message-length", Min: 64, Max: 2048}
)

// The Helm hooks' (`webhook selftest`, `webhook unregister`), validated by
// helmhook.SelftestConfig and helmhook.UnregisterConfig.
const (
	Check         = "check"
	Release       = "release"
	TestNamespace = "test-namespace"
	Image         = "image"
)

// The routing probe's (`webhook probe`, the Pods `kubectl graceguard
// measure-routing` deploys), validated by config.ProbeFlags.
var ProbeListen = Address{Name: "listen"}

// The plugin's measure-routing, validated by pkg/cli. Rate and
// MaxRequests bound the load it sends through the user's path; Hold is
// the probe Pods' preStop sleep, so a withdrawal slower than it cannot be
// measured, and at most budget.MaxTerm so the profile it yields is one
// graceguard accepts.
const (
	MeasureURL          = "url"
	MeasureHost         = "host"
	MeasureIngressClass = "ingress-class"
	MeasureImage        = "image"
	MeasureProfileName  = "profile-name"
)

var (
	MeasureReplicas    = IntRange{Name: "replicas", Min: 2, Max: 10, Why: " (one is deleted at a time; the others keep the path up)"}
	MeasureDeletions   = IntRange{Name: "deletions", Min: 1, Max: 100}
	MeasureRate        = IntRange{Name: "rate", Min: 1, Max: 1000, Why: " requests per second"}
	MeasureMaxRequests = IntRange{Name: "max-requests", Min: 10, Max: 10_000_000}
	MeasureHold        = DurationRange{Name: "hold", Min: 5 * time.Second, Max: 10 * time.Minute, GoSyntax: true}
	MeasureQuiet       = DurationRange{Name: "quiet", Min: 500 * time.Millisecond, Max: time.Minute, GoSyntax: true}
	MeasureMargin      = DurationRange{Name: "margin", Min: 0, Max: 5 * time.Minute, GoSyntax: true}
	MeasureTimeout     = DurationRange{Name: "timeout", Min: 5 * time.Second, Max: 6 * time.Hour, GoSyntax: true}
)

// HookTimeout bounds how long a Helm hook's command keeps trying: long
// enough for a fresh install's replicas to get their certificates, short
// enough to fail, saying why, before Helm's own --timeout (5m by default).
var HookTimeout = DurationRange{Name: "timeout", Min: time.Second, Max: 5 * time.Minute, GoSyntax: true}

// Shared by the webhook and the observer (the addresses), and the
// observer and the plugin's recommend (min-samples).
var (
	MetricsBindAddress     = Address{Name: "metrics-bind-address", Off: "0"}
	HealthProbeBindAddress = Address{Name: "health-probe-bind-address"}
	MinSamples             = IntRange{Name: "min-samples", Min: 1, Max: v1alpha1.MaxSamples,
		Why: fmt.Sprintf(" (a report keeps %d samples)", v1alpha1.MaxSamples)}
)

// IntRange is an integer flag's name and the values it accepts, Min to
// Max.
type IntRange struct {
	Name     string
	Min, Max int64
	// Why follows "want Min to Max" in the error: why those bounds.
	Why string
}

// Check says, naming the flag, that n is outside the range, or returns nil.
func (r IntRange) Check(n int64) error {
	if n < r.Min || n > r.Max {
		return Invalid(r.Name, strconv.FormatInt(n, 10), fmt.Errorf("want %d to %d%s", r.Min, r.Max, r.Why))
	}
	return nil
}

// DurationRange is a duration flag's name and the values it accepts, Min
// to Max.
type DurationRange struct {
	Name     string
	Min, Max time.Duration
	// Why follows "want Min to Max" in the error: why those bounds.
	Why string
	// GoSyntax: the flag reads and prints Go durations only (10s, 1m0s),
	// not also whole seconds as annotations do (Duration).
	GoSyntax bool
}

// Check says, naming the flag, that d is outside the range, or returns nil.
func (r DurationRange) Check(d time.Duration) error {
	if d < r.Min || d > r.Max {
		return Invalid(r.Name, r.Format(d), fmt.Errorf("want %s to %s%s", budget.Format(r.Min), budget.Format(r.Max), r.Why))
	}
	return nil
}

// Format prints d as the flag does.
func (r DurationRange) Format(d time.Duration) string {
	if r.GoSyntax {
		return d.String()
	}
	return budget.Format(d)
}

// Value is the flag's value filling p, in the flag's syntax.
func (r DurationRange) Value(p *time.Duration) pflag.Value {
	if r.GoSyntax {
		return GoDuration(p)
	}
	return Duration(p)
}

// Address is the name of a flag holding a listen address: host:port or
// :port, or Off (when not "") to serve nothing.
type Address struct {
	Name string
	Off  string
}

// Check says, naming the flag, what is wrong with addr, or returns nil.
func (a Address) Check(addr string) error {
	if a.Off != "" && addr == a.Off {
		return nil
	}
	if err := checkAddr(addr); err != nil {
		want := "host:port or :port"
		if a.Off != "" {
			want = "host:port, :port or " + a.Off
		}
		return Invalid(a.Name, addr, fmt.Errorf("%v; want %s", err, want))
	}
	return nil
}

func checkAddr(a string) error {
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not 0-65535", port)
	}
	return nil
}

// Error is what is wrong with a flag's value: --name=value: Err, or
// --name: Err when the value prints as "".
type Error struct {
	// Flag is the flag's name, without the dashes.
	Flag string
	// Value is the value as the flag prints it.
	Value string
	Err   error
}

func (e *Error) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("--%s: %v", e.Flag, e.Err)
	}
	return fmt.Sprintf("--%s=%s: %v", e.Flag, e.Value, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Invalid is the error of a flag whose value (as the flag prints it) is
// wrong: err says what is wrong and what is accepted.
func Invalid(flag, value string, err error) error {
	return &Error{Flag: flag, Value: value, Err: err}
}

// Below is a rule between two flags: Lesser's value must be below
// Greater's. The Validate that owns both settings checks it, and make
// generate writes the chart's render-time check from it, so the rule and
// its reason are written once.
type Below struct {
	Lesser, Greater string
	// Optional: a Greater of 0 switches the rule off (0 disables that
	// setting).
	Optional bool
	// Why follows the rule in both errors: ", so that ..." or ": ...".
	Why string
}

// The rules between flags.
var (
	PendingBelowConnections = Below{Lesser: MaxPendingConnections.Name, Greater: MaxConnections.Name,
		Why: ", so that kept-alive connections always have room"}
	CriticalBelowShutdown = Below{Lesser: NodeShutdownGracePeriodCriticalPods, Greater: NodeShutdownGracePeriod, Optional: true,
		Why: ": regular Pods get the difference"}
)

// Relations lists the rules between flags, for make generate.
var Relations = []Below{PendingBelowConnections, CriticalBelowShutdown}
