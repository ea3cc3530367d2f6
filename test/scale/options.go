package scale

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Options configure a run; cmd/scale binds them to flags, starting from a
// Scenario.
type Options struct {
	// Scenario names the preset the sizes came from (smoke, full).
	Scenario string `json:"scenario"`
	// Nodes are simulated by kwok, each with room for PodsPerNode Pods.
	Nodes       int `json:"nodes"`
	PodsPerNode int `json:"podsPerNode"`
	// Namespaces opted in to graceguard hold the workloads:
	// DeploymentsPerNamespace Deployments of Replicas Pods each.
	Namespaces              int `json:"namespaces"`
	DeploymentsPerNamespace int `json:"deploymentsPerNamespace"`
	Replicas                int `json:"replicas"`
	// EmptyNamespaces more are opted in and hold nothing: what a namespace
	// costs the webhook's and the observer's caches.
	EmptyNamespaces int `json:"emptyNamespaces"`
	// JobParallelism Pods of one Job are created at once in an opted-in
	// namespace and, as the no-policy arm, in one that is not; each runs
	// JobRunSeconds and completes.
	JobParallelism int `json:"jobParallelism"`
	JobRunSeconds  int `json:"jobRunSeconds"`
	// ScaleOut is the Pods a Deployment of one Pod is scaled out to, in
	// each arm after its Job, as `kubectl scale` or an autoscaler does.
	ScaleOut int `json:"scaleOut"`
	// BurstReplicas are graceguard's webhook replicas in its burst arms,
	// one arm each, beside the no-policy and native-policy arms; between
	// the arms, the chart's replicaCount serves.
	BurstReplicas []int `json:"burstReplicas"`
	// ClientPods bare Pods are created by Clients concurrent clients in an
	// opted-in namespace and in one that is not, the two interleaved: the
	// latency of a create as a client sees it, with and without graceguard.
	ClientPods int `json:"clientPods"`
	Clients    int `json:"clients"`
	// RestartFraction of the Deployments are restarted (a rollout of a
	// new template), and Deletions Pods of the others are deleted.
	RestartFraction float64 `json:"restartFraction"`
	Deletions       int     `json:"deletions"`
	// Failover repeats the churn twice more with a standby observer
	// started beside the leader, and stops the leader 5 s into each: by
	// SIGTERM (a rollout or a drain: it writes what it gathered and
	// hands the Lease over), then by SIGKILL (a node lost: the Lease
	// expires first). The run counts what went unrecorded.
	Failover bool `json:"failover,omitempty"`
	// DrainSeconds is how long an app takes to exit after SIGTERM;
	// SlowDeployments per namespace drain SlowDrainSeconds instead, longer
	// than graceguard's grace: they are SIGKILLed at its end.
	DrainSeconds     int `json:"drainSeconds"`
	SlowDeployments  int `json:"slowDeployments"`
	SlowDrainSeconds int `json:"slowDrainSeconds"`
	// MaxWork is the graceguard.io/max-work annotation of the workloads,
	// which graceguard turns into the grace.
	MaxWork string `json:"maxWork"`
	// Timeout bounds every wait of the run (Pods running, rollouts done,
	// shutdowns recorded).
	Timeout time.Duration `json:"timeout"`

	// Root is the repository's root directory; Assets holds
	// kube-apiserver, etcd, kube-controller-manager and kube-scheduler;
	// Kwok is the kwok binary (built into bin/ when empty); OutDir
	// receives scale.json and scale.md ("" writes nothing).
	Root   string    `json:"-"`
	Assets string    `json:"-"`
	Kwok   string    `json:"-"`
	OutDir string    `json:"-"`
	Log    io.Writer `json:"-"`
}

// MaxReplicas is the most webhook replicas a burst arm runs.
const MaxReplicas = 5

// WebhookProcesses is how many webhook processes the run starts: the
// most any burst arm or the chart's replicaCount needs.
func (o Options) WebhookProcesses(chartReplicas int) int {
	n := max(1, chartReplicas)
	for _, r := range o.BurstReplicas {
		n = max(n, r)
	}
	return n
}

func joinInts(vs []int, sep string) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, sep)
}

// Scenarios are the presets of `make scale SCALE=...`.
var Scenarios = map[string]Options{
	// smoke: minutes on 2 cores, for CI, so the harness cannot rot.
	"smoke": {
		Scenario: "smoke", Nodes: 200, PodsPerNode: 110,
		Namespaces: 10, DeploymentsPerNamespace: 4, Replicas: 50, EmptyNamespaces: 200,
		JobParallelism: 500, JobRunSeconds: 30, ScaleOut: 500, BurstReplicas: []int{2, 3}, ClientPods: 300, Clients: 8,
		RestartFraction: 0.1, Deletions: 100, Failover: true,
		DrainSeconds: 2, SlowDeployments: 1, SlowDrainSeconds: 30, MaxWork: "5s",
		Timeout: 5 * time.Minute,
	},
	// full: what issue 23 asks of this machine: 2,000 nodes, 50,000 treated
	// Pods, 10,000 namespaces.
	"full": {
		Scenario: "full", Nodes: 2000, PodsPerNode: 110,
		Namespaces: 100, DeploymentsPerNamespace: 5, Replicas: 100, EmptyNamespaces: 9900,
		JobParallelism: 5000, JobRunSeconds: 120, ScaleOut: 5000, BurstReplicas: []int{2, 3}, ClientPods: 2000, Clients: 16,
		RestartFraction: 0.1, Deletions: 1000, Failover: true,
		DrainSeconds: 2, SlowDeployments: 1, SlowDrainSeconds: 30, MaxWork: "5s",
		// 50,000 Pods at 30 a second take 28 minutes.
		Timeout: 90 * time.Minute,
	},
}

