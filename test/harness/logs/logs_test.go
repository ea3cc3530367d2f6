package logs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log")
	var b strings.Builder
	for i := range 20000 { // ~150 KiB: more than Tail reads
		b.WriteString("line " + strings.Repeat("x", i%7) + "\n")
	}
	b.WriteString("next to last\nlast\n")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := Tail(p, 2); got != "next to last\nlast" {
		t.Errorf("Tail(2) = %q", got)
	}
	if got := Tail(filepath.Join(t.TempDir(), "missing"), 2); got != "" {
		t.Errorf("Tail of a missing file = %q, want empty", got)
	}
	if got := LastLines("a\nb", 5); got != "a\nb" {
		t.Errorf("LastLines(5) of two lines = %q", got)
	}
}
