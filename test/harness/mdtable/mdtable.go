// Package mdtable writes the Markdown tables of the lab's rendered pages
// (docs/benchmarks.md, docs/scale.md).
package mdtable

import (
	"fmt"
	"math"
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

// Num prints a measurement with three significant digits or so.
func Num(v float64) string {
	switch a := math.Abs(v); {
	case math.IsInf(v, 0) || math.IsNaN(v):
		return fmt.Sprint(v)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// Thousands prints a whole number with thousands separators, and any
// other as Num does.
func Thousands(v float64) string {
	if v != math.Trunc(v) || math.Abs(v) >= 1e15 {
		return Num(v)
	}
	s := fmt.Sprintf("%.0f", math.Abs(v))
	var b strings.Builder
	if v < 0 {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
