package cluster

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/graceguard/graceguard/test/harness/repo"
)

// These tests cover the parts of the harness that need no root: the e2e
// smoke test (cluster_e2e_test.go, build tag e2e) runs the real thing.

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPKIIssuesWhatTheComponentsAuthenticateWith(t *testing.T) {
	dir := t.TempDir()
	generated, err := ensurePKI(dir)
	if err != nil || !generated {
		t.Fatalf("ensurePKI = %v, %v; want a fresh PKI", generated, err)
	}
	roots := map[string]*x509.CertPool{}
	for _, ca := range []string{"ca", "front-proxy-ca"} {
		roots[ca] = x509.NewCertPool()
		roots[ca].AddCert(readCert(t, filepath.Join(dir, ca+".crt")))
	}
	for _, spec := range certSpecs() {
		c := readCert(t, filepath.Join(dir, spec.name+".crt"))
		var usages []x509.ExtKeyUsage
		if spec.server {
			usages = append(usages, x509.ExtKeyUsageServerAuth)
		}
		if spec.client {
			usages = append(usages, x509.ExtKeyUsageClientAuth)
		}
		if _, err := c.Verify(x509.VerifyOptions{Roots: roots[spec.ca], KeyUsages: usages}); err != nil {
			t.Errorf("%s does not verify against %s for %v: %v", spec.name, spec.ca, usages, err)
		}
	}
	// The apiserver is reached at the node IP (kubeconfigs), on loopback,
	// and by Pods through the kubernetes Service (DNAT keeps the Service IP).
	api := readCert(t, filepath.Join(dir, "apiserver.crt"))
	for _, ip := range []string{NodeIP, KubernetesServiceIP, "127.0.0.1"} {
		if err := api.VerifyHostname(ip); err != nil {
			t.Errorf("apiserver certificate: %v", err)
		}
	}
	if err := api.VerifyHostname("kubernetes.default.svc"); err != nil {
		t.Errorf("apiserver certificate: %v", err)
	}
	// The Node authorizer and NodeRestriction identify the kubelet by these.
	kc := readCert(t, filepath.Join(dir, "kubelet-client.crt"))
	if kc.Subject.CommonName != "system:node:"+NodeName || len(kc.Subject.Organization) != 1 || kc.Subject.Organization[0] != "system:nodes" {
		t.Errorf("kubelet client subject = %v", kc.Subject)
	}
	if err := readCert(t, filepath.Join(dir, "kubelet.crt")).VerifyHostname(NodeIP); err != nil {
		t.Errorf("kubelet serving certificate (the apiserver dials the InternalIP): %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "ca.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("ca.key mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}

	if generated, err := ensurePKI(dir); err != nil || generated {
		t.Errorf("second ensurePKI = %v, %v; want the PKI kept", generated, err)
	}
	if err := os.Remove(filepath.Join(dir, "kubelet.key")); err != nil {
		t.Fatal(err)
	}
	if generated, err := ensurePKI(dir); err != nil || !generated {
		t.Errorf("ensurePKI after losing a key = %v, %v; want a new PKI", generated, err)
	}
}

func TestAddressPlanKeepsServicesRoutableAndApartFromPods(t *testing.T) {
	_, route, _ := net.ParseCIDR(PodRoute)
	_, pods, _ := net.ParseCIDR(PodCIDR)
	_, svcs, _ := net.ParseCIDR(ServiceCIDR)
	if !route.Contains(svcs.IP) || !route.Contains(pods.IP) {
		t.Errorf("Pods route only %s: it must hold the Pod range %s and the Service range %s", PodRoute, PodCIDR, ServiceCIDR)
	}
	if pods.Contains(svcs.IP) || svcs.Contains(pods.IP) {
		t.Errorf("Pod range %s and Service range %s overlap", PodCIDR, ServiceCIDR)
	}
	first := svcs.IP.To4()
	first[3]++
	if first.String() != KubernetesServiceIP {
		t.Errorf("the apiserver gives the kubernetes Service %s, not %s", first, KubernetesServiceIP)
	}
	if !pods.Contains(net.ParseIP(NodeIP)) {
		t.Errorf("node IP %s is not on the Pod bridge %s", NodeIP, PodCIDR)
	}
}

func TestConfigsKeepEverythingInTheRunDirectory(t *testing.T) {
	l := layoutFor("/srv/gg/run")
	b := binaries{k8sDir: "/k/1.37.2", containerdDir: "/c", runc: "/usr/sbin/runc", cniBinDir: "/usr/lib/cni"}
	ctrd := containerdConfig(l, b)
	for _, want := range []string{
		"version = 3",
		"restrict_oom_score_adj = true", // this VM: no CAP_SYS_RESOURCE
		"netns_mounts_under_state_dir = true",
		`root = "/srv/gg/run/state/containerd/root"`,
		`address = "/srv/gg/run/state/containerd.sock"`,
		`sandbox = "registry.local/pause:3.10"`,
		`Root = "/srv/gg/run/state/runc"`,
		`conf_dir = "/srv/gg/run/config/cni"`,
	} {
		if !strings.Contains(ctrd, want) {
			t.Errorf("containerd.toml lacks %q", want)
		}
	}
	for _, bad := range []string{"/var/lib/containerd", "/run/containerd/containerd.sock", "/etc/cni/net.d"} {
		if strings.Contains(ctrd, bad) {
			t.Errorf("containerd.toml mentions the system path %s", bad)
		}
	}

	var cni struct {
		Name    string
		Plugins []struct {
			Type, Bridge string
			IsGateway    bool
			IPMasq       bool
			IPAM         struct {
				Routes  []map[string]string
				DataDir string
			}
		}
	}
	if err := json.Unmarshal([]byte(cniConfig(l, firstNode)), &cni); err != nil {
		t.Fatal(err)
	}
	p := cni.Plugins[0]
	if cni.Name != CNINetwork || p.Type != "bridge" || p.Bridge != Bridge || !p.IsGateway || p.IPMasq ||
		len(p.IPAM.Routes) != 1 || p.IPAM.Routes[0]["dst"] != PodRoute || !strings.HasPrefix(p.IPAM.DataDir, l.dir+"/") {
		t.Errorf("CNI config = %+v", cni)
	}

	kubelet := kubeletConfig(l, firstNode)
	for _, want := range []string{`cgroupRoot: "/graceguard"`, "failCgroupV1: false", "failSwapOn: false",
		`podLogsDir: "/srv/gg/run/state/pod-logs"`, "imageGCHighThresholdPercent: 100", `memory.available: "1%"`} {
		if !strings.Contains(kubelet, want) {
			t.Errorf("kubelet.yaml lacks %q", want)
		}
	}
	for _, c := range components(l, b) {
		for _, a := range c.args {
			if strings.Contains(a, "/var/lib/") || strings.Contains(a, "0.0.0.0") {
				t.Errorf("%s argument %q leaves the run directory or listens everywhere", c.name, a)
			}
		}
	}
}

func TestIdentityFollowsConfigContent(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.toml")
	if err := os.WriteFile(cfg, []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := component{name: "x", bin: "/bin/true", args: []string{"--config=" + cfg}, files: []string{cfg}}
	id := c.identity()
	if id != c.identity() {
		t.Fatal("identity is not stable")
	}
	if err := os.WriteFile(cfg, []byte("b"), 0o644); err != nil {
		t.Fatal(err)
	}
	if id == c.identity() {
		t.Error("a changed config file keeps the identity: Up would not restart the component")
	}
	c.args = append(c.args, "--v=2")
	if id == c.identity() {
		t.Error("a changed argument keeps the identity")
	}
}

func TestParseMountinfoDecodesEscapes(t *testing.T) {
	text := `22 27 0:21 / /proc rw,relatime - proc proc rw
531 27 0:60 / /srv/gg/run/state/kubelet/pods/a\040b/volumes rw,relatime shared:300 - tmpfs tmpfs rw,size=1024k
532 27 0:4 net:[4026532290] /srv/gg/run/state/containerd/state/netns/cni-1 rw - nsfs nsfs rw
`
	ms := parseMountinfo(text)
	if len(ms) != 3 || ms[1].point != "/srv/gg/run/state/kubelet/pods/a b/volumes" || ms[1].fstype != "tmpfs" || ms[2].fstype != "nsfs" {
		t.Errorf("parseMountinfo = %+v", ms)
	}
}

// A cluster killed with its session leaves its Pods' network namespaces
// mounted under its run directory; Up finds that directory from the
// machine's mounts (the CI run that failed 10 of 16 specs had one).
func TestRunDirsOfFindsADeadClustersMounts(t *testing.T) {
	text := `22 27 0:21 / /proc rw,relatime - proc proc rw
45 27 254:0 /work/main/bin/cluster/state/kubelet /work/main/bin/cluster/state/kubelet rw,relatime shared:1 - ext4 /dev/vda rw
51 27 0:4 net:[4026532175] /work/main/bin/cluster/state/containerd/state/io.containerd.grpc.v1.cri/netns/cni-7660 rw - nsfs nsfs rw
60 27 0:4 net:[4026532176] /check/work/main/bin/cluster/state/node2/containerd/state/io.containerd.grpc.v1.cri/netns/cni-1 rw - nsfs nsfs rw
61 27 0:50 / /home/u/state/notes rw,relatime - tmpfs tmpfs rw
`
	got := runDirsOf(parseMountinfo(text))
	want := []string{"/check/work/main/bin/cluster", "/work/main/bin/cluster"}
	if !slices.Equal(got, want) {
		t.Errorf("runDirsOf = %q, want %q", got, want)
	}
}

func TestShimSocketMatchesContainerd(t *testing.T) {
	// Observed on this machine: containerd v2.2.9's shim for this sandbox
	// listened on /run/containerd/s/4ac8a8df....
	args := []string{"/bin/containerd-shim-runc-v2", "-namespace", "k8s.io",
		"-id", "fc06ce0075c192ffff6bb452c6270d73b00ec82f7ef65031ab4080fea2d2f01e",
		"-address", "/work/main/bin/cluster/state/containerd/containerd.sock"}
	socks := shimSocketsOf(args)
	if len(socks) != 2 || socks[0] != "/run/containerd/s/4ac8a8dfd5bc1310c0090e282e9fe1b7c73421d1c0f894aefb5dafd08684b851" {
		t.Errorf("shimSocketsOf = %v", socks)
	}
	if shimSocketsOf([]string{"containerd-shim-runc-v2", "-id", "x"}) != nil {
		t.Error("an incomplete command line must give no socket")
	}
}

func TestOptionsRefuseDangerousOrLongDirs(t *testing.T) {
	root, err := os.MkdirTemp("/tmp", "gg") // t.TempDir() is too long a path for sockets
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module "+repo.ModulePath+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dir, want string }{
		{"/", "too close to /"},
		{"/srv", "too close to /"},
		{"/srv/" + strings.Repeat("d", 90), "too long"},
		{filepath.Join(root, "run"), ""},
	} {
		o, err := Options{RepoRoot: root, Dir: tc.dir}.complete()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.dir, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want %q", tc.dir, err, tc.want)
		case tc.want == "" && o.Dir != tc.dir:
			t.Errorf("Dir = %s", o.Dir)
		}
	}
	o, err := Options{RepoRoot: root}.complete()
	if err != nil || o.Dir != filepath.Join(root, "bin", "cluster") || o.Timeout <= 0 || o.Logf == nil {
		t.Errorf("defaults = %+v, %v", o, err)
	}
}

func TestMergeEnvOverrides(t *testing.T) {
	got := mergeEnv([]string{"PATH=/usr/bin", "HOME=/root"}, []string{"PATH=/c:/usr/bin"})
	if strings.Join(got, " ") != "HOME=/root PATH=/c:/usr/bin" {
		t.Errorf("mergeEnv = %v", got)
	}
}

func TestSecondNodeHasItsOwnStateNetworkAndTaint(t *testing.T) {
	l := layoutFor("/srv/gg/run")
	l2 := l.node2()
	b := binaries{k8sDir: "/k/1.37.2", containerdDir: "/c", runc: "/usr/sbin/runc", cniBinDir: "/usr/lib/cni"}
	for name, pair := range map[string][2]string{
		"containerd root": {l.containerdRoot, l2.containerdRoot}, "containerd socket": {l.containerdSock, l2.containerdSock},
		"runc root": {l.runcRoot, l2.runcRoot}, "kubelet root": {l.kubeletRoot, l2.kubeletRoot},
		"Pod logs": {l.podLogs, l2.podLogs}, "CNI config": {l.cniConfDir, l2.cniConfDir}, "CNI data": {l.cniDataDir, l2.cniDataDir},
	} {
		if pair[0] == pair[1] || !strings.HasPrefix(pair[1], "/srv/gg/run/") || strings.HasPrefix(pair[1], pair[0]+"/") {
			t.Errorf("%s: the second node's %q must be its own, inside the run directory and apart from %q", name, pair[1], pair[0])
		}
	}
	kubelet := kubeletConfig(l2, secondNode)
	for _, want := range []string{`cgroupRoot: "/graceguard/node2"`, `address: "10.244.1.1"`,
		`tlsCertFile: "/srv/gg/run/pki/kubelet-node2.crt"`, "registerWithTaints:\n- key: \"graceguard.io/second-node\"\n  effect: NoSchedule\n"} {
		if !strings.Contains(kubelet, want) {
			t.Errorf("the second kubelet.yaml lacks %q:\n%s", want, kubelet)
		}
	}
	if strings.Contains(kubeletConfig(l, firstNode), "registerWithTaints") {
		t.Error("the first node must register without a taint")
	}
	var cni struct {
		Plugins []struct {
			Bridge string
			IPAM   struct{ Ranges [][]map[string]string }
		}
	}
	if err := json.Unmarshal([]byte(cniConfig(l2, secondNode)), &cni); err != nil {
		t.Fatal(err)
	}
	if p := cni.Plugins[0]; p.Bridge != Node2Bridge || p.IPAM.Ranges[0][0]["subnet"] != Node2PodCIDR || p.IPAM.Ranges[0][0]["gateway"] != Node2IP {
		t.Errorf("second node CNI config = %+v", cni)
	}
	comps := nodeComponents(l2, b, secondNode)
	if len(comps) != 2 {
		t.Fatalf("%d components", len(comps))
	}
	for _, c := range comps {
		if filepath.Base(c.bin) != "nsenter" || c.args[0] != "--net=/run/netns/"+Node2Netns || c.args[1] != "--" {
			t.Errorf("%s must start in the node's network namespace only: %s %v", c.name, c.bin, c.args)
		}
		if !strings.HasSuffix(c.name, "-node2") {
			t.Errorf("component %s would share the first node's pid record", c.name)
		}
	}

	_, route, _ := net.ParseCIDR(PodRoute)
	_, pods1, _ := net.ParseCIDR(PodCIDR)
	_, pods2, _ := net.ParseCIDR(Node2PodCIDR)
	_, svcs, _ := net.ParseCIDR(ServiceCIDR)
	_, link, _ := net.ParseCIDR(node2LinkHost + "/30")
	if !route.Contains(pods2.IP) || !route.Contains(link.IP) {
		t.Errorf("Pods route only %s: it must hold the second node's Pod range %s and link %s", PodRoute, pods2, link)
	}
	for _, other := range []*net.IPNet{pods1, svcs, link} {
		if other.Contains(pods2.IP) || pods2.Contains(other.IP) {
			t.Errorf("the second node's Pod range %s overlaps %s", pods2, other)
		}
	}
	if !pods2.Contains(net.ParseIP(Node2IP)) || !link.Contains(net.ParseIP(node2LinkPeer)) {
		t.Errorf("node IP %s or link peer %s is off its network", Node2IP, node2LinkPeer)
	}
}

// kube-proxy's rules carry comments with spaces: Down deletes its jumps by
// the arguments iptables -S printed, so the quotes must come off whole.
func TestRuleArgsKeepQuotedCommentsWhole(t *testing.T) {
	line := `-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`
	want := []string{"-A", "PREROUTING", "-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES"}
	if got := ruleArgs(line); !slices.Equal(got, want) {
		t.Errorf("ruleArgs(%q) = %q, want %q", line, got, want)
	}
	if got := ruleArgs(`-A X --comment "say \"hi\"" -j Y`); !slices.Equal(got, []string{"-A", "X", "--comment", `say "hi"`, "-j", "Y"}) {
		t.Errorf("escaped quotes: %q", got)
	}
}
