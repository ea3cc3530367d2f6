package cli

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/graceguard/graceguard/pkg/budget"
)

// chartWidth is the number of columns the chart's time axis spans. With the
// row labels and the notes after the bars, lines stay within 100 columns.
const chartWidth = 56

// Chart marks: time spent as planned, time past the SIGKILL deadline (or
// of a hook past the grace period), and the deadline itself.
const (
	markRun    = '='
	markKilled = 'x'
	markKill   = '|'
	// A platform ceiling: the time it grants, and its SIGKILL.
	markCeiling     = '-'
	markCeilingKill = '!'
)

// row is one phase of the deletion drawn on the chart.
type row struct {
	name     string
	length   time.Duration
	from, to time.Duration
	// cutAt, when set, is where the kubelet stops the phase; the rest is
	// drawn as killed.
	cutAt time.Duration
	note  string
	// ceiling rows show a platform's own SIGKILL, not a phase.
	ceiling bool
}

// chart draws the timeline as a Gantt chart, one row per phase, on a time
// axis from deletion to the later of the SIGKILL deadline and the end of
// the margin. Phases cut short are drawn with x and say so at the right.
func chart(tl budget.Timeline, ceilings []budget.Ceiling) []string {
	span := max(tl.Deadline, tl.ProxyExited+tl.Budget.Margin)
	if span <= 0 {
		return []string{"(nothing to draw: no budget and no grace period)"}
	}
	col := func(t time.Duration) int {
		switch {
		case t <= 0:
			return 0
		case t >= span:
			return chartWidth
		}
		return int(math.Round(float64(t) / float64(span) * chartWidth))
	}

	rows := phases(tl, span)
	for _, c := range ceilings {
		// The notes stay short: the budget lines above say the rest.
		r := row{name: "ceiling", length: c.Limit, from: 0, to: min(c.Limit, span), ceiling: true, note: c.Name + " SIGKILL"}
		if c.Limit >= span {
			r.note = c.Name + ": off chart"
		}
		rows = append(rows, r)
	}
	nameW, lenW := 0, 0
	for _, r := range rows {
		nameW = max(nameW, len(r.name))
		lenW = max(lenW, len(budget.Format(r.length)))
	}
	pad := strings.Repeat(" ", nameW+1+lenW+2)
	dcol := col(tl.Deadline)

	var out []string
	for _, a := range axis(col, tl) {
		out = append(out, strings.TrimRight(pad+a, " "))
	}
	out = append(out, pad+ticks(col, tl))
	for _, r := range rows {
		cells := []byte(strings.Repeat(" ", chartWidth+1))
		a, b := col(r.from), col(r.to)
		if b <= a && r.to > r.from {
			b = a + 1
		}
		stop := dcol
		if r.cutAt > 0 {
			stop = col(r.cutAt)
		}
		for c := a; c < b && c <= chartWidth; c++ {
			cells[c] = markRun
			if c >= stop {
				cells[c] = markKilled
			}
			if r.ceiling {
				cells[c] = markCeiling
			}
		}
		if r.ceiling && r.to < span {
			cells[min(b, chartWidth)] = markCeilingKill
		}
		if cells[dcol] == ' ' {
			cells[dcol] = markKill
		}
		line := fmt.Sprintf("%-*s %*s  %s", nameW, r.name, lenW, budget.Format(r.length), cells)
		if r.note != "" {
			line += " <- " + r.note
		}
		out = append(out, strings.TrimRight(line, " "))
	}
	return out
}

// phases lists the rows of the chart. Without a preStop hook, SIGTERM comes
// at once and the app itself must keep serving for the routing time.
func phases(tl budget.Timeline, span time.Duration) []row {
	b := tl.Budget
	var rows []row
	start := tl.SIGTERM
	switch {
	case tl.Hook > 0:
		r := row{name: "preStop", length: tl.Hook, from: 0, to: min(tl.Hook, span)}
		if tl.HookCut {
			r.cutAt = tl.SIGTERM
			r.note = "cut at " + budget.Format(tl.SIGTERM)
		}
		rows = append(rows, r)
	case b.Routing > 0:
		rows = append(rows, row{name: "routing", length: b.Routing, from: 0, to: b.Routing, note: "app keeps serving"})
		start += b.Routing
	}
	rows = append(rows,
		row{name: "drain", length: b.Work, from: start, to: tl.Drained},
		row{name: "cleanup", length: b.Cleanup, from: tl.Drained, to: tl.Exited},
	)
	if tl.ProxyExited > tl.Exited {
		note := "mesh proxy"
		if tl.ProxyIsSidecar {
			note = "sidecar, past the app"
		}
		rows = append(rows, row{name: "proxy", length: tl.ProxyExited - tl.Exited, from: tl.Exited, to: tl.ProxyExited, note: note})
	}
	for _, sc := range tl.Sidecars {
		rows = append(rows, row{name: "sidecar", length: sc.Wait, from: 0, to: min(sc.Wait, span), note: sc.Name + " waits, then SIGTERM"})
	}
	killed := false
	for i := range rows {
		r := &rows[i]
		if r.cutAt == 0 && r.to > tl.Deadline && r.from < r.to {
			r.note = "killed at " + budget.Format(tl.Deadline)
			killed = true
			break
		}
	}
	margin := row{name: "margin", length: b.Margin, from: tl.ProxyExited, to: tl.ProxyExited + b.Margin}
	if !killed && margin.to > tl.Deadline {
		margin.note = "short by " + budget.Format(margin.to-tl.Deadline)
	}
	rows = append(rows, margin)

	out := rows[:0]
	for _, r := range rows {
		if r.length > 0 {
			out = append(out, r)
		}
	}
	return out
}

