package repo

import (
	"os"
	"path/filepath"
	"testing"
)

// From hack/ (its own module) Chdir lands where the product's go.mod is.
func TestChdirFindsTheProductsModuleAboveHacks(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chdir(wd) })
	if err := os.Chdir(filepath.Join("..", "..")); err != nil { // hack/
		t.Fatal(err)
	}
	if err := Chdir(); err != nil {
		t.Fatal(err)
	}
	got, _ := os.Getwd()
	want, _ := filepath.Abs(filepath.Join(wd, "..", "..", ".."))
	if got != want {
		t.Errorf("Chdir from hack/: in %s, want %s", got, want)
	}
	if _, err := os.Stat("charts/graceguard/Chart.yaml"); err != nil {
		t.Errorf("not the repository root: %v", err)
	}
}
