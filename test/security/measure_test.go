package security

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/graceguard/graceguard/pkg/webhook"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// result is what one class cost the webhook in one round.
type result struct {
	Class string
	Round int
	// Usage is the cgroup's peak charge (memory.max_usage_in_bytes: anon,
	// page cache and kernel memory); Anon its peak anonymous memory and
	// RSS the webhook's peak resident set (VmHWM), both sampled or reset
	// at the class's start.
	Usage, Anon, RSS int64
	// Kernel is the cgroup's peak kernel memory (memory.kmem.max_usage_in_bytes).
	Kernel int64
	// StartAnon is the anonymous memory at the class's start (what the
	// runtime had not returned yet); Heap the most Go heap in use.
	StartAnon, Heap int64
	// Alloc is what the webhook allocated (go_memstats_alloc_bytes_total),
	// GCs its garbage collections, Shed the reviews it answered 429.
	Alloc, GCs, Shed int64
	// OOMKills is the OOM killer's count (memory.failcnt is not kept by
	// this machine's kernel for v1: it stays 0 at the limit).
	OOMKills int64
	// Limit is the cgroup's memory limit.
	Limit    int64
	Restarts int
	Creates  creates
	Load     string
	Seconds  float64
}

func (r result) String() string {
	return fmt.Sprintf("%s: anon %.1f MiB at the start; peak usage %.1f MiB, kernel %.1f MiB, anon %.1f MiB, RSS %.0f MiB, heap %.0f MiB; allocated %.0f MiB in %d GCs; %d shed; OOM kills %d, restarts %d; ordinary Pods %d of %d admitted, p99 %s (%s); %.0fs\n%s",
		r.Class, mib(r.StartAnon), mib(r.Usage), mib(r.Kernel), mib(r.Anon), mib(r.RSS), mib(r.Heap), mib(r.Alloc), r.GCs, r.Shed, r.OOMKills, r.Restarts,
		r.Creates.ok, r.Creates.n, r.Creates.p99.Round(time.Millisecond), r.Creates.firstErr, r.Seconds, r.Load)
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// counters are the webhook's metrics a class is measured by.
type counters struct{ alloc, gcs, shed, heap float64 }

func (e *env) scrape(ctx context.Context) (counters, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.metricsURL, nil)
	if err != nil {
		return counters{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return counters{}, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return counters{}, err
	}
	var c counters
	if mf := mfs["go_memstats_alloc_bytes_total"]; mf != nil && len(mf.Metric) > 0 {
		c.alloc = mf.Metric[0].GetCounter().GetValue()
	}
	if mf := mfs["go_memstats_heap_inuse_bytes"]; mf != nil && len(mf.Metric) > 0 {
		c.heap = mf.Metric[0].GetGauge().GetValue()
	}
	if mf := mfs["go_gc_duration_seconds"]; mf != nil && len(mf.Metric) > 0 {
		c.gcs = float64(mf.Metric[0].GetSummary().GetSampleCount())
	}
	if mf := mfs["graceguard_admission_decisions_total"]; mf != nil {
		for _, m := range mf.Metric {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == string(webhook.ReasonOverloaded) {
					c.shed += m.GetCounter().GetValue()
				}
			}
		}
	}
	return c, nil
}

// scrapeAfter scrapes, retrying while a restarted webhook comes up.
func (e *env) scrapeAfter(ctx context.Context) counters {
	for range 60 {
		if c, err := e.scrape(ctx); err == nil {
			return c
		}
		time.Sleep(time.Second)
	}
	return counters{}
}

// delta is after-before, or after alone when the webhook restarted in
// between (its counters started over).
func delta(before, after float64) int64 {
	if after < before {
		return int64(after)
	}
	return int64(after - before)
}

// measure runs c with the cgroup's and the process's peaks reset, and
// returns what it cost.
func (e *env) measure(ctx context.Context, t *testing.T, c class) result {
	t.Helper()
	before := e.scrapeAfter(ctx)
	if err := e.cg.ResetPeak(); err != nil {
		t.Fatal(err)
	}
	if err := resetHWM(e.webhookPID()); err != nil {
		t.Fatal(err)
	}
	e.peakAnon.Store(0)
	e.peakRSS.Store(0)
	e.peakHeap.Store(int64(before.heap))
	startAnon := e.cg.Anon()
	ooms, restarts := e.cg.OOMKills(), e.restartCount()
	start := time.Now()
	load := c.run(ctx)
	end := time.Now()
	after := e.scrapeAfter(ctx)
	r := result{
		Class: c.name, Load: load, Seconds: end.Sub(start).Seconds(),
		Usage: e.cg.Peak(), Kernel: e.cg.KernelPeak(), Anon: e.peakAnon.Load(), StartAnon: startAnon, Heap: max(e.peakHeap.Load(), int64(after.heap)),
		RSS:   max(procStatus(e.webhookPID(), "VmHWM"), e.peakRSS.Load()),
		Alloc: delta(before.alloc, after.alloc), GCs: delta(before.gcs, after.gcs), Shed: delta(before.shed, after.shed),
		OOMKills: e.cg.OOMKills() - ooms, Limit: e.cg.Limit(),
		Restarts: e.restartCount() - restarts,
		Creates:  e.trickle.window(start, end),
	}
	if r.Restarts > 0 {
		e.mu.Lock()
		t.Logf("%s: the webhook restarted: %s", c.name, strings.Join(e.restarts[restarts:], "; "))
		e.mu.Unlock()
	}
	return r
}

