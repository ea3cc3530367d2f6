package cli

import (
	"encoding/json"
	"io"
	"path/filepath"
	"strings"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// The JSON report of check and audit (-o json), documented in
// docs/plugin.md. Fields are only ever added.

type jsonReport struct {
	Objects []jsonObject `json:"objects"`
	Summary jsonSummary  `json:"summary"`
}

type jsonObject struct {
	// Source is FILE#N (FILE#N.items[I] in a List) for input files, or
	// "cluster" for audit.
	Source     string `json:"source"`
	File       string `json:"file,omitempty"`
	Line       int    `json:"line,omitempty"`
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Verdict is allowed, denied, skipped or error.
	Verdict string `json:"verdict"`
	Mode    string `json:"mode,omitempty"`
	// NamespaceOptedIn is false when the namespace was evaluated as if it
	// were opted in (--assume-opted-in, or audit of a namespace not yet
	// opted in).
	NamespaceOptedIn *bool        `json:"namespaceOptedIn,omitempty"`
	OptedOut         bool         `json:"optedOut,omitempty"`
	Skip             *jsonSkip    `json:"skip,omitempty"`
	Error            string       `json:"error,omitempty"`
	Grace            *jsonGrace   `json:"grace,omitempty"`
	Budget           string       `json:"budget,omitempty"`
	Changes          []jsonChange `json:"changes,omitempty"`
	Findings         []finding    `json:"findings,omitempty"`
	// UnlistedViolations counts the violations beyond the ones graceguard
	// records (mutate.MaxRecordedViolations).
	UnlistedViolations int `json:"unlistedViolations,omitempty"`
}

type jsonSkip struct {
	Reason  mutate.Reason `json:"reason"`
	Message string        `json:"message"`
}

type jsonGrace struct {
	Before int64 `json:"before"`
	After  int64 `json:"after"`
}

type jsonChange struct {
	Reason mutate.Reason `json:"reason"`
	Field  string        `json:"field"`
	// Summary says what is written ("sleep 5s", "30 -> 45 (...)").
	Summary string `json:"summary"`
	// Applied is false in warn mode: enforce mode would make the change.
	Applied bool `json:"applied"`
}

type jsonSummary struct {
	Objects  int `json:"objects"`
	Denied   int `json:"denied"`
	Allowed  int `json:"allowed"`
	Skipped  int `json:"skipped"`
	Errors   int `json:"errors"`
	Warnings int `json:"warnings"`
	// SkippedBy counts skipped objects by reason.
	SkippedBy map[mutate.Reason]int `json:"skippedBy,omitempty"`
	FailOn    string                `json:"failOn"`
	// Failed is true when the run exits 1 (or 2 for errors).
	Failed bool `json:"failed"`
}

func jsonObjectOf(o object) jsonObject {
	j := jsonObject{
		Source: o.doc.Source, File: o.doc.File, Line: o.doc.Line,
		APIVersion: o.doc.APIVersion, Kind: o.doc.Kind, Name: o.doc.Name,
		Namespace: o.doc.Namespace, Verdict: verdictOf(o),
	}
	if o.doc.Supported() {
		j.Namespace = o.ns
	}
	switch j.Verdict {
	case verdictError:
		j.Error = o.err.Error()
		return j
	case verdictSkipped:
		r, why := skipOf(o)
		j.Skip = &jsonSkip{r, why}
		j.Findings = findings(o)
		return j
	}
	m := o.res.Mutation
	j.Mode = string(o.res.Validation.Mode)
	j.OptedOut = m.OptedOut
	if o.nsState == nsAssumed {
		j.NamespaceOptedIn = new(bool)
	} else if o.nsState == nsAsWritten {
		t := true
		j.NamespaceOptedIn = &t
	}
	j.Grace = &jsonGrace{m.GraceBefore, m.Grace}
	if m.Sources != nil {
		j.Budget = m.Budget.Annotation(m.Grace)
	}
	for _, c := range m.Changes {
		j.Changes = append(j.Changes, jsonChange{c.Reason, c.Path.String(), c.Summary, m.Applied})
	}
	j.Findings = findings(o)
	j.UnlistedViolations = o.res.Validation.Unlisted
	return j
}

func writeJSON(w io.Writer, objs []object, t tally, failOn string) error {
	r := newJSONReporter(w, failOn)
	for _, o := range objs {
		if err := r.object(o); err != nil {
			return err
		}
	}
	return r.finish(t)
}

func jsonSummaryOf(t tally, failOn string) jsonSummary {
	rf := reportFlags{failOn: failOn}
	s := jsonSummary{
		Objects: t.objects, Denied: t.denied, Allowed: t.allowed, Skipped: t.skipped, Errors: t.errors, Warnings: t.warnings,
		SkippedBy: t.skippedBy, FailOn: failOn, Failed: rf.outcome(t) != nil,
	}
	if len(s.SkippedBy) == 0 {
		s.SkippedBy = nil
	}
	return s
}

func encodeJSON(w io.Writer, v any) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	e.SetEscapeHTML(false)
	return e.Encode(v)
}

