package server

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/graceguard/graceguard/pkg/webhook"
)

// Only TLS 1.2 with ECDHE and AEAD ciphers, and TLS 1.3, are accepted:
// what an API server offers, and nothing a scanner would flag.
func TestTLSAcceptsOnlyModernVersionsAndAEADSuites(t *testing.T) {
	h := startRun(t, 0, 10*time.Second, 0)
	for _, tc := range []struct {
		name   string
		cfg    *tls.Config
		accept bool
	}{
		{"TLS 1.3", &tls.Config{MinVersion: tls.VersionTLS13}, true},
		{"TLS 1.2 with ECDHE AES-GCM", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}, true},
		{"TLS 1.2 with ECDHE ChaCha20-Poly1305", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}}, true},
		{"TLS 1.2 with a CBC-SHA suite", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}}, false},
		{"TLS 1.2 with a CBC-SHA256 suite", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256}}, false},
		{"TLS 1.1", &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}, false},
		{"TLS 1.0", &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS10}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg.Clone()
			cfg.RootCAs, cfg.ServerName = h.caPool, "127.0.0.1"
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", h.webhookAddr(), cfg)
			if tc.accept {
				if err != nil {
					t.Fatalf("handshake refused: %v", err)
				}
				_ = conn.Close()
				return
			}
			if err == nil {
				_ = conn.Close()
				t.Fatalf("handshake accepted with %s", tls.CipherSuiteName(conn.ConnectionState().CipherSuite))
			}
		})
	}
}

// A client that sends its headers and then trickles or stalls its body is
// cut off once the webhook timeout has passed, not held for as long as it
// likes; the server keeps answering others meanwhile.
func TestStalledBodyIsCutOffAtTheWebhookTimeout(t *testing.T) {
	const timeout = 2 * time.Second
	h := startRun(t, 0, 10*time.Second, 0, func(c *Config) { c.Limits.Timeout = timeout })
	conn := h.rawConn(t)
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"apiVersion\":", webhook.PathMutatePod)

	if r := h.review(t, h.client(false), "shop"); !r.mutated() {
		t.Fatalf("another client's review during the stall was not answered: %v", r.err)
	}
	// The server ends the review: refused (allowed false, 400, the read
	// timed out) or the connection closed.
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var ar admissionv1.AdmissionReview
		if resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(body, &ar); err != nil || ar.Response == nil || ar.Response.Allowed || ar.Response.Result.Code != http.StatusBadRequest {
				t.Fatalf("a review with a stalled body was answered %s", body)
			}
			if !strings.Contains(ar.Response.Result.Message, "timeout") {
				t.Errorf("refusal %q, want it to say the read timed out", ar.Response.Result.Message)
			}
		}
	}
	if took := time.Since(start); took > 4*timeout {
		t.Fatalf("the stalled connection was held %s, want it ended about the webhook timeout (%s) after it began", took.Round(time.Millisecond), timeout)
	}
}

// Request bodies announced beyond the in-flight budget are not read: a
// flood of stalled 6.5 MB reviews holds at most --max-inflight-review-bytes,
// the rest are refused with 429 at once, and once the stalled ones are cut
// off, reviews are answered again.
func TestInFlightBytesBoundStalledBodies(t *testing.T) {
	const timeout = 3 * time.Second
	h := startRun(t, 0, 10*time.Second, 0, func(c *Config) {
		c.Limits.Timeout = timeout
		c.Limits.InFlightBytes = 16 << 20
	})
	const flood, size = 16, 6500 << 10
	var (
		mu     sync.Mutex
		status = map[int]int{}
		wg     sync.WaitGroup
	)
	for range flood {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn := h.rawConn(t)
			defer conn.Close()
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", webhook.PathValidatePod, size)
			_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
			code := 0 // cut off without an answer
			if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
				code = resp.StatusCode
				resp.Body.Close()
			}
			mu.Lock()
			status[code]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	// 16 MiB holds two 6.5 MB bodies: those two wait for their bytes until
	// the timeout; every other one is refused.
	if status[http.StatusTooManyRequests] < flood-2 {
		t.Fatalf("answers by status %v: want at least %d refused with 429", status, flood-2)
	}
	if r := h.review(t, h.client(false), "shop"); !r.mutated() {
		t.Fatalf("after the flood, a review was not answered: %v", r.err)
	}
}

// Beyond --max-concurrent-reviews, and with no room to wait, a review is
// refused with 429 and Retry-After at once instead of queueing, on a
// connection kept open for the API server's retry (a new TLS handshake
// would cost the overloaded replica more than the review).
func TestConcurrentReviewsBeyondTheCapAreShed(t *testing.T) {
	h := startRun(t, 0, 10*time.Second, 3*time.Second, func(c *Config) {
		c.Limits.MaxInFlight = 1
		c.Limits.MaxWaiting = 0
	})
	slow := make(chan reviewResult, 1)
	go func() { slow <- h.review(t, h.client(false), "slow") }()
	h.waitSlowStarted(t)
	c := h.client(false)
	// A body of an ordinary Pod's size (16 KiB), more than net/http
	// buffers with the headers.
	big, err := http.NewRequest(http.MethodPost, "https://"+h.webhookAddr()+webhook.PathMutatePod, strings.NewReader(
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1","object":{"metadata":{"annotations":{"pad":"`+
			strings.Repeat("x", 16<<10)+`"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(big)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("second review while one is in flight: %s, Retry-After %q; want 429, 1", resp.Status, resp.Header.Get("Retry-After"))
	}
	if s := <-slow; !s.mutated() {
		t.Fatalf("the review in flight was not answered: %v", s.err)
	}
	r := h.review(t, c, "shop")
	if !r.mutated() {
		t.Fatalf("a review after the slow one was not answered: %v", r.err)
	}
	if !r.reused {
		t.Error("the retry after a 429 came on a new connection: the shed review's connection was closed")
	}
}

// rawConn is a TLS connection to the webhook server for hand-written requests.
func (h *harness) rawConn(t *testing.T) *tls.Conn {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", h.webhookAddr(),
		&tls.Config{RootCAs: h.caPool, ServerName: "127.0.0.1", NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// /readyz is a state, not a dial: while the webhook port's pending
// connections are all taken (here by connections that never start their
// TLS handshake, as under a flood or a starved CPU, where handshakes wait
// their turn), /readyz still answers at once, within the chart's probe
// timeout. Before, it dialled the webhook port and waited behind them.
func TestReadinessDoesNotWaitForTheWebhookPort(t *testing.T) {
	h := startRun(t, 0, 10*time.Second, time.Second, func(c *Config) {
		c.MaxConnections = 16
		c.MaxPendingConnections = 2
	})
	for range 2 * h.cfg.MaxPendingConnections {
		conn, err := net.Dial("tcp", h.webhookAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
	}
	// The chart's readinessProbe timeoutSeconds is at least 1s.
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 3 {
		resp, err := c.Get("http://" + h.cfg.HealthProbeBindAddress + PathReadyz)
		if err != nil {
			t.Fatalf("/readyz #%d with the pending connections taken: %v", i+1, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/readyz #%d with the pending connections taken = %d, want 200", i+1, resp.StatusCode)
		}
	}
}
