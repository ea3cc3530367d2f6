package observer

import (
	"errors"
	"os"
	"slices"
	"time"

	"github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/mutate"
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
	// ExcludedNamespaces are never observed, whatever their labels say:
	// the webhook's --excluded-namespaces (kube-system by default).
	ExcludedNamespaces []string
	// FlushInterval is how long samples of one workload are gathered
	// before its report is written: one write per workload and interval,
	// however many of its Pods go away.
	FlushInterval time.Duration
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
		MinSamples:             shutdownreport.DefaultMinSamples,
		ExcludedNamespaces:     mutate.DefaultOptions().ExcludedNamespaces,
	}
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
	errs = append(errs, flags.FlushInterval.Check(c.FlushInterval), flags.MinSamples.Check(int64(c.MinSamples)))
	return errors.Join(errs...)
}

// excluded is every namespace the webhook never treats: the excluded ones
// and graceguard's own (as server.Config.Excluded computes it).
func (c Config) excluded() []string {
	out := slices.Clone(c.ExcludedNamespaces)
	if c.Namespace != "" {
		out = append(out, c.Namespace)
	}
	return out
}
