package apiserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// ServiceNetwork stands in for kube-proxy and cluster DNS where neither
// runs: an HTTP CONNECT proxy that forwards a connection for a Service to
// the process routed there, as kube-proxy forwards it to a Pod. The API
// server reaches it as its "cluster" egress (APIServerFlags: it dials a
// webhook's Service by ClusterIP:port); a process reaches it with
// HTTPS_PROXY=ProxyURL (its client dials NAME.NAMESPACE.svc:port, the
// name a Pod resolves). TLS passes through untouched: the client checks
// the certificate the process serves for the Service's DNS name against
// its own trust, as it would in a cluster.
type ServiceNetwork struct {
	uds, tcp net.Listener
	dir      string
	egress   string
	mu       sync.Mutex
	routes   map[string]string // ClusterIP:port or DNS name:port -> 127.0.0.1:port
	conns    map[string]int    // connections forwarded, per address asked for
	open     map[net.Conn]bool // tunnels open now
}

// NewServiceNetwork listens on a unix socket for the API server (it
// reaches an HTTP CONNECT egress proxy over TCP only with TLS) and on a
// loopback port for processes, and writes the API server's egress
// selector configuration. Close stops both.
func NewServiceNetwork() (*ServiceNetwork, error) {
	dir, err := os.MkdirTemp("", "gg-servicenet-")
	if err != nil {
		return nil, err
	}
	n := &ServiceNetwork{dir: dir, routes: map[string]string{}, conns: map[string]int{}, open: map[net.Conn]bool{}}
	if n.uds, err = net.Listen("unix", filepath.Join(dir, "proxy.sock")); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	if n.tcp, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, errors.Join(err, n.Close())
	}
	n.egress = filepath.Join(dir, "egress.yaml")
	if err := os.WriteFile(n.egress, []byte(fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`, n.uds.Addr().String())), 0o600); err != nil {
		return nil, errors.Join(err, n.Close())
	}
	go n.serve(n.uds)
	go n.serve(n.tcp)
	return n, nil
}

// APIServerFlags make the API server reach Services through the network.
func (n *ServiceNetwork) APIServerFlags() map[string]string {
	return map[string]string{"egress-selector-config-file": n.egress}
}

// ProxyURL is what a process's HTTPS_PROXY names to reach Services.
func (n *ServiceNetwork) ProxyURL() string { return "http://" + n.tcp.Addr().String() }

// RouteService sends connections to svc's port (its ClusterIP and its DNS
// names) to backend, a host:port on this machine.
func (n *ServiceNetwork) RouteService(svc *corev1.Service, port int32, backend string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := strconv.Itoa(int(port))
	for _, host := range []string{svc.Spec.ClusterIP, svc.Name + "." + svc.Namespace + ".svc", svc.Name + "." + svc.Namespace + ".svc.cluster.local"} {
		if host != "" {
			n.routes[net.JoinHostPort(host, p)] = backend
		}
	}
}

// Unroute takes svc's port off the network, as a Service without ready
// endpoints: new connections to it fail (open ones stay, as conntrack
// keeps them).
func (n *ServiceNetwork) Unroute(svc *corev1.Service, port int32) {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := strconv.Itoa(int(port))
	for _, host := range []string{svc.Spec.ClusterIP, svc.Name + "." + svc.Namespace + ".svc", svc.Name + "." + svc.Namespace + ".svc.cluster.local"} {
		delete(n.routes, net.JoinHostPort(host, p))
	}
}

// Connections counts the connections forwarded for addr (ClusterIP:port,
// or NAME.NAMESPACE.svc:port).
func (n *ServiceNetwork) Connections(addr string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.conns[addr]
}

// Reset closes every tunnel open now, as a Pod restart or a network blip
// would: the next call opens a new connection, with a new TLS handshake.
func (n *ServiceNetwork) Reset() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for c := range n.open {
		_ = c.Close()
	}
}

// Close stops listening and removes the socket and the configuration.
func (n *ServiceNetwork) Close() error {
	var errs []error
	for _, l := range []net.Listener{n.uds, n.tcp} {
		if l != nil {
			errs = append(errs, l.Close())
		}
	}
	return errors.Join(append(errs, os.RemoveAll(n.dir))...)
}

func (n *ServiceNetwork) serve(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go n.handle(c)
	}
}

func (n *ServiceNetwork) handle(c net.Conn) {
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
		// Nothing behind this address: as a Service without ready
		// endpoints (or a name no DNS knows), the connection fails.
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
	pipe(c, up)
}
