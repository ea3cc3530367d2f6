package policyreport

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/shutdownreport"
)

// What every report and result says of where it comes from.
const (
	// Source is the reports' and results' source: the engine that wrote them.
	Source = "graceguard"
	// Policy is every result's policy; its rules are graceguard's reason
	// codes (docs/annotations.md) and the observer's rules below.
	Policy = "graceguard"
	// CategoryAdmission: what the webhooks decide of the Pod template.
	CategoryAdmission = "admission"
	// CategoryObserved: what the observer saw of the Pods' shutdowns.
	CategoryObserved = "observed shutdowns"
)

// The rules of results that are not a webhook's reason code.
const (
	// RuleKilled: a Pod of the workload was SIGKILLed at the end of its
	// grace (v1alpha1.OutcomeKilled), among the shutdowns its
	// ShutdownReport keeps.
	RuleKilled mutate.Reason = "observed-sigkill"
	// RuleHookFailed: a Pod's preStop hook failed (FailedPreStopHook).
	RuleHookFailed mutate.Reason = "observed-prestop-failure"
	// RuleNotEvaluated: the object could not be evaluated (it does not
	// decode as its kind).
	RuleNotEvaluated mutate.Reason = "not-evaluated"
)

// Labels and annotations of the reports.
const (
	// LabelManagedBy selects graceguard's reports, as the ShutdownReports.
	LabelManagedBy      = "app.kubernetes.io/managed-by"
	LabelManagedByValue = "graceguard"
	// LabelWriter marks the reports a controller writes and keeps
	// (WriterObserver: graceguard's observer), which it alone deletes;
	// kubectl graceguard audit's reports, applied by hand, carry none.
	LabelWriter    = "graceguard.io/report-writer"
	WriterObserver = "observer"
	// AnnotationDigest is a hash of what the report says, its times left
	// out: a writer compares it and skips a report that says nothing new.
	AnnotationDigest = "graceguard.io/report-digest"
	// AnnotationUnlisted counts the results beyond Bounds.MaxResults,
	// which the summary counts but the report does not list.
	AnnotationUnlisted = "graceguard.io/unlisted-results"
)

// Bounds bound what one report holds.
type Bounds struct {
	// MaxResults bounds the results listed; the rest are counted.
	MaxResults int
	// MaxMessageLength bounds each result's message, in bytes.
	MaxMessageLength int
}

// DefaultBounds are the documented defaults: room for every rule of a
// workload and a few dozen findings, and for check's longest messages
// whole (a denial quotes at most 64 bytes of a value and 512 of detail).
func DefaultBounds() Bounds { return Bounds{MaxResults: 50, MaxMessageLength: 1024} }

// Validate checks the bounds, naming the observer's flag that sets each.
func (b Bounds) Validate() error {
	return errors.Join(flags.ReportsMaxResults.Check(int64(b.MaxResults)), flags.ReportsMaxMessageLength.Check(int64(b.MaxMessageLength)))
}

// clamped is b within the flags' ranges, so Build never misbehaves on
// bounds that did not pass Validate.
func (b Bounds) clamped() Bounds {
	b.MaxResults = int(min(max(int64(b.MaxResults), flags.ReportsMaxResults.Min), flags.ReportsMaxResults.Max))
	b.MaxMessageLength = int(min(max(int64(b.MaxMessageLength), flags.ReportsMaxMessageLength.Min), flags.ReportsMaxMessageLength.Max))
	return b
}

// Workload is what a report is about: its scope.
type Workload struct {
	APIVersion, Kind, Namespace, Name string
	// UID, when known, makes the report owned by the workload, so it is
	// garbage-collected with it.
	UID types.UID
}

// Input is everything a report says of one workload.
type Input struct {
	Workload Workload
	// Mutation and Validation are the two webhooks' reports on its Pod
	// template (manifest.Process); nil with Err.
	Mutation, Validation *mutate.Report
	// Err says why the workload could not be evaluated.
	Err error
	// Observed is what its ShutdownReport says (Observe), nil when the
	// observer has seen none of its shutdowns: no observed results then.
	Observed *Observed
}

// Observed is what a workload's ShutdownReport says of its last
// shutdowns, as its policy report states it: how many the report keeps,
// and the observer's notes on those SIGKILLed at the end of their grace
// and on those whose preStop hook failed. It is small whatever the report
// holds (two notes of at most shutdownreport.MaxNoteLength bytes), so a
// writer may keep those of many workloads at once.
type Observed struct {
	// Report is the ShutdownReport's name.
	Report                      string
	Samples, Killed, HookFailed int
	KilledNote, HookFailedNote  string
}

