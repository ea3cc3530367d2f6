package server

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/client-go/rest"

	"github.com/graceguard/graceguard/internal/freeport"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/webhook"
)

// HTTP/2 is off unless asked for: an HTTP/2-capable client gets HTTP/1.1.
func TestHTTP2IsOffByDefault(t *testing.T) {
	h := startRun(t, 0, 10*time.Second, 0)
	r := h.review(t, h.client(true), "shop")
	if r.err != nil || !r.mutated() {
		t.Fatalf("review failed: %v", r.err)
	}
	if r.proto != "HTTP/1.1" {
		t.Fatalf("negotiated %s with HTTP/2 disabled, want HTTP/1.1", r.proto)
	}
}

// The shutdown sequence, end to end on loopback: a real manager, the real
// TLS webhook server and health server, real AdmissionReviews. The manager
// is given an API server address where nothing listens: with a fake
// namespace lookup it never needs one.
func TestRunShutsDownGracefully(t *testing.T) {
	const (
		delay     = 1500 * time.Millisecond
		slowReads = 2500 * time.Millisecond // longer than the delay: in flight when the listener closes
	)
	h := startRun(t, delay, 10*time.Second, slowReads, func(c *Config) { c.EnableHTTP2 = true })

	// Before shutdown: ready, reviews answered, connections reused.
	if code := h.readyz(t); code != http.StatusOK {
		t.Fatalf("/readyz before shutdown = %d, want 200", code)
	}
	if code := h.get(t, PathHealthz); code != http.StatusOK {
		t.Fatalf("/healthz = %d, want 200", code)
	}
	protos := []string{"HTTP/1.1", "HTTP/2.0"}
	clients := map[string]*http.Client{"HTTP/1.1": h.client(false), "HTTP/2.0": h.client(true)}
	for _, proto := range protos {
		c := clients[proto]
		first := h.review(t, c, "shop")
		second := h.review(t, c, "shop")
		if !first.mutated() || !second.mutated() {
			t.Fatalf("%s: review before shutdown not mutated: err=%v response=%+v", proto, first.err, first.review.Response)
		}
		if first.proto != proto {
			t.Fatalf("client negotiated %s, want %s", first.proto, proto)
		}
		if !second.reused {
			t.Fatalf("%s: second review before shutdown did not reuse the connection", proto)
		}
		if first.closeConn {
			t.Fatalf("%s: review before shutdown asked to close the connection", proto)
		}
	}

	// A review whose namespace read takes longer than the whole delay.
	slow := make(chan reviewResult, 1)
	go func() { slow <- h.review(t, h.client(false), "slow") }()
	h.waitSlowStarted(t)

	h.shutdown()
	signalled := time.Now()

	if code := h.readyz(t); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz right after the shutdown signal = %d, want 503", code)
	}
	if since := time.Since(signalled); since > delay/3 {
		t.Fatalf("/readyz turned 503 only after %s", since)
	}
	if code := h.get(t, PathHealthz); code != http.StatusOK {
		t.Fatalf("/healthz during the delay = %d, want 200 (liveness must not restart a draining webhook)", code)
	}

	// During the delay: still serving, but every response closes its
	// connection (HTTP/1.1: Connection: close; HTTP/2: GOAWAY), so clients
	// re-dial and reach replicas that are still ready.
	for _, proto := range protos {
		c := clients[proto]
		r := h.review(t, c, "shop")
		if !r.mutated() {
			t.Fatalf("%s: review during the delay not answered normally: err=%v response=%+v", proto, r.err, r.review.Response)
		}
		if proto == "HTTP/1.1" && !r.closeConn {
			t.Fatalf("HTTP/1.1: response during the delay has no Connection: close")
		}
		time.Sleep(50 * time.Millisecond) // let the client read the GOAWAY
		if r2 := h.review(t, c, "shop"); r2.reused {
			t.Fatalf("%s: connection reused after a response sent during the delay", proto)
		}
	}
	if since := time.Since(signalled); since >= delay {
		t.Fatalf("test too slow: the delay (%s) was over before the reviews during it were sent (%s)", delay, since)
	}

	// After the delay the listener closes; the port refuses connections.
	closed := h.waitPortClosed(t, 5*time.Second)
	if got := closed.Sub(signalled); got < delay {
		t.Fatalf("webhook port closed %s after the signal, before the %s delay", got, delay)
	}

	// The review in flight when the listener closed got its real answer.
	r := <-slow
	if r.err != nil {
		t.Fatalf("in-flight review failed: %v", r.err)
	}
	if !r.mutated() || contains(r.review.Response.Warnings, webhook.NamespaceUnavailableWarning) {
		t.Fatalf("in-flight review answered %+v, want its patch (context cancelled by the shutdown?)", r.review.Response)
	}
	if done := r.at.Sub(signalled); done < delay {
		t.Fatalf("in-flight review finished %s after the signal; expected it to outlast the delay", done)
	}

	if err := h.wait(t, 5*time.Second); err != nil {
		t.Fatalf("Run returned %v, want nil after a clean drain", err)
	}
}

