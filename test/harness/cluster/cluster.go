package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/graceguard/graceguard/test/harness/logs"
)

// Cluster is a running cluster.
type Cluster struct {
	// Dir is the run directory; Kubeconfig the admin kubeconfig in it.
	Dir        string
	Kubeconfig string
	// RESTConfig and Client act as the admin (system:masters).
	RESTConfig *rest.Config
	Client     kubernetes.Interface
	// KubernetesVersion is e.g. "1.37.2"; Kubectl the matching binary.
	KubernetesVersion string
	Kubectl           string
	// Scheduler tells whether kube-scheduler runs; without it Pods need
	// spec.nodeName (NodeName).
	Scheduler bool

	opts Options
	l    layout
	bins binaries
	// imported are the image archives imported so far, which AddNode
	// imports into the second node too.
	imported []string
}

// Up starts the cluster, or completes one that is partly running, and waits
// until the Node is Ready and the default ServiceAccount exists. Cancelling
// ctx (Ctrl-C in the CLI) tears down whatever Up started, as Down does; any
// other failure leaves the processes and logs for inspection: call Down.
func Up(ctx context.Context, opts Options) (c *Cluster, err error) {
	o, err := opts.complete()
	if err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errNotRoot
	}
	l := layoutFor(o.Dir)
	start := time.Now()
	defer func() {
		if err != nil && ctx.Err() != nil {
			o.Logf("interrupted (%v): tearing down", ctx.Err())
			dctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if derr := down(dctx, o, l); derr != nil {
				o.Logf("teardown after interrupt: %v", derr)
			}
		}
	}()

	bins, err := ensureBinaries(ctx, o)
	if err != nil {
		return nil, err
	}
	pause, err := ensurePauseImage(ctx, o)
	if err != nil {
		return nil, err
	}
	o.Logf("binaries ready (%s): kubernetes %s in %s, containerd in %s", time.Since(start).Round(time.Millisecond), bins.k8sVersion, bins.k8sDir, bins.containerdDir)

	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return nil, err
	}
	unlock, err := flock(ctx, l.lock)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := claimMachine(ctx, o, l); err != nil {
		return nil, err
	}
	if err := prepareDir(l); err != nil {
		return nil, err
	}
	if err := recordHost(ctx, l); err != nil {
		return nil, err
	}
	if _, err := ensurePKI(l.pki); err != nil {
		return nil, fmt.Errorf("cluster: PKI: %w", err)
	}
	if err := writeConfigs(l, bins); err != nil {
		return nil, fmt.Errorf("cluster: configs: %w", err)
	}
	if err := ensureBridge(ctx); err != nil {
		return nil, fmt.Errorf("cluster: bridge %s: %w", Bridge, err)
	}
	if err := ensureServiceDNAT(ctx); err != nil {
		return nil, fmt.Errorf("cluster: iptables: %w", err)
	}
	if err := ensureCgroup(CgroupRoot); err != nil {
		return nil, err
	}

	c = &Cluster{Dir: l.dir, Kubeconfig: l.kubeconfig, KubernetesVersion: bins.k8sVersion,
		Kubectl: bins.k8s("kubectl"), Scheduler: bins.scheduler() != "", opts: o, l: l, bins: bins}
	if c.RESTConfig, err = clientcmd.BuildConfigFromFlags("", l.kubeconfig); err != nil {
		return nil, err
	}
	if c.Client, err = kubernetes.NewForConfig(c.RESTConfig); err != nil {
		return nil, err
	}

	for _, comp := range components(l, bins) {
		if err := c.ensureRunning(ctx, comp); err != nil {
			return nil, err
		}
		if comp.name == "containerd" {
			if err := c.ImportImage(ctx, pause); err != nil {
				return nil, err
			}
		}
	}
	if err := c.waitNodeReady(ctx, firstNode); err != nil {
		return nil, err
	}
	if err := c.untaintNode(ctx, NodeName); err != nil {
		return nil, err
	}
	if err := c.waitDefaultServiceAccount(ctx); err != nil {
		return nil, err
	}
	o.Logf("cluster up in %s: node %s Ready; kubeconfig %s", time.Since(start).Round(time.Millisecond), NodeName, l.kubeconfig)
	return c, nil
}

