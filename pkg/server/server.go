// Package server runs the graceguard admission webhook: a
// controller-runtime manager serving the three webhooks over TLS, health
// probes and metrics, and shutting down in the order the product
// prescribes for everyone else.
//
// Invariant: once Run's context is cancelled, /readyz fails at once, but
// the webhook keeps answering reviews (telling clients to close their
// connections) for Config.ShutdownDelay; only then does it stop accepting
// connections and drain the reviews in flight, for at most
// Config.DrainTimeout.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/pkg/certs"
	"github.com/graceguard/graceguard/pkg/webhook"
)

// Option changes how Run wires the server; the defaults are production's.
type Option func(*options)

type options struct {
	namespaces webhook.NamespaceLookup
	host       string
	// observe, if set, is given the webhook server (tests read its
	// connection tracker).
	observe func(*webhookServer)
}

// WithWebhookHost sets the address the webhook server listens on; the
// default "" is every address.
func WithWebhookHost(host string) Option { return func(o *options) { o.host = host } }

// Health endpoints on Config.HealthProbeBindAddress.
const (
	PathHealthz = "/healthz"
	PathReadyz  = "/readyz"
)

// Run serves the webhooks until ctx is cancelled, then shuts down
// gracefully (see the package invariant) and returns nil, or the error
// that stopped it (including a drain that outlived DrainTimeout). It talks
// to the API server restCfg names and registers its metrics on reg
// (controller-runtime's metrics.Registry is the one the metrics server
// serves). cfg must have passed Validate. It logs with the logger in ctx.
func Run(ctx context.Context, cfg Config, restCfg *rest.Config, reg prometheus.Registerer, opts ...Option) error {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	log := logf.FromContext(ctx).WithName("graceguard")
	m, err := RegisterMetrics(reg)
	if err != nil {
		return err
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(scheme))
	// The certificate rotator reads and updates the webhook configurations.
	utilruntime.Must(admissionregistrationv1.AddToScheme(scheme))
	// graceguard.io/max-work: auto reads the observer's ShutdownReports.
	utilruntime.Must(v1alpha1.AddToScheme(scheme))

	// /healthz and /readyz answer from the start, before the API server is
	// reachable: a webhook that cannot reach it stays alive and not ready,
	// retrying, instead of exiting into a crash loop.
	ready := &readiness{}
	ready.waitFor("starting")
	health, err := healthServer(ctx, cfg.HealthProbeBindAddress, ready.check)
	if err != nil {
		return err
	}
	healthCtx, stopHealth := context.WithCancel(context.WithoutCancel(ctx))
	healthDone := make(chan struct{})
	go func() {
		defer close(healthDone)
		if err := health.Start(healthCtx); err != nil {
			log.Error(err, "health probe server stopped")
		}
	}()
	// The probes are answered until the webhook has drained.
	defer func() { stopHealth(); <-healthDone }()

	ws, err := newWebhookServer(cfg, o.host, reg)
	if err != nil {
		return err
	}
	if o.observe != nil {
		o.observe(ws)
	}
	var whServer crwebhook.Server = ws
	var certsReady chan struct{}
	if cfg.CertMode == CertModeSelfManaged {
		// controller-runtime reads tls.crt when the server starts: start it
		// only once the rotator has written the certificates.
		certsReady = make(chan struct{})
		whServer = afterReady{Server: whServer, ready: certsReady}
	}
	// The manager's own health probe server answers 500 when a check
	// fails and cannot tell "starting" from "shutting down"; graceguard
	// serves its probes itself (healthServer) and turns it off here.
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 scheme,
		Logger:                 log,
		Metrics:                metricsserver.Options{BindAddress: cfg.MetricsBindAddress},
		HealthProbeBindAddress: "0",
		// graceguard reads namespaces' labels and annotations only; their
		// managedFields would be most of the cache's memory.
		// Of each Namespace, only the keys graceguard reads, bounded (a
		// default transform: ByObject would need the API server to build
		// the manager, and the webhook starts without one).
		Cache: cache.Options{DefaultTransform: func(obj any) (any, error) {
			obj, err := cache.TransformStripManagedFields()(obj)
			if err != nil {
				return obj, err
			}
			return webhook.BoundNamespace(obj)
		}},
		// graceguard's own webhook server (webhookServer): TLS 1.2+ with
		// AEAD suites, read and write timeouts sized to the webhook
		// timeout, tls.crt and tls.key reloaded when they change.
		WebhookServer: whServer,
		// Bounds the drain: the manager gives up after this and Start
		// returns an error; the webhook server's Shutdown waits as long.
		GracefulShutdownTimeout: &cfg.DrainTimeout,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}

	if certsReady != nil {
		cc := cfg.Certs()
		if err := certs.AddRotator(mgr, cc, certsReady); err != nil {
			return err
		}
		if err := certs.AddSecretSync(mgr, cc, log.WithName("cert-sync")); err != nil {
			return err
		}
	}

	if o.namespaces == nil {
		// Register the metadata informer now so the cache syncs it when
		// the manager starts, before the first review asks. It needs the
		// API server (discovery): until it answers, retry with back-off
		// while /readyz says why.
		err := retry(ctx, apiServerBackoff, func() error {
			_, err := mgr.GetCache().GetInformer(ctx, webhook.NamespaceMetadata())
			if err != nil {
				err = fmt.Errorf("waiting for the API server (watching namespaces): %w", err)
				ready.waitFor(err.Error())
				log.Info("API server not reachable yet; retrying", "error", err.Error())
			}
			return err
		})
		if err != nil {
			// Only a shutdown signal ends the retries.
			log.Info("shutdown before the API server was reachable")
			return nil
		}
		o.namespaces = webhook.NewNamespaceLookup(mgr.GetCache(), mgr.GetAPIReader())
	}

	srv := mgr.GetWebhookServer()
	for path, h := range webhook.Endpoints(webhook.Config{
		Options:    cfg.Excluded(),
		Namespaces: o.namespaces,
		Metrics:    m,
		Log:        log.WithName("admission"),
		Limits:     cfg.Limits,
		Evidence:   webhook.NewEvidenceLookup(mgr.GetAPIReader(), log.WithName("max-work-auto")),
	}) {
		srv.Register(path, closeConnsAfter(ctx, h))
	}
	ready.serving(srv.StartedChecker())

	if err := start(ctx, mgr, cfg, log); err != nil {
		return err
	}
	return ws.DrainErr()
}

