package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/graceguard/graceguard/internal/fixture"
	"github.com/graceguard/graceguard/pkg/webhook"
	"github.com/graceguard/graceguard/test/harness/apiserver"
	"github.com/graceguard/graceguard/test/harness/proc"
)

// Options configure a run; cmd/bench binds them to flags.
type Options struct {
	// Root is the module's root directory.
	Root string
	// Assets holds kube-apiserver and etcd (KUBEBUILDER_ASSETS).
	Assets string
	// OutDir receives benchmarks.md, benchmarks.json and
	// benchmarks-latency.svg; "" writes nothing.
	OutDir string
	// BenchTime and BenchCount are go test's -benchtime and -count; the
	// median repetition is reported.
	BenchTime  string
	BenchCount int
	// Rates are the offered rates (requests/s) of the load runs; a
	// max-throughput run with MaxWorkers workers follows them.
	Rates      []int
	MaxWorkers int
	// InFlight caps the requests in flight of the fixed-rate runs.
	InFlight int
	Load     time.Duration
	Warmup   time.Duration
	// Pods are created through the API server in every arm (arms()):
	// Rounds rounds of PodsPerRound Pods per arm by Clients concurrent
	// clients; then SerialPods per arm of a few arms by one client.
	Rounds, PodsPerRound, Clients, SerialPods int
	// Arms limits the creation phase to these arms (development); empty:
	// every arm.
	Arms []string
	// NamespaceLevels are the numbers of namespaces in the cluster at which
	// the lookup and the webhook are measured, at NamespaceRate for
	// NamespaceLoad.
	NamespaceLevels []int
	NamespaceRate   int
	NamespaceLoad   time.Duration
	// ObserverPods treated and ObserverUntreated untreated Pods are in the
	// cluster of the observer phase, the treated ones owned by
	// ObserverWorkloads Deployments; then treated Pods are deleted at
	// ObserverRate per second for ObserverChurn.
	ObserverPods, ObserverUntreated, ObserverWorkloads, ObserverRate int
	// ObserverClients create the Pods and make the deletions.
	ObserverClients int
	ObserverChurn   time.Duration
	// WaitLoad, if positive, waits up to WaitTimeout for the 1-minute load
	// average to drop below it before measuring anything.
	WaitLoad    float64
	WaitTimeout time.Duration
	// HeldCreators are the concurrent creators of the cpu-held phase, each
	// cell HeldWarmup (unmeasured) then HeldDuration; HeldMillicores the
	// CPU request it holds the webhook to (0: the chart's); HeldBefore a
	// git revision whose webhook is measured beside this checkout's
	// ("": none).
	HeldCreators             []int
	HeldWarmup, HeldDuration time.Duration
	HeldMillicores           int
	HeldBefore               string
	// HeldRounds repeats every cell, round after round; the goodput goal
	// is judged on the median of the rounds' ratios, since one round's
	// ratio varies more from run to run than the goal's margin.
	HeldRounds int
	// HeldLevels replace the phase's CPU settings (millicores, 0:
	// unlimited) while developing; the targets need the default ones.
	HeldLevels []int
	// Skip phases (development): "go", "load", "create", "namespaces",
	// "observer", "cpu-held". Phases, when set, runs only these.
	Skip   []string
	Phases []string
	// Log receives progress.
	Log io.Writer
}

// Phases are the phases a run can be made of, in the order it runs them.
var Phases = []string{"go", "load", "create", "namespaces", "observer", PhaseCPUHeld}

func (o Options) skip(phase string) bool {
	return slices.Contains(o.Skip, phase) || len(o.Phases) > 0 && !slices.Contains(o.Phases, phase)
}

// merging: the run measures the cpu-held phase alone, and its section
// replaces that of the results already in OutDir (a phase that records
// its own run and machine load), the rest kept as they were measured.
func (o Options) merging() bool {
	return o.OutDir != "" && len(o.Phases) == 1 && o.Phases[0] == PhaseCPUHeld
}

// Render rewrites the documents from recorded results (a benchmarks.json)
// without measuring anything: for changes to how results are presented.
func Render(results, outDir string) error {
	b, err := os.ReadFile(results)
	if err != nil {
		return err
	}
	r := &Results{}
	if err := json.Unmarshal(b, r); err != nil {
		return fmt.Errorf("%s: %w", results, err)
	}
	r.Targets = evaluate(r)
	return r.write(outDir)
}

