// Package mdtable writes the Markdown tables of the lab's rendered pages
// (docs/benchmarks.md, docs/scale.md).
package mdtable

import (
	"slices"
	"strings"
)

// Table is a Markdown table; String renders it.
type Table struct {
	Head []string
	Rows [][]string
	// Right aligns these columns (numbers).
	Right []int
}

// Add appends a row.
func (t *Table) Add(cells ...string) { t.Rows = append(t.Rows, cells) }

func (t *Table) String() string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(t.Head, " | ") + " |\n|")
	for i := range t.Head {
		if slices.Contains(t.Right, i) {
			b.WriteString("---:|")
		} else {
			b.WriteString("---|")
		}
	}
	b.WriteString("\n")
	for _, r := range t.Rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return b.String()
}
