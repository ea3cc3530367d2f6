package mutate

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/flags"
)

// Validate checks the options as the webhook and the plugin validate them
// at start-up, and reports everything wrong at once: for each setting, the
// flag that sets it (pkg/flags), its value and what is accepted. Options
// that passed Validate never make Mutate or Validate misbehave: every
// default budget fits the cap.
func (o Options) Validate() error {
	var errs []error
	for _, t := range budget.Terms {
		if d := o.Defaults.Get(t); d < 0 || d > budget.MaxTerm {
			errs = append(errs, flags.Invalid(flags.TermDefault(t), budget.Format(d),
				fmt.Errorf("must be between 0 and %s", budget.Format(budget.MaxTerm))))
		}
	}
	errs = append(errs, o.checkMaxGrace())
	if _, err := ParsePreStopHandler(string(o.PreStop)); err != nil {
		errs = append(errs, flags.Invalid(flags.PreStopHandler, string(o.PreStop), err))
	}
	if _, err := ParseMode(string(o.Mode)); err != nil {
		errs = append(errs, flags.Invalid(flags.DefaultMode, string(o.Mode), err))
	}
	if o.Untreated != "" && !slices.Contains(UntreatedPolicies, o.Untreated) {
		errs = append(errs, flags.Invalid(flags.UntreatedPods, string(o.Untreated),
			fmt.Errorf("want %q or %q", UntreatedDeny, UntreatedAdmit)))
	}
	errs = append(errs, o.checkProfiles(), o.checkDefaultProfile(), o.checkCeilings())
	return errors.Join(errs...)
}

func (o Options) checkMaxGrace() error {
	invalid := func(err error) error { return flags.Invalid(flags.MaxGracePeriod, budget.Format(o.MaxGrace), err) }
	if o.MaxGrace < flags.MaxGrace.Min {
		return invalid(fmt.Errorf("must be at least %s", budget.Format(flags.MaxGrace.Min)))
	}
	if need := o.Defaults.Grace(); need > budget.CeilSeconds(o.MaxGrace) {
		return invalid(fmt.Errorf("the default budget alone needs %ds (%s)", need, o.Defaults.Arithmetic()))
	}
	return nil
}

// checkProfiles checks the table a flag cannot get wrong (each
// --routing-profile is parsed and merged as it is given) but code can.
func (o Options) checkProfiles() error {
	seen := map[string]bool{}
	for _, p := range o.profiles() {
		if err := p.Validate(); err != nil {
			return flags.Invalid(flags.RoutingProfile, "", fmt.Errorf("%s: %w", p.String(), err))
		}
		if seen[p.Name] {
			return flags.Invalid(flags.RoutingProfile, "", fmt.Errorf("%q is given twice", p.Name))
		}
		seen[p.Name] = true
	}
	return nil
}

func (o Options) checkDefaultProfile() error {
	if o.DefaultProfile == "" {
		return nil
	}
	invalid := func(err error) error { return flags.Invalid(flags.DefaultRoutingProfile, o.DefaultProfile, err) }
	p, ok := budget.FindProfile(o.profiles(), o.DefaultProfile)
	if !ok {
		return invalid(fmt.Errorf("no such profile; want one of %s", strings.Join(budget.ProfileNames(o.profiles()), ", ")))
	}
	need := max(o.Defaults.Set(budget.Routing, p.Routing).Grace(), budget.CeilSeconds(p.GraceFloor))
	// A cap under 1s is --max-grace-period's error.
	if o.MaxGrace >= time.Second && need > budget.CeilSeconds(o.MaxGrace) {
		return invalid(fmt.Errorf("its Pods need %ds, over --%s=%s", need, flags.MaxGracePeriod, budget.Format(o.MaxGrace)))
	}
	return nil
}

// ceilingFlags names the flag that sets each platform ceiling.
var ceilingFlags = map[string]string{
	CeilingKarpenter:    flags.KarpenterTerminationGracePeriod,
	CeilingNodeShutdown: flags.NodeShutdownGracePeriod,
}

// checkCeilings refuses a negative ceiling, which the flags cannot set
// but code can: one error per ceiling, naming its flag, or the field for
// a ceiling no flag sets.
func (o Options) checkCeilings() error {
	var errs []error
	seen := map[string]bool{}
	for i, ce := range o.Ceilings {
		if ce.Limit >= 0 || seen[ce.Name] {
			continue
		}
		seen[ce.Name] = true
		err := errors.New("must not be negative")
		if flag, ok := ceilingFlags[ce.Name]; ok {
			errs = append(errs, flags.Invalid(flag, budget.Format(ce.Limit), err))
		} else {
			errs = append(errs, fmt.Errorf("Ceilings[%d] (%s): limit %s: %w", i, ce.Name, budget.Format(ce.Limit), err))
		}
	}
	return errors.Join(errs...)
}
