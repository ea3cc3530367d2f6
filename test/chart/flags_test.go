package chart_test

import (
	"flag"
	"testing"

	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/graceguard/graceguard/pkg/config"
	"github.com/graceguard/graceguard/pkg/observer"
)

// The arguments the chart renders are flags of the webhook binary with
// values its validation accepts (the one definition in pkg/config), for
// each way of serving certificates: a rendered install starts, rather than
// exiting 2 in a crash loop.
func TestRenderedArgumentsAreValidFlags(t *testing.T) {
	cases := map[string]string{
		"routing profiles":  "config: {routingProfiles: {corp-lb: {routingDelay: 45s, graceFloor: 1m}}, defaultRoutingProfile: corp-lb}",
		"platform ceilings": "config: {karpenterTerminationGracePeriod: 48h, karpenterCeilingAction: deny, nodeShutdownGracePeriod: 30s, nodeShutdownGracePeriodCriticalPods: 10s}",
	}
	for name, vals := range modes {
		cases[name] = vals
	}
	for name, vals := range cases {
		t.Run(name, func(t *testing.T) {
			r := render(t, vals)
			cfg := config.Default()
			cfg.Namespace = "graceguard-system" // the Pod's POD_NAMESPACE
			parseArgs(t, "webhook", cfg.Flags(), r.container(t).Args)

			oc := r.observer(t).Spec.Template.Spec.Containers[0]
			if len(oc.Args) == 0 || oc.Args[0] != "observe" {
				t.Fatalf("observer args %q", oc.Args)
			}
			ocfg := observer.Default()
			ocfg.Namespace = "graceguard-system"
			parseArgs(t, "observer", config.ObserverFlags(&ocfg), oc.Args[1:])
		})
	}
}

func parseArgs(t *testing.T, what string, fl config.Flags, args []string) {
	t.Helper()
	fs := pflag.NewFlagSet(what, pflag.ContinueOnError)
	fl.Bind(fs)
	zapOpts := zap.Options{}
	goFlags := flag.NewFlagSet("", flag.ContinueOnError)
	zapOpts.BindFlags(goFlags)
	fs.AddGoFlagSet(goFlags)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("%s: %v (args %q)", what, err, args)
	}
	if err := fl.Validate(); err != nil {
		t.Errorf("%s: %v (args %q)", what, err, args)
	}
}