// Observe reads a workload's ShutdownReport; nil when it holds no sample.
func Observe(w Workload, st *v1alpha1.ShutdownReportStatus) *Observed {
	if st == nil || len(st.Samples) == 0 {
		return nil
	}
	var killed, failed []v1alpha1.Sample
	for _, s := range st.Samples {
		if s.Outcome == v1alpha1.OutcomeKilled {
			killed = append(killed, s)
		}
		if s.HookFailed {
			failed = append(failed, s)
		}
	}
	o := &Observed{Report: v1alpha1.ReportName(w.Kind, w.Name), Samples: len(st.Samples), Killed: len(killed), HookFailed: len(failed)}
	if len(killed) > 0 {
		recommended := "unknown"
		if st.Recommendation != nil {
			recommended = st.Recommendation.MaxWork
		}
		o.KilledNote = shutdownreport.KilledNote(w.Namespace, recommended, killed)
	}
	if len(failed) > 0 {
		o.HookFailedNote = shutdownreport.FailedNote(w.Namespace, failed)
	}
	return o
}

// Rules are the checks a workload passes when they find nothing: every
// reason a webhook denies or warns with (mutate.AllReasons), in that order.
func Rules() []mutate.Reason {
	var out []mutate.Reason
	for _, r := range mutate.AllReasons {
		if k := mutate.KindOf(r); (k == "denial" || k == "warning") && r != mutate.WarnWouldChange {
			out = append(out, r)
		}
	}
	return out
}

// Name is the name of a workload's report: "graceguard-deployment-web",
// within Kubernetes' 253 bytes (a longer one ends in a hash).
func Name(kind, name string) string { return v1alpha1.ReportName("graceguard-"+kind, name) }

// Build makes the report of one workload at time now (its results' time).
func Build(in Input, b Bounds, now time.Time) *openreports.Report {
	b = b.clamped()
	w := in.Workload
	r := &openreports.Report{
		TypeMeta: metav1.TypeMeta{APIVersion: openreports.SchemeGroupVersion.String(), Kind: "Report"},
		ObjectMeta: metav1.ObjectMeta{
			Name: Name(w.Kind, w.Name), Namespace: w.Namespace,
			Labels: map[string]string{LabelManagedBy: LabelManagedByValue},
		},
		Source: Source,
		Scope:  &corev1.ObjectReference{APIVersion: w.APIVersion, Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, UID: w.UID},
	}
	if w.UID != "" {
		// Not a controller reference and no blockOwnerDeletion: those
		// would need more rights on every workload.
		r.OwnerReferences = []metav1.OwnerReference{{APIVersion: w.APIVersion, Kind: w.Kind, Name: w.Name, UID: w.UID}}
	}
	ts := metav1.Timestamp{Seconds: now.Unix()}
	all := results(in)
	for i := range all {
		all[i].Timestamp = ts
		all[i].Description = cut(all[i].Description, b.MaxMessageLength)
		count(&r.Summary, all[i].Result)
	}
	r.Results = all[:min(len(all), b.MaxResults)]
	r.Annotations = map[string]string{AnnotationDigest: digest(r)}
	if n := len(all) - len(r.Results); n > 0 {
		r.Annotations[AnnotationUnlisted] = strconv.Itoa(n)
	}
	return r
}

// results lists every result of the input, fails first, then warns,
// errors and passes: what Build keeps when it cannot keep all. Within a
// level, what the observer saw comes first (a few results, and evidence
// rather than a prediction), then the findings in check's order.
func results(in Input) []openreports.ReportResult {
	var fail, warn, errs, pass, skip []openreports.ReportResult
	add := func(res openreports.ReportResult) {
		switch res.Result {
		case resultFail:
			fail = append(fail, res)
		case resultWarn:
			warn = append(warn, res)
		case resultError:
			errs = append(errs, res)
		case resultPass:
			pass = append(pass, res)
		default:
			skip = append(skip, res)
		}
	}
	for _, res := range observed(in.Observed) {
		add(res)
	}
	switch {
	case in.Err != nil:
		add(openreports.ReportResult{Source: Source, Policy: Policy, Rule: string(RuleNotEvaluated), Category: CategoryAdmission,
			Result: resultError, Description: in.Err.Error()})
	case in.Mutation == nil || in.Validation == nil:
	case in.Mutation.Skip != "" || in.Validation.Skip != "":
		reason := in.Mutation.Skip
		if reason == "" {
			reason = in.Validation.Skip
		}
		add(openreports.ReportResult{Source: Source, Policy: Policy, Rule: string(reason), Category: CategoryAdmission,
			Result: resultSkip, Description: mutate.Describe(reason)})
	default:
		for _, res := range admission(in.Mutation, in.Validation) {
			add(res)
		}
	}
	out := make([]openreports.ReportResult, 0, len(fail)+len(warn)+len(errs)+len(pass)+len(skip))
	for _, level := range [][]openreports.ReportResult{fail, warn, errs, pass, skip} {
		out = append(out, level...)
	}
	return out
}

