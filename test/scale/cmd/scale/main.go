// Command scale runs graceguard's scale harness and writes docs/scale.md
// and docs/scale.json; `make scale SCALE=smoke|full` runs it. See package
// test/scale for what it builds and measures.
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
	"strconv"
	"strings"
	"syscall"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/graceguard/graceguard/test/harness/repo"
	"github.com/graceguard/graceguard/test/scale"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	name := scenarioArg(args)
	o, ok := scale.Scenarios[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "-scale: %q: must be one of %s\n", name, strings.Join(scale.ScenarioNames(), ", "))
		return 2
	}
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.String("scale", name, "the scenario whose sizes are the defaults of the flags below: "+strings.Join(scale.ScenarioNames(), ", "))
	out := fs.String("out", "docs", "directory for scale.md and scale.json, relative to the repository root (\"\" writes nothing)")
	render := fs.String("render", "", "only rewrite the documents in -out from this scale.json (measures nothing)")
	fs.StringVar(&o.Kwok, "kwok", "", "kwok binary (default: bin/kwok-<the version test/go.mod pins>, built once)")
	fs.IntVar(&o.Nodes, "nodes", o.Nodes, "simulated nodes")
	fs.IntVar(&o.PodsPerNode, "pods-per-node", o.PodsPerNode, "Pods each node has room for")
	fs.IntVar(&o.Namespaces, "namespaces", o.Namespaces, "opted-in namespaces holding the Deployments")
	fs.IntVar(&o.DeploymentsPerNamespace, "deployments-per-namespace", o.DeploymentsPerNamespace, "Deployments in each of them")
	fs.IntVar(&o.Replicas, "replicas", o.Replicas, "Pods of each Deployment")
	fs.IntVar(&o.EmptyNamespaces, "empty-namespaces", o.EmptyNamespaces, "opted-in namespaces holding nothing (what a namespace costs the caches)")
	fs.IntVar(&o.JobParallelism, "job-parallelism", o.JobParallelism, "Pods of the Job fan-out, created at once in each arm (0: none)")
	fs.IntVar(&o.JobRunSeconds, "job-run-seconds", o.JobRunSeconds, "how long each Job Pod runs before it completes")
	fs.IntVar(&o.ScaleOut, "scale-out", o.ScaleOut, "Pods a Deployment is scaled out to from 0 in each arm, after the Job (0: none)")
	fs.Func("burst-replicas", fmt.Sprintf("graceguard's webhook replicas in its burst arms, one arm each, comma-separated, each 1 to %d (default %s)", scale.MaxReplicas, intList(o.BurstReplicas)), func(v string) error {
		var err error
		o.BurstReplicas, err = parseInts(v)
		return err
	})
	fs.IntVar(&o.ClientPods, "client-pods", o.ClientPods, "bare Pods created by the clients in each arm (0: none)")
	fs.IntVar(&o.Clients, "clients", o.Clients, "concurrent clients creating the bare Pods (and the nodes, namespaces and Deployments)")
	fs.Float64Var(&o.RestartFraction, "restart-fraction", o.RestartFraction, "fraction of the Deployments the churn restarts")
	fs.IntVar(&o.Deletions, "deletions", o.Deletions, "Pods of the other Deployments the churn deletes")
	fs.BoolVar(&o.Failover, "failover", o.Failover, "repeat the churn twice with the observer's leader stopped 5s in (SIGTERM, then SIGKILL) and a standby taking over")
	fs.IntVar(&o.DrainSeconds, "drain-seconds", o.DrainSeconds, "how long an app drains after SIGTERM")
	fs.IntVar(&o.SlowDeployments, "slow-deployments", o.SlowDeployments, "Deployments per namespace that drain -slow-drain-seconds instead (past the grace: killed)")
	fs.IntVar(&o.SlowDrainSeconds, "slow-drain-seconds", o.SlowDrainSeconds, "their drain")
	fs.StringVar(&o.MaxWork, "max-work", o.MaxWork, "graceguard.io/max-work of the workloads")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "longest wait of any step")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	root, err := repo.Root()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	o.Root, o.Log = root, os.Stderr
	switch {
	case *out == "":
	case filepath.IsAbs(*out):
		o.OutDir = *out
	default:
		o.OutDir = filepath.Join(root, *out)
	}
	if *render != "" {
		if err := scale.Render(*render, o.OutDir); err != nil {
			fmt.Fprintf(os.Stderr, "-render: %v\n", err)
			return 1
		}
		return 0
	}
	if err := o.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if o.Assets, err = assets(root); err != nil {
		fmt.Fprintf(os.Stderr, "kube-apiserver, etcd, kube-controller-manager and kube-scheduler: %v\n", err)
		return 1
	}
	// envtest logs through controller-runtime's logger; only its errors matter here.
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := scale.Run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "scale: %v\n", err)
		return 1
	}
	return 0
}

// parseInts reads a comma-separated list of whole numbers.
func parseInts(v string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q: want whole numbers separated by commas, such as 2,3", v)
		}
		out = append(out, n)
	}
	return out, nil
}

func intList(vs []int) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

// scenarioArg is the value of -scale among args (default smoke), read
// before the other flags, whose defaults are its sizes.
func scenarioArg(args []string) string {
	for i, a := range args {
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if v, ok := strings.CutPrefix(a, "scale="); ok {
			return v
		}
		if a == "scale" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return "smoke"
}

// assets is $KUBEBUILDER_ASSETS when it holds the controller manager and
// the scheduler too, else what hack/envtest-assets.sh provides.
func assets(root string) (string, error) {
	if a := os.Getenv("KUBEBUILDER_ASSETS"); a != "" {
		if _, err := os.Stat(filepath.Join(a, "kube-scheduler")); err == nil {
			return a, nil
		}
	}
	cmd := exec.Command(filepath.Join(root, "hack", "envtest-assets.sh"), "kube-controller-manager", "kube-scheduler")
	cmd.Dir, cmd.Stderr = root, os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/envtest-assets.sh kube-controller-manager kube-scheduler: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
