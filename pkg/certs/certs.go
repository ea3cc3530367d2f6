package certs

import (
	"crypto/x509"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Names written into the certificates and onto the objects the rotator
// updates, so `kubectl get -o yaml --show-managed-fields` says who owns
// the caBundle.
const (
	// CAName is the common name of the self-signed CA.
	CAName = "graceguard-ca"
	// CAOrganization is the CA's organization.
	CAOrganization = "graceguard"
	// FieldOwner is the field manager of the rotator's updates (the
	// webhook configurations' caBundle, the Secret's data). Helm, applying
	// the chart, owns neither, so an upgrade never removes them.
	FieldOwner = "graceguard-cert-rotator"
	// controllerName must be unique in the process (controller-runtime
	// checks), so AddRotator can be called once per process.
	controllerName = "graceguard-cert-rotator"
)

// Lifetimes say how long certificates live and when they are replaced.
//
// The rotator checks every CheckInterval and replaces a certificate that
// will not be valid RenewBefore from now. A new serving certificate is
// signed by the same CA, so the caBundle does not change and the old
// certificate stays valid while the kubelet projects the new one into
// every replica (about a minute). A new CA (once in CA-RenewBefore) is
// injected at once and the replicas serve a certificate from the old CA
// until the kubelet syncs their volume: admission calls can fail for that
// minute. cert-controller has no CA overlap; a long CA makes this rare.
type Lifetimes struct {
	// CA is the validity of the self-signed CA. Default 10 years.
	CA time.Duration
	// Serving is the validity of the serving certificate. Default 1 year.
	Serving time.Duration
	// RenewBefore is how long before expiry either is replaced. Default 90 days.
	RenewBefore time.Duration
	// CheckInterval is how often the certificates are checked. Default 12h.
	CheckInterval time.Duration
}

// DefaultLifetimes returns the documented defaults: a 10-year CA, a 1-year
// serving certificate, both replaced 90 days before they expire, checked
// every 12 hours.
func DefaultLifetimes() Lifetimes {
	const day = 24 * time.Hour
	return Lifetimes{
		CA:            10 * 365 * day,
		Serving:       365 * day,
		RenewBefore:   90 * day,
		CheckInterval: 12 * time.Hour,
	}
}

// Config names the Secret, the Service and the webhook configurations.
// The webhook fills it from its flags (server.Config.Certs).
type Config struct {
	// Namespace holds the Secret and the Service, graceguard's own.
	Namespace string
	// SecretName is the Secret keeping ca.crt, ca.key, tls.crt and tls.key;
	// it must exist, and its data may be empty.
	SecretName string
	// ServiceName is the webhook's Service: the API
	// server dials <service>.<namespace>.svc, the certificate's common name.
	ServiceName string
	// ExtraDNSNames are added to the certificate's names after
	// <service>.<namespace>.svc and <service>.<namespace>.svc.cluster.local.
	ExtraDNSNames []string
	// MutatingWebhookConfiguration gets the CA as caBundle of every webhook.
	MutatingWebhookConfiguration string
	// ValidatingWebhookConfiguration gets the CA as caBundle of every webhook.
	ValidatingWebhookConfiguration string
	// CertDir is where the Secret is mounted; ready is closed
	// once tls.crt appears there and the CA is injected.
	CertDir string
	// Lifetimes of the certificates; zero fields take DefaultLifetimes.
	Lifetimes Lifetimes
}

// DNSNames returns the names the serving certificate is valid for; the
// first is the one the API server dials.
func (c Config) DNSNames() []string {
	svc := c.ServiceName + "." + c.Namespace + ".svc"
	names := []string{svc, svc + ".cluster.local"}
	for _, n := range c.ExtraDNSNames {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// WithDefaults returns c with zero lifetimes replaced by DefaultLifetimes.
func (c Config) WithDefaults() Config {
	d := DefaultLifetimes()
	l := &c.Lifetimes
	if l.CA == 0 {
		l.CA = d.CA
	}
	if l.Serving == 0 {
		l.Serving = d.Serving
	}
	if l.RenewBefore == 0 {
		l.RenewBefore = d.RenewBefore
	}
	if l.CheckInterval == 0 {
		l.CheckInterval = d.CheckInterval
	}
	return c
}

// The rules Validate applies to Config's names and directory: the API
// server's own rules for each object's name. The webhook's validation of
// its flags (server.Config.Validate) checks them with these, so a
// configuration the flags accept is one Validate accepts. Each says what is wrong with a value, and what
// is accepted, or returns nil.
var (
	CheckNamespace            = nameRule(validation.IsDNS1123Label)
	CheckSecretName           = nameRule(validation.IsDNS1123Subdomain)
	CheckServiceName          = nameRule(validation.IsDNS1035Label)
	CheckWebhookConfiguration = nameRule(validation.IsDNS1123Subdomain)
)

func nameRule(rule func(string) []string) func(string) error {
	return func(v string) error {
		if v == "" {
			return errors.New("must not be empty")
		}
		if msgs := rule(v); len(msgs) > 0 {
			return errors.New(strings.Join(msgs, "; "))
		}
		return nil
	}
}

// CheckCertDir requires an absolute path: the rotator and the Secret sync
// write there, whatever the process's working directory.
func CheckCertDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return errors.New("must be an absolute path (where the Secret is mounted)")
	}
	return nil
}

// Validate checks c after defaulting, naming the field at fault. The
// lifetimes must let a certificate be replaced before it expires without
// replacing it at every check:
// CheckInterval < RenewBefore < Serving <= CA.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	for _, f := range []struct {
		name, value string
		check       func(string) error
	}{
		{"namespace", c.Namespace, CheckNamespace},
		{"Secret name", c.SecretName, CheckSecretName},
		{"Service name", c.ServiceName, CheckServiceName},
		{"mutating webhook configuration", c.MutatingWebhookConfiguration, CheckWebhookConfiguration},
		{"validating webhook configuration", c.ValidatingWebhookConfiguration, CheckWebhookConfiguration},
		{"cert dir", c.CertDir, CheckCertDir},
	} {
		if err := f.check(f.value); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", f.name, f.value, err))
		}
	}
	for _, n := range c.ExtraDNSNames {
		if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("extra DNS name %q: %s", n, strings.Join(msgs, "; ")))
		}
	}

	l := c.Lifetimes
	switch {
	case l.CheckInterval < 0, l.RenewBefore < 0, l.Serving < 0, l.CA < 0:
		errs = append(errs, fmt.Errorf("certificate lifetimes must not be negative (%s)", l))
	case l.CheckInterval >= l.RenewBefore:
		errs = append(errs, fmt.Errorf("certificate check interval %s must be shorter than renew-before %s, or a certificate could expire between two checks", l.CheckInterval, l.RenewBefore))
	case l.RenewBefore >= l.Serving:
		errs = append(errs, fmt.Errorf("serving certificate lifetime %s must be longer than renew-before %s, or it would be replaced at every check", l.Serving, l.RenewBefore))
	case l.Serving > l.CA:
		errs = append(errs, fmt.Errorf("serving certificate lifetime %s must not exceed the CA's %s", l.Serving, l.CA))
	}
	return errors.Join(errs...)
}

