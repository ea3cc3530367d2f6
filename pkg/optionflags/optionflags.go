// Package optionflags binds mutate.Options, the cluster defaults the
// webhook and the kubectl plugin share, to their flags: both binaries
// bind them here, so a value means the same to both. What a value must be
// is mutate.Options.Validate's; the flags' names are pkg/flags'.
//
// Invariant: every field of mutate.Options a flag sets is set only through
// the value types here, which refuse at parsing what cannot be parsed
// (a duration, a profile, a ceiling) and leave the rest to Validate.
package optionflags

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// Bind registers the cluster-default flags on fs, filling o.
func Bind(fs *pflag.FlagSet, o *mutate.Options) { flags.Flags{List: List(o)}.Bind(fs) }

// List is the cluster-default flags, filling o, in the order --help
// shows them.
func List(o *mutate.Options) []flags.Flag {
	if o.Profiles == nil {
		o.Profiles = budget.BuiltinProfiles()
	}
	var fl []flags.Flag
	for _, t := range []struct {
		term budget.Term
		d    *time.Duration
		what string
	}{
		{budget.Routing, &o.Defaults.Routing, "routing withdrawal time"},
		{budget.Work, &o.Defaults.Work, "longest admitted work"},
		{budget.Cleanup, &o.Defaults.Cleanup, "cleanup time"},
		{budget.Margin, &o.Defaults.Margin, "safety margin"},
	} {
		fl = append(fl, flags.Flag{Name: flags.TermDefault(t.term), Value: flags.Duration(t.d),
			Usage: t.what + " for Pods that set no " + mutate.KeyFor(t.term)})
	}
	fl = append(fl,
		flags.Flag{Name: flags.MaxGracePeriod, Value: flags.Duration(&o.MaxGrace),
			Usage: "largest grace period a budget may ask for (the cluster autoscaler's cap is 10m)"},
		flags.Flag{Name: flags.PreStopHandler, Value: flags.ChoiceValue(&o.PreStop, mutate.PreStopHandlers...),
			Usage: "default preStop hook: sleep (native sleep action), exec (sleep binary in the image) or none"},
		flags.Flag{Name: flags.DefaultMode, Value: flags.ChoiceValue(&o.Mode, mutate.Modes...),
			Usage: "mode of opted-in namespaces without a " + mutate.LabelMode + " label: enforce or warn"},
		flags.Flag{Name: flags.UntreatedPods, Value: flags.ChoiceValue(&o.Untreated, mutate.UntreatedPolicies...),
			Usage: "what the Pod validating webhook does with a Pod the mutating webhook did not treat (its call failed open): deny (its controller retries) or admit (judged as an opted-out Pod, with a warning)"},
		flags.Flag{Name: flags.ExcludedNamespaces, Value: flags.List(&o.ExcludedNamespaces),
			Usage: "namespaces never touched, whatever their labels"},
		flags.Flag{Name: flags.RoutingProfile, Value: &profilesValue{o: o},
			Usage: "add a routing profile or replace a built-in one: " + budget.ProfileSpecForm +
				" (repeatable; built-in: " + strings.Join(budget.ProfileNames(budget.BuiltinProfiles()), ", ") + ")"},
		flags.Flag{Name: flags.DefaultRoutingProfile, Value: flags.String(&o.DefaultProfile),
			Usage: "routing profile of Pods whose annotations and namespace name none (replaces " + flags.DefaultFlag(budget.Routing) + " for them)"},
	)
	return append(fl, ceilingFlags(o)...)
}

// profilesValue parses each --routing-profile into the options' table.
type profilesValue struct {
	o     *mutate.Options
	given []budget.Profile
}

func (v *profilesValue) String() string {
	parts := make([]string, len(v.given))
	for i, p := range v.given {
		parts[i] = p.String()
	}
	return strings.Join(parts, " ")
}

