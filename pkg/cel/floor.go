package cel

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// The native floor: a ValidatingAdmissionPolicy that refuses, inside the
// API server and so whether or not a webhook replica answers, what the
// webhook refuses and CEL can see from the object alone (docs/admission.md,
// "The native floor"):
//
//   - prestop-exceeds-grace: a preStop hook HookSeconds reads that lasts
//     as long as the grace it runs in, on a Pod as it is about to be stored
//     (opted out or not: graceguard's mutation has run by then) and on a
//     workload's opted-out Pod template (a template graceguard treats would
//     get the budget's grace);
//   - stop-signal-kills: a stop signal no process can catch.
//
// Each with the webhook's words (mutate's Messages), in the webhook's
// order, so a user reads the same denial whichever refused. It refuses
// nothing the webhook admits: test/harness/chart holds it to
// mutate.Validate both ways.

// Variable is a named CEL expression of a policy (spec.variables).
type Variable struct{ Name, Expression string }

// Floor bounds: a Pod with more containers in a list is not judged by
// the floor (the webhook judges it; it reads up to 256).
const floorMaxContainers = 64

// saturated is the seconds past which graceguard reads a count of seconds
// as longer than any grace (mutate's secs): CEL compares min(n, saturated).
var saturated = func() string {
	n, _ := strconv.ParseInt(maxHookSeconds, 10, 64)
	return strconv.FormatInt(n+1, 10)
}()

func sat(n string) string {
	return "(" + n + " > " + maxHookSeconds + " ? " + saturated + " : " + n + ")"
}

// FloorVariables are the floor policy's variables, in order (each may read
// those before it).
func FloorVariables() []Variable {
	spec := "variables.spec"
	return []Variable{
		// The Pod, or the workload's Pod template, and where its spec is.
		{"pod", "object.kind == 'Pod' ? object : object.kind == 'CronJob' ? object.?spec.?jobTemplate.?spec.?template.orValue({}) : object.?spec.?template.orValue({})"},
		{"specPath", "object.kind == 'Pod' ? 'spec' : object.kind == 'CronJob' ? 'spec.jobTemplate.spec.template.spec' : 'spec.template.spec'"},
		{"spec", "variables.pod.?spec.orValue({})"},
		// The API server defaults a missing grace to 30 before admission.
		{"grace", spec + ".?terminationGracePeriodSeconds.orValue(30)"},
		{"optedOut", "variables.pod.?metadata.?annotations[?" + lit(mutate.AnnotationInject) + "].orValue('') == 'false'"},
		{"windows", spec + ".?os.?name.orValue('') == 'windows'"},
		// A Pod's hooks are judged against its grace as it is (graceguard's
		// mutation has run); a template's only when it opted out.
		{"judgesHooks", "object.kind == 'Pod' || variables.optedOut"},
		// Each violation as [field, what is wrong, reason], in the order
		// mutate.Validate finds them: the hooks of the sidecars, then of
		// the containers; then the stop signals, likewise.
		{"violations", violations()},
	}
}

func violations() string {
	spec := "variables.spec"
	inits := spec + ".?initContainers.orValue([])"
	containers := spec + ".?containers.orValue([])"
	sidecar := "c.?restartPolicy.orValue('') == 'Always'"
	initPath := "variables.specPath + '.initContainers[' + string(i) + ']'"
	path := "variables.specPath + '.containers[' + string(i) + ']'"
	return "size(" + inits + ") > " + strconv.Itoa(floorMaxContainers) + " || size(" + containers + ") > " + strconv.Itoa(floorMaxContainers) + " ? [] : (\n" +
		"  (variables.judgesHooks ? (\n" +
		"    " + inits + ".transformList(i, c, " + sidecar + ",\n      " + hookViolations("c", initPath) + ") +\n" +
		"    " + containers + ".transformList(i, c,\n      " + hookViolations("c", path) + ")) : []) +\n" +
		"  " + inits + ".transformList(i, c, " + sidecar + ",\n    " + signalViolations("c", initPath) + ") +\n" +
		"  " + containers + ".transformList(i, c,\n    " + signalViolations("c", path) + ")\n" +
		").flatten()"
}

