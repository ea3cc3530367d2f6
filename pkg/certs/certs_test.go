package certs

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func validConfig() Config {
	return Config{
		Namespace:                      "graceguard-system",
		SecretName:                     "graceguard-cert",
		ServiceName:                    "graceguard",
		MutatingWebhookConfiguration:   "graceguard",
		ValidatingWebhookConfiguration: "graceguard",
		CertDir:                        "/tmp/k8s-webhook-server/serving-certs",
	}
}

func TestDNSNamesStartWithWhatTheAPIServerDials(t *testing.T) {
	c := validConfig()
	c.ExtraDNSNames = []string{"graceguard.graceguard-system.svc", "webhook.example.com"}
	got := c.DNSNames()
	want := []string{
		"graceguard.graceguard-system.svc",
		"graceguard.graceguard-system.svc.cluster.local",
		"webhook.example.com",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("DNSNames() = %q, want %q (service name first, no duplicates)", got, want)
	}
}

func TestWithDefaultsKeepsWhatIsSet(t *testing.T) {
	c := validConfig()
	c.Lifetimes.Serving = 30 * 24 * time.Hour
	got := c.WithDefaults().Lifetimes
	d := DefaultLifetimes()
	if got.Serving != 30*24*time.Hour {
		t.Errorf("Serving = %s, want the 720h that was set", got.Serving)
	}
	if got.CA != d.CA || got.RenewBefore != d.RenewBefore || got.CheckInterval != d.CheckInterval {
		t.Errorf("unset lifetimes = %s, want the defaults %s", got, d)
	}
}

func TestDefaultLifetimesAreDocumented(t *testing.T) {
	d := DefaultLifetimes()
	const day = 24 * time.Hour
	want := Lifetimes{CA: 3650 * day, Serving: 365 * day, RenewBefore: 90 * day, CheckInterval: 12 * time.Hour}
	if d != want {
		t.Fatalf("DefaultLifetimes() = %s, want %s (the chart README and the package doc state these)", d, want)
	}
}