// writeReport writes the table of results, each cell the range over the
// rounds, between the binary markers of path.
func writeReport(path string, e *env, results []result, rounds int, classTime time.Duration, loadStart string) error {
	var b strings.Builder
	limit := e.cg.Limit()
	fmt.Fprintf(&b, "Measured by `make security-report` on %s, load average %s at the start and %s at the end; "+
		"kube-apiserver and etcd %s (envtest) on the same machine. The webhook binary (`./cmd/webhook`, built as `make build` "+
		"builds it) runs in a cgroup v1 memory cgroup limited to the chart's `resources.limits.memory` (%.0f MiB, no swap), "+
		"with the chart's environment (%s) and flags, rendered from the chart (`%s`), beside the flags that connect it here. "+
		"Each class runs %s (the floods: until every connection is open, then 5 s; everything at once: %s), one after another on "+
		"the same process, %s; each cell is the range over the rounds. Peak charge is `memory.max_usage_in_bytes` (anonymous "+
		"memory, page cache and kernel memory, reset before each class), kernel `memory.kmem.max_usage_in_bytes` (its kernel part: sockets, slab, page tables), anon the most `memory.stat rss` (sampled every 10 ms), "+
		"RSS the webhook's VmHWM (reset before each class; code pages included); allocated is `go_memstats_alloc_bytes_total`; "+
		"OOM kills `memory.oom_control`. Throughout, "+
		"ordinary Pods (`fixture.TypicalPod`) are created through the API server five a second, one after another.\n\n",
		machine(), loadStart, loadAverage(), e.api.Version, mib(limit), strings.Join(e.envVars, ", "),
		strings.Join(e.args, " "), classTime, 2*classTime, plural(rounds, "round"))
	b.WriteString("| class | sent (last round) | peak charge | peak kernel | peak anon | peak RSS | allocated | GC cycles | 429s | OOM kills | restarts | ordinary Pods admitted | their p99 |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	var order []string
	byClass := map[string][]result{}
	for _, r := range results {
		if _, ok := byClass[r.Class]; !ok {
			order = append(order, r.Class)
		}
		byClass[r.Class] = append(byClass[r.Class], r)
	}
	for _, name := range order {
		rs := byClass[name]
		last := rs[len(rs)-1]
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", name, summary(last.Load),
			span(rs, func(r result) float64 { return mib(r.Usage) }, "%.0f MiB"),
			span(rs, func(r result) float64 { return mib(r.Kernel) }, "%.0f MiB"),
			span(rs, func(r result) float64 { return mib(r.Anon) }, "%.0f MiB"),
			span(rs, func(r result) float64 { return mib(r.RSS) }, "%.0f MiB"),
			span(rs, func(r result) float64 { return mib(r.Alloc) }, "%.0f MiB"),
			span(rs, func(r result) float64 { return float64(r.GCs) }, "%.0f"),
			span(rs, func(r result) float64 { return float64(r.Shed) }, "%.0f"),
			span(rs, func(r result) float64 { return float64(r.OOMKills) }, "%.0f"),
			span(rs, func(r result) float64 { return float64(r.Restarts) }, "%.0f"),
			span(rs, func(r result) float64 {
				if r.Creates.n == 0 {
					return 100
				}
				return 100 * float64(r.Creates.ok) / float64(r.Creates.n)
			}, "%.1f%%"),
			span(rs, func(r result) float64 { return float64(r.Creates.p99.Milliseconds()) }, "%.0f ms"))
	}
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	const begin, end = "<!-- binary:begin -->\n", "<!-- binary:end -->"
	i, j := bytes.Index(doc, []byte(begin)), bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %q ... %q section", path, begin, end)
	}
	out := append(append(append([]byte{}, doc[:i+len(begin)]...), b.String()...), doc[j:]...)
	return os.WriteFile(path, out, 0o644)
}

// plural is "1 round", "3 rounds".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// summary is a load's first line, its messages left to the log.
func summary(load string) string {
	var lines []string
	for l := range strings.SplitSeq(load, "\n") {
		if !strings.HasPrefix(l, "  ") {
			lines = append(lines, l)
		}
	}
	return strings.ReplaceAll(strings.Join(lines, "; "), "|", "/")
}

// span is the range of f over rs, "a" when they agree, "a–b" otherwise.
func span(rs []result, f func(result) float64, format string) string {
	var vs []float64
	for _, r := range rs {
		vs = append(vs, f(r))
	}
	lo, hi := slices.Min(vs), slices.Max(vs)
	if fmt.Sprintf(format, lo) == fmt.Sprintf(format, hi) {
		return fmt.Sprintf(format, lo)
	}
	return fmt.Sprintf(format, lo) + "–" + strings.TrimSpace(fmt.Sprintf(format, hi))
}