const (
	resultPass  openreports.Result = "pass"
	resultFail  openreports.Result = "fail"
	resultWarn  openreports.Result = "warn"
	resultError openreports.Result = "error"
	resultSkip  openreports.Result = "skip"
)

// maxFieldLength bounds the field path a result names (its "field"
// property), as a denial bounds it.
const maxFieldLength = 320

// admission is what the webhooks say of the template: a fail per
// violation that denies it, a warn per warning (in warn mode, what enforce
// mode would deny or change), and a pass per rule that found nothing.
func admission(m, v *mutate.Report) []openreports.ReportResult {
	denials, warnings := mutate.Findings(m, v)
	mode := map[string]string{"mode": string(v.Mode)}
	found := map[mutate.Reason]bool{}
	var out []openreports.ReportResult
	for _, f := range denials {
		found[f.Reason] = true
		out = append(out, finding(f.Reason, resultFail, f.Err.Field, f.Err.Error(), mode))
	}
	for _, n := range warnings {
		found[n.Reason] = true
		out = append(out, finding(n.Reason, resultWarn, n.Field, n.Text, mode))
	}
	for _, r := range Rules() {
		if !found[r] {
			out = append(out, openreports.ReportResult{Source: Source, Policy: Policy, Rule: string(r), Category: CategoryAdmission,
				Severity: severity(r), Result: resultPass, Scored: true, Properties: map[string]string{"mode": string(v.Mode)}})
		}
	}
	return out
}

func finding(r mutate.Reason, result openreports.Result, field, message string, mode map[string]string) openreports.ReportResult {
	props := map[string]string{"field": shutdownreport.Cut(field, maxFieldLength)}
	for k, v := range mode {
		props[k] = v
	}
	return openreports.ReportResult{Source: Source, Policy: Policy, Rule: string(r), Category: CategoryAdmission,
		Severity: severity(r), Result: result, Scored: true, Description: message, Properties: props}
}

// severity is a rule's: a denial is high, a warning medium, a change (in
// warn mode, what enforce mode would set) low.
func severity(r mutate.Reason) openreports.ResultSeverity {
	switch mutate.KindOf(r) {
	case "denial":
		return "high"
	case "warning":
		return "medium"
	case "change":
		return "low"
	}
	return "info"
}

// observed is what the observer saw of the workload's last shutdowns:
// whether a Pod was SIGKILLed at the end of its grace, whether a preStop
// hook failed, in the words of the observer's events.
func observed(o *Observed) []openreports.ReportResult {
	if o == nil || o.Samples == 0 {
		return nil
	}
	window := fmt.Sprintf("the last %d shutdowns observed", o.Samples)
	if o.Samples == 1 {
		window = "the last shutdown observed"
	}
	res := func(rule mutate.Reason, bad int, note, none string) openreports.ReportResult {
		out := openreports.ReportResult{Source: Source, Policy: Policy, Rule: string(rule), Category: CategoryObserved, Severity: "high", Scored: true,
			Properties: map[string]string{"shutdownReport": o.Report, "samples": strconv.Itoa(o.Samples), "matching": strconv.Itoa(bad)}}
		if bad == 0 {
			out.Result, out.Description = resultPass, "none of "+window+" "+none
		} else {
			out.Result, out.Description = resultFail, "In "+window+": "+note
		}
		return out
	}
	return []openreports.ReportResult{
		res(RuleKilled, o.Killed, o.KilledNote, "was SIGKILLed at the end of its grace"),
		res(RuleHookFailed, o.HookFailed, o.HookFailedNote, "had a preStop hook fail"),
	}
}

func count(s *openreports.ReportSummary, r openreports.Result) {
	switch r {
	case resultPass:
		s.Pass++
	case resultFail:
		s.Fail++
	case resultWarn:
		s.Warn++
	case resultError:
		s.Error++
	case resultSkip:
		s.Skip++
	}
}

// cut bounds a message to n bytes, ending a longer one in a marker that
// says how long it was: "...[cut from 2345 bytes]".
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	marker := "...[cut from " + strconv.Itoa(len(s)) + " bytes]"
	end := n - len(marker)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + marker
}

// digest hashes what the report says: its scope, results (their times
// left out) and summary.
func digest(r *openreports.Report) string {
	results := make([]openreports.ReportResult, len(r.Results))
	for i, res := range r.Results {
		res.Timestamp = metav1.Timestamp{}
		results[i] = res
	}
	b, _ := json.Marshal(struct {
		Scope   *corev1.ObjectReference
		Summary openreports.ReportSummary
		Results []openreports.ReportResult
	}{r.Scope, r.Summary, results})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])[:16]
}
