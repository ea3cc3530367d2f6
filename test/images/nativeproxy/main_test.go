package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// The drain, end to end in one process: before it answers are kept alive;
// `pilot-agent request POST drain` starts it; the request in flight then
// finishes with Connection: close, and new connections are refused.
func TestDrainClosesTheListenerAndFinishesInFlight(t *testing.T) {
	release := make(chan struct{})
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer app.Close()
	up, _ := url.Parse(app.URL)

	in, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	d := &drainer{log: &logger{enc: json.NewEncoder(&out)}, inbound: in}
	front := &http.Server{Handler: d.relay(d.upstream(up))}
	go func() { _ = front.Serve(in) }()
	defer front.Close()
	st := httptest.NewServer(d.status())
	defer st.Close()
	base := "http://" + in.Addr().String()

	res, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.Close {
		t.Fatal("answered with Connection: close before the drain")
	}

	slow := make(chan *http.Response, 1)
	go func() {
		r, err := http.Get(base + "/slow")
		if err != nil {
			t.Errorf("the request in flight: %v", err)
		}
		slow <- r
	}()
	for d.active.Load() == 0 {
		time.Sleep(time.Millisecond)
	}

	port := st.URL[strings.LastIndex(st.URL, ":")+1:]
	var stdout, stderr bytes.Buffer
	if code := run([]string{"request", "--debug-port=" + port, "POST", "drain"}, &stdout, &stderr); code != 0 || stdout.String() != "OK" {
		t.Fatalf("pilot-agent request POST drain: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", in.Addr().String(), time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the inbound listener still accepts 2 s after the drain (DRAIN_TIME 0)")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	r := <-slow
	if r == nil {
		return
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusOK || string(b) != "ok" || !r.Close {
		t.Fatalf("the request in flight: %d %q, Connection: close %v; want 200 \"ok\" with Connection: close", r.StatusCode, b, r.Close)
	}
	// The listener is closed before its event is written: wait for the line.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		log := out.String()
		if strings.Contains(log, `"event":"drain"`) && strings.Contains(log, `"event":"listener_closed"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log lacks drain or listener_closed 2 s after the listener closed:\n%s", log)
		}
	}
}

// syncBuffer is a bytes.Buffer the drainer's goroutines write while the
// test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestStatusPortAcceptsOnlyPOST(t *testing.T) {
	var out bytes.Buffer
	in, _ := net.Listen("tcp", "127.0.0.1:0")
	defer in.Close()
	d := &drainer{log: &logger{enc: json.NewEncoder(&out)}, inbound: in}
	st := httptest.NewServer(d.status())
	defer st.Close()
	port := st.URL[strings.LastIndex(st.URL, ":")+1:]
	var stdout, stderr bytes.Buffer
	if code := run([]string{"request", "--debug-port=" + port, "GET", "drain"}, &stdout, &stderr); code != 1 {
		t.Fatalf("GET drain: exit %d, want 1 (405); stderr %q", code, stderr.String())
	}
	if d.draining.Load() {
		t.Fatal("a GET started the drain")
	}
}

func TestBadCommandsSayWhatIsAccepted(t *testing.T) {
	for _, args := range [][]string{{}, {"wait"}, {"proxy"}, {"request", "POST"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "want") && !strings.Contains(stderr.String(), "accepted") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and what is accepted", args, code, stderr.String())
		}
	}
}
