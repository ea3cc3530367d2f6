package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/manifest"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// reportFlags are check's and audit's: the output format and what fails the run.
type reportFlags struct {
	output string
	failOn string
}

var (
	reportFormats = []string{"text", "json", "sarif"}
	failOnLevels  = []string{levelDenial, levelWarning, "none"}
)

func bindReportFlags(cmd *cobra.Command) *reportFlags {
	r := &reportFlags{output: "text", failOn: levelDenial}
	cmd.Flags().VarP(flags.ChoiceValue(&r.output, reportFormats...), "output", "o",
		"output format: text, json (one object per input object, and a summary) or sarif (SARIF 2.1.0, for code-scanning UIs)")
	cmd.Flags().Var(flags.ChoiceValue(&r.failOn, failOnLevels...), "fail-on",
		"exit 1 when any object has a finding at this level: denial (an object would be refused), warning (a denial or any warning the API server would show), or none (exit 0 whatever is found)")
	return r
}

const exitCodesHelp = `Exit codes: 0 when nothing is found at the --fail-on level, 1 when something
is, 2 when the flags or the input are wrong (nothing is printed on stdout) or
when an object could not be evaluated (it is reported with the others).`

func newCheckCmd() *cobra.Command {
	var in *inputFlags
	var rf *reportFlags
	cmd := &cobra.Command{
		Use:   "check -f FILE",
		Short: "Say which objects graceguard would deny or warn about, and why; gate CI on it",
		Long: `Say which objects graceguard would deny or warn about, and why.

For each object: whether it would be admitted, the denials with their field
paths, the warnings the API server would show, or why graceguard skips it.
In warn mode nothing is denied: what enforce mode would deny or change is
reported as warnings.

Objects are evaluated in an opted-in namespace (-n, --mode,
--namespace-annotations) unless the input defines their Namespace, which is
then used as written; --assume-opted-in evaluates those as if opted in too.

` + exitCodesHelp,
		Example: `  kubectl graceguard check -f k8s/ -R
  kustomize build overlays/prod | kubectl graceguard check -f - --mode warn
  kubectl graceguard check -f deploy.yaml --assume-opted-in --fail-on warning
  kubectl graceguard check -f k8s/ -R -o sarif > graceguard.sarif`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			loaded, err := in.load(cmd.Context(), cmd.InOrStdin(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer loaded.close()
			return rf.stream(cmd.OutOrStdout(), loaded, assumeHint)
		},
	}
	in = bindInputFlags(cmd)
	rf = bindReportFlags(cmd)
	return cmd
}

// assumeHint says how to evaluate objects whose Namespace in the input is
// not opted in.
const assumeHint = "--assume-opted-in evaluates them as if it were"

// write prints the report in the chosen format and returns the error that
// sets the exit code.
func (rf *reportFlags) write(w io.Writer, objs []object, hint string) error {
	t := count(objs)
	var err error
	switch rf.output {
	case "json":
		err = writeJSON(w, objs, t, rf.failOn)
	case "sarif":
		err = writeSARIF(w, objs)
	default:
		err = writeCheck(w, objs, t, hint)
	}
	if err != nil {
		return err
	}
	return rf.outcome(t)
}

// outcome is the run's result: an error for objects that could not be
// evaluated, errFindings for findings at the --fail-on level, else nil.
func (rf *reportFlags) outcome(t tally) error {
	switch {
	case t.errors > 0:
		return notEvaluatedError{t.errors}
	case rf.failOn == levelDenial && t.denied > 0:
		return errFindings
	case rf.failOn == levelWarning && t.denied+t.warnings > 0:
		return errFindings
	}
	return nil
}

// writeCheck prints one verdict per object, then the counts.
func writeCheck(w io.Writer, objs []object, t tally, hint string) error {
	r := &textReporter{p: &printer{w: w}, hint: hint}
	for _, o := range objs {
		if err := r.object(o); err != nil {
			return err
		}
	}
	return r.finish(t)
}

// textReporter is check's text report.
type textReporter struct {
	p    *printer
	hint string
}

// object prints the object's verdict.
func (r *textReporter) object(o object) error {
	p := r.p
	switch verdictOf(o) {
	case verdictError:
		p.line("%s: error: %v", o.ref(), o.err)
		return p.err
	case verdictSkipped:
		_, why := skipOf(o)
		p.line("%s: skipped: %s", o.ref(), why)
		for _, f := range findings(o) {
			p.line("  %s: %s", f.Level, f.Message)
		}
		return p.err
	}
	v := o.res.Validation
	verdict := "allowed"
	if v.Err() != nil {
		verdict = "DENIED"
	}
	p.line("%s [%s]: %s%s", o.ref(), v.Mode, verdict, checkDetail(o))
	for _, f := range findings(o) {
		label := "warning"
		if f.Level == levelDenial {
			label = "error"
		}
		p.line("  %s: %s", label, f.Message)
	}
	if v.Unlisted > 0 {
		p.line("  error: %d more violations, not recorded (graceguard keeps the first %d)", v.Unlisted, mutate.MaxRecordedViolations)
	}
	if n := legacyNote(o); n != "" {
		p.line("  note: %s", n)
	}
	return p.err
}

// finish prints the counts.
func (r *textReporter) finish(t tally) error {
	p := r.p
	p.line("")
	summary := fmt.Sprintf("%s: %d denied, %d allowed, %d skipped", plural(t.objects, "object"), t.denied, t.allowed, t.skipped)
	if t.errors > 0 {
		summary += fmt.Sprintf(", %d not evaluated (errors above)", t.errors)
	}
	p.line("%s", summary)
	if s := t.skipSummary(r.hint); s != "" {
		p.line("%s", s)
	}
	if len(t.assumed) > 0 {
		p.line("evaluated as if opted in (label %s=%s): %s %s", mutate.LabelInject, mutate.LabelInjectEnabled,
			pluralWord(len(t.assumed), "namespace"), strings.Join(t.assumed, ", "))
	}
	return p.err
}

// checkDetail says what else a person should know about the verdict.
func checkDetail(o object) string {
	m := o.res.Mutation
	var parts []string
	if m.OptedOut {
		parts = append(parts, "opted out: only its preStop hooks are checked")
	}
	if n := len(m.Changes); n > 0 {
		if m.Applied {
			parts = append(parts, plural(n, "change"))
		} else {
			parts = append(parts, "enforce would make "+plural(n, "change"))
		}
	}
	if o.nsState == nsAssumed {
		parts = append(parts, "namespace "+o.ns+" not opted in: as if it were")
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

// legacyNote says that an object's API version is no longer served.
func legacyNote(o object) string {
	l := o.doc.Legacy()
	if l == nil {
		return ""
	}
	w, _, _ := mutate.LookupWorkloadVersion(o.doc.APIVersion, o.doc.Kind)
	return fmt.Sprintf("%s %s is not served since Kubernetes %s: apply it as %s; its Pod template, the same in both, was checked",
		o.doc.APIVersion, o.doc.Kind, l.RemovedIn, w.GroupVersion())
}

// skipReason explains a skip reason code in a sentence.
func skipReason(r mutate.Reason, o object) string {
	ns := o.ns
	switch r {
	case mutate.SkipNotOptedIn:
		s := fmt.Sprintf("namespace %s is not opted in (label %s=%s) [%s]", ns, mutate.LabelInject, mutate.LabelInjectEnabled, r)
		if o.nsState == nsAsWritten && o.nsDoc != nil {
			s += "; " + strings.Replace(assumeHint, "them", "it", 1)
		}
		return s
	case mutate.SkipExcluded:
		return fmt.Sprintf("namespace %s is excluded (--excluded-namespaces) [%s]", ns, r)
	case mutate.SkipMirrorPod:
		return fmt.Sprintf("mirror pod of a static pod, which the API server cannot change [%s]", r)
	case mutate.SkipOptedOut:
		return fmt.Sprintf(`opted out with %s: "false" [%s]`, mutate.AnnotationInject, r)
	case manifest.SkipNoTemplate, manifest.SkipWorkloadRef:
		return fmt.Sprintf("%s [%s]", o.res.SkipDetail, r)
	}
	return string(r)
}

func unsupported(o object) string {
	if o.doc.Kind == "Namespace" {
		return "not a Pod or workload; its labels and annotations apply to the objects in it"
	}
	return fmt.Sprintf("%s %s is not a Pod or workload; passed through unchanged", o.doc.APIVersion, o.doc.Kind)
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// printer writes lines and keeps the first write error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) line(format string, args ...any) { p.raw(fmt.Sprintf(format, args...) + "\n") }

func (p *printer) raw(s string) {
	if p.err == nil {
		_, p.err = io.WriteString(p.w, s)
	}
}
