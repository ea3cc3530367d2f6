package config

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/observer"
	"github.com/graceguard/graceguard/pkg/server"
)

// parse fills fl from args as cmd/webhook does, and validates.
func parse(t *testing.T, fl flags.Flags, args ...string) error {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fl.Bind(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return fl.Validate()
}

func TestDefaultsAreValid(t *testing.T) {
	c := Default()
	if err := Flags(&c).Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	o := observer.Default()
	o.Namespace = "graceguard-system"
	if err := ObserverFlags(&o).Validate(); err != nil {
		t.Fatalf("the observer's defaults: %v", err)
	}
}

// The flags' Validate is the configuration's, of the values parsed, for
// the server's flags, the cluster defaults and the observer's alike.
func TestFlagsValidateWhatWasParsed(t *testing.T) {
	for _, tc := range []struct {
		observe bool
		args    []string
		want    []string // nil: valid
	}{
		{args: []string{"--webhook-timeout=30s", "--max-connections=100", "--max-pending-connections=99"}},
		{args: []string{"--webhook-timeout=31s"}, want: []string{"--webhook-timeout=31s: want 1s to 30s"}},
		{args: []string{"--max-inflight-review-bytes=1Mi"}, want: []string{"--max-inflight-review-bytes=1Mi: want at least 7340032 (7Mi)"}},
		{args: []string{"--max-connections=100", "--max-pending-connections=128"},
			want: []string{"--max-pending-connections=128: want 1 to 99, fewer than --max-connections=100"}},
		{args: []string{"--max-grace-period=20s"}, want: []string{"--max-grace-period=20s: the default budget alone needs 30s"}},
		{args: []string{"--routing-profile=corp=45s,grace-floor=2m", "--default-routing-profile=corp", "--max-grace-period=2m"}},
		{args: []string{"--routing-profile=corp=45s,grace-floor=2m", "--default-routing-profile=corp", "--max-grace-period=119s"},
			want: []string{"--default-routing-profile=corp: its Pods need 120s, over --max-grace-period=1m59s"}},
		{args: []string{"--cert-mode=self-managed", "--namespace="}, want: []string{"--namespace: required with --cert-mode=self-managed"}},
		{args: []string{"--cert-mode=self-managed", "--namespace=x", "--service-name=Bad_Name"}, want: []string{"--service-name=Bad_Name: a DNS-1035 label"}},
		{observe: true, args: []string{"--namespace=x"}},
		{observe: true, args: []string{"--namespace="}, want: []string{"--namespace: required with --leader-elect"}},
		{observe: true, args: []string{"--namespace=", "--leader-elect=false"}},
		{observe: true, args: []string{"--namespace=x", "--flush-interval=1ms"}, want: []string{"--flush-interval=1ms: want 10ms to 10m"}},
		{observe: true, args: []string{"--namespace=x", "--min-samples=51"}, want: []string{"--min-samples=51: want 1 to 50 (a report keeps 50 samples)"}},
	} {
		c, o := Default(), observer.Default()
		c.Namespace = ""
		fl := Flags(&c)
		if tc.observe {
			fl = ObserverFlags(&o)
		}
		err := parse(t, fl, tc.args...)
		if tc.want == nil && err != nil {
			t.Errorf("%v: %v, want it valid", tc.args, err)
		}
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %v, want it to say %q", tc.args, err, w)
			}
		}
	}
}

// The owners' Validate print each value as its flag does, so the message
// says back what the person typed (or what its default is).
func TestErrorsPrintValuesAsTheFlagsDo(t *testing.T) {
	for _, tc := range []struct {
		args []string
		n    int // flag errors
	}{
		{[]string{"--port=70000", "--drain-timeout=0s", "--shutdown-delay=6m", "--webhook-timeout=500ms", "--max-concurrent-reviews=-1"}, 5},
		{[]string{"--max-inflight-review-bytes=1Mi", "--max-connections=8", "--max-pending-connections=70000", "--max-grace-period=20s"}, 4},
		{[]string{"--default-routing-profile=aws-nlb", "--metrics-bind-address=localhost", "--health-probe-bind-address=:99999", "--cert-dir=relative"}, 3}, // a relative --cert-dir is only wrong when self-managed
		{[]string{"--cert-mode=self-managed", "--namespace=a.b", "--cert-secret-name=Certs", "--service-name=1x", "--cert-dir=certs",
			"--mutating-webhook-configuration=x_y", "--validating-webhook-configuration="}, 6},
	} {
		c := Default()
		fl := Flags(&c)
		checkPrinted(t, fl, parse(t, fl, tc.args...), tc.n)
	}
	o := observer.Default()
	fl := ObserverFlags(&o)
	checkPrinted(t, fl, parse(t, fl, "--namespace=", "--flush-interval=11m", "--min-samples=0", "--metrics-bind-address=x"), 4)
}

// checkPrinted checks that err holds n flag errors, each naming a flag of
// fl and its value as the flag prints it.
func checkPrinted(t *testing.T, fl flags.Flags, err error, n int) {
	t.Helper()
	var found []*flags.Error
	var walk func(error)
	walk = func(err error) {
		var fe *flags.Error
		switch e := err.(type) {
		case nil:
		case interface{ Unwrap() []error }:
			for _, err := range e.Unwrap() {
				walk(err)
			}
		default:
			if !errors.As(err, &fe) {
				t.Errorf("%v: not a flag's error", err)
				return
			}
			found = append(found, fe)
		}
	}
	walk(err)
	if len(found) != n {
		t.Errorf("%d flag errors, want %d: %v", len(found), n, err)
	}
	for _, fe := range found {
		i := slices.IndexFunc(fl.List, func(f flags.Flag) bool { return f.Name == fe.Flag })
		if i < 0 {
			t.Errorf("%v: no flag --%s", fe, fe.Flag)
		} else if got := fl.List[i].Value.String(); got != fe.Value {
			t.Errorf("%v: the value printed is %q, the flag prints %q", fe, fe.Value, got)
		}
	}
}

func TestEveryFlagHasHelpAndAUniqueName(t *testing.T) {
	c := Default()
	o := observer.Default()
	for _, fl := range []flags.Flags{Flags(&c), ObserverFlags(&o)} {
		seen := map[string]bool{}
		for _, f := range fl.List {
			if f.Usage == "" || seen[f.Name] {
				t.Errorf("--%s: usage %q, seen before: %v", f.Name, f.Usage, seen[f.Name])
			}
			seen[f.Name] = true
		}
	}
}

// The alias keeps the harness's name for the server's configuration.
var _ server.Config = Config{}
