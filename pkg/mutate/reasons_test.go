package mutate_test

import (
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
