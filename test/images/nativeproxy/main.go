// Command nativeproxy is the Envoy-shaped native-sidecar proxy of the e2e
// suite (registry.local/nativeproxy:e2e, test/e2e scenario 9). Like
// Istio's proxyv2 image it is one binary, /usr/local/bin/pilot-agent, with
// two subcommands, and the image has a real shell (busybox sh and sleep)
// for graceguard's wrapped hook:
//
//	pilot-agent proxy sidecar   the proxy (Istio's injected args; flags
//	                            after "sidecar" are accepted and ignored)
//	pilot-agent request [--debug-port=P] METHOD PATH
//	                            what Istio's native-sidecar preStop runs:
//	                            METHOD http://localhost:P/PATH (P default
//	                            15000, as pilot-agent's), prints the body,
//	                            exits 1 unless 200
//
// The proxy relays HTTP from $LISTEN (default :8081) to $TARGET (default
// 127.0.0.1:8080, the app) and serves pilot-agent's status port $STATUS
// (default :15020) with POST /drain, from localhost only, as pilot-agent's
// status server does (pilot/cmd/pilot-agent/status/server.go,
// handleDrain).
//
// The drain is Envoy's inbound graceful drain as the reports describe it:
// istio#51855 (rtmie: once pilot-agent puts Envoy into draining, the
// "proxy no longer accepts new inbound requests, but maintains existing
// inbound connections until they close") and istio#60649 (the native
// sidecar "drains immediately", and requests routed to the Pod during the
// EndpointSlice propagation fail). From the drain on, every answer
// carries Connection: close (Envoy runs with --drain-strategy immediate,
// pkg/envoy/proxy.go), and $DRAIN_TIME (a Go duration, default 0s: Envoy's
// --drain-time-s) later the inbound listener closes: new connections are
// refused, requests in flight finish. Istio's own /drain passes skip_exit
// and keeps the listener open (istio#47226, "drains forever"): there, what
// fails is the callers' pooled connections racing the closes, which no
// test can time; refusing new connections is the deterministic end of the
// same drain.
//
// On SIGTERM (which the kubelet sends a native sidecar after the app's
// containers exited) the proxy exits once its requests in flight are done,
// at once if there are none (istio#47226: "if we already drained, exit
// immediately").
//
// Every line on stdout is one JSON object with "ts" (RFC 3339, nanoseconds)
// and "event": listening, drain {active, requests}, listener_closed,
// sigterm {active}, exit {requests, drained: requests answered while
// draining}.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "request":
			return request(args[1:], stdout, stderr)
		case "proxy":
			if len(args) < 2 || args[1] != "sidecar" {
				fmt.Fprintf(stderr, "pilot-agent proxy: want \"proxy sidecar\", got %q\n", strings.Join(args, " "))
				return 2
			}
			return proxy(stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "pilot-agent: unknown command %q; accepted: \"proxy sidecar\", \"request [--debug-port=P] METHOD PATH\"\n", strings.Join(args, " "))
	return 2
}

// request is `pilot-agent request`: METHOD http://localhost:PORT/PATH.
func request(args []string, stdout, stderr io.Writer) int {
	port := "15000"
	var rest []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--debug-port="); ok {
			port = v
			continue
		}
		rest = append(rest, a)
	}
	if len(rest) != 2 {
		fmt.Fprintf(stderr, "pilot-agent request: want METHOD PATH, got %q\n", strings.Join(rest, " "))
		return 2
	}
	req, err := http.NewRequest(rest[0], "http://localhost:"+port+"/"+strings.TrimPrefix(rest[1], "/"), nil)
	if err != nil {
		fmt.Fprintf(stderr, "pilot-agent request: %v\n", err)
		return 2
	}
	c := &http.Client{Timeout: 10 * time.Second}
	res, err := c.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "pilot-agent request: %v\n", err)
		return 1
	}
	defer res.Body.Close()
	_, _ = io.Copy(stdout, res.Body)
	if res.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "pilot-agent request: %s\n", res.Status)
		return 1
	}
	return 0
}

type logger struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (l *logger) event(event string, kv ...any) {
	m := map[string]any{"ts": time.Now().UTC().Format(time.RFC3339Nano), "event": event}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.enc.Encode(m)
}

