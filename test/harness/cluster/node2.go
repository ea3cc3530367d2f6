package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The second node (e2e scenario 14, a node drain): a second containerd and
// kubelet on this machine, each with its own state under the run directory,
// in a network namespace of their own. Its Pods sit on bridge gg1 inside
// that namespace; one veth pair links it to the first node's, and each side
// routes the other's Pod range through it, so Pod traffic between the nodes
// crosses a real link and a second network stack. The node registers with
// Node2Taint: nothing lands on it but Pods that tolerate it, so the other
// scenarios keep running on the first node alone.
const (
	Node2Name     = "gg-node2"
	Node2IP       = "10.244.1.1"
	Node2PodCIDR  = "10.244.1.0/24"
	Node2Bridge   = "gg1"
	Node2Netns    = "gg-node2"
	Node2TaintKey = "graceguard.io/second-node"
	// Node2CgroupRoot holds the second kubelet's Pods, below the first's
	// CgroupRoot so that Down finds them too.
	Node2CgroupRoot = CgroupRoot + "/node2"

	// The link between the nodes: node2VethHost in the host's namespace,
	// node2VethPeer in Node2Netns, a /30 inside PodRoute (so the first
	// node's Pods route to it) and outside both Pod ranges and ServiceCIDR.
	node2VethHost = "gg-n2"
	node2VethPeer = "gg-n2p"
	node2LinkHost = "10.244.250.1"
	node2LinkPeer = "10.244.250.2"
)

// nodeSpec is what differs between the two nodes.
type nodeSpec struct {
	name, ip, bridge, podCIDR, cgroupRoot string
	// netns is the network namespace its containerd and kubelet run in
	// ("": the host's).
	netns string
	// suffix names its components ("kubelet"+suffix) and certificates.
	suffix string
	// taint is registered with the Node ("": none).
	taint string
}

var (
	firstNode  = nodeSpec{name: NodeName, ip: NodeIP, bridge: Bridge, podCIDR: PodCIDR, cgroupRoot: CgroupRoot}
	secondNode = nodeSpec{name: Node2Name, ip: Node2IP, bridge: Node2Bridge, podCIDR: Node2PodCIDR,
		cgroupRoot: Node2CgroupRoot, netns: Node2Netns, suffix: "-node2", taint: Node2TaintKey}
)

func netnsPath(name string) string { return "/run/netns/" + name }

// node2 is the layout of the second node: its runtime state under
// state/node2/, its configuration under config/node2/; the PKI, logs and
// pid records are the cluster's.
func (l layout) node2() layout {
	state := filepath.Join(l.state, "node2")
	n := l
	n.config = filepath.Join(l.config, "node2")
	n.containerdRoot = filepath.Join(state, "containerd", "root")
	n.containerdState = filepath.Join(state, "containerd", "state")
	n.containerdSock = filepath.Join(state, "containerd.sock")
	n.containerdOpt = filepath.Join(state, "containerd", "opt")
	n.runcRoot = filepath.Join(state, "runc")
	n.kubeletRoot = filepath.Join(state, "kubelet")
	n.podLogs = filepath.Join(state, "pod-logs")
	n.cniConfDir = filepath.Join(n.config, "cni")
	n.cniDataDir = filepath.Join(state, "cni")
	return n
}

// Node2Running tells whether the second node's containerd and kubelet run.
func (c *Cluster) Node2Running() bool {
	cr, ok := readRecord(c.l, "containerd"+secondNode.suffix)
	kr, ok2 := readRecord(c.l, "kubelet"+secondNode.suffix)
	return ok && ok2 && cr.alive() && kr.alive()
}

