package cel

import (
	"strconv"
	"strings"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// The mutating floor: a MutatingAdmissionPolicy (GA and on from Kubernetes
// 1.36) that gives a Pod the budget graceguard's mutating webhook would
// give it, inside the API server, whether or not a replica answers
// (docs/admission.md, "The mutating floor"). The API server runs it before
// the mutating webhooks; it acts only where CEL decides exactly as the
// webhook does, and then leaves a Pod the webhook would not change (but for
// the probes it adds and the label it sets to "true"). Elsewhere (a mesh,
// max-work: auto, graceguard.io/containers, a hook CEL does not read, a
// setting it does not read) it leaves the Pod to the webhook.
//
// What it gives: to every regular container without a preStop hook, the
// sleep graceguard gives (the sleep action, or none for the handler none;
// the exec handler is the webhook's; the routing delay of the
// Pod's annotation, its namespace's, a routing profile's or the
// cluster's), the grace raised to the budget (and a profile's grace
// floor), graceguard's record, and the label graceguard.io/treated:
// "floor" (mutate.LabelTreatedByFloor), which the webhook sets to "true"
// when it answers, so a Pod admitted without it stays visible.
//
// It reads every duration in whole seconds (a term with a fraction leaves
// the Pod to the webhook), so its sums and its record are exactly the
// webhook's.

// MutationChartVariables are the variables the chart writes from its
// values before MutationVariables, in this order: the cluster's defaults
// (config.*), as CEL values.
var MutationChartVariables = []Variable{
	// clusterTerms: each budget term's annotation to its cluster default,
	// in whole seconds.
	{"clusterTerms", "{'graceguard.io/routing-delay': 5, 'graceguard.io/max-work': 20, 'graceguard.io/cleanup': 2, 'graceguard.io/safety-margin': 3}"},
	// clusterHandler: --prestop-handler.
	{"clusterHandler", "'sleep'"},
	// profiles: every routing profile's name to [routing delay, grace
	// floor], in whole seconds (built-in and the operator's).
	{"profiles", "{'kube-proxy': [5, 0]}"},
	// clusterProfile: --default-routing-profile, '' for none.
	{"clusterProfile", "''"},
	// maxGrace: --max-grace-period in whole seconds, rounded up.
	{"maxGrace", "600"},
	// denyCeiling: the least platform ceiling whose action is deny, in
	// whole seconds, or -1.
	{"denyCeiling", "-1"},
}

// wholeSeconds is CEL: duration text v (durationOK) is whole seconds.
func wholeSeconds(v string) string {
	return "[" + durationOf(v) + "].all(d, d == duration(string(d.getSeconds()) + 's'))"
}

// seconds is CEL: duration text v (durationOK, wholeSeconds) in seconds.
func seconds(v string) string {
	return "(" + v + ".matches(r'^" + secondsPattern + "$') ? int(" + v + ") : duration(" + v + ").getSeconds())"
}

// termKeys are the budget terms' annotations, in budget.Terms' order.
var termKeys = func() []string {
	var out []string
	for _, t := range budget.Terms {
		out = append(out, mutate.KeyFor(t))
	}
	return out
}()

// mutationReads is CEL: annotation k with value v (size-bounded first) is
// one the mutating floor reads, with a value it reads as the webhook does
// (on a Pod or, nsKeys, a namespace).
func mutationReads(k, v string) string {
	var terms []string
	for _, key := range termKeys {
		terms = append(terms, lit(key))
	}
	probe := proofOf(mutate.Key{Name: mutate.AnnotationReadinessPath, Proof: mutate.Proof{Kind: mutate.ProofProbePath}}, v, "")
	port := proofOf(mutate.Key{Name: mutate.AnnotationProbePort, Proof: mutate.Proof{Kind: mutate.ProofProbePort}}, v, "")
	handlers := make([]string, len(mutate.PreStopHandlers))
	for i, h := range mutate.PreStopHandlers {
		handlers[i] = string(h)
	}
	return "(" + k + " in " + "[" + strings.Join(terms, ", ") + "] && " + durationOK(v) + " && " + wholeSeconds(v) + ") ||\n" +
		"(" + k + " == " + lit(mutate.AnnotationPreStop) + " && " + v + " in " + list(handlers) + ") ||\n" +
		"(" + k + " in " + list([]string{mutate.AnnotationReadinessPath, mutate.AnnotationLivenessPath}) + " && " + probe + ") ||\n" +
		"(" + k + " == " + lit(mutate.AnnotationProbePort) + " && (" + port + ")) ||\n" +
		"(" + k + " == " + lit(mutate.AnnotationRoutingProfile) + " && " + v + " in variables.profiles)"
}

// MutationVariables are the mutating floor's own variables, after
// MutationChartVariables.
func MutationVariables() []Variable {
	rd, prof, ps := lit(mutate.AnnotationRoutingDelay), lit(mutate.AnnotationRoutingProfile), lit(mutate.AnnotationPreStop)
	term := func(key string) string {
		k := lit(key)
		return "[variables.ann[?" + k + "].or(variables.nsAnn[?" + k + "]).orValue('')].map(v, v == '' ? variables.clusterTerms[" + k + "] : " + seconds("v") + ")[0]"
	}
	meshNames := list([]string{mutate.ContainerIstioProxy, mutate.ContainerLinkerdProxy})
	meshKeys := make([]string, len(meshKeyParts))
	for i, p := range meshKeyParts {
		meshKeys[i] = "k.contains(" + lit(p) + ")"
	}
	podMeshLabels := list([]string{mutate.AnnotationIstioInject, mutate.LabelIstioRev, mutate.LabelIstioDataplaneMode, mutate.LabelIstioManagedGateway})
	nsMeshLabels := list([]string{mutate.LabelIstioInjection, mutate.LabelIstioRev, mutate.LabelIstioDataplaneMode})
	return []Variable{
		{"ann", "object.metadata.?annotations.orValue({})"},
		{"nsAnn", "namespaceObject.metadata.?annotations.orValue({})"},
		{"containers", "object.spec.?containers.orValue([])"},
		// What the floor reads, it reads as the webhook does; anything
		// else leaves the Pod to the webhook.
		{"reads", strings.Join([]string{
			"size(variables.containers) >= 1 && size(variables.containers) <= " + strconv.Itoa(mutate.MaxTreatedContainers) +
				" && size(object.spec.?initContainers.orValue([])) <= " + strconv.Itoa(mutate.MaxTreatedContainers),
			"object.spec.?terminationGracePeriodSeconds.orValue(30) > 0",
			"// No mesh: its proxy, labels or settings (the webhook plans the proxy's exit).\n" +
				"(variables.containers + object.spec.?initContainers.orValue([])).all(c, !(c.?name.orValue('') in " + meshNames + "))",
			"[object.metadata.?labels.orValue({})].all(l, " + podMeshLabels + ".all(k, !(k in l)))",
			"[namespaceObject.metadata.?labels.orValue({})].all(l, " + nsMeshLabels + ".all(k, !(k in l)) && l[?" + lit(mutate.LabelMode) + "].orValue('" + string(mutate.ModeEnforce) + "') == '" + string(mutate.ModeEnforce) + "')",
			"size(variables.ann) <= " + strconv.Itoa(proofMaxAnnotations) + " && size(variables.nsAnn) <= " + strconv.Itoa(proofMaxAnnotations),
			"variables.ann.all(k, size(k) <= " + strconv.Itoa(maxKeyLength) + " && !(" + strings.Join(meshKeys, " || ") + "))",
			"variables.nsAnn.all(k, size(k) <= " + strconv.Itoa(maxKeyLength) + " && !(" + strings.Join(meshKeys, " || ") + "))",
			"// Every graceguard setting one it reads.\n" +
				"variables.ann.all(k, v, !k.startsWith('graceguard.io/') || (size(v) <= " + strconv.Itoa(maxValueLength) + " && (\n" +
				"  (k == " + lit(mutate.AnnotationInject) + " && v == 'true') ||\n" + indent(mutationReads("k", "v"), "  ") + ")))",
			"variables.nsAnn.all(k, v, !k.startsWith('graceguard.io/') || (size(v) <= " + strconv.Itoa(maxValueLength) + " && (\n" + indent(mutationReads("k", "v"), "  ") + ")))",
			"// Every hook of a regular container a length it reads.\n" +
				"variables.containers.all(c, " + HookSeconds("c") + " >= 0)",
		}, " &&\n")},
		// The routing profile (the Pod's, else its namespace's, else the
		// cluster's) and whether it sets the routing delay: unless a
		// routing-delay at its level or closer to the Pod does.
		{"profile", "variables.ann[?" + prof + "].or(variables.nsAnn[?" + prof + "]).orValue(variables.clusterProfile)"},
		{"setsRouting", prof + " in variables.ann ? !(" + rd + " in variables.ann) : " + prof + " in variables.nsAnn ? !(" + rd + " in variables.ann) && !(" + rd + " in variables.nsAnn) : variables.clusterProfile != '' && !(" + rd + " in variables.ann) && !(" + rd + " in variables.nsAnn)"},
		{"delay", "variables.profile != '' && variables.setsRouting ? variables.profiles[variables.profile][0] : " + term(mutate.AnnotationRoutingDelay)},
		{"graceFloor", "variables.profile != '' ? variables.profiles[variables.profile][1] : 0"},
		{"work", term(mutate.AnnotationMaxWork)},
		{"cleanup", term(mutate.AnnotationCleanup)},
		{"margin", term(mutate.AnnotationSafetyMargin)},
		// The preStop handler (exec is left to the webhook, mutationActs).
		{"handler", "variables.ann[?" + ps + "].or(variables.nsAnn[?" + ps + "]).orValue(variables.clusterHandler)"},
		// The sleep each container without a hook gets (0: none).
		{"sleep", "variables.handler == '" + string(mutate.PreStopNone) + "' ? 0 : variables.delay"},
		// The routing term: the longest of the delay and the treated
		// containers' hooks, the ones it adds counted.
		{"routing", "([variables.delay] + variables.containers.map(c, !c.?lifecycle.?preStop.hasValue() ? variables.sleep : " + HookSeconds("c") + ")).max()"},
		{"need", "[variables.routing + variables.work + variables.cleanup + variables.margin, variables.graceFloor].max()"},
		{"grace", "object.spec.?terminationGracePeriodSeconds.orValue(30)"},
		{"newGrace", "variables.need > variables.grace ? variables.need : variables.grace"},
		// graceguard's record, as budget.Budget.Annotation writes it.
		{"record", "'" + string(budget.Routing) + "=' + " + formatSeconds("variables.routing") + " + ' " + string(budget.Work) + "=' + " + formatSeconds("variables.work") +
			" + ' " + string(budget.Cleanup) + "=' + " + formatSeconds("variables.cleanup") + " + ' " + string(budget.Margin) + "=' + " + formatSeconds("variables.margin") +
			" + ' grace=' + string(variables.newGrace) + 's'"},
	}
}

// formatSeconds is CEL: whole seconds n as budget.Format prints them
// ("0s", "45s", "1m30s", "1m", "1h0m5s", "1h").
func formatSeconds(n string) string {
	return "[" + n + "].map(s, s == 0 ? '0s' : s < 60 ? string(s) + 's' : s < 3600 ? string(s / 60) + 'm' + (s % 60 == 0 ? '' : string(s % 60) + 's') : " +
		"string(s / 3600) + 'h' + (s % 3600 == 0 ? '' : string(s % 3600 / 60) + 'm' + (s % 60 == 0 ? '' : string(s % 60) + 's')))[0]"
}

// MutationConditions are the mutating floor's matchConditions: a Pod that
// is not a mirror Pod, did not opt out and carries no record (the webhook
// treated it already, or its author wrote one).
func MutationConditions() []Variable {
	return []Variable{
		{"not-a-mirror-pod", NotMirrorPod},
		{"not-opted-out", NotOptedOut},
		{"no-record", "!has(object.metadata.annotations) || !(" + lit(mutate.AnnotationBudget) + " in object.metadata.annotations)"},
	}
}

// mutationActs is CEL: the floor reads the Pod's budget, and the webhook
// would admit it (within --max-grace-period and every denying ceiling).
// It is part of the patch, not of the matchConditions: the API server
// evaluates those without namespaceObject.
//
// The exec handler is left to the webhook: what it warns about an exec
// hook (the image may lack sleep; a Windows Pod gets the sleep action)
// depends on whether it added the hook itself.
const mutationActs = "variables.reads && variables.handler != '" + string(mutate.PreStopExec) + "' && variables.need <= variables.maxGrace && (variables.denyCeiling < 0 || variables.need <= variables.denyCeiling)"

// MutationPatch is the CEL of the mutating floor's JSON patch: the hooks,
// the grace, the record and the label, each an add as the webhook writes
// them.
func MutationPatch() string {
	hook := "{'sleep': {'seconds': variables.sleep}}"
	budgetKey := "/metadata/annotations/' + jsonpatch.escapeKey(" + lit(mutate.AnnotationBudget) + ")"
	labelKey := "/metadata/labels/' + jsonpatch.escapeKey(" + lit(mutate.LabelTreated) + ")"
	return strings.Join([]string{
		"!(" + mutationActs + ") ? [] :",
		"(variables.sleep == 0 ? [] : variables.containers.transformList(i, c, !c.?lifecycle.?preStop.hasValue(),",
		"  c.?lifecycle.hasValue()",
		"    ? JSONPatch{op: 'add', path: '/spec/containers/' + string(i) + '/lifecycle/preStop', value: " + hook + "}",
		"    : JSONPatch{op: 'add', path: '/spec/containers/' + string(i) + '/lifecycle', value: {'preStop': " + hook + "}})) +",
		"(variables.newGrace != variables.grace ? [JSONPatch{op: 'add', path: '/spec/terminationGracePeriodSeconds', value: variables.newGrace}] : []) +",
		"[has(object.metadata.annotations)",
		"  ? JSONPatch{op: 'add', path: '" + budgetKey + ", value: variables.record}",
		"  : JSONPatch{op: 'add', path: '/metadata/annotations', value: {" + lit(mutate.AnnotationBudget) + ": variables.record}}] +",
		"(has(object.metadata.labels) && " + lit(mutate.LabelTreated) + " in object.metadata.labels ? [] : [has(object.metadata.labels)",
		"  ? JSONPatch{op: 'add', path: '" + labelKey + ", value: " + lit(mutate.LabelTreatedByFloor) + "}",
		"  : JSONPatch{op: 'add', path: '/metadata/labels', value: {" + lit(mutate.LabelTreated) + ": " + lit(mutate.LabelTreatedByFloor) + "}}])",
	}, "\n")
}