// claimMachine refuses to start a second cluster: the bridge, addresses,
// ports and cgroup root are the machine's, not the run directory's. A
// cluster of another run directory that ended without Down (its processes
// killed with the session that ran it) leaves its Pods' network namespaces
// mounted, their veths on the bridge holding this cluster's first Pod IPs:
// the kernel then answers this cluster's probes to those IPs with "connection
// refused" (what failed 10 of 16 e2e specs in one CI run). When no process
// of either cluster runs, claimMachine clears what the dead one left first.
func claimMachine(ctx context.Context, o Options, l layout) error {
	others := map[string]bool{}
	if b, err := os.ReadFile(ownerFile); err == nil {
		if other := strings.TrimSpace(string(b)); other != "" && other != l.dir {
			others[other] = true
		}
	}
	for _, d := range runDirsOf(mounts()) {
		if d != l.dir {
			others[d] = true
		}
	}
	dead := make([]string, 0, len(others))
	for other := range others {
		if len(ownProcesses(other)) > 0 {
			return fmt.Errorf("cluster: a cluster from %s is running on this machine; stop it first (hack/cluster down --dir %s)", other, other)
		}
		dead = append(dead, other)
	}
	slices.Sort(dead)
	if len(dead) > 0 && len(ownProcesses(l.dir)) == 0 {
		for _, other := range dead {
			o.Logf("a cluster from %s ended without Down: clearing what it left on this machine", other)
			if err := down(ctx, o, layoutFor(other)); err != nil {
				return fmt.Errorf("cluster: clearing the dead cluster of %s: %w", other, err)
			}
		}
	}
	return writeFileAtomic(ownerFile, []byte(l.dir+"\n"), 0o644)
}

// runDirsOf names the run directories a cluster's mounts belong to: the
// kubelet's root and the runtime's network namespaces, rootfs and shm mounts
// all lie under <dir>/state/ (state/node2/ for the second node).
func runDirsOf(ms []mount) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		i := strings.Index(m.point, "/state/")
		if i <= 0 {
			continue
		}
		rest := strings.TrimPrefix(m.point[i+len("/state/"):], "node2/")
		if !strings.HasPrefix(rest, "kubelet") && !strings.HasPrefix(rest, "containerd/") {
			continue
		}
		if d := m.point[:i]; !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// prepareDir creates the run directory's skeleton. A fresh run (no state/)
// moves the previous logs to logs.prev/. The go.mod keeps the go command
// from walking the container filesystems under state/ on `go test ./...`.
func prepareDir(l layout) error {
	if _, err := os.Stat(l.state); errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(l.logs); err == nil {
			prev := filepath.Join(l.dir, "logs.prev")
			if err := removeAllSameDevice(prev); err != nil {
				return err
			}
			if err := os.Rename(l.logs, prev); err != nil {
				return err
			}
		}
	}
	for _, d := range []string{l.pki, l.config, l.logs, l.pids, l.state, l.cniConfDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return writeIfChanged(filepath.Join(l.dir, "go.mod"),
		[]byte("// The test cluster's run directory (test/harness/cluster): not Go code.\nmodule graceguard.local/cluster-run-dir\n"), 0o644)
}

// ensureRunning keeps comp if it runs with the same identity, else
// (re)starts it, then waits until it serves.
func (c *Cluster) ensureRunning(ctx context.Context, comp component) error {
	id := comp.identity()
	if r, ok := readRecord(c.l, comp.name); ok && r.alive() {
		if r.Identity == id {
			c.opts.Logf("%s: running (pid %d)", comp.name, r.PID)
			return c.waitReady(ctx, comp, r)
		}
		c.opts.Logf("%s: binary, arguments or configuration changed: restarting pid %d", comp.name, r.PID)
		stopPID(r.PID, r.StartTicks, 10*time.Second)
	}
	r, err := startComponent(c.l, comp)
	if err != nil {
		return err
	}
	c.opts.Logf("%s: started (pid %d), log %s", comp.name, r.PID, c.l.logFile(comp.name))
	return c.waitReady(ctx, comp, r)
}

