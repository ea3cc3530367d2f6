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

// heldTargets are the cpu-held phase's goals, on this checkout's cells:
// no refusal in any round, and the median of the rounds' goodput ratios.
func heldTargets(r *Results) []Target {
	h := r.CPUHeld
	refusedGoal := "one replica held to its CPU request and to 40% of it: no Pod creation refused"
	goodputGoal := fmt.Sprintf("one replica held to its CPU request and to 40%% of it: goodput at the most creators ≥ %.0f%% of the fewest's (median of the rounds)", 100*goalHeldGoodput)
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
			cs := h.cells(HeldThis, mc, n)
			if len(cs) == 0 {
				known = false
				continue
			}
			r, a := 0, 0
			for _, c := range cs {
				r, a = r+c.Refused, a+c.Attempts
			}
			total += r
			refused = append(refused, fmt.Sprintf("%dm/%d: %d of %d", mc, n, r, a))
		}
		g, ok := h.goodput(HeldThis, mc)
		if !ok {
			known = false
			continue
		}
		met = met && g.median >= goalHeldGoodput
		ratios = append(ratios, fmt.Sprintf("%dm: %.0f%% (%s)", mc, 100*g.median, g.rounds()))
	}
	rt := checked(refusedGoal, known, total == 0, "refused %s", strings.Join(refused, ", "))
	gt := checked(goodputGoal, known, met, "%s", strings.Join(ratios, "; "))
	var whyRefused, whyGoodput []string
	for _, mc := range levels {
		for _, n := range h.Creators {
			for _, c := range h.cells(HeldThis, mc, n) {
				if c.Refused > 0 {
					whyRefused = append(whyRefused, fmt.Sprintf("at %dm with %d creators (round %d) the API server's calls were %s; the webhook shed %d reviews and used %s of its %s cores",
						mc, n, c.Round+1, callsText(c.Calls), c.Shed, num(c.Cores), num(float64(mc)/1000)))
				}
			}
		}
		if g, ok := h.goodput(HeldThis, mc); ok && g.median < goalHeldGoodput {
			whyGoodput = append(whyGoodput, fmt.Sprintf("at %dm the webhook used %s cores with %d creators and %s with %d (medians of the rounds), of its %s, and accepted %.0f new connections a round with %d",
				mc, num(median(g.coresFew)), few, num(median(g.coresMany)), many, num(float64(mc)/1000), median(g.conns), many))
		}
	}
	load := fmt.Sprintf(" (load average %.2f at the phase's start, %.2f at its end, on %d CPUs)", h.LoadAvgStart[0], h.LoadAvgEnd[0], r.Machine.NProc)
	if len(whyRefused) > 0 {
		rt.explain(strings.Join(whyRefused, "; ") + load + ".")
	}
	if len(whyGoodput) > 0 {
		gt.explain(strings.Join(whyGoodput, "; ") + load + ".")
	}
	return []Target{rt, gt}
}

// heldGoodput is a variant's goodput at one CPU setting: per round, its
// goodput with the most creators over that with the fewest (the two
// cells of a round run one after the other, so a slow minute of the
// machine weighs on both), and their median.
type heldGoodput struct {
	ratios, coresFew, coresMany, conns []float64
	median                             float64
}

func (g heldGoodput) rounds() string {
	var out []string
	for _, q := range g.ratios {
		out = append(out, fmt.Sprintf("%.0f%%", 100*q))
	}
	if len(out) == 1 {
		return "one round"
	}
	return "rounds " + strings.Join(out, ", ")
}

func (h *CPUHeldRun) goodput(variant string, mc int) (heldGoodput, bool) {
	var g heldGoodput
	if len(h.Creators) < 2 {
		return g, false
	}
	few, many := h.Creators[0], h.Creators[len(h.Creators)-1]
	for round := range max(h.Rounds, 1) {
		a, okA := h.cell(variant, mc, few, round)
		b, okB := h.cell(variant, mc, many, round)
		if !okA || !okB || a.Goodput <= 0 {
			continue
		}
		g.ratios = append(g.ratios, b.Goodput/a.Goodput)
		g.coresFew, g.coresMany = append(g.coresFew, a.Cores), append(g.coresMany, b.Cores)
		if b.Connections >= 0 {
			g.conns = append(g.conns, float64(b.Connections))
		}
	}
	if len(g.ratios) == 0 {
		return g, false
	}
	g.median = median(g.ratios)
	return g, true
}

// median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
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

// cell is the variant's cell at millicores and creators in round.
func (h *CPUHeldRun) cell(variant string, millicores, creators, round int) (HeldCell, bool) {
	for _, c := range h.Cells {
		if c.Variant == variant && c.Millicores == millicores && c.Creators == creators && c.Round == round {
			return c, true
		}
	}
	return HeldCell{}, false
}

// cells are the variant's cells at millicores and creators, a round each.
func (h *CPUHeldRun) cells(variant string, millicores, creators int) []HeldCell {
	var out []HeldCell
	for _, c := range h.Cells {
		if c.Variant == variant && c.Millicores == millicores && c.Creators == creators {
			out = append(out, c)
		}
	}
	return out
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
	Rounds   int
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
	rounds := max(h.Rounds, 1)
	hp.Rounds = rounds
	hp.Table = &table{Head: []string{"Round", "CPU", "Creators", "Webhook", "Creates/s", "Goodput (/s)", "p50 (ms)", "p99 (ms)", "Refused", "Without graceguard's changes",
		"Shed (429)", "New connections", "/readyz failed", "Webhook CPU (cores)", "Throttled (s)"}, Right: seq(2, 14)}
	for _, c := range h.Cells {
		hp.Table.Add(fmt.Sprint(c.Round+1), h.cpuLabel(c.Millicores), fmt.Sprint(c.Creators), c.Variant, num(c.PodsPerSec), num(c.Goodput), num(c.Latency.P50), num(c.Latency.P99),
			fmt.Sprintf("%d of %d", c.Refused, c.Attempts), fmt.Sprint(c.Unmutated), fmt.Sprint(c.Shed), connections(c.Connections),
			fmt.Sprintf("%d of %d", c.ReadyzFailed, c.ReadyzProbes), num(c.Cores), num(c.ThrottledSeconds))
	}
	if len(h.Creators) >= 2 {
		few, many := h.Creators[0], h.Creators[len(h.Creators)-1]
		head := []string{"CPU", "Webhook", fmt.Sprintf("Goodput at %d creators ÷ at %d", many, few)}
		if rounds > 1 {
			head[2] += ", median of the rounds"
			head = append(head, "Each round")
		}
		hp.Goodput = &table{Head: head, Right: []int{2}}
		for _, mc := range []int{0, h.RequestMillicores, heldLevel(h.RequestMillicores)} {
			for _, v := range h.Variants {
				g, ok := h.goodput(v.Name, mc)
				if !ok {
					continue
				}
				row := []string{h.cpuLabel(mc), v.Name, num(g.median) + "×"}
				if rounds > 1 {
					var each []string
					for _, q := range g.ratios {
						each = append(each, num(q)+"×")
					}
					row = append(row, strings.Join(each, ", "))
				}
				hp.Goodput.Add(row...)
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
