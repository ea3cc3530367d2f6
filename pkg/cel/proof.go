package cel

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// The one-call proof (docs/admission.md): the validating webhook's
// matchCondition not-proven-by-cel, which sends a Pod to the webhook only
// when CEL cannot prove, on the Pod as it is about to be stored, that the
// webhook would admit it.

// Bounds of the proof: past them a Pod is left to the webhook.
const (
	// proofMaxContainers bounds each container list the proof walks:
	// mutate.MaxTreatedContainers, past which the webhook refuses.
	proofMaxContainers = mutate.MaxTreatedContainers
	// proofMaxAnnotations bounds the annotations it walks.
	proofMaxAnnotations = 64
	// maxKeyLength is the API's limit on an annotation key (a 253-byte
	// prefix, '/', a 63-byte name).
	maxKeyLength = 253 + 1 + 63
	// maxValueLength bounds a graceguard annotation's value the proof
	// reads: the longest it accepts is a probe path.
	maxValueLength = mutate.MaxProbePathLength
	// maxRecordLength bounds the record it reads: graceguard writes at
	// most 132 characters for terms the pattern reads.
	maxRecordLength = 256
	// maxNameLength is a container name's limit, a DNS label.
	maxNameLength = 63
)

// maxHookSeconds is the most seconds graceguard reads as a duration: past
// it pkg/mutate's secs saturates to longer than any grace, which CEL's
// integers would not.
var maxHookSeconds = strconv.FormatInt(math.MaxInt64/int64(time.Second), 10)

// meshKeyParts: an annotation key holding one of them is a mesh's
// setting, left to the webhook.
var meshKeyParts = []string{"istio.io/", "linkerd.io/"}

// hookFits is CEL: container c's preStop hook lasts at most bound seconds
// and ends before the grace g and before the grace of its liveness and
// startup probes (mutate's checkHooks). The bound comes first: it keeps
// h + 1 from overflowing.
func hookFits(c, g, bound string) string {
	return "[" + HookSeconds(c) + "].all(h, h == 0 || (h > 0 && h <= " + bound + " && h < " + g +
		" && h < " + c + ".?livenessProbe.?terminationGracePeriodSeconds.orValue(h + 1) && h < " +
		c + ".?startupProbe.?terminationGracePeriodSeconds.orValue(h + 1)))"
}

// acceptedAnnotation is CEL: the graceguard annotation k with value v (at
// most maxValueLength characters, checked first) is one the proof accepts
// on a Pod whose record is b (each key's mutate.Proof).
func acceptedAnnotation(k, v, b string) string {
	var terms []string
	for _, key := range mutate.Keys {
		if key.Where&mutate.PodAnnotation == 0 || key.Proof.Kind == mutate.ProofNone {
			continue
		}
		terms = append(terms, "("+k+" == "+lit(key.Name)+" && ("+proofOf(key, v, b)+"))")
	}
	return strings.Join(terms, " ||\n")
}

func proofOf(key mutate.Key, v, b string) string {
	p := key.Proof
	switch p.Kind {
	case mutate.ProofAtMostTerm:
		return durationOK(v) + " && " + durationOf(v) + " <= duration(" + term(b, key.Term) + ")"
	case mutate.ProofTerm:
		d := durationOK(v) + " && " + durationOf(v) + " == duration(" + term(b, key.Term) + ")"
		if len(p.Values) == 0 {
			return d
		}
		return v + " in " + list(p.Values) + " || (" + d + ")"
	case mutate.ProofOneOf:
		return v + " in " + list(p.Values)
	case mutate.ProofProbePath:
		// validProbePath: a slash, then printable ASCII without spaces.
		return v + ".matches(r'^/[!-~]{0," + strconv.Itoa(mutate.MaxProbePathLength-1) + "}$')"
	case mutate.ProofProbePort:
		// parsePort: 1-65535, or an IANA service name (at most 15
		// characters of lowercase letters, digits and single dashes, a
		// letter among them, no dash at either end).
		return "(" + v + ".matches(r'^[1-9][0-9]{0,4}$') && int(" + v + ") <= 65535) || (" + v +
			".matches(r'^[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$') && " + v + ".matches(r'[a-z]') && !" + v + ".contains('--'))"
	}
	panic(fmt.Sprintf("pkg/cel: key %s has an unknown proof kind %d", key.Name, p.Kind))
}

// ProvenCondition is the expression of the matchCondition
// not-proven-by-cel: true (call the webhook) unless CEL proves the Pod
// about to be stored is one the validating webhook admits. docs/admission.md
// says why each part holds.
func ProvenCondition() string {
	containers := "object.spec.?containers.orValue([])"
	all := "(" + containers + " + object.spec.?initContainers.orValue([]))"
	meshKeys := make([]string, len(meshKeyParts))
	for i, p := range meshKeyParts {
		meshKeys[i] = "k.contains(" + lit(p) + ")"
	}
	b := "b"
	var e strings.Builder
	w := func(lines ...string) {
		for _, l := range lines {
			e.WriteString(l)
			e.WriteByte('\n')
		}
	}
	w("!(",
		fmt.Sprintf("  size(%s) <= %d && size(object.spec.?initContainers.orValue([])) <= %d &&", containers, proofMaxContainers, proofMaxContainers),
		"  // A mesh proxy, or a stop signal other than SIGTERM, is left to the webhook.",
		"  "+all+".all(c,",
		fmt.Sprintf("    [c.?name.orValue('')].all(n, size(n) <= %d && !(n in %s)) &&", maxNameLength, list([]string{mutate.ContainerIstioProxy, mutate.ContainerLinkerdProxy})),
		"    [c.?lifecycle.?stopSignal.orValue('SIGTERM')].all(s, size(s) == 7 && s == 'SIGTERM')) &&",
		"  [object.metadata.?labels.orValue({})].all(l, !("+lit(mutate.AnnotationIstioInject)+" in l) && !("+lit(mutate.LabelIstioRev)+" in l)) &&",
		"  [object.spec.?terminationGracePeriodSeconds.orValue(0)].all(g, g > 0 &&",
		fmt.Sprintf("  [object.metadata.?annotations.orValue({})].all(a, size(a) <= %d &&", proofMaxAnnotations),
		"  // A mesh setting on the Pod is left to the webhook.",
		fmt.Sprintf("  !a.exists(k, size(k) > %d || %s) &&", maxKeyLength, strings.Join(meshKeys, " || ")),
		"  [a[?"+lit(mutate.AnnotationInject)+"].orValue('') == 'false'].all(out,",
		"  [out ? '' : a[?"+lit(mutate.AnnotationBudget)+"].orValue('')].all(b,",
		"    (out || (",
		fmt.Sprintf("      size(b) <= %d &&", maxRecordLength),
		"      b.matches(r'"+recordPattern+"') &&",
		"      g == "+recordGrace(b)+" &&",
		"      "+containers+".all(c, c.?lifecycle.?preStop.hasValue()) &&",
		"      a.all(k, v, !k.startsWith('graceguard.io/') ||",
		"        k == "+lit(mutate.AnnotationBudget)+" ||",
		fmt.Sprintf("        (size(v) <= %d && (", maxValueLength),
		indent(acceptedAnnotation("k", "v", b), "          ")+"))))) &&",
		"    [out ? "+maxHookSeconds+" : duration("+term(b, budget.Routing)+").getSeconds()].all(rs,",
		"      "+all+".all(c,",
		"        "+hookFits("c", "g", "rs")+"))))))",
		")")
	return strings.TrimSuffix(e.String(), "\n")
}

func indent(s, by string) string {
	return by + strings.ReplaceAll(s, "\n", "\n"+by)
}
