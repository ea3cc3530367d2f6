package flags

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// BindOptions binds the cluster-default flags shared by the webhook and the
// kubectl plugin.
func BindOptions(fs *pflag.FlagSet, o *mutate.Options) { Options(o).Bind(fs) }

// ValidateOptions checks the cluster defaults, naming each flag at fault.
func ValidateOptions(o mutate.Options) error { return Options(&o).Validate() }

// termFlags names the flag of each budget term's cluster default: the
// annotation's name after "graceguard.io/", so a person who knows one
// knows the other.
var termFlags = func() map[budget.Term]string {
	m := map[budget.Term]string{}
	for _, t := range budget.Terms {
		m[t] = "default-" + strings.TrimPrefix(mutate.KeyFor(t), "graceguard.io/")
	}
	return m
}()

// DefaultFlag is the flag that sets a budget term's cluster default, for
// messages: "--default-max-work".
func DefaultFlag(t budget.Term) string { return "--" + termFlags[t] }

// The option flags other packages' messages name.
const (
	flagMaxGrace       = "max-grace-period"
	flagRoutingProfile = "routing-profile"
	flagDefaultProfile = "default-routing-profile"
)

// DefaultProfileFlag is the flag naming the cluster's default routing profile.
const DefaultProfileFlag = "--" + flagDefaultProfile

func Options(o *mutate.Options) Flags {
	if o.Profiles == nil {
		o.Profiles = budget.BuiltinProfiles()
	}
	var fl Flags
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
		d := t.d
		fl = append(fl, Flag{Name: termFlags[t.term], Value: Duration(d),
			Usage: t.what + " for Pods that set no " + mutate.KeyFor(t.term),
			Check: func() error {
				if *d < 0 || *d > budget.MaxTerm {
					return errors.New("must be between 0 and 1h")
				}
				return nil
			}})
	}
	fl = append(fl,
		Flag{Name: flagMaxGrace, Value: Duration(&o.MaxGrace),
			Usage: "largest grace period a budget may ask for (the cluster autoscaler's cap is 10m)",
			Check: func() error {
				if o.MaxGrace < time.Second {
					return errors.New("must be at least 1s")
				}
				if need := o.Defaults.Grace(); need > budget.CeilSeconds(o.MaxGrace) {
					return fmt.Errorf("the default budget alone needs %ds (%s)", need, o.Defaults.Arithmetic())
				}
				return nil
			}},
		Flag{Name: "prestop-handler", Value: choice(&o.PreStop, mutate.PreStopHandlers),
			Usage: "default preStop hook: sleep (native sleep action), exec (sleep binary in the image) or none",
			Check: func() error { _, err := mutate.ParsePreStopHandler(string(o.PreStop)); return err }},
		Flag{Name: "default-mode", Value: choice(&o.Mode, mutate.Modes),
			Usage: "mode of opted-in namespaces without a " + mutate.LabelMode + " label: enforce or warn",
			Check: func() error { _, err := mutate.ParseMode(string(o.Mode)); return err }},
		Flag{Name: "excluded-namespaces", Value: List(&o.ExcludedNamespaces),
			Usage: "namespaces never touched, whatever their labels"},
		Flag{Name: flagRoutingProfile, Value: &profilesValue{o: o},
			Usage: "add a routing profile or replace a built-in one: " + budget.ProfileSpecForm +
				" (repeatable; built-in: " + strings.Join(budget.ProfileNames(budget.BuiltinProfiles()), ", ") + ")",
			Check: func() error {
				seen := map[string]bool{}
				for _, p := range o.Profiles {
					if err := p.Validate(); err != nil {
						return fmt.Errorf("%s: %w", p.String(), err)
					}
					if seen[p.Name] {
						return fmt.Errorf("%q is given twice", p.Name)
					}
					seen[p.Name] = true
				}
				return nil
			}},
		Flag{Name: flagDefaultProfile, Value: String(&o.DefaultProfile),
			Usage: "routing profile of Pods whose annotations and namespace name none (replaces --" + termFlags[budget.Routing] + " for them)",
			Check: func() error {
				if o.DefaultProfile == "" {
					return nil
				}
				p, ok := budget.FindProfile(o.Profiles, o.DefaultProfile)
				if !ok {
					return fmt.Errorf("no such profile; want one of %s", strings.Join(budget.ProfileNames(o.Profiles), ", "))
				}
				need := max(o.Defaults.Set(budget.Routing, p.Routing).Grace(), budget.CeilSeconds(p.GraceFloor))
				if o.MaxGrace >= time.Second && need > budget.CeilSeconds(o.MaxGrace) {
					return fmt.Errorf("its Pods need %ds, over --%s=%s", need, flagMaxGrace, budget.Format(o.MaxGrace))
				}
				return nil
			}},
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
	p.Source = "--" + flagRoutingProfile + " " + p.Name
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
	ActionWarn = "warn"
	ActionDeny = "deny"
)

// MaxCeiling bounds the ceiling flags: a NodePool may allow days, but a
// ceiling above --max-grace-period (at most 1h) never binds.
const MaxCeiling = 30 * 24 * time.Hour

