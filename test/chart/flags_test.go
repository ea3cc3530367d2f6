package chart_test

import (
	"flag"
	"fmt"
	"io"
	"testing"

	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/config"
	ggflags "github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/mutate"
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
		"policy reports":    "reports: {enabled: true}\nconfig: {routingProfiles: {corp-lb: {routingDelay: 45s, graceFloor: 1m}}, defaultRoutingProfile: corp-lb}",
		// The schema takes whole seconds for every duration; flags such
		// as --flush-interval read Go durations only.
		"durations in whole seconds": "observer: {flushInterval: 10}\nreports: {enabled: true, interval: 600}\nshutdown: {delay: 5, drainTimeout: 20}\n" +
			"config: {defaultRoutingDelay: 5, defaultMaxWork: 20, defaultCleanup: 2, defaultSafetyMargin: 3, maxGracePeriod: 600, routingProfiles: {corp-lb: {routingDelay: 45, graceFloor: 60}}}",
	}
	for name, vals := range modes {
		cases[name] = vals
	}
	for name, vals := range cases {
		t.Run(name, func(t *testing.T) {
			r := render(t, vals)
			cfg := config.Default()
			cfg.Namespace = "graceguard-system" // the Pod's POD_NAMESPACE
			parseArgs(t, "webhook", config.Flags(&cfg), r.container(t).Args)

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

func parseArgs(t *testing.T, what string, fl ggflags.Flags, args []string) {
	t.Helper()
	if err := flagsErr(fl, args); err != nil {
		t.Errorf("%s: %v (args %q)", what, err, args)
	}
}

// flagsErr is what the webhook binary says of args: a flag it does not
// know, a value it cannot parse, or one its validation refuses.
func flagsErr(fl ggflags.Flags, args []string) error {
	fs := pflag.NewFlagSet("webhook", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fl.Bind(fs)
	zapOpts := zap.Options{}
	goFlags := flag.NewFlagSet("", flag.ContinueOnError)
	zapOpts.BindFlags(goFlags)
	fs.AddGoFlagSet(goFlags)
	if err := fs.Parse(args); err != nil {
		return err
	}
	return fl.Validate()
}

// everyProfileAtTheCap makes each built-in routing profile the default
// with a grace cap one second short of what its Pods need, and exactly
// that: the chart reads the profile table (generated) as the webhook does.
func everyProfileAtTheCap() []string {
	d := mutate.DefaultOptions().Defaults
	var out []string
	for _, p := range budget.BuiltinProfiles() {
		d.Routing = p.Routing
		need := max(d.Grace(), budget.CeilSeconds(p.GraceFloor))
		for _, c := range []int64{need - 1, need} {
			out = append(out, fmt.Sprintf("config: {defaultRoutingProfile: %s, maxGracePeriod: %ds}", p.Name, c))
		}
	}
	return out
}

// The chart refuses at install what the webhook would refuse at start (its
// cross-field checks re-implement the webhook's validation, as a template
// cannot call Go), and nothing the webhook accepts: on each of these
// values, rendering succeeds exactly when the arguments the templates
// alone render pass the webhook's flags.
func TestChartChecksAgreeWithTheWebhooksValidation(t *testing.T) {
	for _, vals := range append([]string{
		"",
		"config: {maxGracePeriod: 29s}",
		"config: {maxGracePeriod: 30s}",
		"config: {defaultMaxWork: 59m, maxGracePeriod: 1h}",
		"config: {defaultRoutingProfile: aws-nlb-ip, maxGracePeriod: 2m}",
		"config: {defaultRoutingProfile: aws-nlb-ip, maxGracePeriod: 145s}",
		"config: {defaultRoutingProfile: azure-agic, maxGracePeriod: 100s}",
		"config: {routingProfiles: {corp: {routingDelay: 45s, graceFloor: 2m}}, defaultRoutingProfile: corp, maxGracePeriod: 119s}",
		"config: {routingProfiles: {corp: {routingDelay: 45s, graceFloor: 2m}}, defaultRoutingProfile: corp, maxGracePeriod: 2m}",
		"config: {routingProfiles: {kube-proxy: {routingDelay: 20s}}, defaultRoutingProfile: kube-proxy, maxGracePeriod: 44s}",
		"config: {defaultRoutingProfile: corp}",
		"config: {nodeShutdownGracePeriod: 30s, nodeShutdownGracePeriodCriticalPods: 30s}",
		"config: {nodeShutdownGracePeriod: 30s, nodeShutdownGracePeriodCriticalPods: 29s}",
		"config: {karpenterTerminationGracePeriod: 720h}",
		"shutdown: {delay: 5m, terminationGracePeriodSeconds: 400}",
		"shutdown: {delay: 301s, terminationGracePeriodSeconds: 400}",
		"shutdown: {drainTimeout: 500ms}",
		"config: {maxConnections: 100, maxPendingConnections: 99}",
		"config: {maxConnections: 100, maxPendingConnections: 100}",
		"config: {maxPendingConnections: 256}",
		"config: {maxConnections: 16, maxPendingConnections: 1}",
		"observer: {flushInterval: 10ms}",
		"observer: {flushInterval: 9ms}",
		"reports: {enabled: true, interval: 1s}",
		"reports: {enabled: true, interval: 999ms}",
		"reports: {enabled: true, interval: 24h}",
		"reports: {enabled: true, interval: 24h1s}",
	}, everyProfileAtTheCap()...) {
		t.Run(vals, func(t *testing.T) {
			_, chartErr := renderChart(values(t, vals), renderOpts{})
			rel, err := renderChart(values(t, vals), renderOpts{unchecked: true})
			if err != nil {
				t.Fatalf("the templates alone: %v", err)
			}
			r := decode(t, rel)
			cfg := config.Default()
			cfg.Namespace = namespace
			webhookErr := flagsErr(config.Flags(&cfg), r.container(t).Args)
			if webhookErr == nil {
				ocfg := observer.Default()
				ocfg.Namespace = namespace
				webhookErr = flagsErr(config.ObserverFlags(&ocfg), r.observer(t).Spec.Template.Spec.Containers[0].Args[1:])
			}
			if (chartErr == nil) != (webhookErr == nil) {
				t.Errorf("the chart says %v; the webhook would say %v", chartErr, webhookErr)
			}
		})
	}
}
