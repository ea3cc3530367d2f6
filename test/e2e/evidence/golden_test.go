package evidence

import (
	"os"
	"path/filepath"
	"testing"
)

// docs/e2e.md is rendered from docs/e2e/evidence.json (make e2e writes
// both): re-rendering the committed evidence reproduces the committed
// page byte for byte, so a change to the writer that alters the page shows
// here, and so does a page edited by hand.
func TestTheCommittedPageRendersFromItsEvidence(t *testing.T) {
	docs := filepath.Join("..", "..", "..", "docs")
	r, err := Read(filepath.Join(docs, "e2e", JSONName))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(docs, MDName))
	if err != nil {
		t.Fatal(err)
	}
	if got := Markdown(r, "e2e"); got != string(want) {
		if dir := os.Getenv("RENDER_DIFF_DIR"); dir != "" {
			_ = os.WriteFile(filepath.Join(dir, MDName), []byte(got), 0o644)
		}
		t.Errorf("docs/%s differs from what docs/e2e/%s renders (%d bytes rendered, %d committed); RENDER_DIFF_DIR=dir writes the rendering there to diff", MDName, JSONName, len(got), len(want))
	}
}
