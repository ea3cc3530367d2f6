package manifest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// mutateAll runs the mutating decisions on every Pod and workload of a file
// as if each namespace were opted in, and returns the patches.
func mutateAll(t *testing.T, f *File) (Patches, int) {
	t.Helper()
	ops := map[string][]mutate.Operation{}
	changed := 0
	for _, d := range f.Documents() {
		if !d.Supported() {
			continue
		}
		ns := mutate.Namespace{Name: d.Namespace, Labels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}}
		res, err := Process(d, ns, mutate.DefaultOptions())
		if err != nil {
			t.Fatalf("%s: %v", d.Source, err)
		}
		if res.Mutation == nil {
			continue
		}
		if p := res.Mutation.Patch(); len(p) > 0 {
			ops[d.Source] = p
			changed++
		}
	}
	return func(d Document) []mutate.Operation { return ops[d.Source] }, changed
}

func readTestFile(t *testing.T, path string) *File {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := ReadFile(bytes.NewReader(b), path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestRenderOnlyAdds runs graceguard over manifests shaped like the ones
// people keep (Helm output with `# Source:` lines, a licensed sample, an
// injected mesh Deployment, a List, hand-written YAML with blank lines and
// flow style) and checks what `kubectl graceguard mutate` writes back:
// every input line is still there, in order, unchanged; the only lines
// added are graceguard's; unchanged documents are byte-identical; and the
// result reads, as kubectl reads it, exactly as the webhook's JSON patch
// applied to the document. The added lines, with where they go, are
// golden: testdata/NAME.yaml.diff (UPDATE_GOLDEN=1 rewrites them).
func TestRenderOnlyAdds(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(inputs) < 6 {
		t.Fatalf("want the realistic fixtures in testdata, got %v (%v)", inputs, err)
	}
	for _, in := range inputs {
		t.Run(filepath.Base(in), func(t *testing.T) {
			f := readTestFile(t, in)
			p, changed := mutateAll(t, f)
			out, err := f.Render(p)
			if err != nil {
				t.Fatal(err)
			}
			if f.fallbacks != 0 {
				t.Errorf("%d documents were re-encoded instead of spliced", f.fallbacks)
			}
			added, ok := additions(string(f.Text), string(out))
			if !ok {
				t.Fatalf("the output does not keep every input line in order:\n%s", out)
			}
			if changed > 0 && added == "" {
				t.Errorf("%d objects changed but nothing was added", changed)
			}
			// Each document, unchanged or not, reads as the patched JSON.
			again, err := ReadFile(bytes.NewReader(out), in)
			if err != nil {
				t.Fatalf("the output does not read back: %v", err)
			}
			want, err := f.PatchedJSON(p)
			if err != nil {
				t.Fatal(err)
			}
			var got [][]byte
			for _, c := range again.Chunks {
				if c.raw != nil {
					got = append(got, c.raw)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%d documents read back, want %d", len(got), len(want))
			}
			for i := range want {
				if !sameJSON(got[i], want[i]) {
					t.Errorf("document %d reads as\n%s\nwant\n%s", i+1, got[i], want[i])
				}
			}
			// Documents graceguard does not change are byte-identical.
			for _, c := range f.Chunks {
				if len(c.ops(p)) == 0 && !bytes.Contains(out, f.Text[c.Start:c.End]) {
					t.Errorf("document %d changed although graceguard changes nothing in it", c.N)
				}
			}
			golden(t, in+".diff", added)
		})
	}
}

// additions checks that b is a with text inserted: whole lines, or, in a
// flow mapping, words within a line. It lists what was inserted as
// "+LINE: text" for a new line and "~LINE: text" for a line that gained
// words (LINE numbers b's lines).
func additions(a, b string) (string, bool) {
	al, bl := lines(a), lines(b)
	var out strings.Builder
	i := 0
	for j, l := range bl {
		mark := "+"
		switch {
		case i < len(al) && al[i] == l:
			i++
			continue
		case i < len(al) && inserted(al[i], l):
			i++
			mark = "~"
		}
		fmt.Fprintf(&out, "%s%d: %s", mark, j+1, l)
		if !strings.HasSuffix(l, "\n") {
			out.WriteString("\n")
		}
	}
	return out.String(), i == len(al)
}

func lines(s string) []string {
	l := strings.SplitAfter(s, "\n")
	if l[len(l)-1] == "" {
		l = l[:len(l)-1]
	}
	return l
}

// inserted reports whether b is a with one run of text inserted.
func inserted(a, b string) bool {
	if strings.TrimSpace(a) == "" || len(b) <= len(a) {
		return false
	}
	p := 0
	for p < len(a) && a[p] == b[p] {
		p++
	}
	return strings.HasSuffix(b, a[p:])
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (UPDATE_GOLDEN=1 creates it)", err)
	}
	if string(want) != got {
		t.Errorf("added lines differ from %s (UPDATE_GOLDEN=1 rewrites it):\n--- want\n%s--- got\n%s", path, want, got)
	}
}
