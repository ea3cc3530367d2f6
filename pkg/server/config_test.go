package server

import (
	"strings"
	"testing"
	"time"
)

func TestDefaultConfigIsValid(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("the documented defaults: %v", err)
	}
}

// Each setting set wrong: the error names the webhook flag that sets it,
// the value as the flag prints it, and what is accepted. The cluster
// defaults and the review limits are their owners' checks, reported here
// beside the server's own.
func TestConfigValidateNamesTheFlagTheValueAndWhatIsAccepted(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want []string
	}{
		{name: "a port out of range", edit: func(c *Config) { c.Port = 70000 }, want: []string{"--port=70000: want 1 to 65535"}},
		{name: "no port", edit: func(c *Config) { c.Port = 0 }, want: []string{"--port=0: want 1 to 65535"}},
		{name: "a shutdown delay over 5m", edit: func(c *Config) { c.ShutdownDelay = 6 * time.Minute },
			want: []string{"--shutdown-delay=6m: want 0s to 5m"}},
		{name: "no drain", edit: func(c *Config) { c.DrainTimeout = 0 }, want: []string{"--drain-timeout=0s: want 1s to 5m"}},
		{name: "no cert dir", edit: func(c *Config) { c.CertDir = "" }, want: []string{"--cert-dir: must not be empty"}},
		{name: "a cert mode there is none of", edit: func(c *Config) { c.CertMode = "vault" },
			want: []string{"--cert-mode=vault: want files or self-managed"}},
		{name: "an address without a port", edit: func(c *Config) { c.MetricsBindAddress = "localhost" },
			want: []string{"--metrics-bind-address=localhost: address localhost: missing port in address; want host:port, :port or 0"}},
		{name: "too few connections", edit: func(c *Config) { c.MaxConnections = 8 }, want: []string{"--max-connections=8: want 16 to 65536"}},
		{name: "as many pending connections as open ones", edit: func(c *Config) { c.MaxPendingConnections = 256 },
			want: []string{"--max-pending-connections=256: want 1 to 255, fewer than --max-connections=256, so that kept-alive connections always have room"}},
		{name: "more pending connections than open ones", edit: func(c *Config) { c.MaxConnections, c.MaxPendingConnections = 100, 128 },
			want: []string{"--max-pending-connections=128: want 1 to 99, fewer than --max-connections=100"}},
		{name: "no pending connections", edit: func(c *Config) { c.MaxPendingConnections = 0 },
			want: []string{"--max-pending-connections=0: want 1 to 255"}},
		{name: "both connection caps wrong", edit: func(c *Config) { c.MaxConnections, c.MaxPendingConnections = 0, 70000 },
			want: []string{"--max-connections=0: want 16 to 65536", "--max-pending-connections=70000: want 1 to 65535"}},
		{name: "a cluster default the cap does not fit", edit: func(c *Config) { c.Options.MaxGrace = 20 * time.Second },
			want: []string{"--max-grace-period=20s: the default budget alone needs 30s"}},
		{name: "a review limit out of range", edit: func(c *Config) { c.Limits.Timeout = 31 * time.Second },
			want: []string{"--webhook-timeout=31s: want 1s to 30s"}},
		{name: "self-managed needs a namespace", edit: func(c *Config) { c.CertMode, c.Namespace = CertModeSelfManaged, "" },
			want: []string{"--namespace: required with --cert-mode=self-managed (the Secret's namespace; default $POD_NAMESPACE)"}},
		{name: "every wrong setting at once", edit: func(c *Config) { c.Port, c.DrainTimeout, c.ShutdownDelay = 70000, 0, 6*time.Minute },
			want: []string{"--port=70000: want 1 to 65535", "--drain-timeout=0s: want 1s to 5m", "--shutdown-delay=6m: want 0s to 5m"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v, want it to say %q", err, w)
				}
			}
		})
	}
}

// The invariant: whatever Validate accepts in self-managed mode, the
// certificates' own validation accepts too, so a misspelt name exits 2 at
// validation rather than 1 once the rotator is set up.
func TestSelfManagedConfigThatValidatesCanRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // "" for valid
	}{
		{"as given", func(*Config) {}, ""},
		{"a Service name with capitals", func(c *Config) { c.ServiceName = "Bad_Name" }, "--service-name=Bad_Name: a DNS-1035 label"},
		{"a relative cert dir", func(c *Config) { c.CertDir = "relative/dir" }, "--cert-dir=relative/dir: must be an absolute path"},
		{"a namespace with dots", func(c *Config) { c.Namespace = "a.b" }, "--namespace=a.b: must not contain dots"},
		{"a Secret name with capitals", func(c *Config) { c.CertSecretName = "Certs" }, "--cert-secret-name=Certs: a lowercase RFC 1123 subdomain"},
		{"no mutating webhook configuration", func(c *Config) { c.MutatingWebhookConfiguration = "" }, "--mutating-webhook-configuration: must not be empty"},
		{"a validating webhook configuration with _", func(c *Config) { c.ValidatingWebhookConfiguration = "x_y" }, "--validating-webhook-configuration=x_y: a lowercase RFC 1123 subdomain"},
		{"two wrong names", func(c *Config) { c.ServiceName, c.CertDir = "1graceguard", "certs" }, "--service-name=1graceguard"},
	} {
		c := DefaultConfig()
		c.CertMode, c.Namespace, c.CertDir = CertModeSelfManaged, "graceguard-system", "/certs"
		tc.edit(&c)
		err, certsErr := c.Validate(), c.Certs().Validate()
		switch {
		case tc.want == "" && (err != nil || certsErr != nil):
			t.Errorf("%s: Validate() = %v, certs: %v; want both valid", tc.name, err, certsErr)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: Validate() = %v, want it to say %q", tc.name, err, tc.want)
		case (err == nil) != (certsErr == nil):
			t.Errorf("%s: Validate() = %v but the certificates' Validate() = %v", tc.name, err, certsErr)
		}
	}
	// In files mode the names are not used and not checked.
	c := DefaultConfig()
	c.ServiceName = "Bad_Name"
	if err := c.Validate(); err != nil {
		t.Errorf("files mode: %v", err)
	}
}
