package mutate_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// The prose that lists the workload kinds (docs, the chart's README and
// values, the plugin's help, the webhook's comments) lists exactly those
// of mutate.Workloads: the kinds the validating webhook reviews, or all of
// them where the plugin reads them (a paragraph may name another to say it
// is not reviewed). Adding a kind to the table fails here
// until every such paragraph names it. The chart's rules are held to the
// table by test/chart's TestWebhookRules.
func TestProseListsTheWorkloadKindsOfTheTable(t *testing.T) {
	var reviewed, all []string
	for _, w := range mutate.Workloads {
		all = append(all, w.Kind)
		if w.Reviewed {
			reviewed = append(reviewed, w.Kind)
		}
	}
	for file, want := range map[string][]string{
		"../../docs/annotations.md":           reviewed,
		"../../charts/graceguard/README.md":   reviewed,
		"../../charts/graceguard/values.yaml": reviewed,
		"../webhook/workload.go":              reviewed,
		"../webhook/handler.go":               reviewed,
		"../../docs/plugin.md":                all,
		"../cli/root.go":                      all,
		"../cli/audit.go":                     all,
	} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lists := 0
		for _, para := range regexp.MustCompile(`\n\s*(//|#)?\s*\n`).Split(string(b), -1) {
			// A paragraph that names StatefulSets lists the kinds.
			if !strings.Contains(para, "StatefulSet") {
				continue
			}
			lists++
			words := regexp.MustCompile(`[A-Za-z]+`).FindAllString(para, -1)
			for _, kind := range mutate.Workloads {
				named := false
				for _, w := range words {
					named = named || w == kind.Kind || w == kind.Kind+"s"
				}
				if slices.Contains(want, kind.Kind) && !named {
					t.Errorf("%s: a paragraph listing the workload kinds lacks %s:\n%s", file, kind.Kind, para)
				}
			}
		}
		if lists == 0 {
			t.Errorf("%s lists no workload kinds any more: drop it from this test", file)
		}
	}
}
