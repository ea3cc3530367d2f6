package mutate_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/graceguard/graceguard/pkg/budget"
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
	generated(t, "../../docs/annotations.md", "reasons", reasonsTable())
}

// The built-in routing profiles in docs/routing-profiles.md are generated
// from the code.
func TestDocsListEveryProfile(t *testing.T) {
	generated(t, "../../docs/routing-profiles.md", "profiles", profilesTable())
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

// reasonsTable renders every reason as a Markdown table for the docs.
func reasonsTable() string {
	var b strings.Builder
	b.WriteString("| reason | kind | meaning |\n|---|---|---|\n")
	for _, r := range mutate.AllReasons {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r, mutate.KindOf(r), mutate.Describe(r))
	}
	return b.String()
}

// profilesTable renders the built-in routing profiles as a Markdown table
// for docs/routing-profiles.md, so the page and the code never disagree.
func profilesTable() string {
	var b strings.Builder
	b.WriteString("| profile | routing delay (preStop sleep) | grace floor | basis | in short |\n|---|---|---|---|---|\n")
	for _, p := range budget.BuiltinProfiles() {
		floor := "none"
		if p.GraceFloor > 0 {
			floor = fmt.Sprintf("%ds", budget.CeilSeconds(p.GraceFloor))
		}
		fmt.Fprintf(&b, "| `%s` | %ds | %s | %s | %s |\n", p.Name, budget.CeilSeconds(p.Routing), floor, p.Basis, p.Source)
	}
	return b.String()
}

// The keys table in docs/security.md is generated from mutate.Keys, the
// table the webhook's reader, the size guard and the namespace cache read.
func TestDocsListEveryKey(t *testing.T) {
	generated(t, "../../docs/security.md", "keys", keysTable())
}

func keysTable() string {
	var b strings.Builder
	b.WriteString("| key | read on | owner | value read |\n|---|---|---|---|\n")
	for _, k := range mutate.Keys {
		var on []string
		for _, w := range []struct {
			m    mutate.Where
			name string
		}{{mutate.PodAnnotation, "Pod annotation"}, {mutate.PodLabel, "Pod label"}, {mutate.NamespaceAnnotation, "Namespace annotation"}, {mutate.NamespaceLabel, "Namespace label"}} {
			if k.Where&w.m != 0 {
				on = append(on, w.name)
			}
		}
		bound := fmt.Sprintf("%d bytes", k.MaxLength)
		if k.Where&(mutate.PodAnnotation|mutate.NamespaceAnnotation) == 0 {
			bound = fmt.Sprintf("%d bytes (a label: compared, never parsed)", mutate.MaxLabelValueLength)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", k.Name, strings.Join(on, ", "), k.Owner, bound)
	}
	return b.String()
}

func TestLookupKeyFindsEachPlace(t *testing.T) {
	for _, k := range mutate.Keys {
		for _, w := range []mutate.Where{mutate.PodAnnotation, mutate.PodLabel, mutate.NamespaceAnnotation, mutate.NamespaceLabel} {
			if k.Where&w == 0 {
				continue
			}
			if got, ok := mutate.LookupKey(k.Name, w); !ok || got.Where&w == 0 {
				t.Errorf("LookupKey(%q, %d) = %+v, %v", k.Name, w, got, ok)
			}
		}
	}
	if _, ok := mutate.LookupKey("app", mutate.PodLabel); ok {
		t.Error("found a key graceguard does not read")
	}
}
