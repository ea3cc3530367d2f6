// Command bench runs graceguard's benchmarks and writes docs/benchmarks.md,
// docs/benchmarks.json and docs/benchmarks-latency.svg; `make bench` runs
// it. See package test/bench for what it measures.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/graceguard/graceguard/test/bench"
)

func main() {
	os.Exit(run())
}

func run() int {
	o := bench.Options{Log: os.Stderr}
	out := flag.String("out", "docs", "directory for benchmarks.md, benchmarks.json and benchmarks-latency.svg, relative to the module root (\"\" writes nothing)")
	flag.StringVar(&o.BenchTime, "benchtime", "200ms", "go test -benchtime of the Go benchmarks")
	flag.IntVar(&o.BenchCount, "count", 3, "go test -count of the Go benchmarks; the median repetition is reported")
	rates := flag.String("rates", "500,1000,2000,3000", "offered rates of the load runs, requests/s; a max-throughput run follows")
	flag.IntVar(&o.MaxWorkers, "max-workers", 16, "workers of the max-throughput run (vegeta -rate=0 -max-workers)")
	flag.IntVar(&o.InFlight, "in-flight", 200, "most requests in flight in the fixed-rate runs (vegeta -max-workers; kube-apiserver's default --max-mutating-requests-inflight)")
	flag.DurationVar(&o.Load, "duration", 8*time.Second, "measured length of each load run")
	flag.DurationVar(&o.Warmup, "warmup", time.Second, "unmeasured warm-up before each load run, at its rate")
	flag.IntVar(&o.Rounds, "rounds", 6, "rounds of Pod creation through the API server; each creates -pods Pods in every arm, the arms interleaved")
	flag.IntVar(&o.PodsPerRound, "pods", 1000, "Pods per arm per round")
	flag.IntVar(&o.Clients, "clients", 16, "concurrent clients creating Pods")
	flag.IntVar(&o.SerialPods, "serial-pods", 100, "Pods then created by one client in each of the arms none, noop-one-call and graceguard (0: none)")
	levels := flag.String("namespaces", "10,100,1000,10000", "numbers of namespaces in the cluster at which the namespace cost is measured")
	flag.IntVar(&o.NamespaceRate, "namespace-rate", 500, "offered rate of the webhook runs of the namespace sweep, requests/s")
	flag.DurationVar(&o.NamespaceLoad, "namespace-duration", 4*time.Second, "measured length of each namespace-sweep webhook run")
	flag.IntVar(&o.ObserverPods, "observer-pods", 10000, "treated Pods in the cluster of the observer phase")
	flag.IntVar(&o.ObserverUntreated, "observer-untreated", 10000, "untreated Pods beside them (a namespace that did not opt in)")
	flag.IntVar(&o.ObserverWorkloads, "observer-workloads", 100, "Deployments owning the treated Pods (through a ReplicaSet each)")
	flag.IntVar(&o.ObserverRate, "observer-rate", 50, "treated Pods deleted (and replaced) per second")
	flag.IntVar(&o.ObserverClients, "observer-clients", 48, "clients creating the observer phase's Pods and making its deletions")
	flag.DurationVar(&o.ObserverChurn, "observer-duration", 60*time.Second, "how long treated Pods are deleted at -observer-rate")
	flag.Float64Var(&o.WaitLoad, "wait-load", 0, "if > 0, first wait until the 1-minute load average is below this")
	flag.DurationVar(&o.WaitTimeout, "wait-timeout", 10*time.Minute, "longest wait for -wait-load; then measure anyway (and say so)")
	render := flag.String("render", "", "only rewrite the documents in -out from this benchmarks.json (measures nothing)")
	armList := flag.String("arms", "", "comma-separated arms of the Pod creation phase to run (development; default all)")
	skip := flag.String("skip", "", "comma-separated phases to leave out while developing: "+strings.Join(bench.Phases, ", "))
	phases := flag.String("phases", "", "comma-separated phases to run, the others left out; -phases "+bench.PhaseCPUHeld+
		" alone replaces that section of the benchmarks.json already in -out and rewrites the documents from it")
	heldCreators := flag.String("held-creators", "16,64", "concurrent Pod creators of the cpu-held phase")
	flag.DurationVar(&o.HeldDuration, "held-duration", 20*time.Second, "measured length of each cell of the cpu-held phase")
	flag.DurationVar(&o.HeldWarmup, "held-warmup", 10*time.Second, "unmeasured creation at the start of each cell of the cpu-held phase (the API server opens its connections, the queue fills), without a pause before the measured part")
	flag.IntVar(&o.HeldMillicores, "held-cpu", 0, "CPU request (millicores) the cpu-held phase holds the webhook to; 0: the chart's resources.requests.cpu")
	heldLevels := flag.String("held-levels", "", "development: the CPU settings (millicores, 0 unlimited) of the cpu-held phase instead of unlimited, the request and 40% of it")
	flag.IntVar(&o.HeldRounds, "held-rounds", 3, "rounds of the cpu-held phase, each measuring every cell once; its goodput is judged on the median of the rounds' ratios")
	flag.StringVar(&o.HeldBefore, "held-before", "", "a git revision (e.g. main) whose webhook and chart the cpu-held phase measures beside this checkout's, cell by cell")
	flag.Parse()

	var err error
	if o.Rates, err = ints(*rates); err != nil {
		fmt.Fprintf(os.Stderr, "-rates: %v\n", err)
		return 2
	}
	if o.NamespaceLevels, err = ints(*levels); err != nil {
		fmt.Fprintf(os.Stderr, "-namespaces: %v\n", err)
		return 2
	}
	if *skip != "" {
		o.Skip = strings.Split(*skip, ",")
	}
	if *phases != "" {
		o.Phases = strings.Split(*phases, ",")
	}
	for _, p := range append(slices.Clone(o.Skip), o.Phases...) {
		if !slices.Contains(bench.Phases, p) {
			fmt.Fprintf(os.Stderr, "-skip, -phases: %q is not a phase; want %s\n", p, strings.Join(bench.Phases, ", "))
			return 2
		}
	}
	if o.HeldCreators, err = ints(*heldCreators); err != nil {
		fmt.Fprintf(os.Stderr, "-held-creators: %v\n", err)
		return 2
	}
	for _, f := range strings.Split(*heldLevels, ",") {
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			fmt.Fprintf(os.Stderr, "-held-levels: %q is not 0 or a number of millicores\n", f)
			return 2
		}
		o.HeldLevels = append(o.HeldLevels, n)
	}
	if o.HeldRounds < 1 || o.HeldRounds > 9 {
		fmt.Fprintf(os.Stderr, "-held-rounds=%d: want 1 to 9 (each round takes about 8 minutes)\n", o.HeldRounds)
		return 2
	}
	if o.HeldMillicores < 0 {
		fmt.Fprintf(os.Stderr, "-held-cpu=%d: want 0 (the chart's request) or more millicores\n", o.HeldMillicores)
		return 2
	}
	if *armList != "" {
		o.Arms = strings.Split(*armList, ",")
	}
	if o.Root, err = moduleRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	switch {
	case *out == "":
	case filepath.IsAbs(*out):
		o.OutDir = *out
	default:
		o.OutDir = filepath.Join(o.Root, *out)
	}
	if *render != "" {
		if err := bench.Render(*render, o.OutDir); err != nil {
			fmt.Fprintf(os.Stderr, "-render: %v\n", err)
			return 1
		}
		return 0
	}
	if o.Assets, err = assets(o.Root); err != nil {
		fmt.Fprintf(os.Stderr, "kube-apiserver and etcd: %v\n", err)
	}

	// envtest logs through controller-runtime's logger; only its errors matter here.
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := bench.Run(ctx, o)
	if r != nil {
		fmt.Println(r.Summary())
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	return 0
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// moduleRoot is the directory of graceguard's go.mod, at or above the
// working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/graceguard/graceguard\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run from inside the graceguard module (no go.mod of github.com/graceguard/graceguard found above the working directory)")
		}
		dir = parent
	}
}

// assets is $KUBEBUILDER_ASSETS, else what hack/envtest-assets.sh provides.
func assets(root string) (string, error) {
	if a := os.Getenv("KUBEBUILDER_ASSETS"); a != "" {
		return a, nil
	}
	cmd := exec.Command(filepath.Join(root, "hack", "envtest-assets.sh"))
	cmd.Dir, cmd.Stderr = root, os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/envtest-assets.sh: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
