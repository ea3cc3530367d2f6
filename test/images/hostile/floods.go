package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

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
		hello := craftedPartialHello(serverHandshakeBytes)
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
			code, err := readResponse(bufio.NewReader(c))
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
		headers := unfinishedHeaders(serverHeaderBytes + 4096)
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

// readResponse reads one HTTP/1.1 response with a Content-Length and
// returns its status.
func readResponse(br *bufio.Reader) (int, error) {
	status, length := 0, -1
	for i := 0; ; i++ {
		line, err := br.ReadString('\n')
		if err != nil {
			return 0, err
		}
		line = strings.TrimRight(line, "\r\n")
		if i == 0 {
			f := strings.Fields(line)
			if len(f) < 2 {
				return 0, fmt.Errorf("status line %q", line)
			}
			_, err := fmt.Sscan(f[1], &status)
			if err != nil {
				return 0, err
			}
			continue
		}
		if line == "" {
			break
		}
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Content-Length") {
			if _, err := fmt.Sscan(strings.TrimSpace(v), &length); err != nil {
				return 0, err
			}
		}
	}
	if length < 0 {
		return 0, fmt.Errorf("response without Content-Length")
	}
	_, err := io.CopyN(io.Discard, br, int64(length))
	return status, err
}

// craftedPartialHello is the worst partial ClientHello for a server that
// reads at most limit bytes of a handshake: a complete first record whose
// payload starts a 64 KiB ClientHello, then a second record's header
// announcing the largest record and a few bytes, limit-1 bytes in all.
func craftedPartialHello(limit int) []byte {
	const recordHeader, maxRecord = 5, 16384 + 2048
	first := min(limit-2*recordHeader-16, 16384)
	var b bytes.Buffer
	b.Write([]byte{0x16, 0x03, 0x01})
	_ = binary.Write(&b, binary.BigEndian, uint16(first))
	b.Write([]byte{0x01, 0x00, 0xff, 0xfc}) // ClientHello of 65,532 bytes
	b.Write(bytes.Repeat([]byte{0x03}, first-4))
	b.Write([]byte{0x16, 0x03, 0x01})
	_ = binary.Write(&b, binary.BigEndian, uint16(maxRecord))
	for b.Len() < limit-1 {
		b.WriteByte(0x03)
	}
	return b.Bytes()
}

// unfinishedHeaders is a request whose headers fill limit-1 bytes with the
// shortest distinct header lines, and never end.
func unfinishedHeaders(limit int) []byte {
	var b bytes.Buffer
	b.WriteString("POST /validate-v1-pod HTTP/1.1\r\nHost: graceguard\r\n")
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	for i := 0; ; i++ {
		line := fmt.Sprintf("%c%c%c:\r\n", alphabet[i/len(alphabet)/len(alphabet)%len(alphabet)], alphabet[i/len(alphabet)%len(alphabet)], alphabet[i%len(alphabet)])
		if b.Len()+len(line) >= limit {
			break
		}
		b.WriteString(line)
	}
	return b.Bytes()
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
