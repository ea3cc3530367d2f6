package bench

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/graceguard/graceguard/test/harness/mdtable"
)

// The documents a run writes into Options.OutDir.
const (
	docMarkdown = "benchmarks.md"
	docJSON     = "benchmarks.json"
	docSVG      = "benchmarks-latency.svg"
	docArmsSVG  = "benchmarks-arms.svg"
)

func (r *Results) write(dir string) error {
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	for name, content := range map[string][]byte{
		docJSON:     append(j, '\n'),
		docMarkdown: []byte(r.Markdown()),
		docSVG:      []byte(r.LatencySVG()),
		docArmsSVG:  []byte(r.ArmsSVG()),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// duration prints nanoseconds in a readable unit.
func duration(ns float64) string {
	switch a := math.Abs(ns); {
	case a >= 1e6:
		return num(ns/1e6) + " ms"
	case a >= 1e3:
		return num(ns/1e3) + " µs"
	}
	return num(ns) + " ns"
}

// count prints a count, without decimals when it is whole.
func count(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%.0f", v)
	}
	return num(v)
}

func bytesize(b float64) string {
	switch {
	case b >= 1<<20:
		return num(b/(1<<20)) + " MiB"
	case b >= 1<<10:
		return num(b/(1<<10)) + " KiB"
	}
	return fmt.Sprintf("%.0f B", b)
}

func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return num(a/b) + "×"
}

// table is the lab pages' Markdown table.
type table = mdtable.Table

// num prints a measurement with three significant digits or so.
var num = mdtable.Num

func seq(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

func (r *Results) podDesc(name string) string {
	for _, ps := range r.Pods {
		if ps.Name == name {
			return fmt.Sprintf("%d containers, %d env vars, %s of JSON with managedFields", ps.Containers, ps.EnvVars, bytesize(float64(ps.PodBytes)))
		}
	}
	return name
}

// arm returns the run of the named arm.
func (c *Creation) arm(name string) (ArmRun, bool) {
	if c == nil {
		return ArmRun{}, false
	}
	for _, a := range c.Arms {
		if a.Arm == name {
			return a, true
		}
	}
	return ArmRun{}, false
}

// roundRatios are a's round rates over base's, round by round.
func roundRatios(a, base ArmRun) []float64 {
	var out []float64
	for i := range min(len(a.RoundPodsPerSec), len(base.RoundPodsPerSec)) {
		if base.RoundPodsPerSec[i] > 0 {
			out = append(out, a.RoundPodsPerSec[i]/base.RoundPodsPerSec[i])
		}
	}
	return out
}

// roundP99Ratios are a's round p99s over base's, round by round.
func roundP99Ratios(a, base ArmRun) []float64 {
	var out []float64
	for i := range min(len(a.RoundP99), len(base.RoundP99)) {
		if base.RoundP99[i] > 0 {
			out = append(out, a.RoundP99[i]/base.RoundP99[i])
		}
	}
	return out
}

// joinRatios lists ratios as "0.98×, 1.02×".
func joinRatios(rs []float64) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = num(r) + "×"
	}
	return strings.Join(out, ", ")
}

// spread is (max - min) / median of vs, and its min and max.
func spread(vs []float64) (rel, lo, hi float64) {
	if len(vs) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	if med == 0 {
		return 0, s[0], s[len(s)-1]
	}
	return (s[len(s)-1] - s[0]) / med, s[0], s[len(s)-1]
}

func rangeOf(vs []float64, f func(float64) string) string {
	_, lo, hi := spread(vs)
	if len(vs) == 0 {
		return "–"
	}
	return f(lo) + "–" + f(hi)
}

// cpuTotal adds the processes' CPU in the order of their names: a sum in
// map order differs in the last bit between calls, enough to flip a
// rounded figure (3.59 or 3.60) from one rendering to the next.
func (a ArmRun) cpuTotal() float64 {
	t := 0.0
	for _, k := range slices.Sorted(maps.Keys(a.CPUMsPerPod)) {
		t += a.CPUMsPerPod[k]
	}
	return t
}

// Summary is the side-by-side part of the report for the terminal: the
// targets, the load runs and Pod creation.
func (r *Results) Summary() string {
	md := r.Markdown()
	var keep []string
	on := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "## ") {
			on = strings.HasPrefix(line, "## Targets") || strings.HasPrefix(line, "## 1.") || strings.HasPrefix(line, "## 3.") || strings.HasPrefix(line, "## 4.") || strings.HasPrefix(line, "## 5.")
		}
		if on && (line == "" || strings.HasPrefix(line, "|") || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "**Spread.**") ||
			strings.HasPrefix(line, "**graceguard beside the native policies**")) {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}
