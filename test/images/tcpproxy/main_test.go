package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/graceguard/graceguard/internal/freeport"
)

// The proxy relays requests to the app, and on SIGTERM exits at once,
// cutting a request still in flight: the naive proxy scenario 6 needs.
func TestRelaysThenDiesOnSIGTERM(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	app := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			arrived <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	})}
	appLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = app.Serve(appLn) }()
	defer close(release)
	defer app.Close()

	bin := filepath.Join(t.TempDir(), "tcpproxy")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	port, err := freeport.Get()
	if err != nil {
		t.Fatal(err)
	}
	listen := "127.0.0.1:" + itoa(port)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "LISTEN="+listen, "TARGET="+appLn.Addr().String())
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	events := make(chan map[string]any, 10)
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
	if e := <-events; e["event"] != "listening" {
		t.Fatalf("first event %v, want listening", e)
	}

	// Connections of their own, one per request: Go's client would retry a
	// GET on a new connection when a reused one dies, which would turn the
	// cut into "connection refused", and an idle one would count as active.
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + listen + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok" {
		t.Fatalf("relayed %q, want ok", body)
	}

	slow := make(chan error, 1)
	go func() {
		resp, err := c.Get("http://" + listen + "/slow")
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		slow <- err
	}()
	select { // the request reaches the app through the proxy
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow request never reached the app")
	}
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The slow request is in flight; the first one's connection may not be
	// counted closed yet.
	if e := <-events; e["event"] != "sigterm" || e["active"] == nil || e["active"].(float64) < 1 {
		t.Errorf("event %v, want sigterm with at least the slow request active", e)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit: %v, want 0", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("exited %s after SIGTERM, want at once", d)
	}
	select {
	case err := <-slow:
		if err == nil || !(strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "reset")) {
			t.Errorf("the request in flight got %v, want it cut (EOF or reset)", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the request in flight was not cut")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