// Run measures everything and writes the documents. It returns the results
// even when a phase failed (the failure is in Problems, and the error).
func Run(ctx context.Context, o Options) (*Results, error) {
	start := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(o.Log, "[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	r := &Results{Started: start.UTC().Truncate(time.Second), Settings: Settings{
		BenchTime: o.BenchTime, BenchCount: o.BenchCount, Rates: o.Rates, LoadSeconds: o.Load.Seconds(), WarmupSeconds: o.Warmup.Seconds(),
		MaxWorkers: o.MaxWorkers, InFlight: o.InFlight, Rounds: o.Rounds, PodsPerRound: o.PodsPerRound, Clients: o.Clients, SerialPods: o.SerialPods, NamespaceLevels: o.NamespaceLevels,
		NamespaceRate: o.NamespaceRate, NamespaceSeconds: o.NamespaceLoad.Seconds(),
		ObserverPods: o.ObserverPods, ObserverUntreated: o.ObserverUntreated, ObserverWorkloads: o.ObserverWorkloads,
		ObserverRate: o.ObserverRate, ObserverSeconds: o.ObserverChurn.Seconds(),
	}}
	r.Machine = Machine{Host: proc.ThisHost()}
	if o.WaitLoad > 0 {
		waited := waitForLoad(ctx, o.WaitLoad, o.WaitTimeout, logf)
		r.Machine.WaitedForLoadSeconds = waited.Seconds()
	}
	r.Machine.LoadAvgStart, _ = proc.LoadAvg()
	if r.Machine.LoadAvgStart[0] > float64(r.Machine.NProc)*0.75 {
		r.caveat("the 1-minute load average was %.2f at the start on %d CPUs: other work shared the machine, so latencies and throughput are pessimistic",
			r.Machine.LoadAvgStart[0], r.Machine.NProc)
	}
	logf("machine: %d CPUs (%s), %s, load average %.2f %.2f %.2f",
		r.Machine.NProc, r.Machine.CPUModel, r.Machine.GoVersion, r.Machine.LoadAvgStart[0], r.Machine.LoadAvgStart[1], r.Machine.LoadAvgStart[2])
	r.Pods = podSizes()

	if !o.skip("go") {
		logf("Go benchmarks (-benchtime %s -count %d): %s", o.BenchTime, o.BenchCount, strings.Join(goBenchPackages, " "))
		bs, err := runGoBench(ctx, o.Root, o.BenchTime, o.BenchCount, prefixWriter(o.Log, "    go: "))
		r.GoBench = bs
		if err != nil {
			r.problem("Go benchmarks: %v", err)
		}
	}

	if !(o.skip("load") && o.skip("create") && o.skip("namespaces") && o.skip("observer")) {
		if err := r.cluster(ctx, o, logf); err != nil {
			r.problem("%v", err)
		}
	}

	if !o.skip(PhaseCPUHeld) {
		if err := r.cpuHeld(ctx, o, logf); err != nil {
			r.problem("cpu-held: %v", err)
		}
	}

	r.Machine.LoadAvgEnd, _ = proc.LoadAvg()
	r.Seconds = time.Since(start).Seconds()
	r.Targets = evaluate(r)
	if o.merging() {
		if len(r.Problems) > 0 {
			return r, errors.New(strings.Join(r.Problems, "; "))
		}
		earlier := &Results{}
		b, err := os.ReadFile(filepath.Join(o.OutDir, docJSON))
		if err != nil {
			return r, fmt.Errorf("-phases %s merges into %s: %w", PhaseCPUHeld, filepath.Join(o.OutDir, docJSON), err)
		}
		if err := json.Unmarshal(b, earlier); err != nil {
			return r, err
		}
		earlier.CPUHeld = r.CPUHeld
		earlier.Targets = evaluate(earlier)
		r = earlier
	}
	if ctx.Err() != nil {
		// An interrupted run measured only part of what the documents
		// state: they keep the last whole run.
		return r, fmt.Errorf("interrupted (%w): the documents in %q are left as they were", ctx.Err(), o.OutDir)
	}
	if o.OutDir != "" {
		if err := r.write(o.OutDir); err != nil {
			return r, err
		}
		logf("wrote %s", strings.Join([]string{
			filepath.Join(o.OutDir, docMarkdown), filepath.Join(o.OutDir, docJSON), filepath.Join(o.OutDir, docSVG)}, ", "))
	}
	if len(r.Problems) > 0 {
		return r, errors.New(strings.Join(r.Problems, "; "))
	}
	return r, ctx.Err()
}

