package mutate

import (
	"testing"

	"github.com/graceguard/graceguard/pkg/budget"
)

// Every key the docs tell users to set is read by resolve: a row with a
// Doc and no setter would be documented and ignored. The record is
// graceguard's own (compared, not read as a setting).
func TestDocumentedKeysHaveSetters(t *testing.T) {
	for _, k := range Keys {
		if k.Doc == nil || k.Name == AnnotationBudget {
			continue
		}
		if k.set == nil {
			t.Errorf("%s is documented but has no setter: resolve never reads it", k.Name)
		}
	}
}

// A term's key is the one KeyFor names, and every budget term has one.
func TestEveryTermHasOneKey(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Keys {
		if k.Term == "" {
			continue
		}
		if seen[string(k.Term)] {
			t.Errorf("term %s has two keys", k.Term)
		}
		seen[string(k.Term)] = true
		if KeyFor(k.Term) != k.Name {
			t.Errorf("KeyFor(%s) = %q, want %q", k.Term, KeyFor(k.Term), k.Name)
		}
	}
	for _, term := range budget.Terms {
		if !seen[string(term)] {
			t.Errorf("budget term %s has no key", term)
		}
	}
}
