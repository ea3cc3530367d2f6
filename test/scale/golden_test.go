package scale

import (
	"os"
	"path/filepath"
	"testing"
)

// The page is rendered from the results alone: a recorded run (a small
// one, testdata/results.json) renders as testdata/scale.md, byte for
// byte. UPDATE_GOLDEN=1 rewrites it after an intended change; review the
// diff.
func TestThePageRendersFromTheResults(t *testing.T) {
	dir := t.TempDir()
	if err := Render(filepath.Join("testdata", "results.json"), dir); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, docMarkdown))
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", docMarkdown)
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("testdata/results.json renders differently from %s (%d bytes rendered, %d in the golden file); if intended, rerun with UPDATE_GOLDEN=1 and review the diff", golden, len(got), len(want))
	}
}

// docs/scale.md is rendered from docs/scale.json (make scale writes them
// together, -render rewrites the page): re-rendering the committed results
// reproduces the committed page, so a change to the template that alters
// it shows here, and so does a hand edit.
func TestTheCommittedPageRendersFromItsResults(t *testing.T) {
	docs := filepath.Join("..", "..", "docs")
	dir := t.TempDir()
	if err := Render(filepath.Join(docs, docJSON), dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{docMarkdown, docJSON} {
		want, err := os.ReadFile(filepath.Join(docs, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("docs/%s differs from what `go -C test run ./scale/cmd/scale -render docs/%s` writes (%d bytes rendered, %d committed)", name, docJSON, len(got), len(want))
		}
	}
}
