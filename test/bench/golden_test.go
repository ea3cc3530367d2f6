package bench

import (
	"os"
	"path/filepath"
	"testing"
)

// docs/benchmarks.md and its SVGs are rendered from docs/benchmarks.json
// (make bench writes them together, bench -render rewrites them): re-rendering
// the committed results reproduces the committed documents byte for byte, so a
// change to the writer that alters them shows here, and so does a hand edit.
func TestTheCommittedDocumentsRenderFromTheirResults(t *testing.T) {
	docs := filepath.Join("..", "..", "docs")
	dir := t.TempDir()
	if err := Render(filepath.Join(docs, docJSON), dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{docMarkdown, docJSON, docSVG, docArmsSVG} {
		want, err := os.ReadFile(filepath.Join(docs, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("docs/%s differs from what `go -C test run ./bench/cmd/bench -render docs/%s` writes (%d bytes rendered, %d committed)",
				name, docJSON, len(got), len(want))
		}
	}
}