// AddNode starts the second node, Node2Name, and waits until it is Ready:
// its network namespace and link, its containerd (with every image imported
// into the first node so far, and the pause image) and its kubelet. It needs
// kube-scheduler, since Pods reach the node only through it. It is
// idempotent, like Up; RemoveNode and Down undo it.
func (c *Cluster) AddNode(ctx context.Context) error {
	if !c.Scheduler {
		return errors.New("cluster: a second node needs kube-scheduler, which this cluster does not run")
	}
	unlock, err := flock(ctx, c.l.lock)
	if err != nil {
		return err
	}
	defer unlock()
	start := time.Now()
	if c.bins.runc == "" || c.bins.cniBinDir == "" {
		runc, cniDir, missing := findHostPackages()
		if len(missing) > 0 {
			return fmt.Errorf("cluster: the second node needs %s (run up first)", strings.Join(missing, ", "))
		}
		c.bins.runc, c.bins.cniBinDir = runc, cniDir
	}
	n, l := secondNode, c.l.node2()
	if n := len(l.containerdSock + ".ttrpc"); n > 107 {
		return fmt.Errorf("cluster: run directory %q is too long for the second node's containerd socket (%d bytes, max 107)", c.l.dir, n)
	}
	for _, d := range []string{l.config, l.cniConfDir, l.podLogs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := writeNodeConfigs(l, c.bins, n); err != nil {
		return fmt.Errorf("cluster: second node configs: %w", err)
	}
	if err := ensureNode2Network(ctx); err != nil {
		return fmt.Errorf("cluster: second node network: %w", err)
	}
	if err := ensureCgroup(n.cgroupRoot); err != nil {
		return err
	}
	for _, comp := range nodeComponents(l, c.bins, n) {
		if err := c.ensureRunning(ctx, comp); err != nil {
			return err
		}
		if strings.HasPrefix(comp.name, "containerd") {
			pause, err := ensurePauseImage(ctx, c.opts)
			if err != nil {
				return err
			}
			for _, archive := range append([]string{pause}, c.imported...) {
				if archive == pause && slices.Contains(c.imported, pause) {
					continue
				}
				if err := c.importInto(ctx, n.name, l.containerdSock, archive); err != nil {
					return err
				}
			}
		}
	}
	if err := c.waitNodeReady(ctx, n); err != nil {
		return err
	}
	if err := c.untaintNode(ctx, n.name); err != nil {
		return err
	}
	c.opts.Logf("second node %s Ready in %s (taint %s:NoSchedule)", n.name, time.Since(start).Round(time.Millisecond), n.taint)
	return nil
}

// RemoveNode stops the second node and removes what AddNode made: its
// processes and Pods, mounts, network namespace and link, cgroups, state,
// configuration and Node object. The first node is left alone. Idempotent.
func (c *Cluster) RemoveNode(ctx context.Context) error {
	unlock, err := flock(ctx, c.l.lock)
	if err != nil {
		return err
	}
	defer unlock()
	var errs []error
	l := c.l.node2()
	stopRecorded(c.l, "kubelet"+secondNode.suffix, 15*time.Second)
	if err := killCgroupProcesses(secondNode.cgroupRoot, 15*time.Second); err != nil {
		errs = append(errs, err)
	}
	stopRecorded(c.l, "containerd"+secondNode.suffix, 15*time.Second)
	stopShims(l.containerdSock)
	if err := unmountUnder(filepath.Join(c.l.state, "node2")); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, deleteNode2Network(ctx)...)
	errs = append(errs, removeCgroupsUnder(secondNode.cgroupRoot)...)
	if err := c.Client.CoreV1().Nodes().Delete(ctx, Node2Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete node %s: %w", Node2Name, err))
	}
	if len(errs) == 0 {
		for _, p := range []string{filepath.Join(c.l.state, "node2"), l.config} {
			if err := removeAllSameDevice(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster: remove node %s: %w", Node2Name, err)
	}
	c.opts.Logf("second node %s removed", Node2Name)
	return nil
}

// stopShims stops the containerd shims serving the containerd at address
// and removes their sockets.
func stopShims(address string) {
	for _, pid := range ownProcesses(filepath.Dir(address)) {
		args := cmdlineOf(pid)
		if len(args) == 0 || !strings.Contains(filepath.Base(args[0]), "containerd-shim") || !slices.Contains(args, address) {
			continue
		}
		sockets := shimSocketsOf(args)
		stopPID(pid, 0, 5*time.Second)
		for _, s := range sockets {
			_ = os.Remove(s)
		}
	}
}

// ensureNode2Network creates the second node's network namespace, the veth
// pair to the host, its bridge with the node address, the routes both ways
// and IPv4 forwarding inside it (the host's is recorded and restored by
// Down), and sends its Pods' packets for the kubernetes Service through the
// cluster's DNAT chain, as the first node's.
func ensureNode2Network(ctx context.Context) error {
	ns := func(args ...string) (string, error) {
		return runCmd(ctx, "ip", append([]string{"-n", Node2Netns}, args...)...)
	}
	steps := [][]string{}
	if _, err := os.Stat(netnsPath(Node2Netns)); err != nil {
		steps = append(steps, []string{"ip", "netns", "add", Node2Netns})
	}
	if !linkExists(node2VethHost) {
		steps = append(steps, []string{"ip", "link", "add", node2VethHost, "type", "veth", "peer", "name", node2VethPeer, "netns", Node2Netns})
	}
	for _, s := range steps {
		if _, err := runCmd(ctx, s[0], s[1:]...); err != nil {
			return err
		}
	}
	if _, err := ns("link", "show", Node2Bridge); err != nil {
		if _, err := ns("link", "add", Node2Bridge, "type", "bridge"); err != nil {
			return err
		}
	}
	for _, s := range [][]string{
		{"ip", "addr", "replace", node2LinkHost + "/30", "dev", node2VethHost},
		{"ip", "link", "set", node2VethHost, "up"},
		{"ip", "-n", Node2Netns, "link", "set", "lo", "up"},
		{"ip", "-n", Node2Netns, "addr", "replace", node2LinkPeer + "/30", "dev", node2VethPeer},
		{"ip", "-n", Node2Netns, "link", "set", node2VethPeer, "up"},
		{"ip", "-n", Node2Netns, "addr", "replace", Node2IP + "/24", "dev", Node2Bridge},
		{"ip", "-n", Node2Netns, "link", "set", Node2Bridge, "up"},
		{"ip", "-n", Node2Netns, "route", "replace", PodRoute, "via", node2LinkHost, "dev", node2VethPeer},
		{"ip", "route", "replace", Node2PodCIDR, "via", node2LinkPeer, "dev", node2VethHost},
		{"ip", "netns", "exec", Node2Netns, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
	} {
		if _, err := runCmd(ctx, s[0], s[1:]...); err != nil {
			return err
		}
	}
	// Pods of one node reach the other's through the host.
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return fmt.Errorf("enable IPv4 forwarding: %w", err)
	}
	return ensurePreroutingJump(ctx, node2VethHost)
}

// deleteNode2Network deletes the namespace (which takes its end of the veth
// pair, the bridge and the Pods' veths with it) and the host's end.
func deleteNode2Network(ctx context.Context) []error {
	var errs []error
	if _, err := os.Stat(netnsPath(Node2Netns)); err == nil {
		if _, err := runCmd(ctx, "ip", "netns", "del", Node2Netns); err != nil {
			errs = append(errs, err)
		}
	}
	if linkExists(node2VethHost) {
		if _, err := runCmd(ctx, "ip", "link", "del", node2VethHost); err != nil && linkExists(node2VethHost) {
			errs = append(errs, err)
		}
	}
	return errs
}

// ensureCgroup creates a cgroup in every hierarchy (the kubelet refuses a
// cgroupRoot that does not exist). A new v1 cpuset cgroup starts with no
// CPUs or memory nodes, so those are copied from the parent.
func ensureCgroup(root string) error {
	for _, mp := range cgroupMounts() {
		dir := filepath.Join(mp, root)
		if err := os.MkdirAll(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("cluster: create cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			cur, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil || strings.TrimSpace(string(cur)) != "" {
				continue
			}
			parent, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
			if err != nil {
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, f), parent, 0o644); err != nil {
				return fmt.Errorf("cluster: %s/%s: %w", dir, f, err)
			}
		}
	}
	return nil
}
