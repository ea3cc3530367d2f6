package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/graceguard/graceguard/pkg/manifest"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// streamInputs are inputs for the tests that hold the streamed outputs to
// the whole ones: every fixture, and files that test the joins (no final
// newline, a leading ---, nothing at all, only comments), Lists (empty
// ones, items with HTML characters, which json.Marshal escapes), and a Pod
// that cannot be evaluated.
func streamInputs(t *testing.T) [][]string {
	t.Helper()
	dir := writeTree(t, map[string]string{
		"no-newline.yaml":  "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers:\n  - {name: c, image: i}",
		"leading-sep.yaml": "--- # first\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
		"empty.yaml":       "",
		"comments.yaml":    "# nothing here\n",
		"lists.yaml": "apiVersion: v1\nkind: List\nitems: []\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n" +
			"  metadata: {name: html}\n  data: {page: \"<p>a & b</p>\"}\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n  spec:\n    containers:\n    - {name: c, image: i}\n",
		"lists.json": "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", " +
			"\"metadata\": {\"name\": \"json\"}, \"data\": {\"page\": \"<p>a & b</p>\"}}]}\n",
		"empty-lists.yaml": "apiVersion: v1\nkind: List\nitems: []\n---\napiVersion: v1\nkind: PodList\nitems: []\n",
		"undecodable.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: bad}\nspec:\n  containers:\n  - {name: c, image: i, ports: oops}\n",
	})
	at := func(name string) string { return filepath.Join(dir, name) }
	inputs := [][]string{
		{at("no-newline.yaml"), at("leading-sep.yaml"), at("empty.yaml"), at("comments.yaml"), at("no-newline.yaml")},
		{at("empty.yaml")},
		{at("comments.yaml"), at("empty.yaml")},
		{at("lists.yaml")},
		{at("lists.json"), at("lists.yaml")},
		{at("empty-lists.yaml")},
		{at("undecodable.yaml"), "testdata/check.yaml"},
		{dir}, // found in a directory
	}
	for _, g := range []string{"testdata/*.yaml", "testdata/*.json", "../manifest/testdata/*.yaml", "../mutate/testdata/*.yaml"} {
		m, _ := filepath.Glob(g)
		for _, f := range m {
			if !strings.HasSuffix(f, ".golden.yaml") && !strings.HasPrefix(filepath.Base(f), "bad") {
				inputs = append(inputs, []string{f})
			}
		}
	}
	return inputs
}

