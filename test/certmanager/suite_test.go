// Package certmanager_test installs graceguard's chart in cert-manager mode
// on a real kube-apiserver and etcd (envtest) where cert-manager's own
// controller and cainjector run, and checks what the chart promises in that
// mode: cert-manager issues the serving certificate, cainjector puts its CA
// into both webhook configurations, the API server calls graceguard through
// its Service and trusts it, and a renewal is survived.
//
// No kubelet or kube-proxy runs here; two stand-ins replace them, each doing
// only what the real one does for these objects: a Secret volume (the
// Secret's keys projected into a directory, updated atomically, as the
// kubelet's atomic writer does) and a Service network (the API server's
// "cluster" egress, configured with --egress-selector-config-file, goes
// through an HTTP CONNECT proxy that forwards the Service's ClusterIP:port
// to the graceguard process, as kube-proxy forwards it to a Pod).
//
// Needs KUBEBUILDER_ASSETS (hack/envtest-assets.sh) and CERT_MANAGER_ASSETS
// (hack/cert-manager-assets.sh); `make test` sets both.
package certmanager_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/graceguard/graceguard/test/harness/apiserver"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestCertManager(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "graceguard in cert-manager mode, with cert-manager, on a real API server")
}

var (
	restConfig *rest.Config
	kube       kubernetes.Interface
	dyn        dynamic.Interface
	kubeconfig string
	assets     string // CERT_MANAGER_ASSETS
	network    *serviceNetwork
	webhookBin string
)

var _ = BeforeSuite(func() {
	assets = os.Getenv("CERT_MANAGER_ASSETS")
	for _, f := range []string{"controller", "cainjector", "crds/cert-manager.io_certificates.yaml"} {
		_, err := os.Stat(filepath.Join(assets, f))
		Expect(err).NotTo(HaveOccurred(), "CERT_MANAGER_ASSETS=%q lacks %s: run `make test`, or set it to the output of hack/cert-manager-assets.sh", assets, f)
	}

	var err error
	network, err = newServiceNetwork()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(network.close)
	egress := filepath.Join(GinkgoT().TempDir(), "egress.yaml")
	Expect(os.WriteFile(egress, []byte(fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`, network.addr())), 0o600)).To(Succeed())

	api, err := apiserver.StartAPIServer(context.Background(), apiserver.APIServerOptions{Alone: true,
		CRDDirs: []string{filepath.Join(assets, "crds")}, APIServerFlags: map[string]string{"egress-selector-config-file": egress}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(api.Stop()).To(Succeed()) })
	restConfig, kube = api.Config, api.Client
	dyn, err = dynamic.NewForConfig(restConfig)
	Expect(err).NotTo(HaveOccurred())
	kubeconfig = writeKubeconfig(restConfig, "")

	webhookBin, err = gexec.Build("github.com/graceguard/graceguard/cmd/webhook")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(gexec.CleanupBuildArtifacts)
})

// writeKubeconfig is the envtest admin's kubeconfig, impersonating user
// when it is not empty (a ServiceAccount gets its groups, as in a Pod).
func writeKubeconfig(c *rest.Config, user string) string {
	GinkgoHelper()
	path := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(apiserver.WriteKubeconfig(path, c, "", user)).To(Succeed())
	return path
}

// serviceNetwork stands in for kube-proxy for the API server: it is the
// HTTP CONNECT proxy of the API server's "cluster" egress, and forwards a
// connection to a Service's ClusterIP:port to the process routed there.
// TLS passes through untouched: the API server verifies the certificate
// the process serves, for the Service's DNS name, against the caBundle.
type serviceNetwork struct {
	ln     net.Listener
	mu     sync.Mutex
	routes map[string]string // ClusterIP:port -> 127.0.0.1:port
	conns  map[string]int    // connections forwarded, per ClusterIP:port
	open   map[net.Conn]bool // tunnels open now
}

// newServiceNetwork listens on a unix socket: kube-apiserver (v1.37) reaches
// an HTTP CONNECT egress proxy over TCP only with TLS.
func newServiceNetwork() (*serviceNetwork, error) {
	dir, err := os.MkdirTemp("", "gg-egress-")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "proxy.sock"))
	if err != nil {
		return nil, err
	}
	DeferCleanup(func() { _ = os.RemoveAll(dir) })
	n := &serviceNetwork{ln: ln, routes: map[string]string{}, conns: map[string]int{}, open: map[net.Conn]bool{}}
	go n.serve()
	return n, nil
}

func (n *serviceNetwork) addr() string { return n.ln.Addr().String() }
func (n *serviceNetwork) close()       { _ = n.ln.Close() }

func (n *serviceNetwork) route(service, backend string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.routes[service] = backend
}

func (n *serviceNetwork) connections(service string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.conns[service]
}

// reset closes every open tunnel, as a Pod restart or a network blip
// would: the API server's next call opens a new connection, with a new TLS
// handshake.
func (n *serviceNetwork) reset() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for c := range n.open {
		_ = c.Close()
	}
}

func (n *serviceNetwork) serve() {
	for {
		c, err := n.ln.Accept()
		if err != nil {
			return
		}
		go n.handle(c)
	}
}

func (n *serviceNetwork) handle(c net.Conn) {
	defer c.Close()
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return
	}
	if req.Method != http.MethodConnect {
		_, _ = io.WriteString(c, "HTTP/1.1 405 Method Not Allowed\r\n\r\n")
		return
	}
	target := req.URL.Host
	n.mu.Lock()
	backend, ok := n.routes[target]
	if ok {
		n.conns[target]++
	}
	n.mu.Unlock()
	if !ok {
		// Nothing behind this address (yet): as a Service without ready
		// endpoints, the connection is refused.
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	up, err := net.Dial("tcp", backend)
	if err != nil {
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	defer up.Close()
	n.mu.Lock()
	n.open[c] = true
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(n.open, c)
		n.mu.Unlock()
	}()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}
