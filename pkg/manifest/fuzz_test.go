package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// FuzzRender feeds arbitrary YAML streams (seeded with the realistic
// fixtures) through the decisions and Render: whatever the text, Render
// never fails on what ReadFile and Process accept, every document of its
// output reads back as the webhook's patch applied to it, documents
// graceguard does not change are copied byte for byte, and, where the
// additions were spliced into the text, every comment still belongs, by
// its indentation, to the block it belonged to (commentHomes).
func FuzzRender(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.yaml")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers:\n  - {name: c, image: i}\n")
	f.Add("apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  labels:\n    app: a\n    # team: payments\nspec:\n  containers:\n  - name: c\n    image: i\n    env:\n    - name: A\n    # - name: B\n  # - name: d\n# end\n")
	f.Fuzz(func(t *testing.T, in string) {
		file, err := ReadFile(strings.NewReader(in), "fuzz")
		if err != nil {
			return
		}
		ops := map[string][]mutate.Operation{}
		for _, d := range file.Documents() {
			if !d.Supported() {
				continue
			}
			ns := mutate.Namespace{Name: "fuzz", Labels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}}
			res, err := Process(d, ns, mutate.DefaultOptions())
			if err != nil || res.Mutation == nil {
				continue
			}
			ops[d.Source] = res.Mutation.Patch()
		}
		p := func(d Document) []mutate.Operation { return ops[d.Source] }
		out, err := file.Render(p)
		if err != nil {
			t.Fatalf("Render: %v", err)
		}
		want, err := file.PatchedJSON(p)
		if err != nil {
			t.Fatalf("PatchedJSON: %v", err)
		}
		again, err := ReadFile(strings.NewReader(string(out)), "out")
		if err != nil {
			t.Fatalf("the output does not read back: %v\n%s", err, out)
		}
		var got [][]byte
		for _, c := range again.Chunks {
			if c.raw != nil {
				got = append(got, c.raw)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%d documents read back, want %d:\n%s", len(got), len(want), out)
		}
		for i := range want {
			if !sameJSON(got[i], want[i]) {
				t.Fatalf("document %d reads as\n%s\nwant\n%s", i+1, got[i], want[i])
			}
		}
		for _, c := range file.Chunks {
			if len(c.ops(p)) == 0 && !c.JSON && !strings.Contains(string(out), string(file.Text[c.Start:c.End])) {
				t.Fatalf("document %d changed although graceguard changes nothing in it", c.N)
			}
		}
		if file.fallbacks == 0 && len(commentLines(in)) <= 200 {
			checkCommentHomes(t, "fuzz", in, string(out))
		}
	})
}
