// Package config holds the webhook's configuration as one validated struct
// and defines every flag of the webhook binary (the server's and `webhook
// observe`'s) and the cluster defaults the kubectl plugin shares: each
// flag's name, help, value and rule are written once, in a flag, and
// binding, validation and the messages that name a flag all read it.
//
// Invariant: a configuration that passed Validate can be run; main only
// wires. Nothing downstream (certs, the webhook's limits) rejects what
// Validate accepted.
package config

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/graceguard/graceguard/pkg/certs"
	"github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/observer"
	"github.com/graceguard/graceguard/pkg/webhook"
)

// Config is everything cmd/webhook needs.
type Config struct {
	// Options are the cluster defaults for the budget, hooks and mode.
	Options mutate.Options
	// CertDir holds tls.crt and tls.key; they are reloaded when they change.
	CertDir string
	// Port is the HTTPS port of the admission endpoints.
	Port int
	// MetricsBindAddress serves Prometheus /metrics ("0" disables it).
	MetricsBindAddress string
	// HealthProbeBindAddress serves /healthz and /readyz.
	HealthProbeBindAddress string
	// ShutdownDelay is how long the server keeps serving after SIGTERM,
	// with /readyz failing, so endpoints and API servers stop sending to
	// it before it closes its listener.
	ShutdownDelay time.Duration
	// DrainTimeout bounds the wait for in-flight reviews after the delay.
	DrainTimeout time.Duration
	// Namespace is graceguard's own namespace, never touched.
	Namespace string
	// CertMode is CertModeFiles (tls.crt and tls.key in CertDir, from a
	// mounted Secret: cert-manager or your own) or CertModeSelfManaged (the
	// webhook keeps a CA and serving certificate in CertSecretName, writes
	// them to CertDir and injects the CA into both webhook configurations).
	CertMode CertMode
	// CertSecretName, ServiceName and the two webhook configuration names
	// are what CertModeSelfManaged manages (Certs).
	CertSecretName                 string
	ServiceName                    string
	MutatingWebhookConfiguration   string
	ValidatingWebhookConfiguration string
	// Limits bound the reviews in flight: their number, their bodies'
	// bytes and their time (--webhook-timeout, which also sizes the
	// server's read and write timeouts).
	Limits webhook.Limits
	// MaxConnections bounds the webhook server's open connections, and
	// MaxPendingConnections (fewer) those that have not sent a whole
	// request yet: at a cap, a new connection takes the place of an idle or
	// pending one of the peer holding the most connections.
	MaxConnections        int
	MaxPendingConnections int
	// EnableHTTP2 serves the webhooks over HTTP/2 too. Off by default, as
	// kubebuilder does, because of the HTTP/2 rapid-reset and stream
	// cancellation CVEs (CVE-2023-44487, CVE-2023-39325).
	EnableHTTP2 bool
}

// CertMode is where the serving certificate comes from.
type CertMode string

// Certificate modes.
const (
	CertModeFiles       CertMode = "files"
	CertModeSelfManaged CertMode = "self-managed"
)

// Connection caps: defaults and bounds. The defaults are sized from the
// memory one connection holds (docs/security.md, "Connections, measured"):
// at most about 150 KB whatever its client sends, so 256 hold under 40 MiB
// of the chart's 128Mi beside the 16 MiB of review bodies in flight, and
// 256 is room for the reviews handled and waiting at once (64 + 128) on
// connections of their own. The 128 not pending are kept for the API
// servers' kept-alive connections (25 idle each at most).
const (
	DefaultMaxConnections        = 256
	DefaultMaxPendingConnections = 128
	minConnections               = 16
	maxConnections               = 65536
)

// Default returns the documented defaults.
func Default() Config {
	return Config{
		Options:                        mutate.DefaultOptions(),
		CertDir:                        "/tmp/k8s-webhook-server/serving-certs",
		Port:                           9443,
		MetricsBindAddress:             ":8080",
		HealthProbeBindAddress:         ":8081",
		ShutdownDelay:                  10 * time.Second,
		DrainTimeout:                   20 * time.Second,
		Namespace:                      os.Getenv("POD_NAMESPACE"),
		CertMode:                       CertModeFiles,
		CertSecretName:                 "graceguard-certs",
		ServiceName:                    "graceguard",
		MutatingWebhookConfiguration:   "graceguard",
		ValidatingWebhookConfiguration: "graceguard",
		Limits:                         webhook.DefaultLimits(),
		MaxConnections:                 DefaultMaxConnections,
		MaxPendingConnections:          DefaultMaxPendingConnections,
	}
}

// Validate checks c, naming each flag at fault and the accepted values.
func (c Config) Validate() error { return c.Flags().Validate() }

