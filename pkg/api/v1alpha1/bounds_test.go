package v1alpha1

import (
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestCRDStatesTheBounds: the CRD the chart installs refuses what the Go
// constants say the observer never writes, no less and no more, so a
// changed constant without `make generate` (or a marker without its
// constant) fails here.
func TestCRDStatesTheBounds(t *testing.T) {
	data, err := os.ReadFile("../../../charts/graceguard/files/crds/graceguard.io_shutdownreports.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	at := func(path string) map[string]any {
		t.Helper()
		node := dig(t, crd, "spec", "versions")[0].(map[string]any)
		node = node["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
		for _, p := range strings.Split(path, ".") {
			if p == "[]" {
				node = node["items"].(map[string]any)
				continue
			}
			next, ok := node["properties"].(map[string]any)[p].(map[string]any)
			if !ok {
				t.Fatalf("%s: no property %q", path, p)
			}
			node = next
		}
		return node
	}
	for path, want := range map[string]int{
		"spec.workload.apiVersion":      MaxAPIVersionLength,
		"spec.workload.kind":            MaxKindLength,
		"spec.workload.name":            MaxNameLength,
		"status.samples.[].pod":         MaxPodNameLength,
		"status.samples.[].container":   MaxContainerNameLength,
		"status.samples.[].reason":      MaxReasonLength,
		"status.samples.[].budget":      MaxBudgetLength,
		"status.summary.drainP50":       MaxDurationLength,
		"status.summary.drainP95":       MaxDurationLength,
		"status.summary.drainMax":       MaxDurationLength,
		"status.summary.drainCut":       MaxDurationLength,
		"status.summary.maxWork":        MaxDurationLength,
		"status.summary.withdrawalP50":  MaxDurationLength,
		"status.summary.withdrawalP95":  MaxDurationLength,
		"status.summary.withdrawalMax":  MaxDurationLength,
		"status.summary.budget":         MaxBudgetLength,
		"status.recommendation.maxWork": MaxDurationLength,
		"status.recommendation.reason":  MaxMessageLength,
	} {
		if got, ok := at(path)["maxLength"].(float64); !ok || int(got) != want {
			t.Errorf("%s: maxLength %v in the CRD, want %d", path, at(path)["maxLength"], want)
		}
	}
	if got, ok := at("status.samples")["maxItems"].(float64); !ok || int(got) != MaxSamples {
		t.Errorf("status.samples: maxItems %v, want %d", at("status.samples")["maxItems"], MaxSamples)
	}
	// Every string the observer writes has a bound: none is left open.
	var open []string
	var walk func(path string, node map[string]any)
	walk = func(path string, node map[string]any) {
		if node["type"] == "string" && node["maxLength"] == nil && node["enum"] == nil && node["format"] != "date-time" {
			open = append(open, path)
		}
		if props, ok := node["properties"].(map[string]any); ok {
			for k, v := range props {
				walk(path+"."+k, v.(map[string]any))
			}
		}
		if items, ok := node["items"].(map[string]any); ok {
			walk(path+".[]", items)
		}
	}
	schema := dig(t, crd, "spec", "versions")[0].(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
	for _, part := range []string{"spec", "status"} {
		walk(part, schema["properties"].(map[string]any)[part].(map[string]any))
	}
	if len(open) > 0 {
		t.Errorf("strings without a maxLength in the CRD: %v", open)
	}
}

func dig(t *testing.T, m map[string]any, keys ...string) []any {
	t.Helper()
	var cur any = m
	for _, k := range keys {
		cur = cur.(map[string]any)[k]
	}
	l, ok := cur.([]any)
	if !ok || len(l) == 0 {
		t.Fatalf("%v: not a non-empty list", keys)
	}
	return l
}
