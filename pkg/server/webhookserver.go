package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// webhookServer serves the admission endpoints over TLS like
// controller-runtime's DefaultServer (whose Register it keeps, with its
// request metrics, and whose mux it serves), but owns the http.Server and
// its listener so that connections are bounded in number, time and bytes
// (conns.go): controller-runtime's sets only ReadHeaderTimeout (32s) and
// IdleTimeout, so a client that trickles a body is held for as long as it
// likes, and it accepts as many connections as clients open.
type webhookServer struct {
	crwebhook.Server
	host     string
	port     int
	certDir  string
	tls      *tls.Config
	timeouts serverTimeouts
	conns    *connTracker
	drain    time.Duration
	mu       sync.Mutex
	// serving: the listener is open and one TLS handshake with the
	// certificate in the cert dir completed through it (confirmServing);
	// false again once the listener closes. cert is that certificate's
	// source. StartedChecker reads both; it never dials.
	serving  bool
	closed   bool
	cert     *certwatcher.CertWatcher
	drainErr error
}

// serverTimeouts are the http.Server's bounds on one connection.
type serverTimeouts struct {
	readHeader, read, write, idle time.Duration
	maxHeaderBytes                int
}

// The API server's webhook client, and what the server's timeouts must
// leave it. kube-apiserver calls webhooks through a client-go REST client
// (k8s.io/apiserver/pkg/util/webhook/client.go:141,
// rest.UnversionedRESTClientFor), whose transport
// (k8s.io/client-go/transport/cache.go:147-152) has a 10s TLS handshake
// timeout and keeps at most 25 idle connections per host (cache.go:45,
// idleConnsPerHost), and, from utilnet.SetTransportDefaults
// (k8s.io/apimachinery/pkg/util/net/http.go:123-124), http.DefaultTransport's
// idle timeout: 90s (net/http/transport.go:54). It sends each review as a
// POST (k8s.io/apiserver/pkg/admission/plugin/webhook/validating/dispatcher.go:283),
// which Go's transport does not retry on a kept-alive connection the server
// closed while the request was being written (net/http/transport.go:847,
// not replayable): a server that closes idle connections before the client
// does fails reviews now and then, and failurePolicy Fail turns each into a
// refused Pod. So the server keeps idle connections longer than the client.
const (
	// apiServerIdleTimeout is how long the API server keeps an idle
	// connection; idleTimeout is the server's, half a minute longer.
	apiServerIdleTimeout = 90 * time.Second
	idleTimeout          = apiServerIdleTimeout + 30*time.Second
	// handshakeTimeout bounds the TLS handshake: milliseconds for the API
	// server, which gives up after 10s; a few seconds for a loaded node.
	handshakeTimeout = 3 * time.Second
	// maxHandshakeBytes bounds what a client may send during the handshake:
	// Go's ClientHello, with its post-quantum key share, is 1.5 KiB, the
	// rest of a client's handshake a few hundred bytes, and the webhook
	// asks for no client certificate. Without it crypto/tls buffers a
	// ClientHello of up to 64 KiB, and a partial one cost 61 KB at 16 KiB.
	maxHandshakeBytes = 8 << 10
	// maxHeaderBytes bounds request headers: the API server's are a few
	// hundred bytes (request line with ?timeout=, Host, User-Agent,
	// Content-Type, Accept, Content-Length, Accept-Encoding, a traceparent).
	// net/http reads up to 4 KiB more before refusing with 431, and builds
	// its header map as it reads: short distinct lines cost it about 17
	// bytes of heap per byte read, 150 KB for the 8 KiB that 4 KiB allowed.
	maxHeaderBytes = 1 << 10
)