// A drain that outlives --drain-timeout is cut off and Run says so.
func TestRunReportsDrainTimeout(t *testing.T) {
	h := startRun(t, 0, time.Second, time.Hour)
	go func() { _ = h.review(t, h.client(false), "slow") }()
	h.waitSlowStarted(t)
	h.shutdown()
	err := h.wait(t, 10*time.Second)
	// The webhook server's drain or the manager's grace period, whichever
	// notices first, names the timeout.
	if err == nil || !(strings.Contains(err.Error(), "reviews still in flight after --drain-timeout=1s") ||
		strings.Contains(err.Error(), "within grace period of 1s")) {
		t.Fatalf("Run returned %v, want the drain timeout named", err)
	}
}

// cert-manager or a Secret update rotates the serving certificate; the
// webhook serves the new one without a restart (istio#5947,
// aws-load-balancer-controller#1828: rotation that broke webhooks).
func TestRunReloadsRotatedCertificates(t *testing.T) {
	h := startRun(t, 0, 5*time.Second, 0)
	served := func() *big.Int {
		conn, err := tls.Dial("tcp", h.webhookAddr(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only reads the served certificate
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber
	}
	if got := served(); got.Int64() != 1 {
		t.Fatalf("serving certificate %v, want serial 1", got)
	}
	writeCertTo(t, h.cfg.CertDir, 2)
	// fsnotify usually reports the rename at once; the watcher also polls
	// every 10s.
	deadline := time.Now().Add(15 * time.Second)
	for served().Int64() != 2 {
		if time.Now().After(deadline) {
			t.Fatal("the rotated certificate was not served within 15s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	h.shutdown()
	if err := h.wait(t, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestRunFailsWithoutCertificates(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Port = freePort(t)
	cfg.HealthProbeBindAddress = "127.0.0.1:" + strconv.Itoa(freePort(t))
	cfg.MetricsBindAddress = "0"
	cfg.CertDir = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := Run(ctx, cfg, &rest.Config{Host: "https://127.0.0.1:1"}, prometheus.NewRegistry(),
		WithNamespaceLookup(func(context.Context, string) (mutate.Namespace, error) {
			return mutate.Namespace{}, nil
		}),
		WithWebhookHost("127.0.0.1"),
	)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(cfg.CertDir, "tls.crt")) {
		t.Fatalf("Run returned %v, want an error naming the missing tls.crt", err)
	}
}

// /readyz is 503 while the API server cannot be reached, 503 until the
// webhook server accepts TLS connections, 503 again from the shutdown
// signal on; /healthz stays 200 throughout.
func TestReadyz(t *testing.T) {
	for _, tc := range []struct {
		name       string
		waiting    string
		serving    bool
		shutdown   bool
		wantReady  int
		wantReason string
	}{
		{"while the API server cannot be reached: not ready, saying why", "waiting for the API server: connection refused", false, false,
			http.StatusServiceUnavailable, "waiting for the API server: connection refused"},
		{"before the webhook serves: not ready", "", false, false, http.StatusServiceUnavailable, "webhook: not serving yet"},
		{"while the webhook serves: ready", "", true, false, http.StatusOK, "ok"},
		{"once shutdown began: not ready, though the webhook still serves", "", true, true, http.StatusServiceUnavailable, "shutting down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.shutdown {
				cancel()
			}
			ready := &readiness{}
			if tc.waiting != "" {
				ready.waitFor(tc.waiting)
			} else {
				ready.serving(func(*http.Request) error {
					if !tc.serving {
						return errors.New("not serving yet")
					}
					return nil
				})
			}
			srv, err := healthServer(ctx, "127.0.0.1:0", ready.check)
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = srv.Server.Serve(srv.Listener) }()
			defer srv.Server.Close()
			base := "http://" + srv.Listener.Addr().String()
			for path, want := range map[string]int{PathReadyz: tc.wantReady, PathHealthz: http.StatusOK} {
				resp, err := http.Get(base + path)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Errorf("%s = %d %q, want %d", path, resp.StatusCode, body, want)
				}
				if path == PathReadyz && !strings.Contains(string(body), tc.wantReason) {
					t.Errorf("%s body %q, want %q", path, body, tc.wantReason)
				}
			}
		})
	}
}

type harness struct {
	cfg        Config
	registry   *prometheus.Registry // Run's metrics
	caPool     *x509.CertPool
	cancel     context.CancelFunc
	done       chan error
	slowCalled chan struct{}
	slowOnce   sync.Once
}

// startRun runs Run with a webhook port and health port on loopback, a fresh
// self-signed certificate, and a namespace lookup where every namespace is
// opted in and "slow" takes slowReads (or until the read's context ends).
func startRun(t *testing.T, delay, drain, slowReads time.Duration, tweaks ...func(*Config)) *harness {
	t.Helper()
	return startRunWith(t, nil, delay, drain, slowReads, tweaks...)
}

// startRunWith is startRun with more options for Run.
func startRunWith(t *testing.T, opts []Option, delay, drain, slowReads time.Duration, tweaks ...func(*Config)) *harness {
	t.Helper()
	dir, pool := writeCert(t)
	cfg := DefaultConfig()
	cfg.Port = freePort(t)
	cfg.HealthProbeBindAddress = "127.0.0.1:" + strconv.Itoa(freePort(t))
	cfg.MetricsBindAddress = "0"
	cfg.CertDir = dir
	cfg.Namespace = "graceguard-system"
	cfg.ShutdownDelay = delay
	cfg.DrainTimeout = drain
	for _, tw := range tweaks {
		tw(&cfg)
	}

	h := &harness{cfg: cfg, caPool: pool, done: make(chan error, 1), slowCalled: make(chan struct{}), registry: prometheus.NewRegistry()}
	lookup := func(ctx context.Context, name string) (mutate.Namespace, error) {
		if name == "slow" {
			h.slowOnce.Do(func() { close(h.slowCalled) })
			select {
			case <-time.After(slowReads):
			case <-ctx.Done():
				return mutate.Namespace{}, ctx.Err()
			}
		}
		return mutate.Namespace{Name: name, Labels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}}, nil
	}

	var stopped atomic.Bool
	log := funcr.New(func(prefix, args string) {
		if !stopped.Load() {
			t.Log(prefix, args)
		}
	}, funcr.Options{})
	t.Cleanup(func() { stopped.Store(true) })

	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), log))
	h.cancel = cancel
	t.Cleanup(cancel)
	go func() {
		h.done <- Run(ctx, cfg, &rest.Config{Host: "https://127.0.0.1:1"}, // nothing listens there
			h.registry, append([]Option{WithNamespaceLookup(lookup), WithWebhookHost("127.0.0.1")}, opts...)...)
	}()

	deadline := time.Now().Add(20 * time.Second)
	for h.readyz(t) != http.StatusOK {
		select {
		case err := <-h.done:
			t.Fatalf("Run returned before it was ready: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("/readyz did not pass within 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return h
}

func (h *harness) shutdown() { h.cancel() }

func (h *harness) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case err := <-h.done:
		return err
	case <-time.After(timeout):
		t.Fatalf("Run did not return within %s of the end of the delay", timeout)
		return nil
	}
}