// Flags are the server's flags, bound to c.
func (c *Config) Flags() flags.Flags {
	selfManaged := func(p *string, rule func(string) error) func() error {
		return func() error {
			if c.CertMode != CertModeSelfManaged {
				return nil
			}
			return rule(*p)
		}
	}
	return append(flags.Options(&c.Options),
		flags.Flag{Name: "cert-dir", Value: flags.String(&c.CertDir),
			Usage: "directory with tls.crt and tls.key (reloaded when they change); with --cert-mode=self-managed the webhook writes them there from its Secret",
			Check: func() error {
				if c.CertDir == "" {
					return errors.New("must not be empty")
				}
				return selfManaged(&c.CertDir, certs.CheckCertDir)()
			}},
		flags.Flag{Name: "port", Value: flags.Int(&c.Port), Usage: "HTTPS port of the admission webhooks",
			Check: flags.InRange(&c.Port, 1, 65535, "")},
		flags.MetricsAddress(&c.MetricsBindAddress),
		flags.HealthAddress(&c.HealthProbeBindAddress),
		flags.Flag{Name: "shutdown-delay", Value: flags.Duration(&c.ShutdownDelay),
			Usage: "keep serving this long after SIGTERM while /readyz fails, so routes to this replica are withdrawn first",
			Check: flags.Between(&c.ShutdownDelay, 0, 5*time.Minute)},
		flags.Flag{Name: "drain-timeout", Value: flags.Duration(&c.DrainTimeout),
			Usage: "after the shutdown delay, wait at most this long for in-flight reviews",
			Check: flags.Between(&c.DrainTimeout, time.Second, 5*time.Minute)},
		flags.Flag{Name: "namespace", Value: flags.String(&c.Namespace),
			Usage: "graceguard's own namespace, never mutated (default $POD_NAMESPACE)",
			Check: selfManaged(&c.Namespace, func(ns string) error {
				if ns == "" {
					return errors.New("required with --cert-mode=self-managed (the Secret's namespace; default $POD_NAMESPACE)")
				}
				return certs.CheckNamespace(ns)
			})},
		flags.Flag{Name: "cert-mode", Value: flags.ChoiceValue(&c.CertMode, CertModeFiles, CertModeSelfManaged),
			Usage: "files: serve tls.crt/tls.key from --cert-dir; self-managed: keep a CA and certificate in --cert-secret-name and inject the CA into the webhook configurations",
			Check: func() error {
				if c.CertMode != CertModeFiles && c.CertMode != CertModeSelfManaged {
					return fmt.Errorf("want %s or %s", CertModeFiles, CertModeSelfManaged)
				}
				return nil
			}},
		flags.Flag{Name: "cert-secret-name", Value: flags.String(&c.CertSecretName),
			Usage: "self-managed: the Secret (in --namespace) holding the CA and serving certificate",
			Check: selfManaged(&c.CertSecretName, certs.CheckSecretName)},
		flags.Flag{Name: "service-name", Value: flags.String(&c.ServiceName),
			Usage: "self-managed: the webhook's Service, whose DNS names the certificate covers",
			Check: selfManaged(&c.ServiceName, certs.CheckServiceName)},
		flags.Flag{Name: "mutating-webhook-configuration", Value: flags.String(&c.MutatingWebhookConfiguration),
			Usage: "self-managed: the MutatingWebhookConfiguration to inject the CA into",
			Check: selfManaged(&c.MutatingWebhookConfiguration, certs.CheckWebhookConfiguration)},
		flags.Flag{Name: "validating-webhook-configuration", Value: flags.String(&c.ValidatingWebhookConfiguration),
			Usage: "self-managed: the ValidatingWebhookConfiguration to inject the CA into",
			Check: selfManaged(&c.ValidatingWebhookConfiguration, certs.CheckWebhookConfiguration)},
		flags.Flag{Name: "webhook-timeout", Value: flags.Duration(&c.Limits.Timeout),
			Usage: "the largest timeoutSeconds of graceguard's webhook configurations: a review ends by then (or by the shorter ?timeout= its request names), the namespace read a fifth earlier (at least 1s), and the server's read and write timeouts are sized to it; 1s to 30s",
			Check: func() error {
				if err := flags.Between(&c.Limits.Timeout, time.Second, 30*time.Second)(); err != nil {
					return fmt.Errorf("%w, the range of a webhook's timeoutSeconds", err)
				}
				return nil
			}},
		flags.Flag{Name: "max-concurrent-reviews", Value: flags.Int(&c.Limits.MaxInFlight),
			Usage: "reviews handled at once; more wait (at most 128 of them, for at most 1s) or are refused with 429",
			Check: flags.InRange(&c.Limits.MaxInFlight, 1, 10000, "")},
		flags.Flag{Name: "max-inflight-review-bytes", Value: flags.Bytes(&c.Limits.InFlightBytes),
			Usage: "request bytes the reviews handled at once may hold together (e.g. 16Mi); at least 7Mi, the largest review",
			Check: func() error {
				if c.Limits.InFlightBytes < webhook.MaxReviewBytes {
					return fmt.Errorf("want at least %d (7Mi), the largest review, or that review could never be answered", webhook.MaxReviewBytes)
				}
				return nil
			}},
		flags.Flag{Name: "max-connections", Value: flags.Int(&c.MaxConnections),
			Usage: "webhook connections open at once; a new one beyond closes the peer holding the most's longest idle, else oldest pending, one; it is refused when that peer is its own and all of its connections are in a request",
			Check: flags.InRange(&c.MaxConnections, minConnections, maxConnections, "")},
		flags.Flag{Name: "max-pending-connections", Value: flags.Int(&c.MaxPendingConnections),
			Usage: "webhook connections that have not sent a whole request yet (in the TLS handshake or sending their first request's headers); a new one beyond closes the oldest of the peer holding the most; fewer than --max-connections",
			Check: func() error {
				if flags.InRange(&c.MaxConnections, minConnections, maxConnections, "")() != nil {
					// --max-connections says what is wrong with it.
					return flags.InRange(&c.MaxPendingConnections, 1, maxConnections-1, "")()
				}
				if c.MaxPendingConnections < 1 || c.MaxPendingConnections >= c.MaxConnections {
					return fmt.Errorf("want 1 to %d, fewer than --max-connections=%d, so that kept-alive connections always have room", c.MaxConnections-1, c.MaxConnections)
				}
				return nil
			}},
		flags.Flag{Name: "enable-http2", Value: flags.Bool(&c.EnableHTTP2), NoOptDefVal: "true",
			Usage: "serve the webhooks over HTTP/2 as well as HTTP/1.1 (off: HTTP/2 rapid-reset CVEs)"},
	)
}

