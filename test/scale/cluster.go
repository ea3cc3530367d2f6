package scale

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"

	"github.com/graceguard/graceguard/internal/freeport"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/test/harness/apiserver"
	"github.com/graceguard/graceguard/test/harness/chart"
)

// releaseNamespace is graceguard's own namespace, as the chart is
// installed (the observer's Lease is there).
const releaseNamespace = "graceguard-system"

// observerLease is the Lease the observer replicas elect their leader
// with (pkg/observer's LeaderElectionID).
const observerLease = "graceguard-observer"

// kwokModule is the module whose kwok binary simulates the nodes; its
// version is the one the lab's go.mod pins (this package links its
// stages).
const kwokModule = "sigs.k8s.io/kwok"

//go:embed stages.yaml
var podStages string

// kwokConfig is kwok's --config: its options, its own node-initialize
// and pod-ready stages, then stages.yaml (the shutdown).
func kwokConfig() string {
	return strings.Join([]string{`apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  # Enough workers for thousands of Pods changing stage at once (default 4).
  podPlayStageParallelism: 16
  nodePlayStageParallelism: 4
`, strings.TrimSpace(nodefast.DefaultNodeInit), strings.TrimSpace(podfast.DefaultPodReady), strings.TrimSpace(podStages)}, "\n---\n") + "\n"
}

// kwokVersion is the version of sigs.k8s.io/kwok this program was built
// with: the lab's go.mod pin.
func kwokVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == kwokModule {
				return d.Version
			}
		}
	}
	return ""
}

// buildKwok builds kwok's controller from the lab's module into
// bin/kwok-<version> once; later runs reuse it.
func buildKwok(ctx context.Context, root string, log io.Writer) (string, error) {
	v := kwokVersion()
	if v == "" {
		return "", fmt.Errorf("no version of %s in this program's build information; build it from the lab's module (go -C test run ./scale/cmd/scale)", kwokModule)
	}
	bin := filepath.Join(root, "bin", "kwok-"+v)
	if fi, err := os.Stat(bin); err == nil && fi.Mode()&0o111 != 0 {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	tmp := bin + ".tmp"
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", tmp, kwokModule+"/cmd/kwok")
	cmd.Dir, cmd.Env = filepath.Join(root, "test"), append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = log, log
	fmt.Fprintf(log, "$ (cd test && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o %s %s/cmd/kwok)  # once per version, minutes cold\n", bin, kwokModule)
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building kwok %s: %w", v, err)
	}
	return bin, os.Rename(tmp, bin)
}

// buildWebhook builds cmd/webhook as `make build` does.
func buildWebhook(ctx context.Context, root, dir string, log io.Writer) (string, error) {
	bin := filepath.Join(dir, "webhook")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./cmd/webhook")
	cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building cmd/webhook: %w", err)
	}
	return bin, nil
}

// connectionFlags are the chart's flags that say how a binary is reached
// and where its certificate comes from in a cluster; the harness sets its
// own (loopback ports, the test CA's certificate as files).
var connectionFlags = []string{"port", "health-probe-bind-address", "metrics-bind-address", "cert-dir", "cert-mode",
	"cert-secret-name", "service-name", "mutating-webhook-configuration", "validating-webhook-configuration",
	"shutdown-delay", "drain-timeout"}

// chartArgs are a container's arguments from the chart without the
// connection flags.
func chartArgs(args []string) []string {
	var out []string
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if strings.HasPrefix(a, "--") && slices.Contains(connectionFlags, name) {
			continue
		}
		out = append(out, a)
	}
	return out
}

// cluster is the API server with graceguard in front, and every process
// beside it.
type cluster struct {
	*apiserver.APIServer
	// rest and kube act as the admin, with rate limits high enough for
	// thousands of creates a second.
	rest *rest.Config
	kube kubernetes.Interface
	dyn  dynamic.Interface
	// The processes started beside the API server, and the observer's
	// metrics URL (the webhook replicas' are ReplicaMetrics).
	observer, controllers, scheduler, kwok *apiserver.Process
	observerMetrics                        string
	// How an observer replica starts: the binary and the chart's flags.
	observerBin  string
	observerArgs []string
}

