package config

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/observer"
)

// parse fills a default Config from args, as cmd/webhook does.
func parse(t *testing.T, args ...string) (Config, error) {
	t.Helper()
	c := Default()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	c.Flags().Bind(fs)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	return c, c.Validate()
}

func TestDefaultsAreValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	o := observer.Default()
	o.Namespace = "graceguard-system"
	if err := ObserverFlags(&o).Validate(); err != nil {
		t.Fatalf("the observer's defaults: %v", err)
	}
	if err := flags.ValidateOptions(mutate.DefaultOptions()); err != nil {
		t.Fatalf("the cluster defaults: %v", err)
	}
}

func TestValidateNamesTheFlagTheValueAndWhatIsAccepted(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		edit func(*Config)
		want []string
	}{
		{name: "a timeout over a webhook's 30s", args: []string{"--webhook-timeout=31s"}, want: []string{"--webhook-timeout=31s: want 1s to 30s"}},
		{name: "a timeout under 1s", args: []string{"--webhook-timeout=500ms"}, want: []string{"--webhook-timeout=500ms: want 1s to 30s"}},
		{name: "no concurrent reviews", args: []string{"--max-concurrent-reviews=0"}, want: []string{"--max-concurrent-reviews=0: want 1 to 10000"}},
		{name: "room for less than the largest review", args: []string{"--max-inflight-review-bytes=1Mi"},
			want: []string{"--max-inflight-review-bytes=1Mi: want at least 7340032 (7Mi), the largest review"}},
		{name: "too few connections", args: []string{"--max-connections=8"}, want: []string{"--max-connections=8: want 16 to 65536"}},
		{name: "as many pending connections as open ones", args: []string{"--max-pending-connections=256"},
			want: []string{"--max-pending-connections=256: want 1 to 255, fewer than --max-connections=256, so that kept-alive connections always have room"}},
		{name: "more pending connections than open ones", args: []string{"--max-connections=100", "--max-pending-connections=128"},
			want: []string{"--max-pending-connections=128: want 1 to 99, fewer than --max-connections=100"}},
		{name: "no pending connections", args: []string{"--max-pending-connections=0"},
			want: []string{"--max-pending-connections=0: want 1 to 255"}},
		{name: "both connection caps wrong", args: []string{"--max-connections=0", "--max-pending-connections=70000"},
			want: []string{"--max-connections=0: want 16 to 65536", "--max-pending-connections=70000: want 1 to 65535"}},
		{name: "a cap the defaults do not fit", args: []string{"--max-grace-period=20s"},
			want: []string{"--max-grace-period=20s: the default budget alone needs 30s (routing 5s + work 20s + cleanup 2s + margin 3s)"}},
		{name: "an unknown default profile", args: []string{"--default-routing-profile=aws-nlb"},
			want: []string{"--default-routing-profile=aws-nlb: no such profile; want one of kube-proxy, ingress-nginx, aws-alb-ip, aws-nlb-ip, gke-neg, azure-agic"}},
		{name: "a default profile over the cap", args: []string{"--default-routing-profile=aws-nlb-ip", "--max-grace-period=1m"},
			want: []string{"--default-routing-profile=aws-nlb-ip: its Pods need 145s, over --max-grace-period=1m"}},
		{name: "a profile given twice in code", edit: func(c *Config) {
			p, _ := budget.ParseProfile("x=1s")
			c.Options.Profiles = append(c.Options.Profiles, p, p)
		}, want: []string{`--routing-profile: "x" is given twice`}},
		{name: "a negative ceiling set in code", edit: func(c *Config) {
			c.Options.Ceilings = []budget.Ceiling{{Name: mutate.CeilingKarpenter, Limit: -time.Second}}
		}, want: []string{"--karpenter-termination-grace-period=-1s: must not be negative"}},
		{name: "a preStop handler set in code", edit: func(c *Config) { c.Options.PreStop = "wait" },
			want: []string{`--prestop-handler=wait: unsupported preStop handler "wait"`}},
		{name: "an address without a port", args: []string{"--metrics-bind-address=localhost"},
			want: []string{`--metrics-bind-address=localhost: address localhost: missing port in address; want host:port, :port or 0`}},
		{name: "every wrong flag at once", args: []string{"--port=70000", "--drain-timeout=0s", "--shutdown-delay=6m"},
			want: []string{"--port=70000: want 1 to 65535", "--drain-timeout=0s: want 1s to 5m", "--shutdown-delay=6m: want 0s to 5m"}},
		{name: "self-managed needs a namespace", args: []string{"--cert-mode=self-managed", "--namespace="},
			want: []string{"--namespace: required with --cert-mode=self-managed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parse(t, tc.args...)
			if tc.edit != nil {
				tc.edit(&c)
				err = c.Validate()
			}
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want it to say %q", err, w)
				}
			}
		})
	}
}

