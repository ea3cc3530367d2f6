package budget

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseAnnotation reads what Annotation writes,
// "routing=8s work=30s cleanup=2s margin=5s grace=45s": the four terms, the
// mesh proxy's when there is one, and the grace the Pod was given. The four
// terms and the grace must be present, each term once; the error names the
// first problem.
func ParseAnnotation(s string) (Budget, int64, error) {
	var b Budget
	var grace int64
	seen := map[string]bool{}
	for _, f := range strings.Fields(s) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return Budget{}, 0, fmt.Errorf("budget %q: %q is not key=value", s, f)
		}
		if seen[k] {
			return Budget{}, 0, fmt.Errorf("budget %q: %s given twice", s, k)
		}
		seen[k] = true
		if k == "grace" {
			n, err := strconv.ParseInt(strings.TrimSuffix(v, "s"), 10, 64)
			if err != nil || n < 0 || !strings.HasSuffix(v, "s") {
				return Budget{}, 0, fmt.Errorf("budget %q: grace %q is not whole seconds like 45s", s, v)
			}
			grace = n
			continue
		}
		t := Term(k)
		known := false
		for _, term := range allTerms {
			known = known || term == t
		}
		if !known {
			return Budget{}, 0, fmt.Errorf("budget %q: unknown term %q; want routing, work, cleanup, margin, grace and, with a mesh proxy, proxy", s, k)
		}
		d, err := ParseDuration(v)
		if err != nil {
			return Budget{}, 0, fmt.Errorf("budget %q: %s %w", s, k, err)
		}
		b = b.Set(t, d)
	}
	for _, k := range []string{"routing", "work", "cleanup", "margin", "grace"} {
		if !seen[k] {
			return Budget{}, 0, fmt.Errorf("budget %q: %s is missing", s, k)
		}
	}
	return b, grace, nil
}