func (r *Results) problem(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

func (r *Results) caveat(format string, args ...any) {
	r.Caveats = append(r.Caveats, fmt.Sprintf(format, args...))
}

// cluster runs the phases that need the API server and the binaries.
func (r *Results) cluster(ctx context.Context, o Options, logf func(string, ...any)) (err error) {
	dir, err := os.MkdirTemp("", "graceguard-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logf("building cmd/webhook and the no-op baseline")
	webhookBin, noopBin, err := buildBinaries(ctx, o.Root, dir, prefixWriter(o.Log, "    build: "))
	if err != nil {
		return err
	}
	if o.Assets == "" {
		return errors.New("no kube-apiserver and etcd: set KUBEBUILDER_ASSETS (make bench runs hack/envtest-assets.sh)")
	}
	logf("starting kube-apiserver, etcd, graceguard (%s) and the baseline", webhookBin)
	c, err := startCluster(ctx, o.Assets, dir, webhookBin, noopBin)
	if err != nil {
		return fmt.Errorf("starting the cluster: %w", err)
	}
	defer func() {
		if serr := c.Stop(); serr != nil {
			r.problem("stopping: %v", serr)
		}
	}()
	r.Machine.KubeAPIServer = c.Version
	logf("kube-apiserver %s, graceguard pid %d, baseline pid %d", c.Version, c.Webhook.PID(), c.noop.PID())

	if r.ManagedFields, err = c.checkManagedFields(ctx); err != nil {
		r.problem("comparing managedFields with the API server's: %v", err)
	}

	body := fixture.Review(fixture.TypicalPod())
	gg, err := newTarget(ServerGraceguard, c.WebhookURL+webhook.PathMutatePod, c.Webhook, body, c.CA, true)
	if err != nil {
		return err
	}
	base, err := newTarget(ServerBaseline, c.noopURL+webhook.PathMutatePod, c.noop, body, c.CA, false)
	if err != nil {
		return err
	}

	if !o.skip("load") {
		specs := make([]loadSpec, 0, len(o.Rates)+1)
		for _, rate := range o.Rates {
			specs = append(specs, loadSpec{rate: rate, inFlight: o.InFlight, warmup: o.Warmup, duration: o.Load})
		}
		specs = append(specs, loadSpec{rate: 0, workers: o.MaxWorkers, warmup: o.Warmup, duration: o.Load})
		for i, s := range specs {
			// Fresh processes for every rate: no run inherits the heap or
			// the backlog of an earlier (perhaps overloaded) one.
			if err := c.restart(ctx); err != nil {
				return fmt.Errorf("restarting the servers: %w", err)
			}
			// Alternate who goes first, so neither always runs on a
			// machine the other just warmed (or heated).
			pair := []*target{gg, base}
			if i%2 == 1 {
				pair = []*target{base, gg}
			}
			for _, t := range pair {
				lr, err := t.run(ctx, s)
				if err != nil {
					return fmt.Errorf("load run %s at %s: %w", t.name, rateName(s.rate, s.workers), err)
				}
				logf("load %-10s %-16s %8.0f req/s  p50 %6.2f ms  p99 %7.2f ms  p99.9 %7.2f ms  errors %d  CPU %.2f cores %.0f µs/req  peak RSS %.1f MiB",
					t.name, rateName(s.rate, s.workers), lr.Throughput, lr.Latency.P50, lr.Latency.P99, lr.Latency.P999, lr.Errors,
					lr.Cores, lr.CPUPerRequestUs, lr.PeakRSSMiB)
				r.Load = append(r.Load, lr)
				for _, p := range []*apiserver.Process{c.Webhook, c.noop} {
					if err := p.Exited(); err != nil {
						return err
					}
				}
			}
		}
	}

	if !o.skip("create") {
		if err := c.restart(ctx); err != nil {
			return fmt.Errorf("restarting the servers: %w", err)
		}
		if err := c.installArms(ctx); err != nil {
			r.problem("Pod creation: setting up the arms: %v", err)
		} else {
			var all []arm
			for _, a := range arms() {
				if len(o.Arms) == 0 || slices.Contains(o.Arms, a.name) {
					all = append(all, a)
				}
			}
			logf("creating Pods through the API server in %d arms: %d rounds of %d Pods per arm, %d clients", len(all), o.Rounds, o.PodsPerRound, o.Clients)
			cr, err := c.measureCreation(ctx, all, o, logf)
			if err != nil {
				r.problem("Pod creation: %v", err)
			}
			r.Creation = cr
		}
	}

	if !o.skip("namespaces") {
		if err := c.restart(ctx); err != nil {
			return fmt.Errorf("restarting the servers: %w", err)
		}
		if err := r.namespaces(ctx, o, c, gg, logf); err != nil {
			r.problem("namespace sweep: %v", err)
		}
	}

	if !o.skip("observer") {
		if err := c.restart(ctx); err != nil {
			return fmt.Errorf("restarting the servers: %w", err)
		}
		if err := r.observerPhase(ctx, o, c, webhookBin, dir, logf); err != nil {
			r.problem("observer: %v", err)
		}
	}
	return nil
}

func (r *Results) namespaces(ctx context.Context, o Options, c *cluster, gg *target, logf func(string, ...any)) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	nc, err := c.startNamespaceCache(cctx)
	if err != nil {
		return err
	}
	for _, level := range o.NamespaceLevels {
		have, err := nc.count(ctx)
		if err != nil {
			return err
		}
		if have < level {
			t0 := time.Now()
			if err := c.growNamespaces(ctx, have, level); err != nil {
				return err
			}
			if err := nc.waitFor(ctx, level); err != nil {
				return err
			}
			logf("created %d namespaces in %.1fs", level-have, time.Since(t0).Seconds())
			// graceguard's own informer receives the same watch events.
			time.Sleep(time.Second)
		}
		n, _ := nc.count(ctx)
		at := NamespaceAt{Namespaces: n}
		br, err := nc.benchLookup(ctx)
		if err != nil {
			return err
		}
		at.LookupNsPerOp = float64(br.T.Nanoseconds()) / float64(br.N)
		at.LookupAllocsPerOp, at.LookupBytesPerOp = br.AllocsPerOp(), br.AllocedBytesPerOp()
		runtime.GC()
		var mem runtime.MemStats
		runtime.ReadMemStats(&mem)
		at.HeapMiB = proc.MiB(int64(mem.HeapAlloc))
		lr, err := gg.run(ctx, loadSpec{rate: o.NamespaceRate, inFlight: o.InFlight, warmup: o.Warmup, duration: o.NamespaceLoad})
		if err != nil {
			return err
		}
		lr.Namespaces = n
		at.Load = &lr
		r.Namespaces = append(r.Namespaces, at)
		logf("%5d namespaces: lookup %.0f ns/op %d allocs/op; webhook at %d req/s p50 %.2f ms p99 %.2f ms, %.0f µs CPU/req, RSS %.1f MiB (peak %.1f)",
			n, at.LookupNsPerOp, at.LookupAllocsPerOp, o.NamespaceRate, lr.Latency.P50, lr.Latency.P99, lr.CPUPerRequestUs, lr.RSSMiB, lr.PeakRSSMiB)
		if err := c.Webhook.Exited(); err != nil {
			return err
		}
	}
	return nil
}

func rateName(rate, workers int) string {
	if rate == 0 {
		return fmt.Sprintf("max (%d workers)", workers)
	}
	return fmt.Sprintf("%d req/s", rate)
}

// waitForLoad polls the 1-minute load average until it is below limit.
func waitForLoad(ctx context.Context, limit float64, timeout time.Duration, logf func(string, ...any)) time.Duration {
	start := time.Now()
	for {
		l, err := proc.LoadAvg()
		if err != nil || l[0] < limit {
			return time.Since(start)
		}
		if time.Since(start) >= timeout {
			logf("load average still %.2f after %s; measuring anyway", l[0], timeout)
			return time.Since(start)
		}
		logf("load average %.2f >= %.2f; waiting (up to %s)", l[0], limit, timeout)
		select {
		case <-ctx.Done():
			return time.Since(start)
		case <-time.After(15 * time.Second):
		}
	}
}

func podSizes() []PodSize {
	var out []PodSize
	for _, p := range fixture.Pods {
		pod := p.Pod()
		env := 0
		for _, c := range pod.Spec.Containers {
			env += len(c.Env)
		}
		ps := PodSize{Name: p.Name, Containers: len(pod.Spec.Containers), EnvVars: env,
			PodBytes: len(fixture.JSON(pod)), ReviewBytes: len(fixture.Review(pod))}
		pod.ManagedFields = nil
		ps.SpecBytes = len(fixture.JSON(pod))
		out = append(out, ps)
	}
	return out
}

// prefixWriter prefixes every line written to w.
func prefixWriter(w io.Writer, prefix string) io.Writer {
	return &prefixed{w: w, prefix: prefix, bol: true}
}

type prefixed struct {
	w      io.Writer
	prefix string
	bol    bool
}

func (p *prefixed) Write(b []byte) (int, error) {
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line == "" {
			continue
		}
		if p.bol {
			if _, err := io.WriteString(p.w, p.prefix); err != nil {
				return 0, err
			}
		}
		if _, err := io.WriteString(p.w, line); err != nil {
			return 0, err
		}
		p.bol = strings.HasSuffix(line, "\n")
	}
	return len(b), nil
}
