package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestParseSleep(t *testing.T) {
	for in, want := range map[string]time.Duration{"20": 20 * time.Second, "1.5": 1500 * time.Millisecond, "2s": 2 * time.Second, "1m": time.Minute, "0": 0} {
		got, err := parseSleep(in)
		if err != nil || got != want {
			t.Errorf("parseSleep(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-1", "1d"} {
		if _, err := parseSleep(in); err == nil {
			t.Errorf("parseSleep(%q) succeeded", in)
		}
	}
}

// TestDrainsAdmittedWorkOnSIGTERM runs the real binary: an admitted request
// completes after SIGTERM, a new one is refused with 503, and the log says
// work_started, sigterm active=1, work_completed, shutdown_complete in order.
func TestDrainsAdmittedWorkOnSIGTERM(t *testing.T) {
	cmd, port, next := startDrainApp(t)
	next("listening")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)

	type result struct {
		code int
		body string
		err  error
	}
	get := func(path string) result {
		resp, err := http.Get(base + path)
		if err != nil {
			return result{err: err}
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return result{code: resp.StatusCode, body: string(b)}
	}
	if r := get("/ready"); r.code != 200 {
		t.Fatalf("/ready = %+v", r)
	}
	slow := make(chan result, 1)
	go func() { slow <- get("/work?seconds=1.5") }()
	next("work_started")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if m := next("sigterm"); m["active"] != 1.0 {
		t.Errorf("sigterm logged active=%v, want 1", m["active"])
	}
	if r := get("/work?seconds=0"); r.code != http.StatusServiceUnavailable {
		t.Errorf("new work while draining = %+v, want 503", r)
	}
	next("work_rejected")
	if r := get("/ready"); r.code != http.StatusServiceUnavailable {
		t.Errorf("/ready while draining = %+v, want 503", r)
	}
	if r := get("/live"); r.code != 200 {
		t.Errorf("/live while draining = %+v, want 200", r)
	}
	next("work_completed")
	next("shutdown_complete")
	if r := <-slow; r.code != 200 || !strings.Contains(r.body, `"completed":true`) {
		t.Errorf("admitted request = %+v, want 200 completed", r)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit: %v, want 0", err)
	}
}

func TestSleepByArgv0(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "drainapp")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	link := filepath.Join(dir, "sleep")
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{link, "0.3"}, {bin, "sleep", "0.3"}} {
		start := time.Now()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Errorf("%v: %v %s", args, err, out)
		}
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Errorf("%v returned after %s", args, d)
		}
	}
	if err := exec.Command(link, "nope").Run(); err == nil {
		t.Error("sleep nope succeeded")
	}
}

// TestWorksThroughTheBackend runs the real binary with $BACKEND pointing at
// a relay in front of a backend, as a database proxy sidecar stands in
// front of the database: a request is answered with the backend's work;
// one admitted before SIGTERM still needs the relay, and when the relay
// dies under it the app answers 502 and logs backend_failed, then drains
// and exits 0.
func TestWorksThroughTheBackend(t *testing.T) {
	backendArrived := make(chan struct{}, 10)
	backend := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		backendArrived <- struct{}{}
		secs, _ := strconv.ParseFloat(r.URL.Query().Get("seconds"), 64)
		time.Sleep(time.Duration(secs * float64(time.Second)))
		_, _ = io.WriteString(w, `{"completed":true,"pod":"db"}`)
	})}
	backendLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = backend.Serve(backendLn) }()
	t.Cleanup(func() { _ = backend.Close() })
	relay := startRelay(t, backendLn.Addr().String())

	cmd, port, next := startDrainApp(t, "BACKEND="+relay.addr())
	if m := next("listening"); m["backend"] != relay.addr() {
		t.Errorf("listening logged backend %v, want %s", m["backend"], relay.addr())
	}
	get := func(path string) (int, string, error) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}

	if code, body, err := get("/work?seconds=0.1"); err != nil || code != 200 || !strings.Contains(body, `"completed":true`) || !strings.Contains(body, `"backend":"db"`) {
		t.Fatalf("work through the backend = %d %s %v, want 200 completed by db", code, body, err)
	}
	next("work_started")
	next("work_completed")
	if n := relay.accepted(); n != 1 {
		t.Errorf("the relay saw %d connections, want 1 (one per request)", n)
	}

	type answer struct {
		code int
		body string
		err  error
	}
	slow := make(chan answer, 1)
	go func() {
		code, body, err := get("/work?seconds=30")
		slow <- answer{code, body, err}
	}()
	next("work_started")
	<-backendArrived // the first request's
	select {
	case <-backendArrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow request never reached the backend")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if m := next("sigterm"); m["active"] != 1.0 {
		t.Errorf("sigterm logged active=%v, want 1", m["active"])
	}
	// The relay dies while the admitted request still works through it.
	relay.kill()
	if m := next("backend_failed"); m["error"] == nil || m["error"] == "" {
		t.Errorf("backend_failed without an error: %v", m)
	}
	next("shutdown_complete")
	select {
	case a := <-slow:
		if a.err != nil || a.code != http.StatusBadGateway || !strings.Contains(a.body, `"reason":"backend"`) {
			t.Errorf("the request cut at the backend = %d %s %v, want 502 reason backend", a.code, a.body, a.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the request cut at the backend was not answered")
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit: %v, want 0", err)
	}
}

// relay relays TCP connections to a target until killed, which closes its
// listener and every connection through it, as a proxy process exiting.
type relay struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	n     int
}

func startRelay(t *testing.T, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln}
	t.Cleanup(r.kill)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			r.mu.Lock()
			r.n++
			r.conns = append(r.conns, c, up)
			r.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	return r
}

func (r *relay) addr() string { return r.ln.Addr().String() }

func (r *relay) accepted() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

func (r *relay) kill() {
	r.ln.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
}

// startDrainApp builds and starts the real binary on a free port with env
// added, and returns it, its port, and next, which fails t unless the
// next JSON line it logs is the event named (within 10 s) and returns it.
func startDrainApp(t *testing.T, env ...string) (*exec.Cmd, int, func(string) map[string]any) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "drainapp")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin)
	cmd.Env = append(append(os.Environ(), fmt.Sprintf("PORT=%d", port)), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	events := make(chan map[string]any, 100)
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			var m map[string]any
			if json.Unmarshal(s.Bytes(), &m) == nil {
				events <- m
			}
		}
		close(events)
	}()
	next := func(want string) map[string]any {
		t.Helper()
		select {
		case m, ok := <-events:
			if !ok {
				t.Fatalf("log ended, want %s", want)
			}
			if m["event"] != want {
				t.Fatalf("log event %v, want %s", m, want)
			}
			return m
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s logged", want)
		}
		return nil
	}
	return cmd, port, next
}
