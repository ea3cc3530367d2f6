package bench

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The cpu-held phase's goals (issue 41): one replica held to its CPU
// request (and to heldFraction of it) refuses no creation, and keeps its
// goodput when four times as many creators push it past its capacity.
const goalHeldGoodput = 0.9

// heldTargets are the cpu-held phase's goals, on this checkout's cells.
func heldTargets(r *Results) []Target {
	h := r.CPUHeld
	refusedGoal := "one replica held to its CPU request and to 40% of it: no Pod creation refused"
	goodputGoal := fmt.Sprintf("one replica held to its CPU request and to 40%% of it: creates/s at the most creators ≥ %.0f%% of the fewest's", 100*goalHeldGoodput)
	if h == nil || len(h.Creators) < 2 {
		return []Target{unmeasured(refusedGoal), unmeasured(goodputGoal)}
	}
	levels := []int{h.RequestMillicores, heldLevel(h.RequestMillicores)}
	var refused []string
	total, known := 0, true
	var ratios []string
	met := true
	few, many := h.Creators[0], h.Creators[len(h.Creators)-1]
	for _, mc := range levels {
		for _, n := range h.Creators {
			c, ok := h.cell(HeldThis, mc, n)
			if !ok {
				known = false
				continue
			}
			total += c.Refused
			refused = append(refused, fmt.Sprintf("%dm/%d: %d of %d", mc, n, c.Refused, c.Attempts))
		}
		a, okA := h.cell(HeldThis, mc, few)
		b, okB := h.cell(HeldThis, mc, many)
		if !okA || !okB || a.PodsPerSec <= 0 {
			known = false
			continue
		}
		q := b.PodsPerSec / a.PodsPerSec
		met = met && q >= goalHeldGoodput
		ratios = append(ratios, fmt.Sprintf("%dm: %.0f%% (%s vs %s creates/s)", mc, 100*q, num(b.PodsPerSec), num(a.PodsPerSec)))
	}
	rt := checked(refusedGoal, known, total == 0, "refused %s", strings.Join(refused, ", "))
	gt := checked(goodputGoal, known, met, "%s", strings.Join(ratios, "; "))
	var whyRefused, whyGoodput []string
	for _, mc := range levels {
		for _, n := range h.Creators {
			if c, ok := h.cell(HeldThis, mc, n); ok && c.Refused > 0 {
				whyRefused = append(whyRefused, fmt.Sprintf("at %dm with %d creators the API server's calls were %s; the webhook shed %d reviews and used %s of its %s cores",
					mc, n, callsText(c.Calls), c.Shed, num(c.Cores), num(float64(mc)/1000)))
			}
		}
		a, okA := h.cell(HeldThis, mc, few)
		b, okB := h.cell(HeldThis, mc, many)
		if okA && okB && a.PodsPerSec > 0 && b.PodsPerSec/a.PodsPerSec < goalHeldGoodput {
			whyGoodput = append(whyGoodput, fmt.Sprintf("at %dm the webhook used %s cores with %d creators and %s with %d, of its %s",
				mc, num(a.Cores), few, num(b.Cores), many, num(float64(mc)/1000)))
		}
	}
	load := fmt.Sprintf(" (load average %.2f at the phase's start, %.2f at its end, on %d CPUs)", h.LoadAvgStart[0], h.LoadAvgEnd[0], r.Machine.NProc)
	if len(whyRefused) > 0 {
		rt.explain(strings.Join(whyRefused, "; ") + load + ".")
	}
	if len(whyGoodput) > 0 {
		gt.explain(strings.Join(whyGoodput, "; ") + ": below its quota, the webhook was fed slower than it could serve" + load + ".")
	}
	return []Target{rt, gt}
}

// callsText lists the API server's calls by webhook and code, sorted.
func callsText(calls map[string]int) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(calls)) {
		out = append(out, fmt.Sprintf("%s %d", k, calls[k]))
	}
	if len(out) == 0 {
		return "not recorded"
	}
	return strings.Join(out, ", ")
}

// heldLevel is the starved CPU setting for a request of mc millicores.
func heldLevel(mc int) int { return int(float64(mc)*heldFraction + 0.5) }

// cell is the variant's cell at millicores and creators.
func (h *CPUHeldRun) cell(variant string, millicores, creators int) (HeldCell, bool) {
	for _, c := range h.Cells {
		if c.Variant == variant && c.Millicores == millicores && c.Creators == creators {
			return c, true
		}
	}
	return HeldCell{}, false
}

