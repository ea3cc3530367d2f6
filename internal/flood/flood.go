// Package flood opens hostile connections to a webhook server, from a
// child process (the calling test binary, run again with the flood's
// settings in its environment), so that the server's memory is all the
// measuring process or cgroup sees. pkg/server's connection tests and
// `make security-report` (test/security) flood with it.
//
// Invariant: each kind sends what pkg/server bounds, at those bounds
// (HandshakeBytes, HeaderBytes; pkg/server's tests check they are its
// own), so a flood measures the costliest connection of its kind.
package flood

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/graceguard/graceguard/pkg/webhook"
)

// Kind is one kind of hostile connection.
type Kind string

const (
	// TCP: a TCP connection that sends nothing.
	TCP Kind = "tcp"
	// Hello: a partial ClientHello, crafted to make crypto/tls buffer the
	// most it can: a first record complete (a fragment of a 64 KiB
	// ClientHello), then a second record's header announcing the largest
	// record and a few bytes of it, all within HandshakeBytes.
	Hello Kind = "hello"
	// Handshake: a whole ClientHello, then nothing: the server has done its
	// part of the handshake and waits for the client's Finished.
	Handshake Kind = "handshake"
	// Idle: a TLS connection kept alive, idle after one review.
	Idle Kind = "idle"
	// Headers: a TLS connection whose first request's headers never end:
	// the most, and the smallest, header lines the server reads (the map
	// net/http builds from them is the largest per byte).
	Headers Kind = "headers"
	// IdleHeaders: one review answered, then a second request whose
	// headers never end (the connection is idle to http.Server's ConnState
	// until they do).
	IdleHeaders Kind = "idle-headers"
	// Active: one review answered, then a second review whose body never
	// comes (a connection in a request, which is never evicted).
	Active Kind = "active"
)

// Kinds are every kind, cheapest first.
var Kinds = []Kind{TCP, Hello, Handshake, Idle, Headers, IdleHeaders, Active}

// Descriptions say what each kind sends.
var Descriptions = map[Kind]string{
	TCP:         "TCP connections that send nothing",
	Hello:       "partial ClientHellos, crafted to be buffered the most",
	Handshake:   "whole ClientHellos, the handshake never finished",
	Idle:        "TLS connections idle after one review",
	Headers:     "first requests whose headers never end (short distinct lines, the costliest per byte)",
	IdleHeaders: "one review, then a second request whose headers never end",
	Active:      "one review, then a second review whose body never comes",
}

// The server's bounds the floods are built against: pkg/server's
// maxHandshakeBytes and maxHeaderBytes.
const (
	HandshakeBytes = 8 << 10
	HeaderBytes    = 1 << 10
)

// The child's settings.
const (
	kindEnv  = "GRACEGUARD_FLOOD"
	addrEnv  = "GRACEGUARD_FLOOD_ADDR"
	countEnv = "GRACEGUARD_FLOOD_COUNT"
	rateEnv  = "GRACEGUARD_FLOOD_RATE" // connections a second; 0: as fast as it can
)

