package observer

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/spf13/pflag"
)

// Config is everything the observer process needs.
type Config struct {
	// MetricsBindAddress serves Prometheus /metrics ("0" disables it).
	MetricsBindAddress string
	// HealthProbeBindAddress serves /healthz and /readyz.
	HealthProbeBindAddress string
	// LeaderElection makes one replica observe at a time, so that a
	// rollout of the observer records no shutdown twice.
	LeaderElection bool
	// Namespace is graceguard's own namespace, where the leader election
	// Lease lives.
	Namespace string
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
		MinSamples:             DefaultMinSamples,
	}
}

// BindFlags binds every observer flag to c.
func (c *Config) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.MetricsBindAddress, "metrics-bind-address", c.MetricsBindAddress, `address of Prometheus /metrics ("0" disables it)`)
	fs.StringVar(&c.HealthProbeBindAddress, "health-probe-bind-address", c.HealthProbeBindAddress, "address of /healthz and /readyz")
	fs.BoolVar(&c.LeaderElection, "leader-elect", c.LeaderElection, "observe from one replica at a time (a Lease in --namespace)")
	fs.StringVar(&c.Namespace, "namespace", c.Namespace, "graceguard's own namespace, for the leader election Lease (default $POD_NAMESPACE)")
	fs.DurationVar(&c.FlushInterval, "flush-interval", c.FlushInterval, "gather a workload's samples this long before writing its ShutdownReport (one write per workload and interval)")
	fs.IntVar(&c.MinSamples, "min-samples", c.MinSamples, "samples a recommendation needs when no Pod was killed")
	fs.BoolVar(&c.NamespaceLabel, "metrics-namespace-label", c.NamespaceLabel, "label the observed-shutdown metrics with the namespace (one series per namespace with treated Pods)")
}

// Validate checks c, naming each flag at fault and the accepted values.
func (c Config) Validate() error {
	var errs []error
	if c.MetricsBindAddress != "0" {
		if err := checkAddr(c.MetricsBindAddress); err != nil {
			errs = append(errs, fmt.Errorf("--metrics-bind-address=%q: %v; want host:port, :port or 0", c.MetricsBindAddress, err))
		}
	}
	if err := checkAddr(c.HealthProbeBindAddress); err != nil {
		errs = append(errs, fmt.Errorf("--health-probe-bind-address=%q: %v; want host:port or :port", c.HealthProbeBindAddress, err))
	}
	if c.LeaderElection && c.Namespace == "" {
		errs = append(errs, errors.New("--namespace: required with --leader-elect (the Lease's namespace; default $POD_NAMESPACE)"))
	}
	if c.FlushInterval < 10*time.Millisecond || c.FlushInterval > 10*time.Minute {
		errs = append(errs, fmt.Errorf("--flush-interval=%s: want 10ms to 10m", c.FlushInterval))
	}
	if c.MinSamples < 1 || c.MinSamples > 50 {
		errs = append(errs, fmt.Errorf("--min-samples=%d: want 1 to 50 (a report keeps 50 samples)", c.MinSamples))
	}
	return errors.Join(errs...)
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