// String shows the lifetimes for logs and errors.
func (l Lifetimes) String() string {
	return fmt.Sprintf("CA %s, serving %s, renew %s before expiry, checked every %s", l.CA, l.Serving, l.RenewBefore, l.CheckInterval)
}

// AddRotator registers certificate rotation on mgr: at start, and then
// every CheckInterval, it fills or renews the Secret and injects the CA
// into both webhook configurations. ready is closed once this replica has
// tls.crt in CertDir and the CA is injected; serve the webhooks, and
// report ready, only after that. If the certificates do
// not appear in CertDir after about 17 minutes of retries, the rotator
// stops the manager with an error so the Pod restarts.
//
// Every replica runs the rotator (it does not need leader election):
// each must learn that its own certificates are mounted, and concurrent
// writers are safe because the Secret is updated with its resourceVersion.
// The loser of a race gets a conflict, retries with back-off from its
// cache, finds the winner's valid certificates and keeps them.
//
// The manager's credentials need get, list, watch and update on the Secret
// SecretName in Namespace and on the two webhook configurations, by name
// only: the rotator's lists and watches are narrowed to those names (see
// narrowedManager).
//
// AddRotator can be called once per process.
func AddRotator(mgr manager.Manager, cfg Config, ready chan struct{}) error {
	if mgr == nil {
		return errors.New("certs: nil manager")
	}
	if ready == nil {
		return errors.New("certs: nil ready channel")
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	if err := rotator.AddRotator(narrow(mgr, cfg), newRotator(cfg.WithDefaults(), ready)); err != nil {
		return fmt.Errorf("certs: setting up rotation of Secret %s/%s: %w", cfg.Namespace, cfg.SecretName, err)
	}
	return nil
}

// newRotator translates a defaulted, valid Config into cert-controller's
// settings, every one set explicitly rather than left to its defaults.
func newRotator(cfg Config, ready chan struct{}) *rotator.CertRotator {
	names := cfg.DNSNames()
	return &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.SecretName},
		CertDir:        cfg.CertDir,
		CAName:         CAName,
		CAOrganization: CAOrganization,
		DNSName:        names[0],
		ExtraDNSNames:  names[1:],
		IsReady:        ready,
		Webhooks: []rotator.WebhookInfo{
			{Name: cfg.MutatingWebhookConfiguration, Type: rotator.Mutating},
			{Name: cfg.ValidatingWebhookConfiguration, Type: rotator.Validating},
		},
		FieldOwner: FieldOwner,
		// The webhook server reloads tls.crt and tls.key when they change
		// on disk; exiting would cost a restart for nothing.
		RestartOnSecretRefresh: false,
		ExtKeyUsages:           &[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		// Every replica must run it: ready is per replica.
		RequireLeaderElection:  false,
		CaCertDuration:         cfg.Lifetimes.CA,
		ServerCertDuration:     cfg.Lifetimes.Serving,
		RotationCheckFrequency: cfg.Lifetimes.CheckInterval,
		LookaheadInterval:      cfg.Lifetimes.RenewBefore,
		CertName:               "tls.crt",
		KeyName:                "tls.key",
		// Inject the CA only once this replica has certificates on disk.
		EnableReadinessCheck: true,
		ControllerName:       controllerName,
	}
}