// ceilings holds the platform-ceiling flags and keeps the options'
// Ceilings in step with them.
type ceilings struct {
	o                               *mutate.Options
	karpenter, shutdown, critical   time.Duration
	karpenterAction, shutdownAction string
}

const (
	flagKarpenter        = "karpenter-termination-grace-period"
	flagShutdown         = "node-shutdown-grace-period"
	flagShutdownCritical = "node-shutdown-grace-period-critical-pods"
)

func ceilingFlags(o *mutate.Options) Flags {
	c := &ceilings{o: o, karpenterAction: ActionWarn, shutdownAction: ActionWarn}
	action := func(deny bool) string {
		if deny {
			return ActionDeny
		}
		return ActionWarn
	}
	for _, ce := range o.Ceilings {
		switch ce.Name {
		case mutate.CeilingKarpenter:
			c.karpenter, c.karpenterAction = ce.Limit, action(ce.Deny)
		case mutate.CeilingNodeShutdown:
			c.shutdown, c.shutdownAction = ce.Limit, action(ce.Deny)
		}
	}
	// A ceiling set in code rather than by these flags is still checked.
	notNegative := func(name string) func() error {
		return func() error {
			for _, ce := range o.Ceilings {
				if ce.Name == name && ce.Limit < 0 {
					return errors.New("must not be negative")
				}
			}
			return nil
		}
	}
	actions := []string{ActionWarn, ActionDeny}
	return Flags{
		{Name: flagKarpenter, Value: limitValue(&c.karpenter).then(c.sync),
			Usage: "ceiling: the Karpenter NodePools' terminationGracePeriod (the shortest); Karpenter deletes Pods so they end by then. 0 disables",
			Check: notNegative(mutate.CeilingKarpenter)},
		{Name: "karpenter-ceiling-action", Value: choice(&c.karpenterAction, actions).then(c.sync),
			Usage: "warn or deny Pods whose budget needs more than --" + flagKarpenter},
		{Name: flagShutdown, Value: limitValue(&c.shutdown).then(c.sync),
			Usage: "ceiling: the kubelets' shutdownGracePeriod (graceful node shutdown); regular Pods get it minus --" + flagShutdownCritical + ". 0 disables",
			Check: notNegative(mutate.CeilingNodeShutdown)},
		{Name: flagShutdownCritical, Value: limitValue(&c.critical).then(c.sync),
			Usage: "the kubelets' shutdownGracePeriodCriticalPods, kept from regular Pods during a graceful node shutdown"},
		{Name: "node-shutdown-ceiling-action", Value: choice(&c.shutdownAction, actions).then(c.sync),
			Usage: "warn or deny Pods whose budget needs more than regular Pods get in a graceful node shutdown"},
	}
}

// sync sets the options' Ceilings from the flags, refusing a graceful
// node shutdown that leaves regular Pods nothing.
func (c *ceilings) sync() error {
	if c.shutdown > 0 && c.critical >= c.shutdown {
		return fmt.Errorf("--%s=%s must be shorter than --%s=%s: regular Pods get the difference",
			flagShutdownCritical, budget.Format(c.critical), flagShutdown, budget.Format(c.shutdown))
	}
	var out []budget.Ceiling
	if c.karpenter > 0 {
		out = append(out, budget.Ceiling{Name: mutate.CeilingKarpenter, Event: "a Karpenter disruption", Limit: c.karpenter,
			Deny: c.karpenterAction == ActionDeny, Flag: "--" + flagKarpenter})
	}
	if c.shutdown > 0 {
		out = append(out, budget.Ceiling{Name: mutate.CeilingNodeShutdown, Event: "a graceful node shutdown", Limit: c.shutdown - c.critical,
			Deny: c.shutdownAction == ActionDeny, Flag: "--" + flagShutdown + "(-critical-pods)"})
	}
	c.o.Ceilings = out
	return nil
}

// limitValue is a ceiling duration: a Go duration or whole seconds, 0 to
// 720h.
func limitValue(p *time.Duration) value[time.Duration] {
	return value[time.Duration]{p, func(s string) (time.Duration, error) {
		s = strings.TrimSpace(s)
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 && n <= int64(MaxCeiling/time.Second) {
			return time.Duration(n) * time.Second, nil
		}
		if d, err := time.ParseDuration(s); err == nil && d >= 0 && d <= MaxCeiling {
			return d, nil
		}
		return 0, fmt.Errorf("%q is not a duration from 0 to 720h; want a Go duration (30s, 10m, 48h) or whole seconds (30)", s)
	}, budget.Format, "duration", nil}
}

// MinSamples is --min-samples: the observer's, and the kubectl plugin's
// recommend.
func MinSamples(n *int) Flag {
	return Flag{Name: "min-samples", Value: Int(n), Usage: "samples a recommendation needs when no Pod was killed",
		Check: InRange(n, 1, v1alpha1.MaxSamples, fmt.Sprintf(" (a report keeps %d samples)", v1alpha1.MaxSamples))}
}
