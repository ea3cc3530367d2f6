// Package config holds the webhook's configuration as one validated struct,
// and the flags that fill it. The budget flags are shared with the kubectl
// plugin so both speak the same names.
//
// Invariant: a Config that passed Validate can be run; main only wires.
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/mutate"
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
	CertMode string
	// CertSecretName, ServiceName and the two webhook configuration names
	// are what CertModeSelfManaged manages.
	CertSecretName                 string
	ServiceName                    string
	MutatingWebhookConfiguration   string
	ValidatingWebhookConfiguration string
	// Limits bound the reviews in flight: their number, their bodies'
	// bytes and their time (--webhook-timeout, which also sizes the
	// server's read and write timeouts).
	Limits webhook.Limits
	// EnableHTTP2 serves the webhooks over HTTP/2 too. Off by default, as
	// kubebuilder does, because of the HTTP/2 rapid-reset and stream
	// cancellation CVEs (CVE-2023-44487, CVE-2023-39325).
	EnableHTTP2 bool
}

// Certificate modes.
const (
	CertModeFiles       = "files"
	CertModeSelfManaged = "self-managed"
)

// Default returns the documented defaults.
func Default() Config {
	o := mutate.DefaultOptions()
	ns := os.Getenv("POD_NAMESPACE")
	return Config{
		Options:                        o,
		CertDir:                        "/tmp/k8s-webhook-server/serving-certs",
		Port:                           9443,
		MetricsBindAddress:             ":8080",
		HealthProbeBindAddress:         ":8081",
		ShutdownDelay:                  10 * time.Second,
		DrainTimeout:                   20 * time.Second,
		Namespace:                      ns,
		CertMode:                       CertModeFiles,
		CertSecretName:                 "graceguard-certs",
		ServiceName:                    "graceguard",
		MutatingWebhookConfiguration:   "graceguard",
		ValidatingWebhookConfiguration: "graceguard",
		Limits:                         webhook.DefaultLimits(),
	}
}

// BindFlags binds every server flag to c.
func (c *Config) BindFlags(fs *pflag.FlagSet) {
	BindOptions(fs, &c.Options)
	fs.StringVar(&c.CertDir, "cert-dir", c.CertDir, "directory with tls.crt and tls.key (reloaded when they change); with --cert-mode=self-managed the webhook writes them there from its Secret")
	fs.IntVar(&c.Port, "port", c.Port, "HTTPS port of the admission webhooks")
	fs.StringVar(&c.MetricsBindAddress, "metrics-bind-address", c.MetricsBindAddress, `address of Prometheus /metrics ("0" disables it)`)
	fs.StringVar(&c.HealthProbeBindAddress, "health-probe-bind-address", c.HealthProbeBindAddress, "address of /healthz and /readyz")
	fs.Var(durationValue{&c.ShutdownDelay}, "shutdown-delay", "keep serving this long after SIGTERM while /readyz fails, so routes to this replica are withdrawn first")
	fs.Var(durationValue{&c.DrainTimeout}, "drain-timeout", "after the shutdown delay, wait at most this long for in-flight reviews")
	fs.StringVar(&c.Namespace, "namespace", c.Namespace, "graceguard's own namespace, never mutated (default $POD_NAMESPACE)")
	fs.StringVar(&c.CertMode, "cert-mode", c.CertMode, "files: serve tls.crt/tls.key from --cert-dir; self-managed: keep a CA and certificate in --cert-secret-name and inject the CA into the webhook configurations")
	fs.StringVar(&c.CertSecretName, "cert-secret-name", c.CertSecretName, "self-managed: the Secret (in --namespace) holding the CA and serving certificate")
	fs.StringVar(&c.ServiceName, "service-name", c.ServiceName, "self-managed: the webhook's Service, whose DNS names the certificate covers")
	fs.StringVar(&c.MutatingWebhookConfiguration, "mutating-webhook-configuration", c.MutatingWebhookConfiguration, "self-managed: the MutatingWebhookConfiguration to inject the CA into")
	fs.StringVar(&c.ValidatingWebhookConfiguration, "validating-webhook-configuration", c.ValidatingWebhookConfiguration, "self-managed: the ValidatingWebhookConfiguration to inject the CA into")
	fs.Var(timeoutValue{&c.Limits.Timeout}, "webhook-timeout", "the largest timeoutSeconds of graceguard's webhook configurations: a review ends by then (or by the shorter ?timeout= its request names), the namespace read a fifth earlier (at least 1s), and the server's read and write timeouts are sized to it; 1s to 30s")
	fs.Int64Var(&c.Limits.MaxInFlight, "max-concurrent-reviews", c.Limits.MaxInFlight, "reviews handled at once; more wait (at most 128 of them, for at most 1s) or are refused with 429")
	fs.Var(&bytesValue{&c.Limits.InFlightBytes}, "max-inflight-review-bytes", "request bytes the reviews handled at once may hold together (e.g. 16Mi); at least 7Mi, the largest review")
	fs.BoolVar(&c.EnableHTTP2, "enable-http2", c.EnableHTTP2, "serve the webhooks over HTTP/2 as well as HTTP/1.1 (off: HTTP/2 rapid-reset CVEs)")
}

