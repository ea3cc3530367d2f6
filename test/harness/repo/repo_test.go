package repo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRootIsTheProductModuleAboveNestedModules(t *testing.T) {
	// The test runs in test/harness/repo, under test/go.mod, a module
	// of its own: Root must pass it and stop at the product's go.mod.
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !strings.HasPrefix(string(b), "module "+ModulePath+"\n") {
		t.Fatalf("Root() = %s, whose go.mod does not declare %s (%v)", root, ModulePath, err)
	}
	if _, err := os.Stat(filepath.Join(root, "test", "go.mod")); err != nil {
		t.Fatalf("Root() = %s has no test/go.mod: %v", root, err)
	}
}

func TestRootOutsideTheRepository(t *testing.T) {
	t.Chdir(t.TempDir())
	if _, err := Root(); err == nil || !strings.Contains(err.Error(), "no go.mod of "+ModulePath) {
		t.Fatalf("Root() outside the repository: err = %v, want one naming %s", err, ModulePath)
	}
}
