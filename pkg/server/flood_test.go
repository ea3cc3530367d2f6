package server

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
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
	"testing"
	"time"

	"github.com/graceguard/graceguard/pkg/webhook"
)

// A flood is hostile connections to the webhook, opened by a child
// process (this test binary, re-run with floodEnv set) so that the
// server's memory is all that the test process measures.

// floodKind is one kind of hostile connection.
type floodKind string

const (
	// floodTCP: a TCP connection that sends nothing.
	floodTCP floodKind = "tcp"
	// floodHello: a partial ClientHello, crafted to make crypto/tls buffer
	// the most it can: a first record complete (a fragment of a 64 KiB
	// ClientHello), then a second record's header announcing the largest
	// record and a few bytes of it, all within the handshake byte bound.
	floodHello floodKind = "hello"
	// floodHandshake: a whole ClientHello, then nothing: the server has
	// done its part of the handshake and waits for the client's Finished.
	floodHandshake floodKind = "handshake"
	// floodIdle: a TLS connection kept alive, idle after one review.
	floodIdle floodKind = "idle"
	// floodHeaders: a TLS connection whose first request's headers never
	// end: the most, and the smallest, header lines the server reads (the
	// map net/http builds from them is the largest per byte).
	floodHeaders floodKind = "headers"
	// floodIdleHeaders: one review answered, then a second request whose
	// headers never end (the connection is idle to http.Server's ConnState
	// until they do).
	floodIdleHeaders floodKind = "idle-headers"
	// floodActive: one review answered, then a second review whose body
	// never comes (a connection in a request, which is never evicted).
	floodActive floodKind = "active"
)

var floodKinds = []floodKind{floodTCP, floodHello, floodHandshake, floodIdle, floodHeaders, floodIdleHeaders, floodActive}

// The flood child's settings.
const (
	floodEnv      = "GRACEGUARD_FLOOD" // kind
	floodAddrEnv  = "GRACEGUARD_FLOOD_ADDR"
	floodCountEnv = "GRACEGUARD_FLOOD_COUNT"
	floodRateEnv  = "GRACEGUARD_FLOOD_RATE" // connections a second; 0: as fast as it can
)

func TestMain(m *testing.M) {
	if kind := os.Getenv(floodEnv); kind != "" {
		os.Exit(floodMain(floodKind(kind), os.Getenv(floodAddrEnv), atoi(os.Getenv(floodCountEnv)), atoi(os.Getenv(floodRateEnv))))
	}
	os.Exit(m.Run())
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// floodMain opens count connections of kind to addr, at most rate a
// second, writes "opened <n> failed <m>" to stdout once they are all open,
// and holds them until stdin closes.
func floodMain(kind floodKind, addr string, count, rate int) int {
	if err := raiseFileLimit(count + 100); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	open, err := floodOpener(kind)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var (
		mu     sync.Mutex
		held   = make([]net.Conn, 0, count)
		failed atomic.Int64
		next   atomic.Int64
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
	if kind == floodTCP || kind == floodHello || kind == floodHandshake {
		workers = 8
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range tokens {
				next.Add(1)
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

// floodOpener returns how to open one connection of kind. Connections
// that finished a handshake are held by their TCP connection alone: the
// client's TLS state is of no use to a flood.
func floodOpener(kind floodKind) (func(addr string) (net.Conn, error), error) {
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
		br := bufio.NewReader(c)
		resp, err := readResponse(br)
		if err != nil {
			return err
		}
		if resp != 200 {
			return fmt.Errorf("HTTP %d", resp)
		}
		return nil
	}
	switch kind {
	case floodTCP:
		return dial, nil
	case floodHello:
		hello := craftedPartialHello(maxHandshakeBytes)
		return func(addr string) (net.Conn, error) {
			c, err := dial(addr)
			if err != nil {
				return nil, err
			}
			return send(c, hello)
		}, nil
	case floodHandshake:
		hello, err := clientHello()
		if err != nil {
			return nil, err
		}
		return func(addr string) (net.Conn, error) {
			c, err := dial(addr)
			if err != nil {
				return nil, err
			}
			return send(c, hello)
		}, nil
	case floodIdle:
		return func(addr string) (net.Conn, error) {
			c, err := dialTLS(addr)
			if err != nil {
				return nil, err
			}
			if err := review(c); err != nil {
				_ = c.Close()
				return nil, err
			}
			return c.NetConn(), nil
		}, nil
	case floodActive:
		stalled := fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", webhook.PathValidatePod)
		return func(addr string) (net.Conn, error) {
			c, err := dialTLS(addr)
			if err != nil {
				return nil, err
			}
			if err := review(c); err != nil {
				_ = c.Close()
				return nil, err
			}
			if _, err := c.Write(stalled); err != nil {
				_ = c.Close()
				return nil, err
			}
			return c.NetConn(), nil
		}, nil
	case floodHeaders, floodIdleHeaders:
		headers := unfinishedHeaders(maxHeaderBytes + 4096)
		return func(addr string) (net.Conn, error) {
			c, err := dialTLS(addr)
			if err != nil {
				return nil, err
			}
			if kind == floodIdleHeaders {
				if err := review(c); err != nil {
					_ = c.Close()
					return nil, err
				}
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
		return 0, fmt.Errorf("response without Content-Length")
	}
	_, err := io.CopyN(io.Discard, br, int64(length))
	return status, err
}

// craftedPartialHello is the worst partial ClientHello for a server that
// reads at most limit bytes of a handshake: a complete first record whose
// payload starts a 64 KiB ClientHello, then a second record's header
// announcing the largest record (18,432 bytes: crypto/tls grows its input
// buffer for all of it at once) and a few bytes, limit-1 bytes in all.
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

// unfinishedHeaders is a request whose headers fill limit-1 bytes with the
// shortest distinct header lines, and never end.
func unfinishedHeaders(limit int) []byte {
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

// raiseFileLimit raises the soft limit on open files to at least n, up to
// the hard limit.
func raiseFileLimit(n int) error {
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

// flood is a running flood child.
type flood struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	opened chan floodCount
}

type floodCount struct {
	opened, failed int
	err            error
}

// startFlood starts a child opening count connections of kind to addr.
func startFlood(t *testing.T, kind floodKind, addr string, count, rate int) *flood {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), floodEnv+"="+string(kind), floodAddrEnv+"="+addr,
		floodCountEnv+"="+strconv.Itoa(count), floodRateEnv+"="+strconv.Itoa(rate))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f := &flood{cmd: cmd, stdin: stdin, opened: make(chan floodCount, 1)}
	go func() {
		var c floodCount
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil {
			_, err = fmt.Sscanf(line, "opened %d failed %d", &c.opened, &c.failed)
		}
		c.err = err
		f.opened <- c
		_, _ = io.Copy(io.Discard, stdout)
	}()
	t.Cleanup(f.stop)
	return f
}

// wait returns once every connection was opened (or failed to).
func (f *flood) wait(t *testing.T) floodCount {
	t.Helper()
	select {
	case c := <-f.opened:
		if c.err != nil {
			t.Fatalf("flood: %v", c.err)
		}
		return c
	case <-time.After(5 * time.Minute):
		t.Fatal("the flood did not open its connections within 5 minutes")
		return floodCount{}
	}
}

// stop closes the flood's connections and waits for it to exit.
func (f *flood) stop() {
	if f.stdin != nil {
		_ = f.stdin.Close()
		_ = f.cmd.Wait()
		f.stdin = nil
	}
}
