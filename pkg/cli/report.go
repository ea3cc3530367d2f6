package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/graceguard/graceguard/pkg/manifest"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// Verdicts of check and audit, per object.
const (
	verdictAllowed = "allowed"
	verdictDenied  = "denied"
	verdictSkipped = "skipped"
	// verdictError: a Pod or workload that could not be evaluated.
	verdictError = "error"
)

// Finding levels: what --fail-on compares against.
const (
	levelDenial  = "denial"
	levelWarning = "warning"
)

// finding is one denial or warning, in full, located in the input.
type finding struct {
	Level  string        `json:"level"`
	Reason mutate.Reason `json:"reason"`
	Field  string        `json:"field"`
	// Message is the whole text, as check prints it.
	Message string `json:"message"`
	// File, Line and Column locate the field (or the nearest part of it
	// the input has); empty for objects read from a cluster.
	File   string `json:"file,omitempty"`
	Line   int    `json:"line,omitempty"`
	Column int    `json:"column,omitempty"`
}

// verdictOf says what happens to an object at admission.
func verdictOf(o object) string {
	switch {
	case o.err != nil:
		return verdictError
	case o.skip != "":
		return verdictSkipped
	case !o.evaluated():
		return verdictSkipped
	case o.res.Validation.Skip != "":
		return verdictSkipped
	case o.res.Validation.Err() != nil:
		return verdictDenied
	}
	return verdictAllowed
}

// skipOf returns why an object is skipped and the sentence that says it.
func skipOf(o object) (mutate.Reason, string) {
	if o.skip != "" {
		return o.skip, o.skipWhy
	}
	if o.res == nil {
		return manifest.SkipNotWorkload, unsupported(o)
	}
	r := o.res.Skip
	if r == "" {
		r = o.res.Validation.Skip
	}
	return r, skipReason(r, o)
}

// skipNotObject: a document of a file found in a directory that is not a
// Kubernetes object (a values.yaml, a CI workflow).
const skipNotObject mutate.Reason = "not-a-kubernetes-object"

// findings lists an evaluated object's denials and warnings in full: the
// validating webhook's violations when it denies, and the warnings of both
// webhooks as the API server would show them (in warn mode they include
// what enforce mode would change or deny): mutate.Findings, which the
// policy reports of audit -o openreports and the observer record too.
func findings(o object) []finding {
	out := slices.Clone(o.notes)
	if !o.evaluated() || o.res.Validation.Skip != "" {
		return out
	}
	denials, warnings := mutate.Findings(o.res.Mutation, o.res.Validation)
	for _, f := range denials {
		out = append(out, o.locate(finding{Level: levelDenial, Reason: f.Reason, Field: f.Err.Field, Message: f.Err.Error()}))
	}
	for _, n := range warnings {
		out = append(out, o.locate(finding{Level: levelWarning, Reason: n.Reason, Field: n.Field, Message: n.Text}))
	}
	return out
}

// locate fills in where the finding's field is: in the object, or in its
// Namespace when the input defines it.
func (o object) locate(f finding) finding {
	doc, path := &o.doc, f.Field
	if rest, ok := strings.CutPrefix(f.Field, "Namespace["); ok {
		i := strings.Index(rest, "]")
		if o.nsDoc == nil || i < 0 {
			return f
		}
		doc, path = o.nsDoc, strings.TrimPrefix(rest[i+1:], ".")
	}
	if doc.File == "" {
		return f
	}
	f.File = doc.File
	f.Line, f.Column = doc.Locate(path)
	return f
}

// tally counts verdicts and findings over a run.
type tally struct {
	objects, denied, allowed, skipped, errors, warnings int
	// skippedBy counts skips by reason; notOptedIn names the namespaces
	// of the namespace-not-opted-in ones.
	skippedBy  map[mutate.Reason]int
	notOptedIn []string
	// assumed names the namespaces evaluated as if opted in.
	assumed []string
}

func newTally() tally { return tally{skippedBy: map[mutate.Reason]int{}} }

func count(objs []object) tally {
	t := newTally()
	for _, o := range objs {
		t.add(o)
	}
	return t
}

// add counts one object.
func (t *tally) add(o object) {
	t.objects++
	switch verdictOf(o) {
	case verdictDenied:
		t.denied++
	case verdictAllowed:
		t.allowed++
	case verdictError:
		t.errors++
	case verdictSkipped:
		t.skipped++
		r, _ := skipOf(o)
		t.skippedBy[r]++
		if r == mutate.SkipNotOptedIn && !slices.Contains(t.notOptedIn, o.ns) {
			t.notOptedIn = append(t.notOptedIn, o.ns)
		}
	}
	if o.nsState == nsAssumed && o.evaluated() && !slices.Contains(t.assumed, o.ns) {
		t.assumed = append(t.assumed, o.ns)
	}
	for _, f := range findings(o) {
		if f.Level == levelWarning {
			t.warnings++
		}
	}
}

// skipOrder is the order skip reasons are summed up in.
var skipOrder = []mutate.Reason{
	skipNotObject, manifest.SkipNotWorkload, skipOwned, manifest.SkipNoTemplate, manifest.SkipWorkloadRef, mutate.SkipNotOptedIn, mutate.SkipExcluded, mutate.SkipMirrorPod,
}

// skipSummary says in a line why objects were skipped, and how to evaluate
// those whose namespace is not opted in; "" when none was.
func (t tally) skipSummary(hint string) string {
	if t.skipped == 0 {
		return ""
	}
	var parts []string
	reasons := slices.Clone(skipOrder)
	for r := range t.skippedBy {
		if !slices.Contains(reasons, r) {
			reasons = append(reasons, r)
		}
	}
	for _, r := range reasons {
		n := t.skippedBy[r]
		if n == 0 {
			continue
		}
		switch r {
		case skipNotObject:
			parts = append(parts, fmt.Sprintf("%d not a Kubernetes object", n))
		case skipOwned:
			parts = append(parts, fmt.Sprintf("%d owned by a workload audited itself", n))
		case manifest.SkipNotWorkload:
			parts = append(parts, fmt.Sprintf("%d not a Pod or workload", n))
		case manifest.SkipNoTemplate:
			parts = append(parts, fmt.Sprintf("%d without a Pod template", n))
		case manifest.SkipWorkloadRef:
			parts = append(parts, fmt.Sprintf("%d Rollouts using another object's template (spec.workloadRef)", n))
		case mutate.SkipNotOptedIn:
			s := fmt.Sprintf("%d in %s not opted in", n, pluralWord(len(t.notOptedIn), "namespace")+" "+strings.Join(t.notOptedIn, ", "))
			if hint != "" {
				s += " (" + hint + ")"
			}
			parts = append(parts, s)
		case mutate.SkipExcluded:
			parts = append(parts, fmt.Sprintf("%d in excluded namespaces", n))
		case mutate.SkipMirrorPod:
			parts = append(parts, fmt.Sprintf("%d mirror Pods", n))
		default:
			parts = append(parts, fmt.Sprintf("%d %s", n, r))
		}
	}
	return "skipped: " + strings.Join(parts, ", ")
}

func pluralWord(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}
