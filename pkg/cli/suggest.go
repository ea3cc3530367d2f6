package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// suggestFlag adds to an unknown-flag error the flags the person may have
// meant, the way cobra suggests commands: names within
// SuggestionsMinimumDistance edits, or that start with what was typed.
// pflag's other errors already name the flag, the value and why.
func suggestFlag(cmd *cobra.Command, err error) error {
	msg := err.Error()
	typed, ok := strings.CutPrefix(msg, "unknown flag: --")
	if !ok {
		return err
	}
	dist := cmd.SuggestionsMinimumDistance
	if dist <= 0 {
		dist = 2
	}
	var near []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		// A near miss, a prefix (--assume), or a flag and more (--fail-on-warning).
		if levenshtein(typed, f.Name) <= dist || (len(typed) >= 3 && strings.HasPrefix(f.Name, typed)) ||
			(len(f.Name) >= 4 && strings.HasPrefix(typed, f.Name)) {
			near = append(near, "--"+f.Name)
		}
	})
	if len(near) == 0 {
		return err
	}
	slices.Sort(near)
	return fmt.Errorf("%s\n\nDid you mean this?\n\t%s", msg, strings.Join(near, "\n\t"))
}

// levenshtein is the edit distance between two flag names.
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