// waitReady polls comp's readiness until Options.Timeout; a process that
// dies meanwhile fails at once, quoting its log.
func (c *Cluster) waitReady(ctx context.Context, comp component, r procRecord) error {
	check := c.readiness(comp.name)
	if check == nil {
		return nil
	}
	return c.poll(ctx, comp.name+" ready", func(ctx context.Context) (bool, error) {
		if !r.alive() {
			return false, fmt.Errorf("cluster: %s (pid %d) exited; last lines of %s:\n%s", comp.name, r.PID, c.l.logFile(comp.name), logs.Tail(c.l.logFile(comp.name), 25))
		}
		return check(ctx) == nil, nil
	})
}

// poll calls f every 250 ms until it reports done, fails, or Timeout passes.
func (c *Cluster) poll(ctx context.Context, what string, f func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	start := time.Now()
	for {
		done, err := f(ctx)
		if err != nil {
			return err
		}
		if done {
			c.opts.Logf("%s after %s", what, time.Since(start).Round(time.Millisecond))
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: waiting for %s: %w (logs in %s)", what, ctx.Err(), c.l.logs)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// readiness returns the health check of a component (nil: none).
func (c *Cluster) readiness(name string) func(context.Context) error {
	insecure := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed component serving certs on loopback
	}}
	switch name {
	case "etcd":
		return func(ctx context.Context) error {
			return httpOK(ctx, http.DefaultClient, "http://127.0.0.1:"+strconv.Itoa(EtcdClientPort)+"/health", `"health":"true"`)
		}
	case "kube-apiserver":
		return func(ctx context.Context) error {
			_, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			return err
		}
	case "kube-controller-manager":
		return func(ctx context.Context) error {
			return httpOK(ctx, insecure, "https://127.0.0.1:"+strconv.Itoa(ControllerManagerPort)+"/healthz", "ok")
		}
	case "kube-scheduler":
		return func(ctx context.Context) error {
			return httpOK(ctx, insecure, "https://127.0.0.1:"+strconv.Itoa(SchedulerPort)+"/healthz", "ok")
		}
	case "kube-proxy":
		// 200 once its first sync of the rules is done.
		return func(ctx context.Context) error {
			return httpOK(ctx, http.DefaultClient, "http://127.0.0.1:"+strconv.Itoa(KubeProxyHealthzPort)+"/healthz", "lastUpdated")
		}
	case "containerd":
		return func(ctx context.Context) error {
			_, err := c.ctr(ctx, "version")
			return err
		}
	case "containerd" + secondNode.suffix:
		return func(ctx context.Context) error {
			_, err := c.ctrAt(ctx, c.l.node2().containerdSock, "version")
			return err
		}
	}
	return nil // kubelet: waitNodeReady
}

func httpOK(ctx context.Context, client *http.Client, url, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
		return fmt.Errorf("%s: %d %s", url, resp.StatusCode, body)
	}
	return nil
}

func (c *Cluster) waitNodeReady(ctx context.Context, n nodeSpec) error {
	name := "kubelet" + n.suffix
	r, _ := readRecord(c.l, name)
	return c.poll(ctx, "node "+n.name+" Ready", func(ctx context.Context) (bool, error) {
		if !r.alive() {
			return false, fmt.Errorf("cluster: %s (pid %d) exited; last lines of %s:\n%s", name, r.PID, c.l.logFile(name), logs.Tail(c.l.logFile(name), 25))
		}
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
}

// untaintNode removes the node.kubernetes.io/not-ready taint the kubelet
// registers the Node with. The node lifecycle controller would remove it once
// the Node is Ready, but it is disabled here (it would also evict Pods of a
// node whose kubelet is merely restarting); without this, kube-scheduler
// never places a Pod. Pods with spec.nodeName do not care.
func (c *Cluster) untaintNode(ctx context.Context, name string) error {
	node, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("cluster: get node: %w", err)
	}
	var keep []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.Key != corev1.TaintNodeNotReady {
			keep = append(keep, t)
		}
	}
	if len(keep) == len(node.Spec.Taints) {
		return nil
	}
	node.Spec.Taints = keep
	if _, err := c.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("cluster: remove the %s taint: %w", corev1.TaintNodeNotReady, err)
	}
	c.opts.Logf("removed the %s taint of %s (no node lifecycle controller runs)", corev1.TaintNodeNotReady, name)
	return nil
}

