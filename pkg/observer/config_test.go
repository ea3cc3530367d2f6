package observer

import (
	"strings"
	"testing"
	"time"
)

func TestDefaultConfigIsValid(t *testing.T) {
	c := Default()
	c.Namespace = "graceguard-system" // $POD_NAMESPACE in the chart
	if err := c.Validate(); err != nil {
		t.Fatalf("the documented defaults: %v", err)
	}
}

// Each setting set wrong: the error names the flag of `webhook observe`
// that sets it, the value as the flag prints it, and what is accepted.
func TestConfigValidateNamesTheFlagTheValueAndWhatIsAccepted(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want []string // nil: valid
	}{
		{name: "a namespace", edit: func(c *Config) {}},
		{name: "no namespace to hold the Lease", edit: func(c *Config) { c.Namespace = "" },
			want: []string{"--namespace: required with --leader-elect (the Lease's namespace; default $POD_NAMESPACE)"}},
		{name: "no namespace and no leader election", edit: func(c *Config) { c.Namespace, c.LeaderElection = "", false }},
		{name: "a flush interval under 10ms", edit: func(c *Config) { c.FlushInterval = time.Millisecond },
			want: []string{"--flush-interval=1ms: want 10ms to 10m"}},
		{name: "a flush interval over 10m", edit: func(c *Config) { c.FlushInterval = 11 * time.Minute },
			want: []string{"--flush-interval=11m0s: want 10ms to 10m"}},
		{name: "no ShutdownReport writes at all", edit: func(c *Config) { c.FlushWritesPerSecond = 0 },
			want: []string{"--flush-writes-per-second=0: want 1 to 1000"}},
		{name: "ShutdownReport writes past any API server's taste", edit: func(c *Config) { c.FlushWritesPerSecond = 5000 },
			want: []string{"--flush-writes-per-second=5000: want 1 to 1000"}},
		{name: "more samples than a report keeps", edit: func(c *Config) { c.MinSamples = 51 },
			want: []string{"--min-samples=51: want 1 to 50 (a report keeps 50 samples)"}},
		{name: "no samples", edit: func(c *Config) { c.MinSamples = 0 },
			want: []string{"--min-samples=0: want 1 to 50"}},
		{name: "a health port out of range", edit: func(c *Config) { c.HealthProbeBindAddress = ":99999" },
			want: []string{`--health-probe-bind-address=:99999: port "99999" is not 0-65535; want host:port or :port`}},
		{name: "health probes cannot be disabled", edit: func(c *Config) { c.HealthProbeBindAddress = "0" },
			want: []string{`--health-probe-bind-address=0: address 0: missing port in address; want host:port or :port`}},
		{name: "metrics disabled", edit: func(c *Config) { c.MetricsBindAddress = "0" }},
		{name: "a metrics address without a port", edit: func(c *Config) { c.MetricsBindAddress = "localhost" },
			want: []string{"--metrics-bind-address=localhost: address localhost: missing port in address; want host:port, :port or 0"}},
		{name: "reports of a kind that does not exist", edit: func(c *Config) { c.Reports.Kind = "kyverno" },
			want: []string{"--reports=kyverno: want one of off, auto, openreports, policyreport"}},
		{name: "reports every half second", edit: func(c *Config) { c.Reports.Interval = 500 * time.Millisecond },
			want: []string{"--reports-interval=500ms: want 1s to 24h"}},
		{name: "no report writes at all", edit: func(c *Config) { c.Reports.WritesPerSecond = 0 },
			want: []string{"--reports-writes-per-second=0: want 1 to 100"}},
		{name: "reports of more results than stay small", edit: func(c *Config) { c.Reports.Bounds.MaxResults = 201 },
			want: []string{"--reports-max-results=201: want 1 to 200"}},
		{name: "messages too short to read", edit: func(c *Config) { c.Reports.Bounds.MaxMessageLength = 10 },
			want: []string{"--reports-max-message-length=10: want 64 to 2048"}},
		{name: "a cluster default the webhook refuses too", edit: func(c *Config) { c.Options.MaxGrace = 0 },
			want: []string{"--max-grace-period=0s: must be at least 1s"}},
		{name: "everything wrong at once", edit: func(c *Config) { c.Namespace, c.FlushInterval, c.MinSamples = "", 0, 99 },
			want: []string{"--namespace: required", "--flush-interval=0s: want 10ms to 10m", "--min-samples=99: want 1 to 50"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			c.Namespace = "x"
			tc.edit(&c)
			err := c.Validate()
			if tc.want == nil && err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v, want it to say %q", err, w)
				}
			}
		})
	}
}
