package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/graceguard/graceguard/test/e2e/evidence"
)

// What the runner prints at the end is the summary table of the page it
// wrote, as is, under a line with the run's verdict.
func TestSummaryTextIsThePagesSummaryTable(t *testing.T) {
	r, err := evidence.Read(filepath.Join("..", "..", "..", "..", "docs", "e2e", evidence.JSONName))
	if err != nil {
		t.Fatal(err)
	}
	got := summaryText(r)
	head := "e2e evidence summary (passed=true)\n"
	if !strings.HasPrefix(got, head) {
		t.Fatalf("the summary does not start with %q:\n%s", head, got)
	}
	table := strings.TrimPrefix(got, head)
	if !strings.HasPrefix(table, "## Summary\n\n| scenario | result | measured |\n") || strings.Count(table, "\n| ") != 16 {
		t.Errorf("the summary is not the table of 15 scenarios (0 to 14):\n%s", table)
	}
	if md := evidence.Markdown(r, "."); !strings.Contains(md, "\n"+table+"\n## ") {
		t.Errorf("the summary is not the page's summary section, as is:\n%s", table)
	}
}
