package main

import (
	"fmt"
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
	if !strings.HasPrefix(table, "## Summary\n\n| scenario | result | measured |\n|---|---|---|\n") {
		t.Errorf("the summary is not a table of scenarios:\n%s", table)
	}
	// One row a scenario, numbered from 0 with none left out.
	rows := strings.Split(strings.TrimSpace(strings.SplitN(table, "|---|---|---|\n", 2)[1]), "\n")
	for i, row := range rows {
		if !strings.HasPrefix(row, fmt.Sprintf("| %d. ", i)) {
			t.Errorf("row %d of the summary is not scenario %d: %.80s", i, i, row)
		}
	}
	if len(rows) < 16 {
		t.Errorf("the summary has %d scenarios, want the 16 (0 to 15) of the committed run", len(rows))
	}
	if md := evidence.Markdown(r, "."); !strings.Contains(md, "\n"+table+"\n## ") {
		t.Errorf("the summary is not the page's summary section, as is:\n%s", table)
	}
}

// A failed run ends with each failed spec's failure and graceguard's state
// then, after the table; a passing run's summary has no such lines.
func TestSummaryTextEndsWithWhatFailed(t *testing.T) {
	r, err := evidence.Read(filepath.Join("..", "..", "..", "..", "docs", "e2e", evidence.JSONName))
	if err != nil {
		t.Fatal(err)
	}
	if got := summaryText(r); strings.Contains(got, "did not pass") {
		t.Fatalf("a passing run's summary lists failures:\n%s", got)
	}
	r.Passed = false
	r.Specs = append(r.Specs, evidence.Spec{Name: "3. skipped by a focus", State: "skipped"}, evidence.Spec{Name: "4. a preStop hook longer than grace", State: "failed",
		Failure:    "Expected\n    <string>: no endpoints available for service \"graceguard\"\n" + strings.Repeat("x", 600),
		Graceguard: "graceguard-abc Running ready=false restarts=3 (last: OOMKilled, exit 137)"})
	got := summaryText(r)
	want := "\nSpecs that did not pass:\n- 4. a preStop hook longer than grace (failed): Expected <string>: no endpoints available for service \"graceguard\" x"
	if !strings.Contains(got, want) {
		t.Fatalf("the summary does not end with the failure on one line, %q:\n%s", want, got)
	}
	if strings.Contains(got, "skipped by a focus") {
		t.Errorf("a skipped spec is listed as failed:\n%s", got)
	}
	if !strings.HasSuffix(got, "...\n  graceguard: graceguard-abc Running ready=false restarts=3 (last: OOMKilled, exit 137)\n") {
		t.Errorf("the failure is not cut at 400 characters and followed by graceguard's state:\n%s", got)
	}
}
