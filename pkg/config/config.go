// Package config binds the webhook binary's flags: the server's
// (server.Config, with the cluster defaults of pkg/optionflags), those of
// `webhook observe` (observer.Config) and those of the Helm hooks' `webhook
// selftest` and `webhook unregister` (pkg/helmhook), and `webhook probe`'s
// (pkg/routingprobe, which reads $POD_NAME itself). It holds no rule: what
// a value must be is its owner's Validate (server.Config, mutate.Options,
// webhook.Limits, observer.Config, the helmhook configs), and the flags'
// names and ranges are
// pkg/flags'. It is a package rather than part of cmd/webhook so that the
// chart's tests can parse the arguments the chart renders with the
// binary's own flags.
//
// Only cmd/webhook (and the tests) import it: the kubectl plugin binds
// the cluster defaults through pkg/optionflags and links none of the
// server, the certificates or the observer.
package config

import (
	"errors"

	"github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/helmhook"
	"github.com/graceguard/graceguard/pkg/observer"
	"github.com/graceguard/graceguard/pkg/optionflags"
	"github.com/graceguard/graceguard/pkg/routingprobe/kubeprobe"
	"github.com/graceguard/graceguard/pkg/server"
)

// Config is the webhook's configuration, server.Config, as this package
// binds it to the binary's flags (cmd/webhook, and test/chart, which
// parses the chart's rendered arguments with them).
type Config = server.Config

// Default returns the webhook's documented defaults.
func Default() Config { return server.DefaultConfig() }

// Flags are the webhook server's flags, bound to c; their Validate is c's.
func Flags(c *server.Config) flags.Flags {
	list := append(optionflags.List(&c.Options),
		flags.Flag{Name: flags.CertDir, Value: flags.String(&c.CertDir),
			Usage: "directory with tls.crt and tls.key (reloaded when they change); with --cert-mode=self-managed the webhook writes them there from its Secret"},
		flags.Flag{Name: flags.Port.Name, Value: flags.Int(&c.Port), Usage: "HTTPS port of the admission webhooks"},
		flags.MetricsAddressFlag(&c.MetricsBindAddress),
		flags.HealthAddressFlag(&c.HealthProbeBindAddress),
		flags.Flag{Name: flags.ShutdownDelay.Name, Value: flags.ShutdownDelay.Value(&c.ShutdownDelay),
			Usage: "keep serving this long after SIGTERM while /readyz fails, so routes to this replica are withdrawn first"},
		flags.Flag{Name: flags.DrainTimeout.Name, Value: flags.DrainTimeout.Value(&c.DrainTimeout),
			Usage: "after the shutdown delay, wait at most this long for in-flight reviews"},
		flags.Flag{Name: flags.Namespace, Value: flags.String(&c.Namespace),
			Usage: "graceguard's own namespace, never mutated (default $POD_NAMESPACE)"},
		flags.Flag{Name: flags.CertMode, Value: flags.ChoiceValue(&c.CertMode, server.CertModes...),
			Usage: "files: serve tls.crt/tls.key from --cert-dir; self-managed: keep a CA and certificate in --cert-secret-name and inject the CA into the webhook configurations"},
		flags.Flag{Name: flags.CertSecretName, Value: flags.String(&c.CertSecretName),
			Usage: "self-managed: the Secret (in --namespace) holding the CA and serving certificate"},
		flags.Flag{Name: flags.ServiceName, Value: flags.String(&c.ServiceName),
			Usage: "self-managed: the webhook's Service, whose DNS names the certificate covers"},
		flags.Flag{Name: flags.MutatingWebhookConfiguration, Value: flags.String(&c.MutatingWebhookConfiguration),
			Usage: "self-managed: the MutatingWebhookConfiguration to inject the CA into"},
		flags.Flag{Name: flags.ValidatingWebhookConfiguration, Value: flags.String(&c.ValidatingWebhookConfiguration),
			Usage: "self-managed: the ValidatingWebhookConfiguration to inject the CA into"},
		flags.Flag{Name: flags.WebhookTimeout.Name, Value: flags.WebhookTimeout.Value(&c.Limits.Timeout),
			Usage: "the largest timeoutSeconds of graceguard's webhook configurations: a review ends by then (or by the shorter ?timeout= its request names), the namespace read a fifth earlier (at least 1s), and the server's read and write timeouts are sized to it; 1s to 30s"},
		flags.Flag{Name: flags.MaxConcurrentReviews.Name, Value: flags.Int(&c.Limits.MaxInFlight),
			Usage: "reviews worked on at once (0: 2 per GOMAXPROCS, at least 4); more wait, at most 128 and only while they can still be answered before their deadline, or are refused at once with 429 and Retry-After"},
		flags.Flag{Name: flags.MaxInflightReviewBytes, Value: flags.Bytes(&c.Limits.InFlightBytes),
			Usage: "request bytes the reviews handled at once may hold together (e.g. 16Mi); at least 7Mi, the largest review"},
		flags.Flag{Name: flags.MaxConnections.Name, Value: flags.Int(&c.MaxConnections),
			Usage: "webhook connections open at once; a new one beyond closes the peer holding the most's longest idle, else oldest pending, one; it is refused when that peer is its own and all of its connections are in a request"},
		flags.Flag{Name: flags.MaxPendingConnections.Name, Value: flags.Int(&c.MaxPendingConnections),
			Usage: "webhook connections that have not sent a whole request yet (in the TLS handshake or sending their first request's headers); a new one beyond closes the oldest of the peer holding the most; fewer than --max-connections"},
		flags.Flag{Name: flags.EnableHTTP2, Value: flags.Bool(&c.EnableHTTP2), NoOptDefVal: "true",
			Usage: "serve the webhooks over HTTP/2 as well as HTTP/1.1 (off: HTTP/2 rapid-reset CVEs)"},
	)
	return flags.Flags{List: list, Check: func() error { return c.Validate() }}
}