// hookViolations is CEL: the violations of container c (at field path p,
// a CEL string) by its preStop hook, as mutate's checkHooks finds them: a
// hook of s seconds (saturated) that is not shorter than the grace, or
// than the grace of its liveness or startup probe.
func hookViolations(c, p string) string {
	reason := lit(string(mutate.DenyHookExceedsGrace))
	grace := "string(variables.grace)"
	hookMsg := splice(mutate.MsgHookExceedsGrace, map[string]string{"{grace}": grace})
	probe := func(name string) string {
		pg := c + ".?" + name + ".?terminationGracePeriodSeconds"
		msg := splice(mutate.MsgHookExceedsProbeGrace, map[string]string{
			"{hook}":  "(s > " + maxHookSeconds + " ? 'infinity' : string(s) + 's')",
			"{probe}": lit(name),
		})
		return "(" + pg + ".hasValue() && s >= " + sat(pg+".value()") + " ? [[" + p + " + '." + name + ".terminationGracePeriodSeconds', 'Invalid value: ' + string(" + pg + ".value()) + ': ' + " + msg + ", " + reason + "]] : [])"
	}
	return "[" + HookSeconds(c) + "].map(h, h <= 0 ? [] : [" + sat("h") + "].map(s,\n" +
		"        (s >= " + sat("variables.grace") + " ? [[" + p + " + '.lifecycle.preStop', 'Invalid value: \"' + " + HookDesc(c) + " + '\": ' + " + hookMsg + ", " + reason + "]] : []) +\n" +
		"        " + probe("livenessProbe") + " +\n" +
		"        " + probe("startupProbe") + ")[0])[0]"
}

// signalViolations is CEL: the violation of container c (at p) by a stop
// signal no process can catch (mutate's checkStopSignals).
func signalViolations(c, p string) string {
	signals := make([]string, 0, len(mutate.NoDrainSignals))
	for s := range mutate.NoDrainSignals {
		signals = append(signals, string(s))
	}
	slices.Sort(signals)
	fix := "(variables.windows ? " + lit(mutate.StopSignalFixWindows) + " : " + lit(mutate.StopSignalFix) + ")"
	var e strings.Builder
	e.WriteString("[" + c + ".?lifecycle.?stopSignal.orValue('')].map(sig, ")
	for _, s := range signals {
		what := mutate.NoDrainSignals[corev1.Signal(s)]
		msg := splice(mutate.MsgStopSignalKills, map[string]string{
			"{name}":   "'\"' + " + c + ".name + '\"'",
			"{signal}": lit(s),
			"{what}":   lit(what),
			"{fix}":    fix,
		})
		e.WriteString("sig == " + lit(s) + " ? [[" + p + " + '.lifecycle.stopSignal', 'Invalid value: \"" + s + "\": ' + " + msg + ", " + lit(string(mutate.DenyStopSignalKills)) + "]] : ")
	}
	e.WriteString("[])[0]")
	return e.String()
}

// splice is CEL: message m with each hole replaced by its CEL string
// expression, as one concatenation.
func splice(m mutate.Message, holes map[string]string) string {
	text := string(m)
	var parts []string
	for text != "" {
		i := strings.IndexByte(text, '{')
		j := strings.IndexByte(text, '}')
		if i < 0 || j < i {
			parts = append(parts, lit(text))
			break
		}
		hole := text[i : j+1]
		e, ok := holes[hole]
		if !ok {
			panic("pkg/cel: no CEL for " + hole + " in " + string(m))
		}
		if i > 0 {
			parts = append(parts, lit(text[:i]))
		}
		parts = append(parts, e)
		text = text[j+1:]
	}
	return "(" + strings.Join(parts, " + ") + ")"
}

// FloorMessage is the CEL messageExpression of the floor's denial: its
// violations as the webhook's denial lists them (mutate.Report.Err: one
// line, or the first mutate.MaxListedViolations in brackets with a count
// of the rest), without the "Pod "name" is invalid: " the API server
// replaces by its own prefix.
func FloorMessage() string {
	n := strconv.Itoa(mutate.MaxListedViolations)
	return "[variables.violations.map(v, v[0] + ': ' + v[1])].map(m, size(m) == 1 ? m[0] : '[' + (size(m) <= " + n + " ? m : m.slice(0, " + n +
		") + [variables.violations[" + n + "][0] + ': Too many: ' + string(size(m) - " + n + ") + ': violations from here on not listed (a denial lists the first " + n + ")']).join(', ') + ']')[0]"
}

// FloorReasons is the CEL valueExpression of the floor's audit annotation
// "reasons": the reason codes of its violations, as the webhook's metrics
// name them, comma-separated; empty (no annotation) when it admits.
func FloorReasons() string {
	return "variables.violations.map(v, v[2]).distinct().join(',')"
}

// FloorValidation is the CEL expression the floor validates.
const FloorValidation = "size(variables.violations) == 0"
