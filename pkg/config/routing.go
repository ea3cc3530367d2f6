package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// bindRouting binds the routing-profile flags: operators add profiles or
// replace built-in ones (--routing-profile, repeatable) and may name a
// default for Pods whose namespace names none.
func bindRouting(fs *pflag.FlagSet, o *mutate.Options) {
	if o.Profiles == nil {
		o.Profiles = budget.BuiltinProfiles()
	}
	pv := &profilesValue{o: o}
	fs.Var(pv, "routing-profile", "add a routing profile or replace a built-in one: "+budget.ProfileSpecForm+
		" (repeatable; built-in: "+strings.Join(budget.ProfileNames(budget.BuiltinProfiles()), ", ")+")")
	fs.StringVar(&o.DefaultProfile, "default-routing-profile", o.DefaultProfile,
		"routing profile of Pods whose annotations and namespace name none (replaces --default-routing-delay for them)")
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
	given := append(slices.Clone(v.given), p)
	merged, err := budget.MergeProfiles(budget.BuiltinProfiles(), given)
	if err != nil {
		return err
	}
	v.given, v.o.Profiles = given, merged
	return nil
}

func (v *profilesValue) Type() string { return "profile" }

// ceilingFlags holds the platform-ceiling flags and keeps the options'
// Ceilings in step with them.
type ceilingFlags struct {
	o                          *mutate.Options
	karpenter                  time.Duration
	karpenterDeny              bool
	shutdown, shutdownCritical time.Duration
	shutdownDeny               bool
}

// Ceiling actions.
const (
	ActionWarn = "warn"
	ActionDeny = "deny"
)

func bindCeilings(fs *pflag.FlagSet, o *mutate.Options) {
	c := &ceilingFlags{o: o}
	for _, ce := range o.Ceilings {
		switch ce.Name {
		case mutate.CeilingKarpenter:
			c.karpenter, c.karpenterDeny = ce.Limit, ce.Deny
		case mutate.CeilingNodeShutdown:
			c.shutdown, c.shutdownDeny = ce.Limit, ce.Deny
		}
	}
	fs.Var(&limitValue{&c.karpenter, c.sync, nil}, "karpenter-termination-grace-period",
		"ceiling: the Karpenter NodePools' terminationGracePeriod (the shortest); Karpenter deletes Pods so they end by then. 0 disables")
	fs.Var(&actionValue{&c.karpenterDeny, c.sync}, "karpenter-ceiling-action", "warn or deny Pods whose budget needs more than --karpenter-termination-grace-period")
	fs.Var(&limitValue{&c.shutdown, c.sync, c.checkShutdown}, "node-shutdown-grace-period",
		"ceiling: the kubelets' shutdownGracePeriod (graceful node shutdown); regular Pods get it minus --node-shutdown-grace-period-critical-pods. 0 disables")
	fs.Var(&limitValue{&c.shutdownCritical, c.sync, c.checkShutdown}, "node-shutdown-grace-period-critical-pods",
		"the kubelets' shutdownGracePeriodCriticalPods, kept from regular Pods during a graceful node shutdown")
	fs.Var(&actionValue{&c.shutdownDeny, c.sync}, "node-shutdown-ceiling-action", "warn or deny Pods whose budget needs more than regular Pods get in a graceful node shutdown")
}

func (c *ceilingFlags) checkShutdown() error {
	if c.shutdown > 0 && c.shutdownCritical >= c.shutdown {
		return fmt.Errorf("--node-shutdown-grace-period-critical-pods=%s must be shorter than --node-shutdown-grace-period=%s: regular Pods get the difference",
			budget.Format(c.shutdownCritical), budget.Format(c.shutdown))
	}
	return nil
}

func (c *ceilingFlags) sync() {
	var out []budget.Ceiling
	if c.karpenter > 0 {
		out = append(out, budget.Ceiling{Name: mutate.CeilingKarpenter, Event: "a Karpenter disruption", Limit: c.karpenter,
			Deny: c.karpenterDeny, Flag: "--karpenter-termination-grace-period"})
	}
	if c.shutdown > 0 {
		out = append(out, budget.Ceiling{Name: mutate.CeilingNodeShutdown, Event: "a graceful node shutdown", Limit: c.shutdown - c.shutdownCritical,
			Deny: c.shutdownDeny, Flag: "--node-shutdown-grace-period(-critical-pods)"})
	}
	c.o.Ceilings = out
}

// MaxCeiling bounds the ceiling flags: a NodePool may allow days, but a
// ceiling above --max-grace-period (at most 1h) never binds.
const MaxCeiling = 30 * 24 * time.Hour

// limitValue is a ceiling duration: a Go duration or whole seconds, 0 to 720h.
type limitValue struct {
	d     *time.Duration
	sync  func()
	check func() error
}

func (v *limitValue) String() string {
	if v.d == nil {
		return ""
	}
	return budget.Format(*v.d)
}

func (v *limitValue) Set(s string) error {
	var d time.Duration
	if n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil && n >= 0 && n <= int64(MaxCeiling/time.Second) {
		d = time.Duration(n) * time.Second
	} else if d, err = time.ParseDuration(strings.TrimSpace(s)); err != nil || d < 0 || d > MaxCeiling {
		return fmt.Errorf("%q is not a duration from 0 to 720h; want a Go duration (30s, 10m, 48h) or whole seconds (30)", s)
	}
	old := *v.d
	*v.d = d
	if v.check != nil {
		if err := v.check(); err != nil {
			*v.d = old
			return err
		}
	}
	v.sync()
	return nil
}

func (v *limitValue) Type() string { return "duration" }

// actionValue is warn or deny.
type actionValue struct {
	deny *bool
	sync func()
}

func (v *actionValue) String() string {
	if v.deny != nil && *v.deny {
		return ActionDeny
	}
	return ActionWarn
}

func (v *actionValue) Set(s string) error {
	switch s {
	case ActionWarn, ActionDeny:
		*v.deny = s == ActionDeny
		v.sync()
		return nil
	}
	return fmt.Errorf("%q is not one of %s, %s", s, ActionWarn, ActionDeny)
}

func (v *actionValue) Type() string { return "action" }