// ObserverFlags are the flags of `webhook observe`, bound to c; their
// Validate is c's.
func ObserverFlags(c *observer.Config) flags.Flags {
	r := &c.Reports
	// The cluster defaults, as the webhook takes them: the reports
	// evaluate Pod templates with them (--excluded-namespaces is also
	// where the observer never looks).
	return flags.Flags{List: append(optionflags.List(&c.Options), []flags.Flag{
		flags.MetricsAddressFlag(&c.MetricsBindAddress),
		flags.HealthAddressFlag(&c.HealthProbeBindAddress),
		{Name: flags.LeaderElect, Value: flags.Bool(&c.LeaderElection), NoOptDefVal: "true",
			Usage: "observe from one replica at a time (a Lease in --namespace)"},
		{Name: flags.Namespace, Value: flags.String(&c.Namespace),
			Usage: "graceguard's own namespace, for the leader election Lease; its Pods are never observed (default $POD_NAMESPACE)"},
		{Name: flags.FlushInterval.Name, Value: flags.FlushInterval.Value(&c.FlushInterval),
			Usage: "gather a workload's samples this long before writing its ShutdownReport (one write per workload and interval)"},
		{Name: flags.FlushWritesPerSecond.Name, Value: flags.Int(&c.FlushWritesPerSecond),
			Usage: "ShutdownReport writes a second, every workload's together, at most; past it a workload's next write waits and carries more samples"},
		flags.MinSamplesFlag(&c.MinSamples),
		{Name: flags.MetricsNamespaceLabel, Value: flags.Bool(&c.NamespaceLabel), NoOptDefVal: "true",
			Usage: "label the observed-shutdown metrics with the namespace (one series per namespace with treated Pods)"},
		{Name: flags.Reports, Value: flags.ChoiceValue(&r.Kind, observer.ReportKinds...),
			Usage: "write a policy report per workload of the treated namespaces: off, auto (openreports.io/v1alpha1 Report if served, else wgpolicyk8s.io/v1alpha2 PolicyReport, else none), openreports or policyreport"},
		{Name: flags.ReportsInterval.Name, Value: flags.ReportsInterval.Value(&r.Interval),
			Usage: "evaluate every workload again this often, and ask the API server which report kinds it serves"},
		{Name: flags.ReportsWritesPerSecond.Name, Value: flags.Int(&r.WritesPerSecond),
			Usage: "policy report writes and deletes a second, at most"},
		{Name: flags.ReportsMaxResults.Name, Value: flags.Int(&r.Bounds.MaxResults),
			Usage: "results a report lists, at most (fails first); the summary counts the rest"},
		{Name: flags.ReportsMaxMessageLength.Name, Value: flags.Int(&r.Bounds.MaxMessageLength),
			Usage: "bytes of a result's message, at most; a longer one is cut with a marker that says its length"},
	}...), Check: func() error { return c.Validate() }}
}