func TestValidate(t *testing.T) {
	const day = 24 * time.Hour
	cases := []struct {
		name   string
		change func(*Config)
		want   []string // substrings of the error; none means valid
	}{
		{"the chart's configuration is valid", func(*Config) {}, nil},
		{"an empty secret name names the field", func(c *Config) { c.SecretName = "" }, []string{`Secret name "": must not be empty`}},
		{"a secret name with capitals is refused", func(c *Config) { c.SecretName = "Cert" }, []string{`Secret name "Cert": a lowercase RFC 1123 subdomain`}},
		{"a service name must be a DNS-1035 label", func(c *Config) { c.ServiceName = "1graceguard" }, []string{`Service name "1graceguard": a DNS-1035 label`}},
		{"a namespace with dots is refused", func(c *Config) { c.Namespace = "a.b" }, []string{`namespace "a.b": must not contain dots`}},
		{"both webhook configurations are required", func(c *Config) {
			c.MutatingWebhookConfiguration, c.ValidatingWebhookConfiguration = "", ""
		}, []string{`mutating webhook configuration "": must not be empty`, `validating webhook configuration "": must not be empty`}},
		{"a relative cert dir is refused", func(c *Config) { c.CertDir = "certs" }, []string{`cert dir "certs": must be an absolute path`}},
		{"an extra DNS name must be a DNS name", func(c *Config) { c.ExtraDNSNames = []string{"not a name"} }, []string{`extra DNS name "not a name"`}},
		{"a check interval as long as renew-before could miss expiry", func(c *Config) {
			c.Lifetimes = Lifetimes{CheckInterval: 90 * day}
		}, []string{"check interval 2160h0m0s must be shorter than renew-before 2160h0m0s"}},
		{"renew-before as long as the lifetime would renew at every check", func(c *Config) {
			c.Lifetimes = Lifetimes{Serving: 30 * day, RenewBefore: 30 * day}
		}, []string{"serving certificate lifetime 720h0m0s must be longer than renew-before 720h0m0s"}},
		{"a serving certificate may not outlive its CA", func(c *Config) {
			c.Lifetimes = Lifetimes{CA: 200 * day, Serving: 365 * day}
		}, []string{"must not exceed the CA's 4800h0m0s"}},
		{"negative lifetimes are refused", func(c *Config) { c.Lifetimes = Lifetimes{RenewBefore: -time.Hour} }, []string{"must not be negative"}},
		{"short but consistent lifetimes are fine", func(c *Config) {
			c.Lifetimes = Lifetimes{CA: 48 * time.Hour, Serving: 24 * time.Hour, RenewBefore: 8 * time.Hour, CheckInterval: time.Hour}
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.change(&c)
			err := c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestRotatorSettings(t *testing.T) {
	ready := make(chan struct{})
	cr := newRotator(validConfig().WithDefaults(), ready)
	if cr.SecretKey != (types.NamespacedName{Namespace: "graceguard-system", Name: "graceguard-cert"}) {
		t.Errorf("SecretKey = %v", cr.SecretKey)
	}
	wantHooks := []rotator.WebhookInfo{{Name: "graceguard", Type: rotator.Mutating}, {Name: "graceguard", Type: rotator.Validating}}
	if !slices.Equal(cr.Webhooks, wantHooks) {
		t.Errorf("Webhooks = %+v, want the mutating and the validating configuration %+v", cr.Webhooks, wantHooks)
	}
	if cr.NeedLeaderElection() {
		t.Error("the rotator needs leader election; non-leader replicas would never become ready")
	}
	if cr.RestartOnSecretRefresh {
		t.Error("RestartOnSecretRefresh exits the process on every renewal; the server reloads certificates itself")
	}
	if cr.IsReady != ready {
		t.Error("IsReady is not the caller's channel")
	}
	if cr.DNSName != "graceguard.graceguard-system.svc" || !slices.Equal(cr.ExtraDNSNames, []string{"graceguard.graceguard-system.svc.cluster.local"}) {
		t.Errorf("DNSName, ExtraDNSNames = %q, %q", cr.DNSName, cr.ExtraDNSNames)
	}
	if cr.FieldOwner != FieldOwner {
		t.Errorf("FieldOwner = %q, want %q so the caBundle's owner is visible in managedFields", cr.FieldOwner, FieldOwner)
	}
}

// issue makes a CA and a serving certificate the way the rotator does,
// with the serving certificate's validity starting at begin.
func issue(t *testing.T, cfg Config, begin time.Time) (cr *rotator.CertRotator, caPEM, caKeyPEM, certPEM, keyPEM []byte) {
	t.Helper()
	cr = newRotator(cfg.WithDefaults(), make(chan struct{}))
	l := cfg.WithDefaults().Lifetimes
	ca, err := cr.CreateCACert(begin, begin.Add(l.CA))
	if err != nil {
		t.Fatalf("CreateCACert: %v", err)
	}
	certPEM, keyPEM, err = cr.CreateCertPEM(ca, begin, begin.Add(l.Serving))
	if err != nil {
		t.Fatalf("CreateCertPEM: %v", err)
	}
	return cr, ca.CertPEM, ca.KeyPEM, certPEM, keyPEM
}

func TestServingCertificateWorksForEveryServiceName(t *testing.T) {
	cfg := validConfig()
	_, caPEM, _, certPEM, keyPEM := issue(t, cfg, time.Now().Add(-time.Hour))
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()

	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("the CA PEM (the caBundle) does not parse")
	}
	get := func(serverName string) error {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}}}
		resp, err := c.Get(srv.URL)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	for _, name := range cfg.DNSNames() {
		if err := get(name); err != nil {
			t.Errorf("an API server dialing %s with the caBundle: %v", name, err)
		}
	}
	if err := get("graceguard.other-namespace.svc"); err == nil {
		t.Error("the certificate is accepted for a Service in another namespace")
	}
}

func TestCertificatesAreRenewedBeforeTheyExpireAndNotBefore(t *testing.T) {
	cfg := validConfig()
	l := DefaultLifetimes()
	now := time.Now()

	cr, caPEM, caKeyPEM, certPEM, keyPEM := issue(t, cfg, now.Add(-time.Hour))
	// What the configured rotator asks at each check: is the certificate
	// still valid its LookaheadInterval from now?
	dueForRenewal := func(caPEM, certPEM, keyPEM []byte, name string) bool {
		ok, _ := rotator.ValidCert(caPEM, certPEM, keyPEM, name, cr.ExtKeyUsages, now.Add(cr.LookaheadInterval))
		return !ok
	}
	if dueForRenewal(caPEM, certPEM, keyPEM, cr.DNSName) {
		t.Error("a fresh serving certificate is already due for renewal: the rotator would replace it at every check")
	}
	if ok, err := rotator.ValidCert(caPEM, caPEM, caKeyPEM, cr.CAName, nil, now.Add(cr.LookaheadInterval)); !ok {
		t.Errorf("a fresh CA is already due for renewal (%v): the caBundle would change at every check", err)
	}

	// A serving certificate that has lived Serving-RenewBefore (and one
	// check interval) is due, yet still valid: renewal comes before expiry.
	agedBegin := now.Add(-(l.Serving - l.RenewBefore + l.CheckInterval))
	cr, caPEM, _, certPEM, keyPEM = issue(t, cfg, agedBegin)
	if !dueForRenewal(caPEM, certPEM, keyPEM, cr.DNSName) {
		t.Error("a serving certificate within RenewBefore of its expiry is not due for renewal")
	}
	if ok, err := rotator.ValidCert(caPEM, certPEM, keyPEM, cr.DNSName, cr.ExtKeyUsages, now); !ok {
		t.Errorf("the certificate due for renewal has already expired (%v): renewal would come too late", err)
	}
}

// offlineManager builds a manager that never reaches an API server: the
// rotator only registers a cache and a controller until Start.
func offlineManager(t *testing.T) manager.Manager {
	t.Helper()
	mgr, err := manager.New(&rest.Config{Host: "https://127.0.0.1:1"}, manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatalf("manager.New: %v", err)
	}
	return mgr
}

func TestAddRotator(t *testing.T) {
	mgr := offlineManager(t)
	bad := validConfig()
	bad.SecretName = ""
	if err := AddRotator(mgr, bad, make(chan struct{})); err == nil || !strings.Contains(err.Error(), "Secret name") {
		t.Errorf("AddRotator with no secret name = %v, want an error naming the Secret name", err)
	}
	if err := AddRotator(nil, validConfig(), make(chan struct{})); err == nil {
		t.Error("AddRotator(nil manager) = nil")
	}
	if err := AddRotator(mgr, validConfig(), nil); err == nil {
		t.Error("AddRotator(nil ready) = nil; nobody could learn the certificates are ready")
	}
	// The refused calls above registered nothing: this one may take the
	// process's single controller name.
	if err := AddRotator(mgr, validConfig(), make(chan struct{})); err != nil {
		t.Fatalf("AddRotator(valid) = %v", err)
	}
	if err := AddRotator(offlineManager(t), validConfig(), make(chan struct{})); err == nil {
		t.Error("a second AddRotator in one process succeeded; the doc says it cannot (controller names are unique)")
	}
}