// heldPage is section 6 of the page.
type heldPage struct {
	Run      *CPUHeldRun
	Started  string
	Load     string
	Table    *table
	Goodput  *table
	Variants []string
	Fraction string
	Request  int
	Starved  int
}

func (r *Results) heldPage() *heldPage {
	h := r.CPUHeld
	if h == nil || len(h.Cells) == 0 {
		return nil
	}
	hp := &heldPage{Run: h, Started: h.Started.Format("2006-01-02 15:04 MST"),
		Load: fmt.Sprintf("%.2f, %.2f, %.2f at the start, %.2f, %.2f, %.2f at the end", h.LoadAvgStart[0], h.LoadAvgStart[1], h.LoadAvgStart[2],
			h.LoadAvgEnd[0], h.LoadAvgEnd[1], h.LoadAvgEnd[2]),
		Fraction: fmt.Sprintf("%.0f%%", 100*heldFraction), Request: h.RequestMillicores, Starved: heldLevel(h.RequestMillicores)}
	for _, v := range h.Variants {
		at := v.Commit
		if v.Ref != "" {
			at = fmt.Sprintf("`%s` at %s", v.Ref, v.Commit)
		}
		gomaxprocs := "unset (the machine's CPUs)"
		for _, e := range v.Env {
			if g, ok := strings.CutPrefix(e, "GOMAXPROCS="); ok {
				gomaxprocs = g + " (from its chart's CPU request)"
			}
		}
		conc := "?"
		for _, a := range v.Args {
			if n, ok := strings.CutPrefix(a, "--max-concurrent-reviews="); ok {
				conc = n
			}
		}
		hp.Variants = append(hp.Variants, fmt.Sprintf("**%s**: %s; its chart's CPU request %dm, `--max-concurrent-reviews=%s`, GOMAXPROCS %s",
			v.Name, at, v.RequestMillicores, conc, gomaxprocs))
	}
	hp.Table = &table{Head: []string{"CPU", "Creators", "Webhook", "Creates/s", "p50 (ms)", "p99 (ms)", "Refused", "Without graceguard's changes",
		"Shed (429)", "New connections", "/readyz failed", "Webhook CPU (cores)", "Throttled (s)"}, Right: seq(1, 12)}
	for _, c := range h.Cells {
		hp.Table.Add(h.cpuLabel(c.Millicores), fmt.Sprint(c.Creators), c.Variant, num(c.PodsPerSec), num(c.Latency.P50), num(c.Latency.P99),
			fmt.Sprintf("%d of %d", c.Refused, c.Attempts), fmt.Sprint(c.Unmutated), fmt.Sprint(c.Shed), connections(c.Connections),
			fmt.Sprintf("%d of %d", c.ReadyzFailed, c.ReadyzProbes), num(c.Cores), num(c.ThrottledSeconds))
	}
	if len(h.Creators) >= 2 {
		few, many := h.Creators[0], h.Creators[len(h.Creators)-1]
		hp.Goodput = &table{Head: []string{"CPU", "Webhook", fmt.Sprintf("Creates/s at %d creators ÷ at %d", many, few)}, Right: []int{2}}
		for _, mc := range []int{0, h.RequestMillicores, heldLevel(h.RequestMillicores)} {
			for _, v := range h.Variants {
				a, okA := h.cell(v.Name, mc, few)
				b, okB := h.cell(v.Name, mc, many)
				if okA && okB {
					hp.Goodput.Add(h.cpuLabel(mc), v.Name, ratio(b.PodsPerSec, a.PodsPerSec))
				}
			}
		}
	}
	return hp
}

// connections shows a cell's new connections, "n/a" when its webhook
// does not count them (a "before" older than the metric).
func connections(n int) string {
	if n < 0 {
		return "n/a"
	}
	return fmt.Sprint(n)
}

// cpuLabel names a CPU setting in the table.
func (h *CPUHeldRun) cpuLabel(mc int) string {
	switch mc {
	case 0:
		return "unlimited"
	case h.RequestMillicores:
		return fmt.Sprintf("%dm (the request)", mc)
	}
	return fmt.Sprintf("%dm (%.0f%%)", mc, 100*float64(mc)/float64(h.RequestMillicores))
}