// The package's invariant: whatever the flags accept in self-managed mode,
// the certificates' own validation accepts too, so a misspelt name exits 2
// at validation rather than 1 once the rotator is set up.
func TestSelfManagedConfigThatValidatesCanRun(t *testing.T) {
	base := []string{"--cert-mode=self-managed", "--namespace=graceguard-system", "--cert-dir=/certs"}
	for _, tc := range []struct {
		args []string
		want string // "" for valid
	}{
		{nil, ""},
		{[]string{"--service-name=Bad_Name"}, "--service-name=Bad_Name: a DNS-1035 label"},
		{[]string{"--cert-dir=relative/dir"}, "--cert-dir=relative/dir: must be an absolute path"},
		{[]string{"--namespace=a.b"}, "--namespace=a.b: must not contain dots"},
		{[]string{"--cert-secret-name=Certs"}, "--cert-secret-name=Certs: a lowercase RFC 1123 subdomain"},
		{[]string{"--mutating-webhook-configuration="}, "--mutating-webhook-configuration: must not be empty"},
		{[]string{"--validating-webhook-configuration=x_y"}, "--validating-webhook-configuration=x_y: a lowercase RFC 1123 subdomain"},
		{[]string{"--service-name=1graceguard", "--cert-dir=certs"}, "--service-name=1graceguard"},
	} {
		c, err := parse(t, append(slices.Clone(base), tc.args...)...)
		certsErr := c.Certs().Validate()
		switch {
		case tc.want == "" && (err != nil || certsErr != nil):
			t.Errorf("%v: Validate() = %v, certs: %v; want both valid", tc.args, err, certsErr)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: Validate() = %v, want it to say %q", tc.args, err, tc.want)
		case (err == nil) != (certsErr == nil):
			t.Errorf("%v: Validate() = %v but the certificates' Validate() = %v", tc.args, err, certsErr)
		}
	}
	// In files mode the names are not used and not checked.
	if _, err := parse(t, "--service-name=Bad_Name"); err != nil {
		t.Errorf("files mode: %v", err)
	}
}

func TestObserverFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--namespace=x"}, ""},
		{[]string{"--namespace="}, "--namespace: required with --leader-elect"},
		{[]string{"--namespace=", "--leader-elect=false"}, ""},
		{[]string{"--namespace=x", "--flush-interval=1ms"}, "--flush-interval=1ms: want 10ms to 10m"},
		{[]string{"--namespace=x", "--min-samples=51"}, "--min-samples=51: want 1 to 50 (a report keeps 50 samples)"},
		{[]string{"--namespace=x", "--health-probe-bind-address=:99999"}, `--health-probe-bind-address=:99999: port "99999" is not 0-65535`},
	} {
		c := observer.Default()
		fl := ObserverFlags(&c)
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		fl.Bind(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := fl.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestEveryFlagHasHelpAndAUniqueName(t *testing.T) {
	c := Default()
	o := observer.Default()
	for _, fl := range []flags.Flags{c.Flags(), ObserverFlags(&o)} {
		seen := map[string]bool{}
		for _, f := range fl {
			if f.Usage == "" || seen[f.Name] {
				t.Errorf("--%s: usage %q, seen before: %v", f.Name, f.Usage, seen[f.Name])
			}
			seen[f.Name] = true
		}
	}
}

func TestDefaultFlagNamesTheFlagOfEachTerm(t *testing.T) {
	c := Default()
	fl := c.Flags()
	for _, term := range budget.Terms {
		name := strings.TrimPrefix(flags.DefaultFlag(term), "--")
		lookup(fl, name) // panics if there is none
	}
	if flags.DefaultFlag(budget.Work) != "--default-max-work" {
		t.Errorf("flags.DefaultFlag(work) = %s", flags.DefaultFlag(budget.Work))
	}
	lookup(fl, strings.TrimPrefix(flags.DefaultProfileFlag, "--"))
}

// lookup returns the flag named name; it panics for a name no flag has.
func lookup(fl flags.Flags, name string) flags.Flag {
	for _, f := range fl {
		if f.Name == name {
			return f
		}
	}
	panic("config: no flag --" + name)
}
