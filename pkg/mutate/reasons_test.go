package mutate_test

import (
	"os"
	"strings"
	"testing"

	"github.com/graceguard/graceguard/pkg/mutate"
)

func TestEveryReasonIsDescribed(t *testing.T) {
	for _, r := range mutate.AllReasons {
		if mutate.Describe(r) == "" {
			t.Errorf("reason %q has no description: add it to reasonDocs", r)
		}
	}
}

// The reasons table in docs/annotations.md is generated from the code.
func TestDocsListEveryReason(t *testing.T) {
	generated(t, "../../docs/annotations.md", "reasons", mutate.ReasonsTable())
}

// The built-in routing profiles in docs/routing-profiles.md are generated
// from the code.
func TestDocsListEveryProfile(t *testing.T) {
	generated(t, "../../docs/routing-profiles.md", "profiles", mutate.ProfilesTable())
}

// generated checks (UPDATE_GOLDEN=1: rewrites) the part of a page between
// <!-- name:begin --> and <!-- name:end -->.
func generated(t *testing.T, path, name, table string) {
	t.Helper()
	begin, end := "<!-- "+name+":begin -->\n", "<!-- "+name+":end -->"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the %s markers", path, name)
	}
	want := s[:i+len(begin)] + table + s[j:]
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if s != want {
		t.Fatalf("%s is stale: run `make golden`", path)
	}
}