// waitDefaultServiceAccount waits for what every Pod of namespace default
// needs: its ServiceAccount and the kube-root-ca.crt ConfigMap.
func (c *Cluster) waitDefaultServiceAccount(ctx context.Context) error {
	return c.poll(ctx, "default ServiceAccount", func(ctx context.Context) (bool, error) {
		if _, err := c.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, nil
		}
		_, err := c.Client.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil, nil
	})
}

// ctr runs the cluster's ctr against its containerd, in the CRI namespace.
func (c *Cluster) ctr(ctx context.Context, args ...string) (string, error) {
	return c.ctrAt(ctx, c.l.containerdSock, args...)
}

// ctrAt runs ctr against the containerd at socket (a node's).
func (c *Cluster) ctrAt(ctx context.Context, socket string, args ...string) (string, error) {
	full := append([]string{"--address", socket, "--namespace", ContainerdNamespace}, args...)
	return runCmd(ctx, c.bins.containerd("ctr"), full...)
}

// ImportImage imports an OCI (or Docker) image archive into the CRI
// namespace of every node, so Pods can use it with imagePullPolicy: Never.
// The name comes from the archive (io.containerd.image.name in index.json,
// see test/harness/ocipack). Importing the same archive again is harmless.
func (c *Cluster) ImportImage(ctx context.Context, archive string) error {
	if err := c.importInto(ctx, NodeName, c.l.containerdSock, archive); err != nil {
		return err
	}
	if !slices.Contains(c.imported, archive) {
		c.imported = append(c.imported, archive)
	}
	if c.Node2Running() {
		return c.importInto(ctx, Node2Name, c.l.node2().containerdSock, archive)
	}
	return nil
}

func (c *Cluster) importInto(ctx context.Context, node, socket, archive string) error {
	start := time.Now()
	out, err := c.ctrAt(ctx, socket, "images", "import", archive)
	if err != nil {
		return fmt.Errorf("cluster: import %s: %w", archive, err)
	}
	c.opts.Logf("imported %s into %s in %s: %s", filepath.Base(archive), node, time.Since(start).Round(time.Millisecond), strings.Join(strings.Fields(logs.LastLines(out, 1)), " "))
	return nil
}

// Down stops every process of the run directory and removes everything the
// cluster made on the host: Pod processes and cgroups, mounts, network
// namespaces, veths, the bridge, iptables chains and rules, sysctl changes,
// CNI cache entries, shim sockets, and the run directory's state (logs/ is
// kept). It is idempotent and works whether or not Up finished.
func Down(ctx context.Context, opts Options) error {
	o, err := opts.complete()
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errNotRoot
	}
	l := layoutFor(o.Dir)
	if _, err := os.Stat(l.dir); err == nil {
		unlock, err := flock(ctx, l.lock)
		if err != nil {
			return err
		}
		defer unlock()
	}
	return down(ctx, o, l)
}