// Excluded returns the options with graceguard's own namespace excluded.
func (c Config) Excluded() mutate.Options {
	o := c.Options
	if c.Namespace != "" {
		o.ExcludedNamespaces = append(append([]string{}, o.ExcludedNamespaces...), c.Namespace)
	}
	return o
}

// Certs is what CertModeSelfManaged manages, from the flags that name it.
func (c Config) Certs() certs.Config {
	return certs.Config{
		Namespace:                      c.Namespace,
		SecretName:                     c.CertSecretName,
		ServiceName:                    c.ServiceName,
		MutatingWebhookConfiguration:   c.MutatingWebhookConfiguration,
		ValidatingWebhookConfiguration: c.ValidatingWebhookConfiguration,
		CertDir:                        c.CertDir,
	}
}

// ObserverFlags are the flags of `webhook observe`, bound to c.
func ObserverFlags(c *observer.Config) flags.Flags {
	return flags.Flags{
		flags.MetricsAddress(&c.MetricsBindAddress),
		flags.HealthAddress(&c.HealthProbeBindAddress),
		{Name: "leader-elect", Value: flags.Bool(&c.LeaderElection), NoOptDefVal: "true",
			Usage: "observe from one replica at a time (a Lease in --namespace)"},
		{Name: "namespace", Value: flags.String(&c.Namespace),
			Usage: "graceguard's own namespace, for the leader election Lease; its Pods are never observed (default $POD_NAMESPACE)",
			Check: func() error {
				if c.LeaderElection && c.Namespace == "" {
					return errors.New("required with --leader-elect (the Lease's namespace; default $POD_NAMESPACE)")
				}
				return nil
			}},
		{Name: "flush-interval", Value: flags.GoDuration(&c.FlushInterval),
			Usage: "gather a workload's samples this long before writing its ShutdownReport (one write per workload and interval)",
			Check: func() error {
				if c.FlushInterval < 10*time.Millisecond || c.FlushInterval > 10*time.Minute {
					return errors.New("want 10ms to 10m")
				}
				return nil
			}},
		{Name: "excluded-namespaces", Value: flags.List(&c.ExcludedNamespaces),
			Usage: "namespaces whose Pods are never observed, whatever their labels: the webhook's --excluded-namespaces"},
		flags.MinSamples(&c.MinSamples),
		{Name: "metrics-namespace-label", Value: flags.Bool(&c.NamespaceLabel), NoOptDefVal: "true",
			Usage: "label the observed-shutdown metrics with the namespace (one series per namespace with treated Pods)"},
	}
}