// SARIF 2.1.0 (https://docs.oasis-open.org/sarif/sarif/v2.1.0/): one run,
// a rule per reason code, a result per finding located at the file, line
// and column of its field, so code-scanning UIs annotate the line.

type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool        sarifTool         `json:"tool"`
	Invocations []sarifInvocation `json:"invocations"`
	Results     []sarifResult     `json:"results"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	Version        string      `json:"version"`
	InformationURI string      `json:"informationUri"`
	Rules          []sarifRule `json:"rules"`
}

type sarifRule struct {
	ID                   string            `json:"id"`
	ShortDescription     sarifText         `json:"shortDescription"`
	HelpURI              string            `json:"helpUri"`
	DefaultConfiguration sarifRuleDefaults `json:"defaultConfiguration"`
}

type sarifRuleDefaults struct {
	Level string `json:"level"`
}

type sarifText struct {
	Text string `json:"text"`
}

type sarifInvocation struct {
	ExecutionSuccessful bool                `json:"executionSuccessful"`
	Notifications       []sarifNotification `json:"toolExecutionNotifications,omitempty"`
}

type sarifNotification struct {
	Level     string          `json:"level"`
	Message   sarifText       `json:"message"`
	Locations []sarifLocation `json:"locations,omitempty"`
}

type sarifResult struct {
	RuleID    string          `json:"ruleId"`
	RuleIndex int             `json:"ruleIndex"`
	Level     string          `json:"level"`
	Message   sarifText       `json:"message"`
	Locations []sarifLocation `json:"locations"`
}

type sarifLocation struct {
	Physical *sarifPhysical `json:"physicalLocation,omitempty"`
	Logical  []sarifLogical `json:"logicalLocations,omitempty"`
}

type sarifPhysical struct {
	ArtifactLocation sarifArtifact `json:"artifactLocation"`
	Region           *sarifRegion  `json:"region,omitempty"`
}

type sarifArtifact struct {
	URI       string `json:"uri"`
	URIBaseID string `json:"uriBaseId,omitempty"`
}

type sarifRegion struct {
	StartLine   int `json:"startLine"`
	StartColumn int `json:"startColumn,omitempty"`
}

type sarifLogical struct {
	FullyQualifiedName string `json:"fullyQualifiedName"`
	Kind               string `json:"kind"`
}

const (
	sarifSchema = "https://json.schemastore.org/sarif-2.1.0.json"
	projectURI  = "https://github.com/graceguard/graceguard"
	reasonsURI  = projectURI + "/blob/main/docs/annotations.md#reason-codes"
)

func writeSARIF(w io.Writer, objs []object) error {
	r := newSARIFReporter(w)
	for _, o := range objs {
		if err := r.object(o); err != nil {
			return err
		}
	}
	return r.finish(tally{})
}

// sarifRunOf is the run before any object: no rules, no results.
func sarifRunOf() sarifRun {
	return sarifRun{
		Tool:        sarifTool{sarifDriver{Name: "graceguard", Version: version(), InformationURI: projectURI, Rules: []sarifRule{}}},
		Invocations: []sarifInvocation{{ExecutionSuccessful: true}},
		Results:     []sarifResult{},
	}
}

// sarifAdd adds an object to the run: a notification when it could not be
// evaluated, a rule for each reason not seen yet, and returns the results
// of its findings, for the caller to write.
func sarifAdd(run *sarifRun, ruleIndex map[mutate.Reason]int, o object) []sarifResult {
	if o.err != nil {
		run.Invocations[0].ExecutionSuccessful = false
		run.Invocations[0].Notifications = append(run.Invocations[0].Notifications, sarifNotification{
			Level: "error", Message: sarifText{o.ref() + ": " + o.err.Error()},
			Locations: []sarifLocation{objectLocation(o, o.doc.File, o.doc.Line, o.doc.Column)},
		})
		return nil
	}
	var results []sarifResult
	for _, f := range findings(o) {
		level := "warning"
		if f.Level == levelDenial {
			level = "error"
		}
		i, ok := ruleIndex[f.Reason]
		if !ok {
			i = len(run.Tool.Driver.Rules)
			ruleIndex[f.Reason] = i
			run.Tool.Driver.Rules = append(run.Tool.Driver.Rules, sarifRule{
				ID: string(f.Reason), ShortDescription: sarifText{reasonText(f.Reason)},
				HelpURI: reasonsURI, DefaultConfiguration: sarifRuleDefaults{ruleLevel(f.Reason)},
			})
		}
		results = append(results, sarifResult{
			RuleID: string(f.Reason), RuleIndex: i, Level: level,
			Message:   sarifText{o.ref() + ": " + f.Message},
			Locations: []sarifLocation{objectLocation(o, f.File, f.Line, f.Column)},
		})
	}
	return results
}

// objectLocation places a result in its file (when it comes from one) and
// names the object, so results from a cluster have a location too.
func objectLocation(o object, file string, line, column int) sarifLocation {
	if o.problem != nil {
		return sarifLocation{Physical: &sarifPhysical{ArtifactLocation: artifact(file), Region: &sarifRegion{StartLine: max(line, 1)}}}
	}
	name := o.doc.Kind + "/" + o.doc.Name
	if o.ns != "" && o.doc.Supported() {
		name = o.doc.Kind + "/" + o.ns + "/" + o.doc.Name
	}
	loc := sarifLocation{Logical: []sarifLogical{{FullyQualifiedName: name, Kind: "resource"}}}
	if file == "" {
		return loc
	}
	loc.Physical = &sarifPhysical{ArtifactLocation: artifact(file)}
	if line > 0 {
		loc.Physical.Region = &sarifRegion{StartLine: line, StartColumn: column}
	}
	return loc
}

// artifact makes a file name a SARIF artifact location: a relative path
// from the source root (run check from the repository's root), a file URI
// for an absolute path, a URL as it is.
func artifact(file string) sarifArtifact {
	switch {
	case isURL(file):
		return sarifArtifact{URI: file}
	case file == "stdin":
		return sarifArtifact{URI: "stdin"}
	case filepath.IsAbs(file):
		return sarifArtifact{URI: "file://" + filepath.ToSlash(file)}
	}
	return sarifArtifact{URI: strings.TrimPrefix(filepath.ToSlash(filepath.Clean(file)), "./"), URIBaseID: "%SRCROOT%"}
}

// ruleLevel is a reason's level when the namespace enforces.
func ruleLevel(r mutate.Reason) string {
	if mutate.KindOf(r) == "denial" {
		return "error"
	}
	return "warning"
}

func reasonText(r mutate.Reason) string {
	if t := mutate.Describe(r); t != "" {
		return t
	}
	if t, ok := pluginReasons[r]; ok {
		return t
	}
	return string(r)
}

// pluginReasons explain the reasons of the plugin's own findings, which
// no webhook makes.
var pluginReasons = map[mutate.Reason]string{
	warnNamespaceRedefined: "A Namespace is defined again later in the input with other labels or annotations: kubectl apply ends with the last definition, which graceguard reads; the earlier one applies to nothing.",
}
