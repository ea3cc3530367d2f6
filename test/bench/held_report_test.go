package bench

import (
	"strings"
	"testing"
)

// heldRun is a cpu-held run of this checkout at the chart's 50m request
// (and its 20m), one round per entry of perSec: creates/s at 16 and at 64
// creators, the same at both CPU settings.
func heldRun(perSec ...[2]float64) *Results {
	h := &CPUHeldRun{RequestMillicores: 50, Creators: []int{16, 64}, Rounds: len(perSec)}
	for round, r := range perSec {
		for _, mc := range []int{50, 20} {
			for i, n := range h.Creators {
				h.Cells = append(h.Cells, HeldCell{Variant: HeldThis, Round: round, Millicores: mc, Creators: n,
					PodsPerSec: r[i], Goodput: r[i], Attempts: 100, Created: 100, Connections: 10 * round})
			}
		}
	}
	return &Results{CPUHeld: h}
}

func TestHeldGoodputIsJudgedOnTheMedianRound(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rounds [][2]float64
		met    bool
		shows  string
	}{
		{"one round below the goal, the median above", [][2]float64{{100, 80}, {100, 95}, {100, 92}}, true, "50m: 92% (rounds 80%, 95%, 92%)"},
		{"one round above the goal, the median below", [][2]float64{{100, 99}, {100, 85}, {100, 88}}, false, "50m: 88% (rounds 99%, 85%, 88%)"},
		{"a single round", [][2]float64{{100, 91}}, true, "50m: 91% (one round)"},
		{"an even count takes the middle two's mean", [][2]float64{{100, 80}, {100, 88}, {100, 92}, {100, 99}}, true, "50m: 90% (rounds 80%, 88%, 92%, 99%)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := heldTargets(heldRun(tc.rounds...))[1]
			if got.Met != tc.met || !strings.Contains(got.Measured, tc.shows) {
				t.Errorf("goodput target: met %v, measured %q; want met %v and %q", got.Met, got.Measured, tc.met, tc.shows)
			}
			if !tc.met && !strings.Contains(got.Why, "medians of the rounds") {
				t.Errorf("a missed goodput target explains itself from the medians; why: %q", got.Why)
			}
		})
	}
}

func TestHeldRefusalsCountEveryRound(t *testing.T) {
	r := heldRun([2]float64{100, 95}, [2]float64{100, 95}, [2]float64{100, 95})
	for i := range r.CPUHeld.Cells {
		if c := &r.CPUHeld.Cells[i]; c.Round == 2 && c.Millicores == 20 && c.Creators == 64 {
			c.Refused, c.Created = 3, 97
		}
	}
	got := heldTargets(r)[0]
	if got.Met || !strings.Contains(got.Measured, "20m/64: 3 of 300") || !strings.Contains(got.Why, "round 3") {
		t.Errorf("refusals in the last round: met %v, measured %q, why %q; want missed, 20m/64: 3 of 300, naming round 3", got.Met, got.Measured, got.Why)
	}
}

// The goal is judged on goodput (creations answered in the window), not on
// creations started over the time until the last answered, which reads
// lower the longer the queue left at the window's end.
func TestHeldGoodputIsJudgedOnAnswersInTheWindow(t *testing.T) {
	r := heldRun([2]float64{100, 95})
	for i := range r.CPUHeld.Cells {
		if c := &r.CPUHeld.Cells[i]; c.Creators == 64 {
			c.PodsPerSec = 85
		}
	}
	got := heldTargets(r)[1]
	if !got.Met || !strings.Contains(got.Measured, "50m: 95%") {
		t.Errorf("goodput 95 of 100 with creates/s 85 of 100: met %v, measured %q; want met at 95%%", got.Met, got.Measured)
	}
}
