package observer

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/policyreport"
	"github.com/graceguard/graceguard/pkg/shutdownreport"
)

// Config is everything the observer process needs; the webhook binary's
// `observe` binds its flags (config.ObserverFlags).
type Config struct {
	// MetricsBindAddress serves Prometheus /metrics ("0" disables it).
	MetricsBindAddress string
	// HealthProbeBindAddress serves /healthz and /readyz.
	HealthProbeBindAddress string
	// LeaderElection makes one replica observe at a time, so that a
	// rollout of the observer records no shutdown twice.
	LeaderElection bool
	// Namespace is graceguard's own namespace, where the leader election
	// Lease lives; its Pods are never observed.
	Namespace string
	// Options are the cluster defaults the webhook runs with (its flags,
	// pkg/optionflags): the policy reports evaluate Pod templates with
	// them, and their ExcludedNamespaces (the webhook's
	// --excluded-namespaces, kube-system by default) are never observed,
	// whatever their labels say.
	Options mutate.Options
	// Reports is what the observer writes as policy reports.
	Reports Reports
	// FlushInterval is how long samples of one workload are gathered
	// before its report is written: one write per workload and interval,
	// however many of its Pods go away.
	FlushInterval time.Duration
	// FlushWritesPerSecond bounds the ShutdownReport writes, every
	// workload's together: past it, a workload's flush waits its turn
	// and its next write carries more samples. The writes at shutdown
	// (what is pending when the leader stops) are not held back.
	FlushWritesPerSecond int
	// MinSamples is how many samples a recommendation needs without kills.
	MinSamples int
	// NamespaceLabel adds a namespace label to the observed-shutdown
	// metrics: one series per namespace with treated Pods.
	NamespaceLabel bool
}

// Default returns the documented defaults.
func Default() Config {
	return Config{
		MetricsBindAddress:     ":8080",
		HealthProbeBindAddress: ":8081",
		LeaderElection:         true,
		Namespace:              os.Getenv("POD_NAMESPACE"),
		FlushInterval:          10 * time.Second,
		FlushWritesPerSecond:   20,
		MinSamples:             shutdownreport.DefaultMinSamples,
		Options:                mutate.DefaultOptions(),
		Reports: Reports{Kind: ReportsOff, Interval: 5 * time.Minute, WritesPerSecond: 5,
			Bounds: policyreport.DefaultBounds()},
	}
}

// Reports configures the policy reports the observer writes: one
// OpenReports Report or PolicyReport per workload of the namespaces
// graceguard treats (docs/reports.md).
type Reports struct {
	// Kind is ReportsOff, ReportsAuto (OpenReports when the API server
	// serves them, else PolicyReport, else none), or a policyreport.Kind,
	// written only while the API server serves it.
	Kind string
	// Interval is how often every workload is evaluated again (and the
	// API server asked which kinds it serves).
	Interval time.Duration
	// WritesPerSecond bounds the writes (and deletes) of reports: a sweep
	// of many changed workloads spreads over time.
	WritesPerSecond int
	Bounds          policyreport.Bounds
}

// What Reports.Kind may be besides a policyreport.Kind.
const (
	ReportsOff  = "off"
	ReportsAuto = "auto"
)

// ReportKinds are the values of Reports.Kind.
var ReportKinds = []string{ReportsOff, ReportsAuto, string(policyreport.OpenReports), string(policyreport.PolicyReport)}

func (r Reports) validate() error {
	var errs []error
	if !slices.Contains(ReportKinds, r.Kind) {
		errs = append(errs, flags.Invalid(flags.Reports, r.Kind, fmt.Errorf("want one of %s", strings.Join(ReportKinds, ", "))))
	}
	return errors.Join(append(errs, flags.ReportsInterval.Check(r.Interval), flags.ReportsWritesPerSecond.Check(int64(r.WritesPerSecond)),
		r.Bounds.Validate())...)
}

// Validate checks c as `webhook observe` validates it at start-up, naming
// each flag at fault, its value and what is accepted; it reports
// everything wrong at once.
func (c Config) Validate() error {
	errs := []error{
		flags.MetricsBindAddress.Check(c.MetricsBindAddress),
		flags.HealthProbeBindAddress.Check(c.HealthProbeBindAddress),
	}
	if c.LeaderElection && c.Namespace == "" {
		errs = append(errs, flags.Invalid(flags.Namespace, "",
			errors.New("required with --"+flags.LeaderElect+" (the Lease's namespace; default $POD_NAMESPACE)")))
	}
	errs = append(errs, flags.FlushInterval.Check(c.FlushInterval), flags.FlushWritesPerSecond.Check(int64(c.FlushWritesPerSecond)),
		flags.MinSamples.Check(int64(c.MinSamples)),
		c.Options.Validate(), c.Reports.validate())
	return errors.Join(errs...)
}

// excluded is every namespace the webhook never treats: the excluded ones
// and graceguard's own (as server.Config.Excluded computes it).
func (c Config) excluded() []string {
	out := slices.Clone(c.Options.ExcludedNamespaces)
	if c.Namespace != "" {
		out = append(out, c.Namespace)
	}
	return out
}