// timeoutsFor sizes the server's timeouts to the webhook timeout: a whole
// request must be read within it (the API server stops waiting then), the
// answer written within a second more. Idle keep-alive connections outlive
// the API server's (idleTimeout).
func timeoutsFor(webhookTimeout time.Duration) serverTimeouts {
	return serverTimeouts{
		readHeader:     min(5*time.Second, webhookTimeout),
		read:           webhookTimeout,
		write:          webhookTimeout + time.Second,
		idle:           idleTimeout,
		maxHeaderBytes: maxHeaderBytes,
	}
}

// connLimitsFor are the connection limits of cfg.
func connLimitsFor(cfg Config) connLimits {
	return connLimits{
		maxOpen:           cfg.MaxConnections,
		maxPending:        cfg.MaxPendingConnections,
		handshakeTimeout:  handshakeTimeout,
		maxHandshakeBytes: maxHandshakeBytes,
	}
}

// newWebhookServer returns the webhook server for cfg, listening on host,
// its connection metrics registered on reg.
func newWebhookServer(cfg Config, host string, reg prometheus.Registerer) (*webhookServer, error) {
	m, err := newConnMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &webhookServer{
		Server:   crwebhook.NewServer(crwebhook.Options{Host: host, Port: cfg.Port, CertDir: cfg.CertDir}),
		host:     host,
		port:     cfg.Port,
		certDir:  cfg.CertDir,
		tls:      tlsConfig(cfg),
		timeouts: timeoutsFor(cfg.Limits.Timeout),
		conns:    newConnTracker(connLimitsFor(cfg), m),
		drain:    cfg.DrainTimeout,
	}, nil
}

// tlsConfig accepts TLS 1.2 and 1.3 only, and in TLS 1.2 only ECDHE key
// exchange with AEAD ciphers (TLS 1.3 suites are all AEAD and not
// configurable): no CBC, no RSA key exchange, no SHA-1 MACs. The API server
// offers these. HTTP/2 only when enabled: HTTP/1.1 is not exposed to the
// HTTP/2 rapid-reset and stream-cancellation attacks (CVE-2023-44487,
// CVE-2023-39325).
func tlsConfig(cfg Config) *tls.Config {
	c := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: TLS12CipherSuites,
		NextProtos:   []string{"http/1.1"},
	}
	if cfg.EnableHTTP2 {
		c.NextProtos = []string{"h2", "http/1.1"}
	}
	return c
}

// TLS12CipherSuites are the TLS 1.2 suites the webhook accepts.
var TLS12CipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// Start serves until ctx ends, then stops accepting connections and waits
// at most the drain timeout for the reviews in flight. tls.crt and tls.key
// in the cert dir are reloaded when they change (controller-runtime's
// certwatcher).
func (s *webhookServer) Start(ctx context.Context) error {
	logger := logf.FromContext(ctx).WithName("webhook-server")
	watcher, err := certwatcher.New(filepath.Join(s.certDir, "tls.crt"), filepath.Join(s.certDir, "tls.key"))
	if err != nil {
		return err
	}
	go func() {
		if err := watcher.Start(ctx); err != nil {
			logger.Error(err, "certificate watcher stopped")
		}
	}()
	cfg := s.tls.Clone()
	cfg.GetCertificate = watcher.GetCertificate

	tcp, err := net.Listen("tcp", net.JoinHostPort(s.host, strconv.Itoa(s.port)))
	if err != nil {
		return err
	}
	ln := newConnListener(tcp, cfg, s.conns)
	t := s.timeouts
	srv := &http.Server{
		Handler:           endUnreadBodies(s.WebhookMux()),
		ReadHeaderTimeout: t.readHeader,
		ReadTimeout:       t.read,
		WriteTimeout:      t.write,
		IdleTimeout:       t.idle,
		MaxHeaderBytes:    t.maxHeaderBytes,
		ConnState:         s.conns.connStateHook,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	if !containsProto(cfg.NextProtos, "h2") {
		// A non-nil empty map turns Go's automatic HTTP/2 off.
		srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}

	drained := make(chan error, 1)
	go func() {
		<-ctx.Done()
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.drain)
		defer cancel()
		drained <- srv.Shutdown(dctx)
	}()
	s.mu.Lock()
	s.cert = watcher
	s.mu.Unlock()
	go s.confirmServing(ctx, ln.Addr().String())
	logger.Info("serving webhooks", "address", ln.Addr().String(), "readTimeout", t.read, "writeTimeout", t.write,
		"maxConnections", s.conns.limits.maxOpen, "maxPendingConnections", s.conns.limits.maxPending)
	err = srv.Serve(ln)
	s.mu.Lock()
	s.serving, s.closed = false, true
	s.mu.Unlock()
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	if err := <-drained; err != nil {
		err = fmt.Errorf("reviews still in flight after --drain-timeout=%s: %w", s.drain, err)
		s.mu.Lock()
		s.drainErr = err
		s.mu.Unlock()
		return err
	}
	return nil
}

