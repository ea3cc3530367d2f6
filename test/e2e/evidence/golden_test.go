package evidence

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docs/e2e.md and docs/e2e/timeline.svg are rendered from
// docs/e2e/evidence.json (make e2e writes all three): re-rendering the
// committed evidence reproduces the committed page and picture byte for
// byte, so a change to the writers that alters them shows here, and so
// does a page edited by hand.
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
	svg, err := os.ReadFile(filepath.Join(docs, "e2e", SVGName))
	if err != nil {
		t.Fatal(err)
	}
	if got := TimelineSVG(r); got != string(svg) {
		t.Errorf("docs/e2e/%s differs from what docs/e2e/%s renders:\n%s", SVGName, JSONName, firstDiff(string(svg), got))
	}
}

// testdata/sparse-*.json are runs with parts missing: every scenario
// present and empty (nil attack, nil creates, no arms, no rounds), and one
// with half its optional fields unset and odd characters in its strings.
// Their pages and timelines are pinned in testdata/sparse-*.md and .svg
// (UPDATE_GOLDEN=1 rewrites them), so the fallbacks of each section ("not
// observed", "none", "No checks recorded", a missing row or paragraph)
// stay as they were when the writers change.
func TestSparseRunsRenderAsPinned(t *testing.T) {
	runs, err := filepath.Glob(filepath.Join("testdata", "sparse-*.json"))
	if err != nil || len(runs) == 0 {
		t.Fatalf("no testdata/sparse-*.json: %v", err)
	}
	for _, path := range runs {
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		t.Run(name, func(t *testing.T) {
			r, err := Read(path)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", name+".md"), Markdown(r, "."))
			golden(t, filepath.Join("testdata", name+".svg"), TimelineSVG(r))
		})
	}
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
		t.Fatalf("%v (UPDATE_GOLDEN=1 writes it)", err)
	}
	if got != string(want) {
		t.Errorf("the rendering differs from %s (UPDATE_GOLDEN=1 rewrites it):\n%s", path, firstDiff(string(want), got))
	}
}

// firstDiff is the first line where got departs from want, with both.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n--- want\n%s\n--- got\n%s", i+1, wl, gl)
		}
	}
	return "(only the line endings differ)"
}