func (v *profilesValue) Set(s string) error {
	p, err := budget.ParseProfile(s)
	if err != nil {
		return err
	}
	p.Source = "--" + flags.RoutingProfile + " " + p.Name
	given := append(slices.Clone(v.given), p)
	merged, err := budget.MergeProfiles(budget.BuiltinProfiles(), given)
	if err != nil {
		return err
	}
	v.given, v.o.Profiles = given, merged
	return nil
}

func (v *profilesValue) Type() string { return "profile" }

// Ceiling actions.
const (
	actionWarn = "warn"
	actionDeny = "deny"
)

// ceilings holds the platform-ceiling flags and keeps the options'
// Ceilings in step with them.
type ceilings struct {
	o                               *mutate.Options
	karpenter, shutdown, critical   time.Duration
	karpenterAction, shutdownAction string
}

func ceilingFlags(o *mutate.Options) []flags.Flag {
	c := &ceilings{o: o, karpenterAction: actionWarn, shutdownAction: actionWarn}
	action := func(deny bool) string {
		if deny {
			return actionDeny
		}
		return actionWarn
	}
	for _, ce := range o.Ceilings {
		switch ce.Name {
		case mutate.CeilingKarpenter:
			c.karpenter, c.karpenterAction = ce.Limit, action(ce.Deny)
		case mutate.CeilingNodeShutdown:
			c.shutdown, c.shutdownAction = ce.Limit, action(ce.Deny)
		}
	}
	return []flags.Flag{
		{Name: flags.KarpenterTerminationGracePeriod, Value: flags.CeilingDuration(&c.karpenter).Then(c.sync),
			Usage: "ceiling: the Karpenter NodePools' terminationGracePeriod (the shortest); Karpenter deletes Pods so they end by then. 0 disables"},
		{Name: flags.KarpenterCeilingAction, Value: flags.ChoiceValue(&c.karpenterAction, actionWarn, actionDeny).Then(c.sync),
			Usage: "warn or deny Pods whose budget needs more than --" + flags.KarpenterTerminationGracePeriod},
		{Name: flags.NodeShutdownGracePeriod, Value: flags.CeilingDuration(&c.shutdown).Then(c.sync),
			Usage: "ceiling: the kubelets' shutdownGracePeriod (graceful node shutdown); regular Pods get it minus --" + flags.NodeShutdownGracePeriodCriticalPods + ". 0 disables"},
		{Name: flags.NodeShutdownGracePeriodCriticalPods, Value: flags.CeilingDuration(&c.critical).Then(c.sync),
			Usage: "the kubelets' shutdownGracePeriodCriticalPods, kept from regular Pods during a graceful node shutdown"},
		{Name: flags.NodeShutdownCeilingAction, Value: flags.ChoiceValue(&c.shutdownAction, actionWarn, actionDeny).Then(c.sync),
			Usage: "warn or deny Pods whose budget needs more than regular Pods get in a graceful node shutdown"},
	}
}

// sync sets the options' Ceilings from the flags, refusing a graceful
// node shutdown that leaves regular Pods nothing.
func (c *ceilings) sync() error {
	if rule := flags.CriticalBelowShutdown; c.shutdown > 0 && c.critical >= c.shutdown {
		return fmt.Errorf("--%s=%s must be shorter than --%s=%s%s",
			rule.Lesser, budget.Format(c.critical), rule.Greater, budget.Format(c.shutdown), rule.Why)
	}
	var out []budget.Ceiling
	if c.karpenter > 0 {
		out = append(out, budget.Ceiling{Name: mutate.CeilingKarpenter, Event: "a Karpenter disruption", Limit: c.karpenter,
			Deny: c.karpenterAction == actionDeny, Flag: "--" + flags.KarpenterTerminationGracePeriod})
	}
	if c.shutdown > 0 {
		out = append(out, budget.Ceiling{Name: mutate.CeilingNodeShutdown, Event: "a graceful node shutdown", Limit: c.shutdown - c.critical,
			Deny: c.shutdownAction == actionDeny, Flag: "--" + flags.NodeShutdownGracePeriod + "(-critical-pods)"})
	}
	c.o.Ceilings = out
	return nil
}
