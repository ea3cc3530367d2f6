package cluster

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/graceguard/graceguard/test/harness/repo"
)

// The cluster's fixed shape. One cluster per machine, so these are constants
// rather than options: tests and tools can rely on them.
const (
	NodeName = "gg-node"
	// Bridge is the Linux bridge the Pods' veths join; NodeIP is its address,
	// the Pods' gateway, the Node's InternalIP and the apiserver's address.
	Bridge   = "gg0"
	NodeIP   = "10.244.0.1"
	PodCIDR  = "10.244.0.0/24"
	PodRoute = "10.244.0.0/16"
	// ServiceCIDR lies inside PodRoute so that a Pod's packets to a Service
	// IP reach the node, where kube-proxy (iptables mode) DNATs them to an
	// endpoint; the cluster's own DNAT rule for the kubernetes Service
	// (from before kube-proxy ran here) stays as a fallback.
	ServiceCIDR         = "10.244.128.0/24"
	KubernetesServiceIP = "10.244.128.1"
	// ClusterCIDR is kube-proxy's: traffic to a Service from outside it
	// (the host) is masqueraded.
	ClusterCIDR = PodRoute

	APIServerPort         = 16443
	EtcdClientPort        = 12379
	EtcdPeerPort          = 12380
	ControllerManagerPort = 10357
	SchedulerPort         = 10359
	KubeletPort           = 10250
	KubeletHealthzPort    = 10248
	KubeProxyHealthzPort  = 10256
	KubeProxyMetricsPort  = 10249

	// CgroupRoot is the kubelet's cgroupRoot: every Pod process lives below it.
	CgroupRoot = "/graceguard"
	// IptablesChain holds the cluster's own rules (nat table).
	IptablesChain = "GG-CLUSTER"
	// CNINetwork names the CNI network (and its cache entries).
	CNINetwork = "graceguard"

	// PauseImage is built from test/images/pause and imported at Up.
	PauseImage = "registry.local/pause:3.10"
	// ContainerdVersion is built from the Go module proxy into bin/containerd/.
	ContainerdVersion = "v2.2.9"
	// ContainerdNamespace is the namespace the CRI plugin (and so the
	// kubelet) uses; images for Pods must be imported there.
	ContainerdNamespace = "k8s.io"

	// ownerFile names the run directory of the machine's cluster.
	ownerFile = "/run/graceguard-cluster/owner"
)

// Options configure Up, Down and Status. The zero value is usable.
type Options struct {
	// RepoRoot is the graceguard checkout (for hack/envtest-assets.sh,
	// test/images and bin/). Default: the directory holding go.mod of
	// github.com/graceguard/graceguard, searched upwards from the working
	// directory.
	RepoRoot string
	// Dir is the run directory. Default: $GG_CLUSTER_DIR, else
	// RepoRoot/bin/cluster.
	Dir string
	// SkipInstall makes Up fail instead of running apt-get when runc, the
	// CNI plugins or iptables are missing.
	SkipInstall bool
	// Timeout bounds each wait for a component to become ready (the Node
	// Ready wait included). Default 3 minutes. Builds are not bounded.
	Timeout time.Duration
	// Logf receives progress lines. Default: the standard logger.
	Logf func(format string, args ...any)
}

func (o Options) complete() (Options, error) {
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	if o.Timeout <= 0 {
		o.Timeout = 3 * time.Minute
	}
	if o.RepoRoot == "" {
		root, err := repo.Root()
		if err != nil {
			return o, fmt.Errorf("cluster: %w; or set Options.RepoRoot", err)
		}
		o.RepoRoot = root
	}
	if o.Dir == "" {
		o.Dir = os.Getenv("GG_CLUSTER_DIR")
	}
	if o.Dir == "" {
		o.Dir = filepath.Join(o.RepoRoot, "bin", "cluster")
	}
	var err error
	if o.RepoRoot, err = filepath.Abs(o.RepoRoot); err != nil {
		return o, err
	}
	if o.Dir, err = filepath.Abs(o.Dir); err != nil {
		return o, err
	}
	o.Dir = filepath.Clean(o.Dir)
	if o.Dir == "/" || len(strings.Split(strings.Trim(o.Dir, "/"), "/")) < 2 {
		return o, fmt.Errorf("cluster: run directory %q is too close to / to be wiped by Down; use a dedicated directory", o.Dir)
	}
	// Unix socket paths are limited to 107 bytes; the longest is the
	// containerd ttrpc socket.
	if n := len(layoutFor(o.Dir).containerdSock + ".ttrpc"); n > 107 {
		return o, fmt.Errorf("cluster: run directory %q is too long: the containerd socket path would be %d bytes (max 107); set GG_CLUSTER_DIR to a shorter path", o.Dir, n)
	}
	return o, nil
}

// layout is every path of a run directory.
type layout struct {
	dir, pki, config, logs, pids, state string

	kubeconfig string // admin

	etcdData        string
	containerdRoot  string
	containerdState string
	containerdSock  string
	containerdOpt   string
	runcRoot        string
	kubeletRoot     string
	podLogs         string
	cniConfDir      string
	cniDataDir      string
	hostRecord      string
	lock            string
}

func layoutFor(dir string) layout {
	state := filepath.Join(dir, "state")
	return layout{
		dir:    dir,
		pki:    filepath.Join(dir, "pki"),
		config: filepath.Join(dir, "config"),
		logs:   filepath.Join(dir, "logs"),
		pids:   filepath.Join(dir, "pids"),
		state:  state,

		kubeconfig: filepath.Join(dir, "kubeconfig"),

		etcdData:        filepath.Join(state, "etcd"),
		containerdRoot:  filepath.Join(state, "containerd", "root"),
		containerdState: filepath.Join(state, "containerd", "state"),
		containerdSock:  filepath.Join(state, "containerd.sock"),
		containerdOpt:   filepath.Join(state, "containerd", "opt"),
		runcRoot:        filepath.Join(state, "runc"),
		kubeletRoot:     filepath.Join(state, "kubelet"),
		podLogs:         filepath.Join(state, "pod-logs"),
		cniConfDir:      filepath.Join(dir, "config", "cni"),
		cniDataDir:      filepath.Join(state, "cni"),
		hostRecord:      filepath.Join(dir, "host.json"),
		lock:            filepath.Join(dir, ".lock"),
	}
}

func (l layout) pkiFile(name string) string { return filepath.Join(l.pki, name) }
func (l layout) logFile(name string) string { return filepath.Join(l.logs, name+".log") }
