package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/manifest"
	"github.com/graceguard/graceguard/pkg/mutate"
)

func newMutateCmd() *cobra.Command {
	output := "yaml"
	var in *inputFlags
	cmd := &cobra.Command{
		Use:   "mutate -f FILE",
		Short: "Print the objects as graceguard's mutating webhook would leave them",
		Long: `Print the objects as graceguard's mutating webhook would leave them.

Pods are printed as admitted; workloads with their Pod template as their Pods
would be (the webhook itself never patches templates). Objects of other kinds,
and objects graceguard skips, are printed unchanged.

The YAML output is the input with graceguard's additions written into it:
every byte of an object graceguard does not change is kept, and a changed
object keeps its comments, key order, quoting, blank lines and layout, with
the added fields at the end of the mapping that holds them (a List stays a
List; documents written as JSON stay JSON). Pipe it into git diff
or kubectl apply. -o json prints the patched objects as JSON.

Warnings, and the denials the validating webhook would return, go to stderr;
the exit code is 0 whatever they say (use check to gate on them).`,
		Example: `  kubectl graceguard mutate -f deploy.yaml
  kubectl graceguard mutate -f deploy.yaml > deploy.new.yaml && git diff --no-index deploy.yaml deploy.new.yaml
  helm template . | kubectl graceguard mutate -f - --default-max-work=1m -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			loaded, err := in.load(cmd.Context(), cmd.InOrStdin(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			for _, o := range loaded.objs {
				reportToStderr(cmd.ErrOrStderr(), o)
			}
			if err := writeObjects(cmd.OutOrStdout(), loaded, output); err != nil {
				return err
			}
			if t := count(loaded.objs); t.errors > 0 {
				return notEvaluatedError{t.errors}
			}
			return nil
		},
	}
	in = bindInputFlags(cmd)
	cmd.Flags().VarP(flags.ChoiceValue(&output, "yaml", "json"), "output", "o",
		"output format: yaml (the input with graceguard's additions) or json (a List when there are several documents)")
	return cmd
}

// reportToStderr prints what the API server would tell the client, in full.
func reportToStderr(w io.Writer, o object) {
	switch verdictOf(o) {
	case verdictError:
		fmt.Fprintf(w, "error: %s: %v (printed unchanged)\n", o.ref(), o.err)
		return
	case verdictSkipped:
		if o.res != nil {
			_, why := skipOf(o)
			fmt.Fprintf(w, "note: %s: skipped: %s\n", o.ref(), why)
		}
	}
	for _, f := range findings(o) {
		label := "Warning"
		if f.Level == levelDenial {
			label = "Denied"
		}
		fmt.Fprintf(w, "%s: %s: %s\n", label, o.ref(), f.Message)
	}
}

// patches are the mutating webhook's patches, by document.
func patches(objs []object) manifest.Patches {
	bySource := map[string][]mutate.Operation{}
	for _, o := range objs {
		if o.evaluated() {
			bySource[o.doc.Source] = o.res.Mutation.Patch()
		}
	}
	return func(d manifest.Document) []mutate.Operation { return bySource[d.Source] }
}

// writeObjects prints the input with graceguard's changes: as YAML, each
// file written back (separated by ---), or as JSON.
func writeObjects(w io.Writer, in *input, format string) error {
	p := patches(in.objs)
	var buf bytes.Buffer
	if format == "json" {
		var docs [][]byte
		for _, f := range in.files {
			got, err := f.PatchedJSON(p)
			if err != nil {
				return err
			}
			docs = append(docs, got...)
		}
		var out []byte
		switch len(docs) {
		case 0:
			out = []byte(`{"apiVersion":"v1","kind":"List","items":[]}`)
		case 1:
			out = docs[0]
		default:
			items, err := flattenLists(docs)
			if err != nil {
				return err
			}
			if out, err = json.Marshal(struct {
				APIVersion string            `json:"apiVersion"`
				Kind       string            `json:"kind"`
				Items      []json.RawMessage `json:"items"`
			}{"v1", "List", items}); err != nil {
				return err
			}
		}
		if err := json.Indent(&buf, out, "", "  "); err != nil {
			return err
		}
		buf.WriteByte('\n')
	} else {
		for i, f := range in.files {
			text, err := f.Render(p)
			if err != nil {
				return err
			}
			if i > 0 {
				if buf.Len() > 0 && !bytes.HasSuffix(buf.Bytes(), []byte("\n")) {
					buf.WriteByte('\n')
				}
				if !bytes.HasPrefix(text, []byte("---")) {
					buf.WriteString("---\n")
				}
			}
			buf.Write(text)
		}
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// flattenLists makes one list of objects of documents that may be Lists.
func flattenLists(docs [][]byte) ([]json.RawMessage, error) {
	var out []json.RawMessage
	for _, d := range docs {
		var l struct {
			Kind  string            `json:"kind"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(d, &l); err != nil {
			return nil, err
		}
		if strings.HasSuffix(l.Kind, "List") && l.Items != nil {
			out = append(out, l.Items...)
			continue
		}
		out = append(out, d)
	}
	return out, nil
}
