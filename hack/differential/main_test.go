package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"sigs.k8s.io/yaml"
)

// A differential run is repeatable only if the corpus is: the same seed
// writes the same files, and another seed other ones.
func TestTheCorpusIsTheSameForTheSameSeed(t *testing.T) {
	read := func(dir string, seed uint64) []byte {
		files, err := generate(dir, 120, seed)
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != 3 {
			t.Fatalf("120 objects went to %d files, want 3 of 50, 50 and 20", len(files))
		}
		var all []byte
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, b...)
		}
		return all
	}
	tmp := t.TempDir()
	a, b, c := read(filepath.Join(tmp, "a"), 1), read(filepath.Join(tmp, "b"), 1), read(filepath.Join(tmp, "c"), 2)
	if !bytes.Equal(a, b) {
		t.Error("seed 1 wrote two different corpora")
	}
	if bytes.Equal(a, c) {
		t.Error("seeds 1 and 2 wrote the same corpus")
	}
	kinds := map[string]int{}
	for _, doc := range bytes.Split(a, []byte("---\n"))[1:] {
		var o struct{ Kind string }
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("a generated document does not read as YAML: %v\n%s", err, doc)
		}
		kinds[o.Kind]++
	}
	if kinds["Pod"] == 0 || kinds["Deployment"] == 0 || kinds["Pod"]+kinds["Deployment"] != 120 {
		t.Errorf("kinds %v, want 120 Pods and Deployments, some of each", kinds)
	}
}

// Runs that only reorder their findings are told apart from runs that
// change them, and -ignore drops the lines a change alters on purpose.
func TestComparisonsSeeOrderAndIgnoredLines(t *testing.T) {
	a := result{"0", "x\ny\n", "warn A\nwarn B\n"}
	reordered := result{"0", "x\ny\n", "warn B\nwarn A\n"}
	if a == reordered || a.sorted() != reordered.sorted() {
		t.Error("a run that reorders its warnings is not told apart as reordered")
	}
	changed := result{"0", "x\ny\n", "warn A\nwarn C\n"}
	if a.sorted() == changed.sorted() {
		t.Error("a run with another warning compares equal sorted")
	}
	skip := regexp.MustCompile("warn [BC]")
	if a.without(skip) != changed.without(skip) {
		t.Error("-ignore did not leave the matching lines out")
	}
	if (result{"1", "", ""}).without(skip) == (result{"0", "", ""}).without(skip) {
		t.Error("-ignore hid a changed exit code")
	}
}
