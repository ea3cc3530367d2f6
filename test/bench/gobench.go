package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// goBenchPackages are the packages whose Go benchmarks the run includes.
var goBenchPackages = []string{"./pkg/mutate", "./pkg/webhook"}

// runGoBench runs the Go benchmarks (one `go test` invocation, -benchmem)
// in the module at root and parses their results. The raw output goes to
// log as it comes.
func runGoBench(ctx context.Context, root, benchTime string, count int, log io.Writer) ([]GoBench, error) {
	args := append([]string{"test", "-run", "^$", "-bench", ".", "-benchmem", "-count", strconv.Itoa(count), "-benchtime", benchTime}, goBenchPackages...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = os.Environ()
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, log)
	cmd.Stderr = io.MultiWriter(&out, log)
	fmt.Fprintf(log, "$ go %s\n", strings.Join(args, " "))
	err := cmd.Run()
	bs := medians(parseGoBench(&out))
	if err != nil {
		return bs, fmt.Errorf("go test -bench: %w", err)
	}
	return bs, nil
}

// medians folds the -count repetitions of each benchmark into the one with
// the median time, keeping every repetition's time: on a shared machine a
// single repetition can be hit by someone else's burst.
func medians(bs []GoBench) []GoBench {
	var order []string
	runs := map[string][]GoBench{}
	for _, b := range bs {
		k := b.Package + " " + b.Name
		if _, ok := runs[k]; !ok {
			order = append(order, k)
		}
		runs[k] = append(runs[k], b)
	}
	out := make([]GoBench, 0, len(order))
	for _, k := range order {
		rs := slices.Clone(runs[k])
		slices.SortFunc(rs, func(a, b GoBench) int { return cmp.Compare(a.NsPerOp, b.NsPerOp) })
		m := rs[(len(rs)-1)/2]
		for _, r := range runs[k] {
			m.NsPerOpRuns = append(m.NsPerOpRuns, r.NsPerOp)
		}
		out = append(out, m)
	}
	return out
}

// parseGoBench reads the standard benchmark format:
//
//	pkg: github.com/graceguard/graceguard/pkg/mutate
//	BenchmarkMutate/pod=huge-2   10000   26330 ns/op   65305 pod-bytes   10409 B/op   71 allocs/op
func parseGoBench(r io.Reader) []GoBench {
	var out []GoBench
	pkg := ""
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || len(f)%2 != 0 {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		b := GoBench{Package: pkg, Name: trimProcs(f[0]), Iterations: n}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch unit := f[i+1]; unit {
			case "ns/op":
				b.NsPerOp = v
			case "B/op":
				b.BytesPerOp = v
			case "allocs/op":
				b.AllocsPerOp = v
			case "MB/s":
				b.MBPerSec = v
			default:
				if b.Extra == nil {
					b.Extra = map[string]float64{}
				}
				b.Extra[unit] = v
			}
		}
		out = append(out, b)
	}
	return out
}

// trimProcs drops the -GOMAXPROCS suffix: BenchmarkX/y-2 -> BenchmarkX/y.
func trimProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return name
	}
	if _, err := strconv.Atoi(name[i+1:]); err != nil {
		return name
	}
	return name[:i]
}

// findBench returns the benchmark with this name (without the -N suffix).
func findBench(bs []GoBench, name string) (GoBench, bool) {
	for _, b := range bs {
		if b.Name == name {
			return b, true
		}
	}
	return GoBench{}, false
}
