package optionflags_test

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/optionflags"
)

func parse(o *mutate.Options, args ...string) error {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	optionflags.Bind(fs, o)
	return fs.Parse(args)
}

// The flags messages name (DefaultFlag, DefaultProfileFlag) are flags
// that exist.
func TestDefaultFlagNamesTheFlagOfEachTerm(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o := mutate.DefaultOptions()
	optionflags.Bind(fs, &o)
	for _, term := range budget.Terms {
		if fs.Lookup(strings.TrimPrefix(flags.DefaultFlag(term), "--")) == nil {
			t.Errorf("the %s term: no flag %s", term, flags.DefaultFlag(term))
		}
	}
	if flags.DefaultFlag(budget.Work) != "--default-max-work" {
		t.Errorf("flags.DefaultFlag(work) = %s", flags.DefaultFlag(budget.Work))
	}
	if fs.Lookup(strings.TrimPrefix(flags.DefaultProfileFlag, "--")) == nil {
		t.Errorf("no flag %s", flags.DefaultProfileFlag)
	}
}

func TestFlagsFillTheOptions(t *testing.T) {
	o := mutate.DefaultOptions()
	err := parse(&o, "--default-max-work=45", "--max-grace-period=5m", "--prestop-handler=exec", "--default-mode=warn",
		"--excluded-namespaces=a,b", "--routing-profile=corp=45s,grace-floor=2m", "--default-routing-profile=corp",
		"--karpenter-termination-grace-period=48h", "--karpenter-ceiling-action=deny",
		"--node-shutdown-grace-period=30s", "--node-shutdown-grace-period-critical-pods=10s")
	if err != nil {
		t.Fatal(err)
	}
	if o.Defaults.Work != 45*time.Second || o.MaxGrace != 5*time.Minute || o.PreStop != mutate.PreStopExec || o.Mode != mutate.ModeWarn ||
		strings.Join(o.ExcludedNamespaces, ",") != "a,b" || o.DefaultProfile != "corp" {
		t.Errorf("options %+v", o)
	}
	if p, ok := budget.FindProfile(o.Profiles, "corp"); !ok || p.Routing != 45*time.Second || p.GraceFloor != 2*time.Minute {
		t.Errorf("profile corp: %+v, %v", p, ok)
	}
	want := []budget.Ceiling{
		{Name: mutate.CeilingKarpenter, Event: "a Karpenter disruption", Limit: 48 * time.Hour, Deny: true, Flag: "--karpenter-termination-grace-period"},
		{Name: mutate.CeilingNodeShutdown, Event: "a graceful node shutdown", Limit: 20 * time.Second, Flag: "--node-shutdown-grace-period(-critical-pods)"},
	}
	if len(o.Ceilings) != len(want) || o.Ceilings[0] != want[0] || o.Ceilings[1] != want[1] {
		t.Errorf("ceilings %+v, want %+v", o.Ceilings, want)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

// What cannot be parsed is refused as the flag is given, saying what is
// accepted; the rest is Validate's.
func TestFlagsRefuseWhatDoesNotParse(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--node-shutdown-grace-period=20s", "--node-shutdown-grace-period-critical-pods=30s"},
			"--node-shutdown-grace-period-critical-pods=30s must be shorter than --node-shutdown-grace-period=20s: regular Pods get the difference"},
		{[]string{"--karpenter-termination-grace-period=721h"}, `"721h" is not a duration from 0 to 720h; want a Go duration (30s, 10m, 48h) or whole seconds (30)`},
		{[]string{"--karpenter-ceiling-action=block"}, `"block" is not one of warn, deny`},
		{[]string{"--routing-profile=corp=45s", "--routing-profile=corp=50s"}, `routing profile "corp" is given twice`},
		{[]string{"--default-max-work=2h"}, "--default-max-work"},
	} {
		o := mutate.DefaultOptions()
		if err := parse(&o, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want it to say %q", tc.args, err, tc.want)
		}
	}
}