// down is Down without the lock (Up holds it when it tears down).
func down(ctx context.Context, o Options, l layout) error {
	start := time.Now()
	var errs []error
	machine := true
	if b, err := os.ReadFile(ownerFile); err == nil {
		if other := strings.TrimSpace(string(b)); other != l.dir && len(ownProcesses(other)) > 0 {
			o.Logf("the running cluster belongs to %s: stopping only what %s started", other, l.dir)
			machine = false
		}
	}

	// 1. The kubelets first, so that nothing restarts containers.
	stopRecorded(l, "kubelet"+secondNode.suffix, 15*time.Second)
	stopRecorded(l, "kubelet", 15*time.Second)
	// 2. Every Pod process (containers and sandboxes) of both nodes.
	if machine {
		if err := killCgroupProcesses(CgroupRoot, 15*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	// 3. The containerds, then their shims (which outlive them by design).
	stopRecorded(l, "containerd"+secondNode.suffix, 15*time.Second)
	stopRecorded(l, "containerd", 15*time.Second)
	var sockets []string
	for _, pid := range ownProcesses(l.dir) {
		args := cmdlineOf(pid)
		if len(args) > 0 && strings.Contains(filepath.Base(args[0]), "containerd-shim") {
			sockets = append(sockets, shimSocketsOf(args)...)
			stopPID(pid, 0, 5*time.Second)
		}
	}
	// 4. kube-proxy (before its chains are removed), then the control plane.
	for _, name := range []string{"kube-proxy", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"} {
		stopRecorded(l, name, 15*time.Second)
	}
	// 5. Anything else that mentions the run directory.
	for _, pid := range ownProcesses(l.dir) {
		o.Logf("stopping leftover process %d: %s", pid, strings.Join(cmdlineOf(pid), " "))
		stopPID(pid, 0, 5*time.Second)
	}
	if left := ownProcesses(l.dir); len(left) > 0 {
		errs = append(errs, fmt.Errorf("processes of %s still running: %v", l.dir, left))
	}
	for _, s := range sockets {
		_ = os.Remove(s)
	}

	// 6. Mounts (kubelet volumes and root bind, rootfs overlays, netns).
	if err := unmountUnder(l.dir); err != nil {
		errs = append(errs, err)
	}
	rec, haveRecord := readHostRecord(l)
	if machine {
		// 7. Network: veths, bridge, iptables; 8. cgroups; 9. sysctls and caches.
		errs = append(errs, deleteNode2Network(ctx)...)
		errs = append(errs, deleteBridge(ctx)...)
		errs = append(errs, cleanupIptables(ctx, rec, haveRecord)...)
		errs = append(errs, removeCgroupsUnder(CgroupRoot)...)
		errs = append(errs, restoreSysctls(rec)...)
		errs = append(errs, removeCNICache()...)
		errs = append(errs, removeContainerLogLinks(l.dir)...)
		removeSystemDirs(rec, haveRecord)
	}

	// 10. The run directory, except logs/ (and the lock we hold).
	if len(errs) == 0 {
		for _, p := range []string{l.state, l.pki, l.config, l.pids, l.kubeconfig, l.hostRecord, filepath.Join(l.dir, "go.mod")} {
			if err := removeAllSameDevice(p); err != nil {
				errs = append(errs, err)
			}
		}
		if b, err := os.ReadFile(ownerFile); err == nil && strings.TrimSpace(string(b)) == l.dir {
			_ = os.Remove(ownerFile)
			_ = os.Remove(filepath.Dir(ownerFile))
		}
	} else {
		errs = append(errs, fmt.Errorf("kept %s for inspection; run down again after fixing the above", l.state))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster: down: %w", err)
	}
	o.Logf("cluster down in %s (logs kept in %s)", time.Since(start).Round(time.Millisecond), l.logs)
	return nil
}

func stopRecorded(l layout, name string, grace time.Duration) {
	if r, ok := readRecord(l, name); ok {
		stopPID(r.PID, r.StartTicks, grace)
	}
	_ = os.Remove(pidFile(l, name))
}

// ComponentStatus is one process of a Status report.
type ComponentStatus struct {
	Name    string
	PID     int
	Running bool
	Log     string
}

// StatusReport describes a run directory's cluster.
type StatusReport struct {
	Dir        string
	Kubeconfig string
	Components []ComponentStatus
	// NodeReady is true when the apiserver answers and the Node is Ready.
	NodeReady bool
	// Leftovers lists host objects present without a running cluster.
	Leftovers []string
}

// Running tells whether every component runs and the Node is Ready.
func (s *StatusReport) Running() bool {
	for _, c := range s.Components {
		if !c.Running {
			return false
		}
	}
	return len(s.Components) > 0 && s.NodeReady
}

// Status reports on the run directory's cluster without changing anything.
func Status(ctx context.Context, opts Options) (*StatusReport, error) {
	o, err := opts.complete()
	if err != nil {
		return nil, err
	}
	l := layoutFor(o.Dir)
	s := &StatusReport{Dir: l.dir}
	if _, err := os.Stat(l.kubeconfig); err == nil {
		s.Kubeconfig = l.kubeconfig
	}
	names := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "containerd", "kubelet", "kube-proxy",
		"containerd" + secondNode.suffix, "kubelet" + secondNode.suffix}
	for _, n := range names {
		r, ok := readRecord(l, n)
		if !ok {
			continue
		}
		s.Components = append(s.Components, ComponentStatus{Name: n, PID: r.PID, Running: r.alive(), Log: l.logFile(n)})
	}
	if s.Kubeconfig != "" {
		if cfg, err := clientcmd.BuildConfigFromFlags("", l.kubeconfig); err == nil {
			cfg.Timeout = 3 * time.Second
			if cs, err := kubernetes.NewForConfig(cfg); err == nil {
				if node, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{}); err == nil {
					for _, cond := range node.Status.Conditions {
						if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
							s.NodeReady = true
						}
					}
				}
			}
		}
	}
	if len(s.Components) == 0 {
		s.Leftovers = Leftovers(l.dir)
	}
	return s, nil
}

