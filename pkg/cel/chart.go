package cel

import (
	"strings"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// Definition is a named piece of CEL (or of the YAML that holds CEL) the
// chart includes: make generate writes each into _generated.tpl as a Helm
// define.
type Definition struct {
	// Name is the define's name; Doc says what it is for.
	Name, Doc string
	// Text is what the define holds.
	Text string
}

// Definitions are every piece of CEL the chart ships.
func Definitions() []Definition {
	return []Definition{
		{"graceguard.cel.notMirrorPod", "a Pod that is not a mirror Pod (a static Pod as the API server shows it), which belongs to the kubelet: it ignores changes to it.", NotMirrorPod},
		{"graceguard.cel.notOptedOut", "the Pod did not opt out with graceguard.io/inject: \"false\".", NotOptedOut},
		{"graceguard.cel.podTemplateChanged", "a workload's CREATE, or an UPDATE that changes its Pod template: controllers update workloads all the time without touching it.", PodTemplateChanged},
		{"graceguard.cel.proven", "the expression of the matchCondition not-proven-by-cel (pkg/cel ProvenCondition; docs/admission.md).", ProvenCondition()},
		{"graceguard.cel.floorVariables", "the native floor's variables, as the YAML list of a ValidatingAdmissionPolicy's spec.variables (pkg/cel FloorVariables).", variablesYAML(FloorVariables())},
		{"graceguard.cel.floorValidation", "the expression the native floor validates.", FloorValidation},
		{"graceguard.cel.floorMessage", "the native floor's messageExpression: the webhook's words for what it refuses.", FloorMessage()},
		{"graceguard.cel.floorReasons", "the native floor's audit annotation: the reason codes of what it refuses.", FloorReasons()},
		{"graceguard.cel.mutationVariables", "the mutating floor's own variables, after the ones the chart writes from its values (" + chartVariableNames() + "), as YAML (pkg/cel MutationVariables).", variablesYAML(MutationVariables())},
		{"graceguard.cel.mutationConditions", "the mutating floor's matchConditions, as YAML (pkg/cel MutationConditions).", conditionsYAML(MutationConditions())},
		{"graceguard.cel.mutationPatch", "the mutating floor's JSON patch (pkg/cel MutationPatch).", MutationPatch()},
	}
}

func chartVariableNames() string {
	names := make([]string, len(MutationChartVariables))
	for i, v := range MutationChartVariables {
		names[i] = v.Name
	}
	return strings.Join(names, ", ")
}

// conditionsYAML writes named expressions as a YAML list of matchConditions.
func conditionsYAML(cs []Variable) string {
	var b strings.Builder
	for i, c := range cs {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("- name: " + c.Name + "\n  expression: |-\n    " + strings.ReplaceAll(c.Expression, "\n", "\n    "))
	}
	return b.String()
}

// The chart's matchConditions.
var (
	NotMirrorPod = "!has(object.metadata.annotations) || !(" + lit(mutate.AnnotationMirror) + " in object.metadata.annotations)"
	NotOptedOut  = "!has(object.metadata.annotations) || !(" + lit(mutate.AnnotationInject) + " in object.metadata.annotations) || object.metadata.annotations[" + lit(mutate.AnnotationInject) + "] != 'false'"
)

// PodTemplateChanged is true for a CREATE and for an UPDATE of a workload
// whose Pod template (a CronJob's job template's) changed. A Rollout with
// spec.workloadRef has no template: the optional reads never err on it.
const PodTemplateChanged = "request.operation != 'UPDATE' || (has(object.spec.jobTemplate) ? object.spec.jobTemplate.spec.template != oldObject.spec.jobTemplate.spec.template : object.?spec.?template != oldObject.?spec.?template)"

// variablesYAML writes variables as a YAML list, each expression a block
// scalar.
func variablesYAML(vs []Variable) string {
	var b strings.Builder
	for i, v := range vs {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("- name: " + v.Name + "\n  expression: |-\n    " + strings.ReplaceAll(v.Expression, "\n", "\n    "))
	}
	return b.String()
}