// loadObjects reads files as the commands do and returns the objects,
// evaluated, and the paths of the files read.
func loadObjects(t *testing.T, files []string, extra ...string) (objs []object, paths []string) {
	t.Helper()
	cmd := &cobra.Command{}
	f := bindInputFlags(cmd)
	if err := cmd.Flags().Parse(append(extra, flagsFor(files)...)); err != nil {
		t.Fatal(err)
	}
	in, err := f.load(context.Background(), strings.NewReader(""), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer in.close()
	if err := in.each(func(o object) error { objs = append(objs, o); return nil }); err != nil {
		t.Fatal(err)
	}
	for _, file := range in.files {
		paths = append(paths, file.source)
	}
	return objs, paths
}

// wholeFile renders a file whole, as the whole text it is written back as
// (YAML) and the JSON of each of its documents.
func wholeFile(t *testing.T, path string, p manifest.Patches) (text []byte, docs [][]byte) {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	s := manifest.NewStream(fh, path)
	for {
		piece, err := s.Next()
		if errors.Is(err, io.EOF) {
			return append(text, s.Tail()...), docs
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := piece.Render(p)
		if err != nil {
			t.Fatal(err)
		}
		text = append(append(text, piece.Before...), b...)
		if d, err := piece.PatchedJSON(p); err != nil {
			t.Fatal(err)
		} else if d != nil {
			docs = append(docs, d)
		}
	}
}

func flagsFor(files []string) []string {
	var args []string
	for _, f := range files {
		args = append(args, "-f", f)
	}
	return args
}

// The JSON and SARIF reports, written object by object, are byte for byte
// the documents encoded whole, as they were before they were streamed.
func TestStreamedReportsAreTheWholeDocuments(t *testing.T) {
	for _, files := range streamInputs(t) {
		for _, extra := range [][]string{nil, {"--mode", "warn", "--assume-opted-in"}} {
			objs, _ := loadObjects(t, files, extra...)
			name := strings.Join(append(files, extra...), " ")
			t.Run(name, func(t *testing.T) {
				var want bytes.Buffer
				if err := encodeJSON(&want, jsonReport{Objects: jsonObjectsOf(objs), Summary: jsonSummaryOf(count(objs), levelWarning)}); err != nil {
					t.Fatal(err)
				}
				_, got, _ := run(t, "", append(append([]string{"check", "-o", "json", "--fail-on", "warning"}, flagsFor(files)...), extra...)...)
				if got != want.String() {
					t.Errorf("-o json differs from the whole document:\n%s", diff(want.String(), got))
				}

				run0 := sarifRunOf()
				rules := map[mutate.Reason]int{}
				for _, o := range objs {
					run0.Results = append(run0.Results, sarifAdd(&run0, rules, o)...)
				}
				want.Reset()
				if err := encodeJSON(&want, sarifLog{Schema: sarifSchema, Version: "2.1.0", Runs: []sarifRun{run0}}); err != nil {
					t.Fatal(err)
				}
				_, got, _ = run(t, "", append(append([]string{"check", "-o", "sarif"}, flagsFor(files)...), extra...)...)
				if got != want.String() {
					t.Errorf("-o sarif differs from the whole document:\n%s", diff(want.String(), got))
				}
			})
		}
	}
}

func jsonObjectsOf(objs []object) []jsonObject {
	out := make([]jsonObject, 0, len(objs))
	for _, o := range objs {
		out = append(out, jsonObjectOf(o))
	}
	return out
}

// mutate, written document by document, prints what it printed when it
// rendered each file whole and joined them: as YAML (the files joined by
// ---, each on lines of its own), and as JSON (the one document, or a List
// of every object, or an empty List).
func TestStreamedMutateIsTheWholeOutput(t *testing.T) {
	for _, files := range streamInputs(t) {
		t.Run(strings.Join(files, " "), func(t *testing.T) {
			objs, paths := loadObjects(t, files)
			p := patches(objs)

			var want bytes.Buffer
			var docs [][]byte
			for i, path := range paths {
				text, d := wholeFile(t, path, p)
				docs = append(docs, d...)
				if i > 0 {
					if want.Len() > 0 && !bytes.HasSuffix(want.Bytes(), []byte("\n")) {
						want.WriteByte('\n')
					}
					if !bytes.HasPrefix(text, []byte("---")) {
						want.WriteString("---\n")
					}
				}
				want.Write(text)
			}
			_, got, _ := run(t, "", append([]string{"mutate"}, flagsFor(files)...)...)
			if got != want.String() {
				t.Errorf("YAML differs from the files rendered whole:\n%s", diff(want.String(), got))
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
					t.Fatal(err)
				}
				if out, err = json.Marshal(struct {
					APIVersion string            `json:"apiVersion"`
					Kind       string            `json:"kind"`
					Items      []json.RawMessage `json:"items"`
				}{"v1", "List", items}); err != nil {
					t.Fatal(err)
				}
			}
			want.Reset()
			if err := json.Indent(&want, out, "", "  "); err != nil {
				t.Fatal(err)
			}
			want.WriteByte('\n')
			_, got, _ = run(t, "", append([]string{"mutate", "-o", "json"}, flagsFor(files)...)...)
			if got != want.String() {
				t.Errorf("JSON differs from the documents joined whole:\n%s", diff(want.String(), got))
			}
		})
	}
}

// stdin is read twice, through a temporary file that is gone when the
// run ends: a Namespace at its end applies to the workloads before it,
// and findings about it are placed in it, as for a file.
func TestStdinIsReadLikeAFile(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	in := `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: app, image: web:1, ports: [{containerPort: 8080}]}
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Namespace
  metadata:
    name: shop
    labels:
      graceguard.io/inject: enabled
    annotations:
      graceguard.io/max-work: banana
`
	path := filepath.Join(t.TempDir(), "in.yaml")
	if err := os.WriteFile(path, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check"}, {"check", "-o", "json"}, {"mutate"}, {"explain"}} {
		codeFile, outFile, errFile := run(t, "", append(args, "-f", path)...)
		code, out, stderr := run(t, in, append(args, "-f", "-")...)
		if code != codeFile || out != strings.ReplaceAll(outFile, path, "stdin") || stderr != strings.ReplaceAll(errFile, path, "stdin") {
			t.Errorf("%v: stdin gives exit %d\n%s%s\nthe file gives exit %d\n%s%s", args, code, out, stderr, codeFile, outFile, errFile)
		}
		if left, _ := os.ReadDir(tmp); len(left) > 0 {
			t.Errorf("%v left %s in TMPDIR", args, left[0].Name())
		}
	}
	_, out, _ := run(t, in, "check", "-f", "-", "-o", "json")
	var r jsonReport
	if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Objects) != 2 {
		t.Fatalf("%v:\n%s", err, out)
	}
	var found bool
	for _, f := range r.Objects[0].Findings {
		if strings.HasPrefix(f.Field, "Namespace[shop].metadata.annotations[graceguard.io/max-work]") {
			found = true
			if f.File != "stdin" || f.Line != 22 || f.Column != 7 {
				t.Errorf("the namespace's bad max-work is placed at %s:%d:%d, want stdin:22:7, where the Namespace defined after the workload says it", f.File, f.Line, f.Column)
			}
		}
	}
	if !found {
		t.Errorf("no finding about the namespace's max-work:\n%s", out)
	}
}

// A file that changes between the two reads is an error that says so, not
// a report of two different files.
func TestAFileThatChangesWhileReadIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.yaml")
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers:\n  - {name: c, image: i}\n"
	if err := os.WriteFile(path, []byte(pod), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := &cobra.Command{}
	f := bindInputFlags(cmd)
	f.files = []string{path}
	in, err := f.load(context.Background(), strings.NewReader(""), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer in.close()
	if err := os.WriteFile(path, []byte(pod+"---\n"+pod), 0o644); err != nil {
		t.Fatal(err)
	}
	err = in.each(func(object) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "-f "+path+": changed while it was read (1 object, then 2): run again") {
		t.Errorf("got %v", err)
	}
}