// BindOptions binds the cluster-default flags shared by the webhook and the
// kubectl plugin.
func BindOptions(fs *pflag.FlagSet, o *mutate.Options) {
	fs.Var(durationValue{&o.Defaults.Routing}, "default-routing-delay", "routing withdrawal time for Pods that set no "+mutate.AnnotationRoutingDelay)
	fs.Var(durationValue{&o.Defaults.Work}, "default-max-work", "longest admitted work for Pods that set no "+mutate.AnnotationMaxWork)
	fs.Var(durationValue{&o.Defaults.Cleanup}, "default-cleanup", "cleanup time for Pods that set no "+mutate.AnnotationCleanup)
	fs.Var(durationValue{&o.Defaults.Margin}, "default-safety-margin", "safety margin for Pods that set no "+mutate.AnnotationSafetyMargin)
	fs.Var(durationValue{&o.MaxGrace}, "max-grace-period", "largest grace period a budget may ask for (the cluster autoscaler's cap is 10m)")
	fs.Var(choiceValue[mutate.PreStopHandler]{&o.PreStop, mutate.PreStopHandlers}, "prestop-handler", "default preStop hook: sleep (native sleep action), exec (sleep binary in the image) or none")
	fs.Var(choiceValue[mutate.Mode]{&o.Mode, mutate.Modes}, "default-mode", "mode of opted-in namespaces without a "+mutate.LabelMode+" label: enforce or warn")
	fs.StringSliceVar(&o.ExcludedNamespaces, "excluded-namespaces", o.ExcludedNamespaces, "namespaces never touched, whatever their labels")
	bindRouting(fs, o)
	bindCeilings(fs, o)
}

// Validate checks c, naming each flag at fault and the accepted values.
func (c Config) Validate() error {
	var errs []error
	if err := c.Options.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Port < 1 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("--port=%d: want 1-65535", c.Port))
	}
	if c.CertDir == "" {
		errs = append(errs, errors.New("--cert-dir: must not be empty"))
	}
	if c.MetricsBindAddress != "0" {
		if err := checkAddr(c.MetricsBindAddress); err != nil {
			errs = append(errs, fmt.Errorf("--metrics-bind-address=%q: %v; want host:port, :port or 0", c.MetricsBindAddress, err))
		}
	}
	if err := checkAddr(c.HealthProbeBindAddress); err != nil {
		errs = append(errs, fmt.Errorf("--health-probe-bind-address=%q: %v; want host:port or :port", c.HealthProbeBindAddress, err))
	}
	if c.ShutdownDelay < 0 || c.ShutdownDelay > 5*time.Minute {
		errs = append(errs, fmt.Errorf("--shutdown-delay=%s: want 0 to 5m", c.ShutdownDelay))
	}
	if c.DrainTimeout < time.Second || c.DrainTimeout > 5*time.Minute {
		errs = append(errs, fmt.Errorf("--drain-timeout=%s: want 1s to 5m", c.DrainTimeout))
	}
	if err := c.Limits.Validate(); err != nil {
		errs = append(errs, err)
	}
	switch c.CertMode {
	case CertModeFiles:
	case CertModeSelfManaged:
		if c.Namespace == "" {
			errs = append(errs, errors.New("--namespace: required with --cert-mode=self-managed (the Secret's namespace; default $POD_NAMESPACE)"))
		}
	default:
		errs = append(errs, fmt.Errorf("--cert-mode=%q: want %q or %q", c.CertMode, CertModeFiles, CertModeSelfManaged))
	}
	return errors.Join(errs...)
}

// Excluded returns the options with graceguard's own namespace excluded.
func (c Config) Excluded() mutate.Options {
	o := c.Options
	if c.Namespace != "" {
		o.ExcludedNamespaces = append(append([]string{}, o.ExcludedNamespaces...), c.Namespace)
	}
	return o
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

// durationValue is a pflag.Value that accepts what annotations accept: Go
// durations or bare whole seconds, within 0..1h.
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil {
		return ""
	}
	return budget.Format(*v.d)
}
func (v durationValue) Set(s string) error {
	d, err := budget.ParseDuration(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}
func (v durationValue) Type() string { return "duration" }

// timeoutValue is a pflag.Value for a Go duration or whole seconds.
type timeoutValue struct{ d *time.Duration }

func (v timeoutValue) String() string {
	if v.d == nil {
		return ""
	}
	return budget.Format(*v.d)
}
func (v timeoutValue) Set(s string) error {
	if n, err := strconv.Atoi(s); err == nil {
		*v.d = time.Duration(n) * time.Second
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration: want a Go duration (5s) or whole seconds (5)", s)
	}
	*v.d = d
	return nil
}
func (v timeoutValue) Type() string { return "duration" }

// bytesValue is a pflag.Value for a byte count in Kubernetes quantity
// notation: 16Mi, 16777216.
type bytesValue struct{ n *int64 }

func (v *bytesValue) String() string {
	if v.n == nil {
		return ""
	}
	return resource.NewQuantity(*v.n, resource.BinarySI).String()
}
func (v *bytesValue) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("%q is not a byte count: want a quantity like 16Mi or 16777216", s)
	}
	n, ok := q.AsInt64()
	if !ok {
		return fmt.Errorf("%q is not a whole number of bytes: want a quantity like 16Mi", s)
	}
	*v.n = n
	return nil
}
func (v *bytesValue) Type() string { return "bytes" }

// choiceValue is a pflag.Value limited to a fixed set of strings.
type choiceValue[T ~string] struct {
	v       *T
	choices []T
}

func (c choiceValue[T]) String() string {
	if c.v == nil {
		return ""
	}
	return string(*c.v)
}
func (c choiceValue[T]) Set(s string) error {
	for _, ch := range c.choices {
		if string(ch) == s {
			*c.v = ch
			return nil
		}
	}
	names := make([]string, len(c.choices))
	for i, ch := range c.choices {
		names[i] = string(ch)
	}
	return fmt.Errorf("%q is not one of %s", s, strings.Join(names, ", "))
}
func (c choiceValue[T]) Type() string { return "string" }
