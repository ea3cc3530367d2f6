package mutate

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/graceguard/graceguard/pkg/budget"
)

// Platform ceilings (docs/routing-profiles.md#platform-ceilings): the most
// grace a platform grants when it ends a Pod itself. --max-grace-period
// (the cluster autoscaler's) is checked as a cap and always denies; these
// warn or deny as the operator chose.
const (
	CeilingKarpenter    = "karpenter"
	CeilingNodeShutdown = "node-shutdown"
)

// ceilingFindings checks the grace a target needs against the configured
// ceilings: warnings for the warn ones, violations for the deny ones.
func ceilingFindings(t Target, need int64, ceilings []budget.Ceiling) (warnings, violations []Finding) {
	path := t.SpecPath.Child("terminationGracePeriodSeconds")
	for _, c := range ceilings {
		if !c.Exceeded(need) {
			continue
		}
		if c.Deny {
			violations = append(violations, Finding{DenyOverCeiling, field.Invalid(path, need,
				fmt.Sprintf("the budget needs %ds but %s grants at most %s (%s): the kubelet would SIGKILL it then; shorten the budget or raise the platform's limit",
					need, c.Event, budget.Format(c.Limit), c.Flag))})
			continue
		}
		warnings = append(warnings, Finding{WarnOverCeiling, field.Invalid(path, need,
			fmt.Sprintf("needs %ds; %s grants %s", need, c.Event, budget.Format(c.Limit)))})
	}
	return warnings, violations
}

func validateCeilings(o Options) []string {
	var errs []string
	for _, c := range o.Ceilings {
		if c.Limit < 0 {
			errs = append(errs, fmt.Sprintf("%s=%s: must not be negative", c.Flag, budget.Format(c.Limit)))
		}
	}
	return errs
}
