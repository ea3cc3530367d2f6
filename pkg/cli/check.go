package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/graceguard/graceguard/pkg/mutate"
)

func newCheckCmd() *cobra.Command {
	var in *inputFlags
	cmd := &cobra.Command{
		Use:   "check -f FILE",
		Short: "Say which objects graceguard would deny, and why; exit 1 if any",
		Long: `Say which objects graceguard would deny, and why.

For each object: whether it would be admitted, the denials with their field
paths, the warnings the API server would show, or why graceguard skips it.
Exits 1 when any object would be denied, 0 otherwise, and 2 when the flags or
the input are wrong. In warn mode nothing is denied: what enforce mode would
deny is printed as warnings and the exit code is 0.`,
		Example: `  kubectl graceguard check -f k8s/ -R
  kustomize build overlays/prod | kubectl graceguard check -f - --mode warn`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			objs, err := in.load(cmd.InOrStdin(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			denied, err := writeCheck(cmd.OutOrStdout(), objs)
			if err != nil {
				return err
			}
			if denied {
				return errDenied
			}
			return nil
		},
	}
	in = bindInputFlags(cmd)
	return cmd
}

// writeCheck prints one verdict per object and reports whether any object
// is denied.
func writeCheck(w io.Writer, objs []object) (bool, error) {
	p := &printer{w: w}
	var nDenied, nAllowed, nSkipped int
	for _, o := range objs {
		if o.res == nil {
			nSkipped++
			p.line("%s: skipped: %s", o.ref(), unsupported(o))
			continue
		}
		v := o.res.Validation
		if v.Skip != "" {
			nSkipped++
			p.line("%s: skipped: %s", o.ref(), skipReason(v.Skip, o.ns))
			continue
		}
		verdict := "allowed"
		err := v.Err()
		if err != nil {
			verdict = "DENIED"
			nDenied++
		} else {
			nAllowed++
		}
		p.line("%s [%s]: %s%s", o.ref(), v.Mode, verdict, checkDetail(o))
		if err != nil {
			for _, f := range v.Violations {
				p.line("  error: %s", f.Err.Error())
			}
		}
		for _, m := range warnings(o) {
			p.line("  warning: %s", m)
		}
	}
	p.line("")
	p.line("%s: %d denied, %d allowed, %d skipped", plural(len(objs), "object"), nDenied, nAllowed, nSkipped)
	return nDenied > 0, p.err
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
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

// skipReason explains a skip reason code in a sentence.
func skipReason(r mutate.Reason, ns string) string {
	switch r {
	case mutate.SkipNotOptedIn:
		return fmt.Sprintf("namespace %s is not opted in (label %s=%s) [%s]", ns, mutate.LabelInject, mutate.LabelInjectEnabled, r)
	case mutate.SkipExcluded:
		return fmt.Sprintf("namespace %s is excluded (--excluded-namespaces) [%s]", ns, r)
	case mutate.SkipMirrorPod:
		return fmt.Sprintf("mirror pod of a static pod, which the API server cannot change [%s]", r)
	case mutate.SkipOptedOut:
		return fmt.Sprintf(`opted out with %s: "false" [%s]`, mutate.AnnotationInject, r)
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

func (p *printer) line(format string, args ...any) {
	if p.err != nil {
		return
	}
	_, p.err = fmt.Fprintf(p.w, format+"\n", args...)
}