// ScenarioNames lists the scenarios in a stable order.
func ScenarioNames() []string {
	names := make([]string, 0, len(Scenarios))
	for n := range Scenarios {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Deployments is the number of Deployments, SlowTotal those of them that
// drain past the grace, and Restarted those a rollout restarts (at least
// one when RestartFraction is positive).
func (o Options) Deployments() int { return o.Namespaces * o.DeploymentsPerNamespace }
func (o Options) SlowTotal() int   { return o.Namespaces * o.SlowDeployments }
func (o Options) Restarted() int {
	if o.RestartFraction <= 0 {
		return 0
	}
	return max(1, int(o.RestartFraction*float64(o.Deployments())+0.5))
}

// DeploymentPods is the number of Pods the Deployments run.
func (o Options) DeploymentPods() int { return o.Deployments() * o.Replicas }

// Validate checks the sizes: each error names the option, its value and
// what is accepted.
func (o Options) Validate() error {
	var errs []error
	positive := func(name string, v int) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s: %d: must be at least 1", name, v))
		}
	}
	nonNegative := func(name string, v int) {
		if v < 0 {
			errs = append(errs, fmt.Errorf("%s: %d: must be 0 or more", name, v))
		}
	}
	positive("nodes", o.Nodes)
	positive("pods-per-node", o.PodsPerNode)
	positive("namespaces", o.Namespaces)
	positive("deployments-per-namespace", o.DeploymentsPerNamespace)
	positive("replicas", o.Replicas)
	positive("clients", o.Clients)
	nonNegative("empty-namespaces", o.EmptyNamespaces)
	nonNegative("job-parallelism", o.JobParallelism)
	nonNegative("job-run-seconds", o.JobRunSeconds)
	nonNegative("scale-out", o.ScaleOut)
	for _, n := range o.BurstReplicas {
		if n < 1 || n > MaxReplicas {
			errs = append(errs, fmt.Errorf("burst-replicas: %d: each must be 1 to %d", n, MaxReplicas))
		}
	}
	nonNegative("client-pods", o.ClientPods)
	nonNegative("deletions", o.Deletions)
	nonNegative("drain-seconds", o.DrainSeconds)
	nonNegative("slow-drain-seconds", o.SlowDrainSeconds)
	if o.SlowDeployments < 0 || o.SlowDeployments > o.DeploymentsPerNamespace {
		errs = append(errs, fmt.Errorf("slow-deployments: %d: must be 0 to deployments-per-namespace (%d)", o.SlowDeployments, o.DeploymentsPerNamespace))
	}
	if o.RestartFraction < 0 || o.RestartFraction > 1 {
		errs = append(errs, fmt.Errorf("restart-fraction: %g: must be 0 to 1", o.RestartFraction))
	}
	if o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("timeout: %s: must be positive", o.Timeout))
	}
	if _, err := time.ParseDuration(o.MaxWork); err != nil {
		errs = append(errs, fmt.Errorf("max-work: %q: must be a Go duration such as 5s", o.MaxWork))
	}
	// Every Pod of the run at once must fit on the nodes, or some stay
	// Pending and the run waits for them in vain.
	if need, room := o.DeploymentPods()*2+o.JobParallelism+o.ScaleOut+o.ClientPods*2, o.Nodes*o.PodsPerNode; need > room {
		errs = append(errs, fmt.Errorf("nodes: %d: %d nodes of %d Pods hold %d Pods, and a run needs room for %d at its peak (the Deployments twice during their rollout, one burst arm's Job and scale-out, both arms' bare Pods); add nodes",
			o.Nodes, o.Nodes, o.PodsPerNode, room, need))
	}
	if o.Deletions > o.DeploymentPods()-o.Restarted()*o.Replicas {
		errs = append(errs, fmt.Errorf("deletions: %d: more than the %d Pods of the Deployments not restarted", o.Deletions, o.DeploymentPods()-o.Restarted()*o.Replicas))
	}
	return errors.Join(errs...)
}

// String is the load in one line, for logs.
func (o Options) String() string {
	return strings.Join([]string{
		fmt.Sprintf("%d nodes", o.Nodes),
		fmt.Sprintf("%d opted-in namespaces with %d Deployments of %d Pods (%d Pods)", o.Namespaces, o.DeploymentsPerNamespace, o.Replicas, o.DeploymentPods()),
		fmt.Sprintf("%d empty namespaces", o.EmptyNamespaces),
		fmt.Sprintf("burst arms (no policy, native policy, graceguard with %s replicas) of a Job of %d Pods and a scale-out to %d", joinInts(o.BurstReplicas, " and "), o.JobParallelism, o.ScaleOut),
		fmt.Sprintf("%d bare Pods per arm", o.ClientPods),
		fmt.Sprintf("%d Deployments restarted, %d Pods deleted", o.Restarted(), o.Deletions),
		map[bool]string{true: "then twice again with the observer's leader stopped (SIGTERM, SIGKILL)", false: "no observer failover"}[o.Failover],
	}, "; ")
}