// Leftovers lists what a cluster of dir would leave on the host if Down
// missed it: processes, mounts under dir, the bridge, cgroups, the iptables
// chain, shim sockets. Empty after a clean Down.
func Leftovers(dir string) []string {
	var out []string
	for _, pid := range ownProcesses(dir) {
		out = append(out, fmt.Sprintf("process %d: %s", pid, strings.Join(cmdlineOf(pid), " ")))
	}
	for _, m := range mountsUnder(dir) {
		out = append(out, "mount "+m)
	}
	if linkExists(Bridge) {
		out = append(out, "bridge "+Bridge)
	}
	for _, d := range cgroupDirs(CgroupRoot) {
		out = append(out, "cgroup "+d)
	}
	if _, err := os.Stat(netnsPath(Node2Netns)); err == nil {
		out = append(out, "network namespace "+Node2Netns)
	}
	if linkExists(node2VethHost) {
		out = append(out, "veth "+node2VethHost)
	}
	for key, chains := range listChains(context.Background()) {
		for _, ch := range chains {
			if ch == IptablesChain {
				out = append(out, "iptables chain "+key+" "+ch)
			}
		}
	}
	if matches, _ := filepath.Glob("/var/lib/cni/results/" + CNINetwork + "-*"); len(matches) > 0 {
		out = append(out, "CNI cache "+strings.Join(matches, " "))
	}
	return out
}

func sleepChan(ms int) <-chan time.Time { return time.After(time.Duration(ms) * time.Millisecond) }

// Attach returns the running cluster of a run directory (for tools that
// import images or need the kubeconfig after another process ran Up).
func Attach(ctx context.Context, opts Options) (*Cluster, error) {
	o, err := opts.complete()
	if err != nil {
		return nil, err
	}
	l := layoutFor(o.Dir)
	cr, ok := readRecord(l, "containerd")
	kr, ok2 := readRecord(l, "kubelet")
	if !ok || !ok2 || !cr.alive() || !kr.alive() || len(cr.Args) == 0 || len(kr.Args) == 0 {
		return nil, fmt.Errorf("cluster: no running cluster in %s; run up first", l.dir)
	}
	bins := binaries{containerdDir: filepath.Dir(cr.Args[0]), k8sDir: filepath.Dir(kr.Args[0])}
	bins.k8sVersion = k8sVersionOf(bins.k8sDir)
	c := &Cluster{Dir: l.dir, Kubeconfig: l.kubeconfig, KubernetesVersion: bins.k8sVersion,
		Kubectl: bins.k8s("kubectl"), opts: o, l: l, bins: bins}
	if r, ok := readRecord(l, "kube-scheduler"); ok && r.alive() {
		c.Scheduler = true
	}
	if c.RESTConfig, err = clientcmd.BuildConfigFromFlags("", l.kubeconfig); err != nil {
		return nil, err
	}
	if c.Client, err = kubernetes.NewForConfig(c.RESTConfig); err != nil {
		return nil, err
	}
	if _, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return nil, fmt.Errorf("cluster: the apiserver of %s does not answer: %w", l.dir, err)
	}
	return c, nil
}
