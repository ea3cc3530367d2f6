// Command drainapp is the draining test app of the e2e suite
// (registry.local/drainapp:e2e, test/e2e): an HTTP server that admits
// "work", drains it on SIGTERM and says so in structured logs, the Go
// counterpart of the Python fixture of the shutdown lab the project grew
// from. It answers on $PORT (default 8080):
//
//	GET /work?seconds=N  admit one unit of work (N may be fractional, e.g.
//	                     0.1), sleep N seconds, answer 200
//	                     {"completed":true,...}; while draining: 503
//	                     {"reason":"draining"} with Connection: close
//	GET /ready           200, or 503 while draining (readiness)
//	GET /live            200 while the process runs, draining or not (liveness)
//	GET /stats           {"admitted":..,"active":..,"rejected":..,"draining":..}
//
// Every line on stdout is one JSON object with "ts" (RFC 3339, nanoseconds,
// the node's clock) and "event":
//
//	listening, work_started {id, seconds}, work_completed {id},
//	backend_failed {id, error}, work_rejected {active}, sigterm {active},
//	shutdown_complete {admitted, rejected}
//
// Admission is one critical section: a request either joins the active
// work before draining begins or is rejected after; never both, never
// neither. On SIGTERM the app marks itself draining (new work: 503 and
// Connection: close; /ready: 503), keeps listening until the active work is
// done, then closes the listener, logs shutdown_complete and exits 0. It has
// no drain deadline of its own: the Pod's grace period is the only bound
// (the e2e control arm relies on that to show a cut request).
//
// With $BACKEND set (host:port), the app is the client of a backend it
// reaches through that address, as an app reaches its database through a
// proxy sidecar on localhost (test/e2e scenario 16): each admitted /work
// opens a new TCP connection to $BACKEND and spends its N seconds there, as
// GET /work?seconds=N of another drainapp. It answers 200 only when the
// backend answered 200 {"completed":true}; otherwise 502
// {"reason":"backend","error":...} and logs backend_failed {id, error}
// instead of work_completed. Draining is unchanged: admitted work runs on
// after SIGTERM, so it still needs the backend's connection then.
//
// The image is a static binary without a shell, so it is also its own
// `sleep` for exec preStop hooks: run as `sleep N` (argv0 trick: the image
// links /bin/sleep to the binary) or as `drainapp sleep N`, it sleeps N
// seconds (N as GNU sleep reads it: 20, 20s, 1.5m) and exits 0.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	args := os.Args
	if len(args) > 0 && filepath.Base(args[0]) == "sleep" {
		os.Exit(sleepMain(args[1:]))
	}
	if len(args) > 1 && args[1] == "sleep" {
		os.Exit(sleepMain(args[2:]))
	}
	if len(args) > 1 {
		fmt.Fprintf(os.Stderr, "usage: drainapp | drainapp sleep N | sleep N\n")
		os.Exit(2)
	}
	os.Exit(serve())
}

// sleepMain is `sleep N...`: the operands are summed, as GNU sleep does.
func sleepMain(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "sleep: missing operand")
		return 1
	}
	var total time.Duration
	for _, a := range args {
		d, err := parseSleep(a)
		if err != nil {
			fmt.Fprintf(os.Stderr, "sleep: %v\n", err)
			return 1
		}
		total += d
	}
	time.Sleep(total)
	return 0
}

