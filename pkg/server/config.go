package server

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/graceguard/graceguard/pkg/certs"
	"github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/webhook"
)

// Config is everything Run needs. The webhook binary binds its flags
// (pkg/config); Validate checks it once, at start-up.
//
// Invariant: a Config that passed Validate can be run. Nothing downstream
// (certs, the webhook's limits, the connection caps) rejects what Validate
// accepted.
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

// CertModes lists the accepted modes.
var CertModes = []CertMode{CertModeFiles, CertModeSelfManaged}

// Connection caps' defaults (their bounds are flags.MaxConnections and
// flags.MaxPendingConnections). The defaults are sized from the memory one
// connection holds (docs/security.md, "Connections, measured"): at most
// about 150 KB whatever its client sends, so 256 hold under 40 MiB of the
// chart's 128Mi beside the 16 MiB of review bodies in flight, and 256 is
// room for the reviews worked on and waiting at once (a few per CPU, and
// 128) on connections of their own. The 128 not pending are kept for the API
// servers' kept-alive connections (25 idle each at most).
const (
	DefaultMaxConnections        = 256
	DefaultMaxPendingConnections = 128
)

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
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

// Validate checks c as the webhook validates it at start-up, and reports
// everything wrong at once: for each setting, the flag that sets it, its
// value and what is accepted. The cluster defaults are
// mutate.Options.Validate's, the review limits webhook.Limits.Validate's,
// the names self-managed certificates use pkg/certs' checks.
func (c Config) Validate() error {
	errs := []error{c.Options.Validate()}
	if c.CertDir == "" {
		errs = append(errs, flags.Invalid(flags.CertDir, "", errors.New("must not be empty")))
	} else {
		errs = append(errs, c.selfManaged(flags.CertDir, c.CertDir, certs.CheckCertDir))
	}
	errs = append(errs,
		flags.Port.Check(int64(c.Port)),
		flags.MetricsBindAddress.Check(c.MetricsBindAddress),
		flags.HealthProbeBindAddress.Check(c.HealthProbeBindAddress),
		flags.ShutdownDelay.Check(c.ShutdownDelay),
		flags.DrainTimeout.Check(c.DrainTimeout),
		c.selfManaged(flags.Namespace, c.Namespace, func(ns string) error {
			if ns == "" {
				return errors.New("required with --" + flags.CertMode + "=" + string(CertModeSelfManaged) + " (the Secret's namespace; default $POD_NAMESPACE)")
			}
			return certs.CheckNamespace(ns)
		}),
	)
	if c.CertMode != CertModeFiles && c.CertMode != CertModeSelfManaged {
		errs = append(errs, flags.Invalid(flags.CertMode, string(c.CertMode), fmt.Errorf("want %s or %s", CertModeFiles, CertModeSelfManaged)))
	}
	errs = append(errs,
		c.selfManaged(flags.CertSecretName, c.CertSecretName, certs.CheckSecretName),
		c.selfManaged(flags.ServiceName, c.ServiceName, certs.CheckServiceName),
		c.selfManaged(flags.MutatingWebhookConfiguration, c.MutatingWebhookConfiguration, certs.CheckWebhookConfiguration),
		c.selfManaged(flags.ValidatingWebhookConfiguration, c.ValidatingWebhookConfiguration, certs.CheckWebhookConfiguration),
		c.Limits.Validate(),
		c.checkConnections(),
	)
	return errors.Join(errs...)
}

// selfManaged applies a rule of pkg/certs to a name self-managed
// certificates use; in files mode the names are not used and not checked.
func (c Config) selfManaged(flag, value string, rule func(string) error) error {
	if c.CertMode != CertModeSelfManaged {
		return nil
	}
	if err := rule(value); err != nil {
		return flags.Invalid(flag, value, err)
	}
	return nil
}

// checkConnections checks both caps, and that fewer connections may be
// pending than open, so that kept-alive connections always have room.
func (c Config) checkConnections() error {
	if err := flags.MaxConnections.Check(int64(c.MaxConnections)); err != nil {
		// --max-connections says what is wrong with it; the pending cap is
		// checked against its own bounds only.
		return errors.Join(err, flags.MaxPendingConnections.Check(int64(c.MaxPendingConnections)))
	}
	pending, rule := flags.MaxPendingConnections, flags.PendingBelowConnections
	if n := int64(c.MaxPendingConnections); n < pending.Min || n >= int64(c.MaxConnections) {
		return flags.Invalid(rule.Lesser, fmt.Sprint(n),
			fmt.Errorf("want %d to %d, fewer than --%s=%d%s", pending.Min, c.MaxConnections-1, rule.Greater, c.MaxConnections, rule.Why))
	}
	return nil
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