// axis labels deletion, SIGTERM and SIGKILL above their columns. A label
// that would run into another goes on a line above; one that fits on
// neither is left out (the event list has every time).
func axis(col func(time.Duration) int, tl budget.Timeline) []string {
	type labels struct {
		line  []byte
		taken []bool
	}
	rows := make([]labels, 2)
	for i := range rows {
		rows[i].line = []byte(strings.Repeat(" ", chartWidth+24))
		rows[i].taken = make([]bool, len(rows[i].line))
	}
	place := func(r *labels, s string, start int) bool {
		if start < 0 || start+len(s) > len(r.line) {
			return false
		}
		for c := max(start-1, 0); c < min(start+len(s)+1, len(r.line)); c++ {
			if r.taken[c] {
				return false
			}
		}
		copy(r.line[start:], s)
		for c := start; c < start+len(s); c++ {
			r.taken[c] = true
		}
		return true
	}
	// put tries each start on the axis line, then on the line above.
	put := func(s string, starts ...int) {
		for i := range rows {
			for _, st := range starts {
				if place(&rows[i], s, st) {
					return
				}
			}
		}
	}
	kill := "SIGKILL " + budget.Format(tl.Deadline)
	d := col(tl.Deadline)
	put(kill, d-len(kill)+1, d)
	put("0s", 0)
	if tl.SIGTERM > 0 {
		term := "SIGTERM " + budget.Format(tl.SIGTERM)
		s := col(tl.SIGTERM)
		put(term, s, s-len(term)+1)
	}
	var out []string
	for i := len(rows) - 1; i >= 0; i-- {
		if l := strings.TrimRight(string(rows[i].line), " "); l != "" || i == 0 {
			out = append(out, l)
		}
	}
	return out
}

// ticks marks the columns of deletion, SIGTERM and SIGKILL.
func ticks(col func(time.Duration) int, tl budget.Timeline) string {
	line := []byte(strings.Repeat(" ", chartWidth+1))
	for _, t := range []time.Duration{0, tl.SIGTERM, tl.Deadline} {
		line[col(t)] = markKill
	}
	return strings.TrimRight(string(line), " ")
}

// events lists the timeline's moments in time order, one a line:
// "t=8s   SIGTERM". Moments after SIGKILL never come, and say so. sigterm
// names the SIGTERM event ("SIGTERM to app" when containers differ).
func events(tl budget.Timeline, sigterm string) []string {
	ev := tl.Events()
	slices.SortStableFunc(ev, func(a, b budget.Event) int { return cmp.Compare(a.At, b.At) })
	w := 0
	for _, e := range ev {
		w = max(w, len(budget.Format(e.At)))
	}
	out := make([]string, len(ev))
	for i, e := range ev {
		name := e.Name
		if name == "SIGTERM" {
			name = sigterm
		}
		out[i] = fmt.Sprintf("t=%-*s  %s", w, budget.Format(e.At), name)
		if e.At > tl.Deadline {
			out[i] += " (never: SIGKILL comes first)"
		}
	}
	return out
}

// verdict says in plain sentences whether the process exits, with its
// margin, before SIGKILL, and if not, what is cut.
func verdict(tl budget.Timeline) string {
	at := budget.Format
	switch {
	case tl.HookCut:
		s := fmt.Sprintf("DOES NOT FIT: the preStop hook (%s) outlasts the grace period (%ds). The kubelet cuts it at %s, then sends SIGTERM, and SIGKILL at %s",
			at(tl.Hook), tl.Grace, at(tl.SIGTERM), at(tl.Deadline))
		if tl.Exited > tl.Deadline {
			s += fmt.Sprintf(", %s before the process would exit", at(tl.Exited-tl.Deadline))
		}
		return s + "."
	case tl.Slack() < 0 && tl.Exited <= tl.Deadline:
		return fmt.Sprintf("DOES NOT FIT: the app exits at %s but SIGKILL at %s comes %s before its mesh proxy is done at %s.",
			at(tl.Exited), at(tl.Deadline), at(-tl.Slack()), at(tl.ProxyExited))
	case tl.Slack() < 0:
		return fmt.Sprintf("DOES NOT FIT: SIGKILL at %s comes %s before the process would exit at %s; admitted work or cleanup is cut.",
			at(tl.Deadline), at(tl.Exited-tl.Deadline), at(tl.Exited))
	case !tl.Fits():
		return fmt.Sprintf("DOES NOT FIT: the %s at %s, only %s before SIGKILL at %s; the budget keeps a %s margin.",
			exits(tl), at(tl.ProxyExited), at(tl.Slack()), at(tl.Deadline), at(tl.Budget.Margin))
	}
	return fmt.Sprintf("fits: the %s at %s, %s before SIGKILL at %s (margin %s).",
		exits(tl), at(tl.ProxyExited), at(tl.Slack()), at(tl.Deadline), at(tl.Budget.Margin))
}

// exits names what exits last: the process, or its mesh proxy after it.
func exits(tl budget.Timeline) string {
	if tl.ProxyExited > tl.Exited && tl.ProxyIsSidecar {
		return "process exits at " + budget.Format(tl.Exited) + " and its last sidecar gets SIGTERM"
	}
	if tl.ProxyExited > tl.Exited {
		return "process exits at " + budget.Format(tl.Exited) + " and its mesh proxy"
	}
	return "process exits"
}

// wrap breaks prose into lines of at most width columns (a word longer than
// that gets a line of its own).
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		switch {
		case line == "":
			line = w
		case len(line)+1+len(w) <= width:
			line += " " + w
		default:
			lines = append(lines, line)
			line = w
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
