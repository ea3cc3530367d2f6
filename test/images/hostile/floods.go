package main

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/graceguard/graceguard/internal/flood"
	"github.com/graceguard/graceguard/test/e2e/evidence"
)

// The kinds of hostile connection, as pkg/server's flood tests open them.
const (
	// floodTCP: connected, then nothing (no ClientHello): half open to the
	// server's TLS layer.
	floodTCP = "tcp"
	// floodHello: a partial ClientHello crafted to be buffered the most
	// within the server's 8 KiB handshake bound.
	floodHello = "hello"
	// floodIdle: TLS, one review answered, then idle (kept alive).
	floodIdle = "idle"
	// floodHeaders: TLS, then a request whose headers never end, just
	// under what net/http reads before it answers 431.
	floodHeaders = "headers"
)

var floodKinds = []string{floodTCP, floodHello, floodIdle, floodHeaders}

// The server's bounds the crafted bytes are sized to (pkg/server).
const (
	serverHandshakeBytes = 8 << 10
	serverHeaderBytes    = 1 << 10
)

// flooder keeps up to target connections of one kind open to one address,
// opening a new one as soon as the server closes one, at most rate a second.
type flooder struct {
	kind, addr string
	target     int
	rate       int
	open       func() (net.Conn, error)

	// slots counts the connections held or being opened (at most target),
	// held those open.
	slots, held, peak      atomic.Int64
	opened, failed, closed atomic.Int64
	failSample             atomic.Value // string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	stop  chan struct{}
	wg    sync.WaitGroup
}

func newFlooder(kind, addr, ns string, target, rate int) (*flooder, error) {
	open, err := opener(kind, addr, ns)
	if err != nil {
		return nil, err
	}
	return &flooder{kind: kind, addr: addr, target: target, rate: max(rate, 1), open: open, conns: map[net.Conn]struct{}{}, stop: make(chan struct{})}, nil
}

// start runs workers opening connections until halt.
func (f *flooder) start(workers int) {
	tokens := make(chan struct{}, f.rate)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		// Tokens every 10 ms, rate a second in all.
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		carry := 0.0
		for {
			select {
			case <-f.stop:
				return
			case <-t.C:
			}
			carry += float64(f.rate) / 100
			for ; carry >= 1; carry-- {
				select {
				case tokens <- struct{}{}:
				default:
				}
			}
		}
	}()
	for range workers {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			for {
				for n := f.slots.Load(); n >= int64(f.target) || !f.slots.CompareAndSwap(n, n+1); n = f.slots.Load() {
					select {
					case <-f.stop:
						return
					case <-time.After(time.Millisecond):
					}
				}
				select {
				case <-f.stop:
					f.slots.Add(-1)
					return
				case <-tokens:
				}
				c, err := f.open()
				if err != nil {
					f.slots.Add(-1)
					f.failed.Add(1)
					f.failSample.CompareAndSwap(nil, clip(err.Error(), 200))
					continue
				}
				f.hold(c)
			}
		}()
	}
}

// hold keeps c until the server closes it (counted) or halt.
func (f *flooder) hold(c net.Conn) {
	f.mu.Lock()
	select {
	case <-f.stop:
		f.mu.Unlock()
		f.slots.Add(-1)
		_ = c.Close()
		return
	default:
	}
	f.conns[c] = struct{}{}
	f.mu.Unlock()
	f.opened.Add(1)
	n := f.held.Add(1)
	for p := f.peak.Load(); n > p && !f.peak.CompareAndSwap(p, n); p = f.peak.Load() {
	}
	go func() {
		_, _ = io.Copy(io.Discard, c)
		f.mu.Lock()
		_, mine := f.conns[c]
		delete(f.conns, c)
		f.mu.Unlock()
		if mine {
			f.closed.Add(1)
		}
		f.held.Add(-1)
		f.slots.Add(-1)
		_ = c.Close()
	}()
}

// halt stops opening and closes every connection held.
func (f *flooder) halt() {
	f.mu.Lock()
	close(f.stop)
	conns := f.conns
	f.conns = map[net.Conn]struct{}{}
	f.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
	f.wg.Wait()
}

func (f *flooder) snapshot() *evidence.Flood {
	s, _ := f.failSample.Load().(string)
	return &evidence.Flood{Kind: f.kind, Target: f.addr, Opened: int(f.opened.Load()), Failed: int(f.failed.Load()),
		Closed: int(f.closed.Load()), HeldPeak: int(f.peak.Load()), FailSample: s}
}

// opener returns how to open one connection of kind to addr. Connections
// that finished a handshake are held by their TCP connection alone.
func opener(kind, addr, ns string) (func() (net.Conn, error), error) {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	dial := func() (net.Conn, error) { return dialer.Dial("tcp", addr) }
	dialTLS := func() (*tls.Conn, error) {
		return tls.DialWithDialer(dialer, "tcp", addr,
			// X25519 alone: the cheapest handshake, for the attacker too.
			&tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}, CurvePreferences: []tls.CurveID{tls.X25519}}) //nolint:gosec // an attacker trusts anything
	}
	send := func(c net.Conn, b []byte) (net.Conn, error) {
		_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(b); err != nil {
			_ = c.Close()
			return nil, err
		}
		_ = c.SetWriteDeadline(time.Time{})
		return c, nil
	}
	body := review(ns)
	switch kind {
	case floodTCP:
		return dial, nil
	case floodHello:
		hello := flood.CraftedPartialHello(serverHandshakeBytes)
		return func() (net.Conn, error) {
			c, err := dial()
			if err != nil {
				return nil, err
			}
			return send(c, hello)
		}, nil
	case floodIdle:
		return func() (net.Conn, error) {
			c, err := dialTLS()
			if err != nil {
				return nil, err
			}
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			fmt.Fprintf(c, "POST /validate-v1-pod HTTP/1.1\r\nHost: graceguard\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			code, err := flood.ReadResponse(bufio.NewReader(c))
			if err == nil && code != 200 {
				err = fmt.Errorf("review answered HTTP %d", code)
			}
			if err != nil {
				_ = c.Close()
				return nil, err
			}
			_ = c.SetDeadline(time.Time{})
			return c.NetConn(), nil
		}, nil
	case floodHeaders:
		headers := flood.UnfinishedHeaders(serverHeaderBytes + 4096)
		return func() (net.Conn, error) {
			c, err := dialTLS()
			if err != nil {
				return nil, err
			}
			if _, err := send(c, headers); err != nil {
				return nil, err
			}
			return c.NetConn(), nil
		}, nil
	}
	return nil, fmt.Errorf("no flood kind %q", kind)
}

// raiseFileLimit raises the soft limit on open files to the hard limit (an
// unprivileged process can go no further) and says what it was and is.
func raiseFileLimit() (string, uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return "", 0, err
	}
	before := fmt.Sprintf("soft %d hard %d", lim.Cur, lim.Max)
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return before, 0, fmt.Errorf("raising the open-file limit to %d: %w", lim.Max, err)
		}
	}
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return before, 0, err
	}
	return fmt.Sprintf("%s, raised to soft %d hard %d", before, lim.Cur, lim.Max), lim.Cur, nil
}