// drainer is the proxy's state: the requests it answers and its drain.
type drainer struct {
	log        *logger
	drainTime  time.Duration
	inbound    net.Listener
	draining   atomic.Bool
	active     atomic.Int64
	requests   atomic.Int64
	drained    atomic.Int64
	drainOnce  sync.Once
	closedOnce sync.Once
}

func proxy(stdout, stderr io.Writer) int {
	log := &logger{enc: json.NewEncoder(stdout)}
	listen, status, target := env("LISTEN", ":8081"), env("STATUS", ":15020"), env("TARGET", "127.0.0.1:8080")
	dt, err := time.ParseDuration(env("DRAIN_TIME", "0s"))
	if err != nil || dt < 0 {
		fmt.Fprintf(stderr, "pilot-agent: DRAIN_TIME %q: want a Go duration >= 0, e.g. 0s or 45s\n", os.Getenv("DRAIN_TIME"))
		return 2
	}
	up, err := url.Parse("http://" + target)
	if err != nil || up.Host == "" {
		fmt.Fprintf(stderr, "pilot-agent: TARGET %q: want host:port\n", target)
		return 2
	}
	in, err := net.Listen("tcp", listen)
	if err != nil {
		log.event("error", "error", err.Error())
		return 1
	}
	st, err := net.Listen("tcp", status)
	if err != nil {
		log.event("error", "error", err.Error())
		return 1
	}
	d := &drainer{log: log, drainTime: dt, inbound: in}

	front := &http.Server{Handler: d.relay(d.upstream(up)), ReadHeaderTimeout: 10 * time.Second}
	admin := &http.Server{Handler: d.status(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = admin.Serve(st) }()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	served := make(chan error, 1)
	go func() { served <- front.Serve(in) }()
	log.event("listening", "listen", listen, "status", status, "target", target, "drainTime", dt.String())

	select {
	case <-sig:
	case err := <-served:
		// The listener closed by the drain ends Serve; wait for SIGTERM.
		if !errors.Is(err, net.ErrClosed) && !errors.Is(err, http.ErrServerClosed) {
			log.event("error", "error", err.Error())
			return 1
		}
		<-sig
	}
	log.event("sigterm", "active", d.active.Load(), "draining", d.draining.Load())
	// Shutdown closes the listener (if the drain has not) and returns once
	// the requests in flight are answered.
	_ = front.Shutdown(context.Background())
	log.event("exit", "requests", d.requests.Load(), "drained", d.drained.Load())
	return 0
}

// upstream relays to the app; an answer given while draining carries
// Connection: close (the server then closes the connection after it),
// also for a request that arrived before the drain.
func (d *drainer) upstream(up *url.URL) *httputil.ReverseProxy {
	rp := httputil.NewSingleHostReverseProxy(up)
	rp.ModifyResponse = func(res *http.Response) error {
		if d.draining.Load() {
			d.drained.Add(1)
			res.Header.Set("Connection", "close")
		}
		return nil
	}
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		// Envoy's answer when the upstream fails.
		http.Error(w, "upstream connect error or disconnect/reset before headers: "+err.Error(), http.StatusServiceUnavailable)
	}
	return rp
}

// relay counts the requests and those in flight.
func (d *drainer) relay(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.active.Add(1)
		defer d.active.Add(-1)
		d.requests.Add(1)
		next.ServeHTTP(w, r)
	})
}

// status is pilot-agent's status port: POST /drain from localhost.
func (d *drainer) status() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/drain", func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			http.Error(w, "Only requests from localhost are allowed", http.StatusForbidden)
			return
		}
		if r.Method != http.MethodPost {
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
			return
		}
		d.drain()
		_, _ = w.Write([]byte("OK"))
	})
	return mux
}

func (d *drainer) drain() {
	d.drainOnce.Do(func() {
		d.draining.Store(true)
		d.log.event("drain", "active", d.active.Load(), "requests", d.requests.Load())
		time.AfterFunc(d.drainTime, func() {
			d.closedOnce.Do(func() {
				_ = d.inbound.Close()
				d.log.event("listener_closed", "active", d.active.Load())
			})
		})
	})
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
