package flags

import (
	"errors"
	"testing"
	"time"

	"github.com/graceguard/graceguard/pkg/budget"
)

func TestRangesSayTheFlagTheValueAndTheRange(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string // "" for nil
	}{
		{"an int in range", Port.Check(1), ""},
		{"an int at the top", Port.Check(65535), ""},
		{"an int under", Port.Check(0), "--port=0: want 1 to 65535"},
		{"an int over, with why", MinSamples.Check(51), "--min-samples=51: want 1 to 50 (a report keeps 50 samples)"},
		{"a duration in range", DrainTimeout.Check(time.Second), ""},
		{"a duration under", DrainTimeout.Check(0), "--drain-timeout=0s: want 1s to 5m"},
		{"a duration over, with why", WebhookTimeout.Check(31 * time.Second), "--webhook-timeout=31s: want 1s to 30s, the range of a webhook's timeoutSeconds"},
		{"the grace cap under 1s", MaxGrace.Check(500 * time.Millisecond), "--max-grace-period=500ms: want 1s to 1h"},
		{"a term's default, named by its term", TermDefaultRange(budget.Work).Check(2 * time.Hour), "--default-max-work=2h: want 0s to 1h"},
		{"a Go duration printed as Go prints it", FlushInterval.Check(11 * time.Minute), "--flush-interval=11m0s: want 10ms to 10m"},
		{"an address", HealthProbeBindAddress.Check("127.0.0.1:8081"), ""},
		{"no port", HealthProbeBindAddress.Check("localhost"), "--health-probe-bind-address=localhost: address localhost: missing port in address; want host:port or :port"},
		{"a port out of range", MetricsBindAddress.Check(":70000"), `--metrics-bind-address=:70000: port "70000" is not 0-65535; want host:port, :port or 0`},
		{"off", MetricsBindAddress.Check("0"), ""},
		{"an empty value", Invalid(CertDir, "", errors.New("must not be empty")), "--cert-dir: must not be empty"},
	} {
		got := ""
		if tc.err != nil {
			got = tc.err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Fewer connections may be pending than open, at every --max-connections.
func TestPendingConnectionsFitUnderOpenOnes(t *testing.T) {
	if MaxPendingConnections.Max != MaxConnections.Max-1 || MaxPendingConnections.Min >= MaxConnections.Min {
		t.Errorf("pending %+v, open %+v", MaxPendingConnections, MaxConnections)
	}
}

func TestCeilingDuration(t *testing.T) {
	var d time.Duration
	v := CeilingDuration(&d)
	for in, want := range map[string]time.Duration{"30": 30 * time.Second, "48h": 48 * time.Hour, "720h": MaxCeiling, "0": 0} {
		if err := v.Set(in); err != nil || d != want {
			t.Errorf("%q: %v, %v; want %v", in, d, err, want)
		}
	}
	for _, in := range []string{"721h", "-1s", "2592001", "soon"} {
		if err := v.Set(in); err == nil {
			t.Errorf("%q accepted as %v", in, d)
		} else if want := `"` + in + `" is not a duration from 0 to 720h; want a Go duration (30s, 10m, 48h) or whole seconds (30)`; err.Error() != want {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}
