package cli

import (
	"bufio"
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
			defer loaded.close()
			errs := 0
			report := func(objs []object) {
				for _, o := range objs {
					reportToStderr(cmd.ErrOrStderr(), o)
					if verdictOf(o) == verdictError {
						errs++
					}
				}
			}
			if err := writeObjects(cmd.OutOrStdout(), loaded, output, report); err != nil {
				return err
			}
			if errs > 0 {
				return notEvaluatedError{errs}
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

// writeObjects prints the input with graceguard's changes, document by
// document as walk reads them: as YAML, each file written back (separated
// by ---), or as JSON. report is called with each document's objects
// before the document is written.
func writeObjects(w io.Writer, in *input, format string, report func([]object)) error {
	bw := bufio.NewWriter(w)
	var err error
	if format == "json" {
		err = writeJSONObjects(bw, in, report)
	} else {
		err = writeYAMLObjects(bw, in, report)
	}
	if err != nil {
		return err
	}
	return bw.Flush()
}

func writeYAMLObjects(w io.Writer, in *input, report func([]object)) error {
	out := &tracked{w: w}
	var file *fileStart
	files := 0
	return in.walk(walker{
		file: func(string) error {
			file = &fileStart{out: out, after: files > 0}
			files++
			return nil
		},
		piece: func(p *manifest.Piece, objs []object) error {
			report(objs)
			text, _, err := p.Render(patches(objs))
			if err != nil {
				return err
			}
			if _, err := file.Write(p.Before); err != nil {
				return err
			}
			_, err = file.Write(text)
			return err
		},
		end: func(tail []byte) error {
			if _, err := file.Write(tail); err != nil {
				return err
			}
			return file.flush()
		},
	})
}

// tracked counts what is written and keeps its last byte.
type tracked struct {
	w    io.Writer
	n    int
	last byte
}

func (t *tracked) Write(b []byte) (int, error) {
	n, err := t.w.Write(b)
	t.n += n
	if n > 0 {
		t.last = b[n-1]
	}
	return n, err
}

// fileStart writes a file's text after the files before it (after), as
// one stream: on a line of its own, after a "---" line unless the text
// starts with one. It holds the first three bytes until it knows.
type fileStart struct {
	out     *tracked
	after   bool
	head    []byte
	started bool
}

func (f *fileStart) Write(b []byte) (int, error) {
	if f.started {
		return f.out.Write(b)
	}
	f.head = append(f.head, b...)
	if len(f.head) < len("---") {
		return len(b), nil
	}
	return len(b), f.flush()
}

// flush writes what is held, the file's whole text if it is that short.
func (f *fileStart) flush() error {
	if f.started {
		return nil
	}
	f.started = true
	var sep string
	if f.after {
		if f.out.n > 0 && f.out.last != '\n' {
			sep = "\n"
		}
		if !bytes.HasPrefix(f.head, []byte("---")) {
			sep += "---\n"
		}
	}
	_, err := f.out.Write(append([]byte(sep), f.head...))
	f.head = nil
	return err
}

// writeJSONObjects prints the one document as JSON, or a List of the
// objects of all (Lists flattened), or an empty List when there are none;
// indented as json.Indent writes the whole.
func writeJSONObjects(w io.Writer, in *input, report func([]object)) error {
	indent := func(doc []byte, prefix string) ([]byte, error) {
		var buf bytes.Buffer
		err := json.Indent(&buf, doc, prefix, "  ")
		return buf.Bytes(), err
	}
	if in.values == 0 {
		// Even so, the documents' objects are reported.
		if err := in.walk(walker{piece: func(_ *manifest.Piece, objs []object) error { report(objs); return nil }}); err != nil {
			return err
		}
		out, err := indent([]byte(`{"apiVersion":"v1","kind":"List","items":[]}`), "")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", out)
		return err
	}
	if in.values == 1 {
		return in.walk(walker{piece: func(p *manifest.Piece, objs []object) error {
			report(objs)
			doc, err := p.PatchedJSON(patches(objs))
			if err != nil || doc == nil {
				return err
			}
			out, err := indent(doc, "")
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(w, "%s\n", out)
			return err
		}})
	}
	// A List: the frame around its items, cut where they go.
	frame, err := json.Marshal(struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}{"v1", "List", nil})
	if err != nil {
		return err
	}
	if frame, err = indent(frame, ""); err != nil {
		return err
	}
	at := bytes.LastIndex(frame, []byte("null"))
	head, tail := frame[:at], frame[at+len("null"):]
	if _, err := w.Write(head); err != nil {
		return err
	}
	n := 0
	err = in.walk(walker{piece: func(p *manifest.Piece, objs []object) error {
		report(objs)
		doc, err := p.PatchedJSON(patches(objs))
		if err != nil || doc == nil {
			return err
		}
		items, err := flattenLists([][]byte{doc})
		if err != nil {
			return err
		}
		for _, item := range items {
			// As json.Marshal writes an item of the List: compact, with
			// HTML characters escaped.
			b, err := json.Marshal(item)
			if err != nil {
				return err
			}
			if b, err = indent(b, "    "); err != nil {
				return err
			}
			sep := ",\n    "
			if n == 0 {
				sep = "[\n    "
			}
			n++
			if _, err := fmt.Fprintf(w, "%s%s", sep, b); err != nil {
				return err
			}
		}
		return nil
	}})
	if err != nil {
		return err
	}
	end := "null"
	if n > 0 {
		end = "\n  ]"
	}
	_, err = fmt.Fprintf(w, "%s%s\n", end, tail)
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