// startObserver starts an observer replica as the chart runs one (its
// flags, leader election on), its metrics on metricsPort.
func (c *cluster) startObserver(name string, metricsPort int) (*apiserver.Process, error) {
	kc, err := c.Kubeconfig("graceguard-observer")
	if err != nil {
		return nil, err
	}
	health, err := freeport.Get()
	if err != nil {
		return nil, err
	}
	return c.StartProcess(name, c.observerBin, append(slices.Clone(c.observerArgs),
		"--kubeconfig="+kc, "--namespace="+releaseNamespace, "--metrics-bind-address=127.0.0.1:"+strconv.Itoa(metricsPort),
		"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(health))...)
}

// leaseHolder is the holder of the observers' Lease ("" when none holds
// it, or it does not exist yet).
func (c *cluster) leaseHolder(ctx context.Context) (string, error) {
	l, err := c.kube.CoordinationV1().Leases(releaseNamespace).Get(ctx, observerLease, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if l.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *l.Spec.HolderIdentity, nil
}

// startCluster starts the API server with graceguard's webhooks and the
// webhook binary run with the chart's flags, then the controllers, the
// scheduler, kwok and the observer.
func startCluster(ctx context.Context, o Options, dir, webhookBin string, chartDefaults *ChartDefaults) (_ *cluster, err error) {
	wd, err := chart.Deployment("graceguard", releaseNamespace, nil, "webhook")
	if err != nil {
		return nil, err
	}
	wc, err := chart.Container("graceguard", releaseNamespace, nil, "webhook")
	if err != nil {
		return nil, err
	}
	chartDefaults.WebhookReplicas = int(ptr.Deref(wd.Spec.Replicas, 1))
	oc, err := chart.Container("graceguard", releaseNamespace, nil, "observer")
	if err != nil {
		return nil, err
	}
	chartDefaults.WebhookArgs, chartDefaults.ObserverArgs = chartArgs(wc.Args), chartArgs(oc.Args)
	chartDefaults.WebhookMemoryLimitMiB = float64(wc.Resources.Limits.Memory().Value()) / (1 << 20)
	chartDefaults.ObserverMemoryLimitMiB = float64(oc.Resources.Limits.Memory().Value()) / (1 << 20)

	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	c := &cluster{observerMetrics: metricsURL(ports[0])}
	// Every replica any arm needs runs from the start (an idle one costs
	// its namespace cache); the chart's replicaCount serve between arms.
	c.APIServer, err = apiserver.StartAPIServer(ctx, apiserver.APIServerOptions{
		AssetsDir: o.Assets, ReleaseNamespace: releaseNamespace, Dir: dir, WebhookBinary: webhookBin,
		WebhookArgs: chartDefaults.WebhookArgs, WebhookReplicas: o.WebhookProcesses(chartDefaults.WebhookReplicas),
		// etcd's default quota is 2 GiB, which the full scenario's Pods
		// and their revisions between compactions can pass; 8 GiB is the
		// largest etcd recommends, what large clusters run with.
		EtcdFlags: map[string]string{"quota-backend-bytes": strconv.Itoa(8 << 30)},
	})
	if err != nil {
		return nil, err
	}
	c.routeTo(chartDefaults.WebhookReplicas)
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	c.rest = rest.CopyConfig(c.Config)
	c.rest.QPS, c.rest.Burst = 5000, 5000
	if c.kube, err = kubernetes.NewForConfig(c.rest); err != nil {
		return c, err
	}
	if c.dyn, err = dynamic.NewForConfig(c.rest); err != nil {
		return c, err
	}
	if err := c.createNamespace(ctx, releaseNamespace, false); err != nil {
		return c, err
	}

	assets := func(name string) (string, error) {
		p := filepath.Join(o.Assets, name)
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("no %s in %s: run hack/envtest-assets.sh kube-controller-manager kube-scheduler (make scale does)", name, o.Assets)
		}
		return p, nil
	}
	kcm, err := assets("kube-controller-manager")
	if err != nil {
		return c, err
	}
	sched, err := assets("kube-scheduler")
	if err != nil {
		return c, err
	}
	kc, err := c.Kubeconfig("kube-controller-manager")
	if err != nil {
		return c, err
	}
	// Only the controllers the workloads need: no node lifecycle (kwok's
	// nodes never go away), no service accounts (envtest admits Pods
	// without them).
	if c.controllers, err = c.StartProcess("kube-controller-manager", kcm, "--kubeconfig="+kc, "--leader-elect=false", "--secure-port=0",
		"--controllers=deployment-controller,replicaset-controller,job-controller,garbage-collector-controller",
		"--kube-api-qps=1000", "--kube-api-burst=2000", "--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10",
		"--concurrent-job-syncs=10", "--v=1"); err != nil {
		return c, err
	}
	sc, err := c.Kubeconfig("kube-scheduler")
	if err != nil {
		return c, err
	}
	schedConfig := filepath.Join(dir, "kube-scheduler.yaml")
	if err := os.WriteFile(schedConfig, []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: 1000
  burst: 2000
leaderElection:
  leaderElect: false
`, sc)), 0o600); err != nil {
		return c, err
	}
	if c.scheduler, err = c.StartProcess("kube-scheduler", sched, "--config="+schedConfig, "--secure-port=0", "--v=1"); err != nil {
		return c, err
	}
	kk, err := c.Kubeconfig("kwok")
	if err != nil {
		return c, err
	}
	kwokConf := filepath.Join(dir, "kwok.yaml")
	if err := os.WriteFile(kwokConf, []byte(kwokConfig()), 0o600); err != nil {
		return c, err
	}
	if c.kwok, err = c.StartProcess("kwok", o.Kwok, "--kubeconfig="+kk, "--config="+kwokConf, "--manage-all-nodes=false",
		"--manage-nodes-with-label-selector="+kwokNodeLabel+"="+kwokNodeValue, "--server-address=127.0.0.1:"+strconv.Itoa(ports[1])); err != nil {
		return c, err
	}
	c.observerBin, c.observerArgs = webhookBin, chartDefaults.ObserverArgs
	if c.observer, err = c.startObserver("graceguard observer", ports[0]); err != nil {
		return c, err
	}
	deadline := time.Now().Add(time.Minute)
	for _, url := range append(slices.Clone(c.ReplicaMetrics), c.observerMetrics) {
		for {
			if err := c.exited(); err != nil {
				return c, err
			}
			if _, err := scrape(ctx, url); err == nil {
				break
			} else if time.Now().After(deadline) {
				return c, fmt.Errorf("no metrics at %s within a minute: %v", url, err)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	return c, nil
}

// exited says which process beside the API server stopped, or nil.
func (c *cluster) exited() error {
	for _, p := range append(slices.Clone(c.Replicas), c.observer, c.controllers, c.scheduler, c.kwok) {
		if p == nil {
			continue
		}
		if err := p.Exited(); err != nil {
			return err
		}
	}
	return nil
}

func freePorts(n int) ([]int, error) {
	out := make([]int, n)
	for i := range out {
		p, err := freeport.Get()
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// scrapeWebhooks reads every webhook replica's /metrics, as one
// exposition: their series side by side, so that sums add the replicas.
func (c *cluster) scrapeWebhooks(ctx context.Context) (exposition, error) {
	out := exposition{}
	for _, url := range c.ReplicaMetrics {
		e, err := scrape(ctx, url)
		if err != nil {
			return nil, err
		}
		for name, f := range e {
			if have, ok := out[name]; ok {
				have.Metric = append(have.Metric, f.Metric...)
				continue
			}
			out[name] = f
		}
	}
	return out, nil
}

func metricsURL(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) + "/metrics" }

// createNamespace creates a namespace, opted in to graceguard or not.
func (c *cluster) createNamespace(ctx context.Context, name string, optedIn bool) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if optedIn {
		ns.Labels = map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}
	}
	_, err := c.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