// start runs the manager on a context of its own, cancelled only
// cfg.ShutdownDelay after ctx is: controller-runtime's webhook server
// stops listening the moment its context ends (controller-runtime#3113),
// while endpoints, load balancers and API servers still route to it.
// Readiness and keep-alives watch ctx itself, so they change at once.
func start(ctx context.Context, mgr manager.Manager, cfg Config, log logr.Logger) error {
	mgrCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		log.Info("shutdown: /readyz failing, still serving reviews", "delay", cfg.ShutdownDelay)
		delay := time.NewTimer(cfg.ShutdownDelay)
		defer delay.Stop()
		select {
		case <-delay.C:
		case <-done:
			return
		}
		log.Info("shutdown: closing the listener, draining reviews in flight", "timeout", cfg.DrainTimeout)
		stop()
	}()
	err := mgr.Start(mgrCtx)
	close(done)
	if err != nil {
		return fmt.Errorf("running the webhook: %w", err)
	}
	if ctx.Err() == nil {
		return errors.New("the webhook stopped without a shutdown signal")
	}
	log.Info("shutdown: done")
	return nil
}

// closeConnsAfter asks clients, once shutdown has begun, to close their
// connection after each response: "Connection: close" ends an HTTP/1.1
// connection after the response and makes Go's HTTP/2 server send GOAWAY.
// API servers keep reusing connections to a webhook replica that left the
// endpoints (kubernetes#127335); without this they would still be sending
// to this replica when the listener closes. It is the per-response form of
// http.Server.SetKeepAlivesEnabled(false), which controller-runtime's
// server does not expose; Shutdown itself then closes idle connections.
func closeConnsAfter(ctx context.Context, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ctx.Err() != nil {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}

// healthServer serves /healthz (always ok while the process runs) and
// /readyz: 503 until ready passes (the API server reached and the webhook
// server accepting TLS connections), and 503 again from the moment ctx
// ends. Run stops it last, after the webhook server drained, so probes keep
// getting answers during the drain.
func healthServer(ctx context.Context, addr string, ready healthz.Checker) (*manager.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--health-probe-bind-address=%q: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(PathHealthz, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})
	mux.HandleFunc(PathReadyz, func(w http.ResponseWriter, r *http.Request) {
		if ctx.Err() != nil {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		if err := ready(r); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	return &manager.Server{
		Name:     "health probes",
		Listener: ln,
		Server: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 5 * time.Second,
			// Probes are answered until the manager stops this server,
			// after the webhook drained; their contexts need not end sooner.
			BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		},
	}, nil
}

// readiness is what /readyz reports before shutdown: why the webhook is
// not ready yet, or the webhook server's started check.
type readiness struct {
	mu      sync.Mutex
	waiting string
	started healthz.Checker
}

func (r *readiness) waitFor(why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waiting, r.started = why, nil
}

func (r *readiness) serving(started healthz.Checker) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waiting, r.started = "", started
}

func (r *readiness) check(req *http.Request) error {
	r.mu.Lock()
	waiting, started := r.waiting, r.started
	r.mu.Unlock()
	if started == nil {
		return errors.New(waiting)
	}
	if err := started(req); err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	return nil
}

// apiServerBackoff paces the retries while the API server cannot be
// reached at start: 1s, doubling, at most 30s apart, with jitter so that
// replicas do not retry in step.
var apiServerBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Cap: 30 * time.Second, Steps: math.MaxInt32}

// retry calls f until it succeeds or ctx ends (then it returns ctx's error),
// sleeping b's steps in between.
func retry(ctx context.Context, b wait.Backoff, f func() error) error {
	for {
		if err := f(); err == nil {
			return nil
		}
		t := time.NewTimer(b.Step())
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// afterReady is a webhook server that starts serving only once ready is
// closed; until then its StartedChecker fails, so /readyz does too.
type afterReady struct {
	crwebhook.Server
	ready <-chan struct{}
}

func (a afterReady) Start(ctx context.Context) error {
	select {
	case <-a.ready:
	case <-ctx.Done():
		return nil
	}
	return a.Server.Start(ctx)
}