func (h *harness) waitSlowStarted(t *testing.T) {
	t.Helper()
	select {
	case <-h.slowCalled:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow review never reached the namespace lookup")
	}
}

// get returns the status of a health endpoint, or 0 if it did not answer.
func (h *harness) get(t *testing.T, path string) int {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + h.cfg.HealthProbeBindAddress + path)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func (h *harness) readyz(t *testing.T) int { t.Helper(); return h.get(t, PathReadyz) }

func (h *harness) webhookAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(h.cfg.Port))
}

// client speaks HTTP/1.1, or HTTP/2 when h2 (as API servers do by default).
func (h *harness) client(h2 bool) *http.Client {
	tlsCfg := &tls.Config{RootCAs: h.caPool, ServerName: "127.0.0.1"}
	if !h2 {
		tlsCfg.NextProtos = []string{"http/1.1"}
	}
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: h2}}
}

type reviewResult struct {
	review    admissionv1.AdmissionReview
	proto     string
	reused    bool
	closeConn bool
	at        time.Time
	err       error
}

func (r reviewResult) mutated() bool {
	return r.err == nil && r.review.Response != nil && r.review.Response.Allowed && len(r.review.Response.Patch) > 0
}

// review posts a Pod CREATE review for a basic Pod in namespace ns.
func (h *harness) review(t *testing.T, c *http.Client, ns string) reviewResult {
	pod := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":%q},
		"spec":{"terminationGracePeriodSeconds":30,"containers":[{"name":"app","image":"nginx"}]}}`, ns)
	body := fmt.Sprintf(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
		"uid":"u1","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},
		"namespace":%q,"name":"web","operation":"CREATE","userInfo":{"username":"test"},"object":%s}}`, ns, pod)
	var res reviewResult
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { res.reused = i.Reused }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodPost,
		"https://"+h.webhookAddr()+webhook.PathMutatePod, bytes.NewBufferString(body))
	if err != nil {
		t.Error(err)
		return reviewResult{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		res.err = err
		return res
	}
	defer resp.Body.Close()
	res.proto, res.closeConn, res.at = resp.Proto, resp.Close, time.Now()
	if resp.StatusCode != http.StatusOK {
		// Read to its end, as the API server's client does, so the
		// connection can carry the next review.
		_, _ = io.Copy(io.Discard, resp.Body)
		res.err = fmt.Errorf("HTTP %d", resp.StatusCode)
		return res
	}
	res.err = json.NewDecoder(resp.Body).Decode(&res.review)
	return res
}

// waitPortClosed dials the webhook port until it refuses, and returns when.
func (h *harness) waitPortClosed(t *testing.T, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		// A full handshake, so the server logs no aborted ones.
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", h.webhookAddr(),
			&tls.Config{RootCAs: h.caPool, ServerName: "127.0.0.1"})
		if err != nil {
			return time.Now()
		}
		_ = conn.Close()
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("webhook port still open %s later", timeout)
	return time.Time{}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func freePort(t *testing.T) int {
	t.Helper()
	p, err := freeport.Get()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// writeCert writes a self-signed tls.crt and tls.key for 127.0.0.1 into
// a new directory.
func writeCert(t *testing.T) (string, *x509.CertPool) {
	t.Helper()
	dir := t.TempDir()
	cert := writeCertTo(t, dir, 1)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return dir, pool
}

// writeCertTo replaces tls.crt and tls.key in dir the way a kubelet
// updates a Secret volume: written aside, then renamed into place.
func writeCertTo(t *testing.T, dir string, serial int64) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial),
		Subject:               pkix.Name{CommonName: "graceguard-test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, b []byte) {
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	write("tls.key", "EC PRIVATE KEY", keyDER)
	write("tls.crt", "CERTIFICATE", der)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