// DrainErr is the error of a drain that did not finish in time, if any:
// the manager does not return errors of runnables that end after it
// stopped them.
func (s *webhookServer) DrainErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.drainErr
}

// StartedChecker passes while the server serves: once one TLS handshake
// completed through its listener (confirmServing), until the listener
// closes. It is a state, never a dial: a probe that dialled the webhook
// port would wait, behind the connection caps and the reviews for the
// CPU, exactly when the replica is busiest, and fail on every replica at
// once under load (issue 41), taking admission down with it. Overload is
// the guard's to handle, by shedding; readiness says whether the replica
// can serve at all.
func (s *webhookServer) StartedChecker() healthz.Checker {
	return func(*http.Request) error {
		s.mu.Lock()
		serving, cert := s.serving, s.cert
		s.mu.Unlock()
		switch {
		case cert == nil:
			return errors.New("webhook server has not been started yet")
		case !serving:
			return errors.New("webhook server is not serving TLS yet")
		}
		if c, err := cert.GetCertificate(nil); err != nil || c == nil {
			return fmt.Errorf("no serving certificate loaded: %v", err)
		}
		return nil
	}
}

// confirmServing dials the listener at addr until one TLS handshake
// completes, then marks the server serving: the certificate loads, the
// listener accepts, and the handshake works end to end. It retries every
// confirmInterval until ctx ends.
func (s *webhookServer) confirmServing(ctx context.Context, addr string) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only whether it answers TLS
			_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
			err = tc.HandshakeContext(ctx)
			_ = tc.Close()
		}
		if err == nil {
			s.mu.Lock()
			s.serving = !s.closed
			s.mu.Unlock()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(confirmInterval):
		}
	}
}

// confirmInterval paces confirmServing's attempts.
const confirmInterval = 200 * time.Millisecond

// endUnreadBodies ends at once the request of a handler that returned
// before reading its body to the end (a 404, a 429 or 413 refusal, a body
// cut off at its deadline): its read deadline passes, so net/http's
// attempt to read the rest fails and the connection closes after the
// answer. Otherwise net/http waits for up to 256 KiB more until the read
// deadline, and may then read what is left of the body as the next request:
// a client that sends headers announcing a body and never sends it would
// hold its connection in a request, where the connection tracker cannot
// evict it, for the whole webhook timeout. A handler that read its body to
// the end is left alone (net/http's background read of the connection has
// started then).
func endUnreadBodies(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		body := r.Body
		b := &eofBody{ReadCloser: body}
		r.Body = b
		h.ServeHTTP(w, r)
		// net/http decides after the handler whether the connection can
		// carry another request, from the body it made: given back, one
		// closed or unreadable before its end closes the connection,
		// instead of the rest of it being read as the next request.
		r.Body = body
		if !b.eof {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now())
		}
	})
}

// eofBody is a request body that tells whether it was read to the end.
type eofBody struct {
	io.ReadCloser
	eof bool
}

func (b *eofBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func containsProto(protos []string, p string) bool {
	for _, x := range protos {
		if x == p {
			return true
		}
	}
	return false
}
