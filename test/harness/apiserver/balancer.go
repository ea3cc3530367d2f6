package apiserver

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
)

// Balancer stands in for kube-proxy in front of a webhook Deployment's
// replicas: the API server dials one address (the Service's), and each
// connection is forwarded whole to one backend (a replica's port) chosen
// at random, as kube-proxy's iptables and nftables modes choose an
// endpoint per connection. TLS passes through untouched, so every replica
// serves the certificate the API server trusts for that address. Requests
// on a kept-alive connection stay with its replica, as they do through
// kube-proxy: only new connections spread.
type Balancer struct {
	ln net.Listener

	mu       sync.Mutex
	backends []string // new connections go to one of these
	stats    map[string]*BackendStats
	open     map[net.Conn]string // client side of a tunnel -> its backend
	failed   int                 // connections no backend took
	wg       sync.WaitGroup
}

// BackendStats is what the balancer forwarded to one backend since it
// started or since ResetStats.
type BackendStats struct {
	Addr string `json:"addr"`
	// Connections were forwarded in all; Open are forwarded now, and
	// PeakOpen the most at once.
	Connections int `json:"connections"`
	Open        int `json:"open"`
	PeakOpen    int `json:"peakOpen"`
}

// NewBalancer listens on a free loopback port; SetBackends says where its
// connections go.
func NewBalancer() (*Balancer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Balancer{ln: ln, stats: map[string]*BackendStats{}, open: map[net.Conn]string{}}
	go b.serve()
	return b, nil
}

// Addr is the address the API server dials (127.0.0.1:port).
func (b *Balancer) Addr() string { return b.ln.Addr().String() }

// SetBackends routes new connections to addrs (host:port each), as
// kube-proxy does once the endpoints are ready; open connections stay
// where they are.
func (b *Balancer) SetBackends(addrs ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.backends = slices.Clone(addrs)
	for _, a := range addrs {
		if b.stats[a] == nil {
			b.stats[a] = &BackendStats{Addr: a}
		}
	}
}

// CloseConnections closes every connection open now, as a rollout of the
// webhook or a network blip would: the API server opens new ones, which
// spread over the backends of the moment.
func (b *Balancer) CloseConnections() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.open {
		_ = c.Close()
	}
}

// ResetStats starts the counts again: the connections forwarded and the
// peaks from now on (Open stays what it is).
func (b *Balancer) ResetStats() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.stats {
		s.Connections, s.PeakOpen = 0, s.Open
	}
	b.failed = 0
}

// Stats is the counts of every backend ever set, in the order of their
// addresses, and the connections dropped because no backend was set or
// the chosen one refused.
func (b *Balancer) Stats() (backends []BackendStats, failed int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.stats {
		backends = append(backends, *s)
	}
	slices.SortFunc(backends, func(x, y BackendStats) int {
		if x.Addr < y.Addr {
			return -1
		}
		if x.Addr > y.Addr {
			return 1
		}
		return 0
	})
	return backends, b.failed
}

// Close stops listening and closes every tunnel.
func (b *Balancer) Close() error {
	err := b.ln.Close()
	b.CloseConnections()
	b.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

func (b *Balancer) serve() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.wg.Go(func() { b.forward(c) })
	}
}

// forward picks a backend for c and copies both ways until either side
// closes.
func (b *Balancer) forward(c net.Conn) {
	defer c.Close()
	b.mu.Lock()
	if len(b.backends) == 0 {
		b.failed++
		b.mu.Unlock()
		return
	}
	addr := b.backends[rand.IntN(len(b.backends))]
	b.mu.Unlock()
	up, err := net.Dial("tcp", addr)
	if err != nil {
		b.mu.Lock()
		b.failed++
		b.mu.Unlock()
		return
	}
	defer up.Close()
	b.mu.Lock()
	s := b.stats[addr]
	s.Connections++
	s.Open++
	s.PeakOpen = max(s.PeakOpen, s.Open)
	b.open[c] = addr
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		s.Open--
		delete(b.open, c)
		b.mu.Unlock()
	}()
	pipe(c, up)
}

// pipe copies both ways between a and b until either side closes or
// fails; the caller closes both.
func pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(b, a); done <- struct{}{} }()
	go func() { _, _ = io.Copy(a, b); done <- struct{}{} }()
	<-done
}