// SelftestFlags are the flags of `webhook selftest` (the chart's `helm
// test` Pods), bound to c; their Validate is c's.
func SelftestFlags(c *helmhook.SelftestConfig) flags.Flags {
	return flags.Flags{List: []flags.Flag{
		{Name: flags.Check, Value: flags.ChoiceValue(&c.Check, helmhook.Checks...),
			Usage: "service: call every webhook of the release's configurations as the API server does (the Service's DNS name, their caBundle); " +
				"mutation: create a server-side dry-run Pod in --test-namespace and want it back with graceguard's budget, grace and preStop hook"},
		{Name: flags.Namespace, Value: flags.String(&c.Namespace),
			Usage: "service: the release namespace, whose objects the reviews are of (graceguard never treats them) (default $POD_NAMESPACE)"},
		{Name: flags.MutatingWebhookConfiguration, Value: flags.String(&c.MutatingWebhookConfiguration),
			Usage: "service: the release's MutatingWebhookConfiguration"},
		{Name: flags.ValidatingWebhookConfiguration, Value: flags.String(&c.ValidatingWebhookConfiguration),
			Usage: "service: the release's ValidatingWebhookConfiguration"},
		{Name: flags.TestNamespace, Value: flags.String(&c.TestNamespace),
			Usage: "mutation: a namespace labelled graceguard.io/inject=enabled (enforce mode) to create the dry-run Pod in"},
		{Name: flags.Image, Value: flags.String(&c.Image),
			Usage: "mutation: the dry-run Pod's image (never pulled)"},
		{Name: flags.HookTimeout.Name, Value: flags.HookTimeout.Value(&c.Timeout),
			Usage: "retry this long, then fail with the last reason"},
	}, Check: func() error { return c.Validate() }}
}

// UnregisterFlags are the flags of `webhook unregister` (the chart's
// pre-delete hook), bound to c; their Validate is c's.
func UnregisterFlags(c *helmhook.UnregisterConfig) flags.Flags {
	return flags.Flags{List: []flags.Flag{
		{Name: flags.Release, Value: flags.String(&c.Release),
			Usage: "the Helm release whose webhook configurations to delete: only those its meta.helm.sh/release-name and -namespace annotations name it"},
		{Name: flags.Namespace, Value: flags.String(&c.Namespace),
			Usage: "the release's namespace (default $POD_NAMESPACE)"},
		{Name: flags.MutatingWebhookConfiguration, Value: flags.String(&c.MutatingWebhookConfiguration),
			Usage: "the MutatingWebhookConfiguration to delete"},
		{Name: flags.ValidatingWebhookConfiguration, Value: flags.String(&c.ValidatingWebhookConfiguration),
			Usage: "the ValidatingWebhookConfiguration to delete"},
		{Name: flags.HookTimeout.Name, Value: flags.HookTimeout.Value(&c.Timeout),
			Usage: "give up on the API server after this long"},
	}, Check: func() error { return c.Validate() }}
}

// ProbeConfig is `webhook probe`'s: where it listens.
type ProbeConfig struct {
	Listen string
}

// DefaultProbe listens on :8080, as the Pods measure-routing deploys
// expect.
func DefaultProbe() ProbeConfig { return ProbeConfig{Listen: ":8080"} }

// ProbeFlags are the flags of `webhook probe`, bound to c.
func ProbeFlags(c *ProbeConfig) flags.Flags {
	return flags.Flags{List: []flags.Flag{
		{Name: flags.ProbeListen.Name, Value: flags.String(&c.Listen),
			Usage: "answer every HTTP request on this address with the Pod's name ($POD_NAME)"},
	}, Check: func() error { return flags.ProbeListen.Check(c.Listen) }}
}

// MeasureConfig is `webhook measure`'s, the in-cluster client of
// measure-routing --in-cluster: the plugin's settings, and the probe's
// namespace (its own, $POD_NAMESPACE).
type MeasureConfig struct {
	Settings  kubeprobe.Settings
	Namespace string
}

// MeasureFlags are the flags of `webhook measure`, bound to c: the
// plugin's, which it passes on (kubeprobe.Settings.Args).
func MeasureFlags(c *MeasureConfig) flags.Flags {
	list := append(kubeprobe.SettingsFlags(&c.Settings), flags.Flag{Name: flags.Namespace, Value: flags.String(&c.Namespace),
		Usage: "the probe's namespace (default $POD_NAMESPACE)"})
	return flags.Flags{List: list, Check: func() error {
		var errs []error
		if c.Namespace == "" {
			errs = append(errs, flags.Invalid(flags.Namespace, "", errors.New("required: the probe's namespace (or set $POD_NAMESPACE)")))
		}
		return errors.Join(append(errs, c.Settings.Validate("the probe's Service URL"))...)
	}}
}