func parseSleep(a string) (time.Duration, error) {
	unit := time.Second
	num := a
	switch {
	case strings.HasSuffix(a, "s"):
		num = strings.TrimSuffix(a, "s")
	case strings.HasSuffix(a, "m"):
		num, unit = strings.TrimSuffix(a, "m"), time.Minute
	case strings.HasSuffix(a, "h"):
		num, unit = strings.TrimSuffix(a, "h"), time.Hour
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || f > 1e6 {
		return 0, fmt.Errorf("invalid time interval %q", a)
	}
	return time.Duration(f * float64(unit)), nil
}

// logger writes one JSON object per line; lines never interleave.
type logger struct {
	mu  sync.Mutex
	enc *json.Encoder
	pod string
}

func (l *logger) log(event string, kv ...any) {
	m := map[string]any{"ts": time.Now().UTC().Format(time.RFC3339Nano), "event": event, "pod": l.pod}
	for i := 0; i+1 < len(kv); i += 2 {
		m[fmt.Sprint(kv[i])] = kv[i+1]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.enc.Encode(m)
}

// app holds the admission state: one lock guards draining and the counters.
type app struct {
	log *logger
	// backend is $BACKEND: where each unit of work is done, through a new
	// connection; "" does the work here.
	backend string

	mu       sync.Mutex
	draining bool
	active   int
	admitted int64
	rejected int64
	idle     chan struct{} // closed when draining and active reaches 0
}

// admit is the admission critical section.
func (a *app) admit() (id int64, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.draining {
		a.rejected++
		return 0, false
	}
	a.active++
	a.admitted++
	return a.admitted, true
}

func (a *app) done() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.active--
	if a.draining && a.active == 0 && a.idle != nil {
		close(a.idle)
		a.idle = nil
	}
}

// drain marks the app draining and returns the active count then, and a
// channel closed once no work is active.
func (a *app) drain() (int, <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.draining = true
	ch := make(chan struct{})
	if a.active == 0 {
		close(ch)
	} else {
		a.idle = ch
	}
	return a.active, ch
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (a *app) work(w http.ResponseWriter, r *http.Request) {
	secs := 1.0
	if s := r.URL.Query().Get("seconds"); s != "" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f < 0 || f > 3600 {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "seconds must be a number from 0 to 3600"})
			return
		}
		secs = f
	}
	id, ok := a.admit()
	if !ok {
		a.mu.Lock()
		active := a.active
		a.mu.Unlock()
		a.log.log("work_rejected", "active", active)
		// Tell keep-alive clients to go elsewhere: this process is leaving.
		w.Header().Set("Connection", "close")
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"reason": "draining", "pod": a.log.pod})
		return
	}
	// The counter is released however the handler ends.
	defer a.done()
	a.log.log("work_started", "id", id, "seconds", secs)
	answer := map[string]any{"completed": true, "id": id, "pod": a.log.pod}
	if a.backend == "" {
		time.Sleep(time.Duration(secs * float64(time.Second)))
	} else {
		pod, err := a.callBackend(r.Context(), secs)
		if err != nil {
			a.log.log("backend_failed", "id", id, "error", err.Error())
			writeJSON(w, http.StatusBadGateway, map[string]any{"reason": "backend", "error": err.Error(), "id": id, "pod": a.log.pod})
			return
		}
		answer["backend"] = pod
	}
	writeJSON(w, http.StatusOK, answer)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	a.log.log("work_completed", "id", id)
}

// callBackend does secs of work at the backend, over a connection of its
// own (no keep-alive: a database proxy sees one connection per request),
// and returns the backend Pod that did it.
func (a *app) callBackend(ctx context.Context, secs float64) (string, error) {
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/work?seconds=%g", a.backend, secs), nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var body struct {
		Completed bool   `json:"completed"`
		Pod       string `json:"pod"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&body); err != nil {
		return "", fmt.Errorf("backend answered %d: %w", resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK || !body.Completed {
		return "", fmt.Errorf("backend answered %d", resp.StatusCode)
	}
	return body.Pod, nil
}

func (a *app) ready(w http.ResponseWriter, _ *http.Request) {
	a.mu.Lock()
	draining := a.draining
	a.mu.Unlock()
	if draining {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"draining": true})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"draining": false})
}

func (a *app) stats(w http.ResponseWriter, _ *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"admitted": a.admitted, "active": a.active, "rejected": a.rejected, "draining": a.draining, "pod": a.log.pod})
}

func serve() int {
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	pod, _ := os.Hostname()
	lg := &logger{enc: json.NewEncoder(os.Stdout), pod: pod}
	a := &app{log: lg, backend: os.Getenv("BACKEND")}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /work", a.work)
	mux.HandleFunc("GET /ready", a.ready)
	mux.HandleFunc("GET /live", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"live": true})
	})
	mux.HandleFunc("GET /stats", a.stats)

	// Signals first, so a SIGTERM right after start is never the default
	// action (exit without draining).
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	ln, err := net.Listen("tcp", net.JoinHostPort("", port))
	if err != nil {
		lg.log("listen_failed", "error", err.Error())
		return 1
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if a.backend != "" {
		lg.log("listening", "addr", ln.Addr().String(), "backend", a.backend)
	} else {
		lg.log("listening", "addr", ln.Addr().String())
	}

	select {
	case err := <-errc:
		lg.log("serve_failed", "error", err.Error())
		return 1
	case s := <-sigs:
		active, idle := a.drain()
		lg.log(strings.ToLower(unixName(s)), "active", active)
		<-idle
	}
	// No active work: stop listening (new connections are refused from
	// here) and let the handlers still answering 503s finish.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		lg.log("shutdown_error", "error", err.Error())
	}
	a.mu.Lock()
	admitted, rejected := a.admitted, a.rejected
	a.mu.Unlock()
	lg.log("shutdown_complete", "admitted", admitted, "rejected", rejected)
	return 0
}

func unixName(s os.Signal) string {
	switch s {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	}
	return s.String()
}