// MainIfChild runs the flood and exits when this process is a flood child
// (Start's); otherwise it returns at once. Call it first in TestMain.
func MainIfChild() {
	if kind := os.Getenv(kindEnv); kind != "" {
		os.Exit(childMain(Kind(kind), os.Getenv(addrEnv), atoi(os.Getenv(countEnv)), atoi(os.Getenv(rateEnv))))
	}
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// childMain opens count connections of kind to addr, at most rate a
// second, writes "opened <n> failed <m>" to stdout once they are all open,
// and holds them until stdin closes.
func childMain(kind Kind, addr string, count, rate int) int {
	if err := RaiseFileLimit(count + 100); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	open, err := opener(kind)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var (
		mu     sync.Mutex
		held   = make([]net.Conn, 0, count)
		failed atomic.Int64
		wg     sync.WaitGroup
	)
	var tick <-chan time.Time
	if rate > 0 {
		t := time.NewTicker(time.Second / time.Duration(rate))
		defer t.Stop()
		tick = t.C
	}
	tokens := make(chan struct{})
	go func() {
		defer close(tokens)
		for range count {
			if tick != nil {
				<-tick
			}
			tokens <- struct{}{}
		}
	}()
	workers := 32
	if kind == TCP || kind == Hello || kind == Handshake {
		workers = 8
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range tokens {
				c, err := open(addr)
				if err != nil {
					failed.Add(1)
					continue
				}
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	fmt.Printf("opened %d failed %d\n", len(held), failed.Load())
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, c := range held {
		_ = c.Close()
	}
	return 0
}

// opener returns how to open one connection of kind. Connections that
// finished a handshake are held by their TCP connection alone: the
// client's TLS state is of no use to a flood.
func opener(kind Kind) (func(addr string) (net.Conn, error), error) {
	dial := func(addr string) (net.Conn, error) { return net.DialTimeout("tcp", addr, 10*time.Second) }
	dialTLS := func(addr string) (*tls.Conn, error) {
		return tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr,
			// X25519 alone: the cheapest handshake, for the server too.
			&tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}, CurvePreferences: []tls.CurveID{tls.X25519}}) //nolint:gosec // a flood trusts anything
	}
	send := func(c net.Conn, b []byte) (net.Conn, error) {
		if _, err := c.Write(b); err != nil {
			_ = c.Close()
			return nil, err
		}
		return c, nil
	}
	review := func(c *tls.Conn) error {
		body := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"f","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"namespace":"flood","operation":"CREATE","userInfo":{"username":"flood"},"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"f","namespace":"flood"},"spec":{"containers":[{"name":"a","image":"a"}]}}}}`)
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", webhook.PathValidatePod, len(body), body)
		status, err := ReadResponse(bufio.NewReader(c))
		if err != nil {
			return err
		}
		if status != 200 {
			return fmt.Errorf("HTTP %d", status)
		}
		return nil
	}
	// withReview dials TLS, has one review answered, then sends then.
	withReview := func(then []byte) func(addr string) (net.Conn, error) {
		return func(addr string) (net.Conn, error) {
			c, err := dialTLS(addr)
			if err != nil {
				return nil, err
			}
			if err := review(c); err != nil {
				_ = c.Close()
				return nil, err
			}
			if len(then) > 0 {
				if _, err := c.Write(then); err != nil {
					_ = c.Close()
					return nil, err
				}
			}
			return c.NetConn(), nil
		}
	}
	switch kind {
	case TCP:
		return dial, nil
	case Hello, Handshake:
		hello := CraftedPartialHello(HandshakeBytes)
		if kind == Handshake {
			var err error
			if hello, err = clientHello(); err != nil {
				return nil, err
			}
		}
		return func(addr string) (net.Conn, error) {
			c, err := dial(addr)
			if err != nil {
				return nil, err
			}
			return send(c, hello)
		}, nil
	case Idle:
		return withReview(nil), nil
	case Active:
		return withReview(fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", webhook.PathValidatePod)), nil
	case IdleHeaders:
		return withReview(UnfinishedHeaders(HeaderBytes + 4096)), nil
	case Headers:
		headers := UnfinishedHeaders(HeaderBytes + 4096)
		return func(addr string) (net.Conn, error) {
			c, err := dialTLS(addr)
			if err != nil {
				return nil, err
			}
			if _, err := c.Write(headers); err != nil {
				_ = c.Close()
				return nil, err
			}
			return c.NetConn(), nil
		}, nil
	}
	return nil, fmt.Errorf("no flood kind %q", kind)
}

// ReadResponse reads one HTTP/1.1 response with a Content-Length and
// returns its status.
func ReadResponse(br *bufio.Reader) (int, error) {
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
			status = atoi(f[1])
			continue
		}
		if line == "" {
			break
		}
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Content-Length") {
			length = atoi(strings.TrimSpace(v))
		}
	}
	if length < 0 {
		return 0, errors.New("response without Content-Length")
	}
	_, err := io.CopyN(io.Discard, br, int64(length))
	return status, err
}

// CraftedPartialHello is the worst partial ClientHello for a server that
// reads at most limit bytes of a handshake: a complete first record whose
// payload starts a 64 KiB ClientHello, then a second record's header
// announcing the largest record (18,432 bytes: crypto/tls grows its input
// buffer for all of it at once) and a few bytes, limit-1 bytes in all.
func CraftedPartialHello(limit int) []byte {
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

// clientHello is a ClientHello as Go's client sends it (the API server's),
// captured from a handshake with no server.
func clientHello() ([]byte, error) {
	client, server := net.Pipe()
	defer server.Close()
	go func() {
		c := tls.Client(client, &tls.Config{ServerName: "graceguard.graceguard-system.svc", NextProtos: []string{"http/1.1"}}) //nolint:gosec // never completes
		_ = c.Handshake()
	}()
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(server, hdr); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint16(hdr[3:]))
	if _, err := io.ReadFull(server, body); err != nil {
		return nil, err
	}
	_ = client.Close()
	return append(hdr, body...), nil
}

// UnfinishedHeaders is a request whose headers fill limit-1 bytes with the
// shortest distinct header lines, and never end.
func UnfinishedHeaders(limit int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: x\r\n", webhook.PathValidatePod)
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

// RaiseFileLimit raises the soft limit on open files to at least n, up to
// the hard limit.
func RaiseFileLimit(n int) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	if lim.Cur >= uint64(n) {
		return nil
	}
	if lim.Max < uint64(n) {
		return fmt.Errorf("need %d open files, the hard limit (ulimit -Hn) is %d: raise it to run the connection floods", n, lim.Max)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("raising the open-file limit to %d: %w", lim.Max, err)
	}
	return nil
}

// Flood is a running flood child.
type Flood struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	opened chan Count
	once   sync.Once
}

// Count is what a flood opened.
type Count struct {
	Opened, Failed int
	Err            error
}

// Start starts a child (this test binary, running no test) opening count
// connections of kind to addr, at most rate a second (0: as fast as it
// can). Its errors go to this process's stderr.
func Start(kind Kind, addr string, count, rate int) (*Flood, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), kindEnv+"="+string(kind), addrEnv+"="+addr,
		countEnv+"="+strconv.Itoa(count), rateEnv+"="+strconv.Itoa(rate))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	f := &Flood{cmd: cmd, stdin: stdin, opened: make(chan Count, 1)}
	go func() {
		var c Count
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil {
			_, err = fmt.Sscanf(line, "opened %d failed %d", &c.Opened, &c.Failed)
		}
		c.Err = err
		f.opened <- c
		_, _ = io.Copy(io.Discard, stdout)
	}()
	return f, nil
}

// Wait returns once every connection was opened (or failed to), or after
// timeout.
func (f *Flood) Wait(timeout time.Duration) (Count, error) {
	select {
	case c := <-f.opened:
		if c.Err != nil {
			return c, fmt.Errorf("flood: %w", c.Err)
		}
		return c, nil
	case <-time.After(timeout):
		return Count{}, fmt.Errorf("the flood did not open its connections within %s", timeout)
	}
}

// Stop closes the flood's connections and waits for it to exit.
func (f *Flood) Stop() {
	f.once.Do(func() {
		_ = f.stdin.Close()
		_ = f.cmd.Wait()
	})
}
