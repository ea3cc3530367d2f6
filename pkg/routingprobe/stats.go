package routingprobe

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Stats summarise the withdrawal delays of the rounds.
type Stats struct {
	N                     int
	Min, Median, P90, Max time.Duration
}

// Summarize computes Stats over delays by nearest rank (the median of
// 1, 2, 3, 4 is 2: a delay that was measured, never an average).
func Summarize(delays []time.Duration) Stats {
	if len(delays) == 0 {
		return Stats{}
	}
	d := slices.Clone(delays)
	slices.Sort(d)
	return Stats{N: len(d), Min: d[0], Median: nearestRank(d, 50), P90: nearestRank(d, 90), Max: d[len(d)-1]}
}

func nearestRank(sorted []time.Duration, p int) time.Duration {
	i := int(math.Ceil(float64(p)/100*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

// Delays are the rounds' withdrawal delays, in order.
func Delays(rounds []Round) []time.Duration {
	d := make([]time.Duration, len(rounds))
	for i, r := range rounds {
		d[i] = r.Delay
	}
	return d
}

// ProfileDelay is the routing delay a profile takes from a measurement:
// the slowest withdrawal plus margin, rounded up to whole seconds.
func ProfileDelay(slowest, margin time.Duration) time.Duration {
	d := slowest + margin
	if r := d % time.Second; r != 0 {
		d += time.Second - r
	}
	return d
}

// plotWidth is the bar length of the profile's delay.
const plotWidth = 40

// Plot draws one bar per round, scaled so that the profile's delay is the
// column marked '|': a bar reaching it would be a withdrawal the profile
// does not cover.
func Plot(w io.Writer, rounds []Round, profile time.Duration) error {
	if profile <= 0 || len(rounds) == 0 {
		return nil
	}
	name := 0
	for _, r := range rounds {
		name = max(name, len(r.Pod))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%*s  0s%s%s\n", 3+1+name, "", strings.Repeat(" ", plotWidth-2), formatWhole(profile))
	for i, r := range rounds {
		n := int(math.Round(float64(r.Delay) / float64(profile) * plotWidth))
		n = min(max(n, 0), plotWidth)
		bar := strings.Repeat("#", n) + strings.Repeat(" ", plotWidth-n)
		fmt.Fprintf(&b, "%3d %-*s  %s| %s\n", i+1, name, r.Pod, bar, FormatDelay(r.Delay))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func formatWhole(d time.Duration) string {
	return fmt.Sprintf("%ds", int64(d/time.Second))
}
