package routingprobe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// router stands in for a data plane: it sends each request to the next
// of its routed Pods, each a real HTTP server answering as a probe.
type router struct {
	mu     sync.Mutex
	routed []string
	next   int
	pods   map[string]*httptest.Server
	// delays[i] is how long after the i-th delete call the router stops
	// routing to the deleted Pod.
	delays  []time.Duration
	deleted []string
	created int
	srv     *httptest.Server
	t       *testing.T
}

func newRouter(t *testing.T, replicas int, delays ...time.Duration) *router {
	r := &router{pods: map[string]*httptest.Server{}, delays: delays, t: t}
	for range replicas {
		r.addPod()
	}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

// addPod starts a Pod and routes to it at once: a replacement that is
// Ready and routed.
func (r *router) addPod() {
	r.created++
	name := fmt.Sprintf("probe-%d", r.created)
	s := httptest.NewServer(Handler(name))
	r.t.Cleanup(s.Close)
	r.pods[name] = s
	r.routed = append(r.routed, name)
}

func (r *router) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	if len(r.routed) == 0 {
		r.mu.Unlock()
		http.Error(w, "no backend", http.StatusServiceUnavailable)
		return
	}
	pod := r.routed[r.next%len(r.routed)]
	r.next++
	url := r.pods[pod].URL
	r.mu.Unlock()
	resp, err := http.Get(url)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	_, _ = io.Copy(w, resp.Body)
}

func (r *router) ReadyPods(context.Context) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ready []string
	for name := range r.pods {
		if !slices.Contains(r.deleted, name) {
			ready = append(ready, name)
		}
	}
	return ready, nil
}

func (r *router) Delete(_ context.Context, pod string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.delays[len(r.deleted)]
	r.deleted = append(r.deleted, pod)
	r.addPod()
	withdraw := func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.routed = slices.DeleteFunc(r.routed, func(p string) bool { return p == pod })
	}
	if d == 0 {
		r.routed = slices.DeleteFunc(r.routed, func(p string) bool { return p == pod })
		return nil
	}
	time.AfterFunc(d, withdraw)
	return nil
}

func testConfig(deletions int) Config {
	return Config{Replicas: 3, Deletions: deletions, Quiet: 300 * time.Millisecond, Hold: 5 * time.Second,
		RouteWait: 5 * time.Second, Poll: 10 * time.Millisecond, Recent: time.Second}
}

func startTestLoad(t *testing.T, url string, max int) *Load {
	l := StartLoad(t.Context(), LoadConfig{URL: url, Rate: 200, MaxRequests: max, Client: &http.Client{Timeout: 2 * time.Second}})
	t.Cleanup(func() { l.Stop() })
	return l
}

func TestMeasureTimesEachWithdrawal(t *testing.T) {
	delays := []time.Duration{150 * time.Millisecond, 400 * time.Millisecond, 250 * time.Millisecond}
	r := newRouter(t, 3, delays...)
	load := startTestLoad(t, r.srv.URL, 100000)
	var progress bytes.Buffer
	rounds, err := Measure(t.Context(), testConfig(len(delays)), r, load, &progress)
	if err != nil {
		t.Fatalf("Measure: %v\n%s", err, progress.String())
	}
	if len(rounds) != len(delays) {
		t.Fatalf("%d rounds, want %d", len(rounds), len(delays))
	}
	for i, rd := range rounds {
		if rd.Pod != r.deleted[i] {
			t.Errorf("round %d timed Pod %s, but %s was deleted", i+1, rd.Pod, r.deleted[i])
		}
		// Every third request goes to the Pod (5 ms apart at 200/s): its
		// last one was sent at most a few gaps before the router stopped.
		if lo, hi := delays[i]-100*time.Millisecond, delays[i]+50*time.Millisecond; rd.Delay < lo || rd.Delay > hi {
			t.Errorf("round %d: withdrawal %s, want within %s..%s of the router's %s", i+1, rd.Delay, lo, hi, delays[i])
		}
		if rd.Served < 2 {
			t.Errorf("round %d: Pod answered %d requests after its delete call; the router kept it %s at 200/s", i+1, rd.Served, delays[i])
		}
		if rd.Failed != 0 {
			t.Errorf("round %d: %d requests failed; the router never fails one", i+1, rd.Failed)
		}
	}
	if got := strings.Count(progress.String(), "\n"); got != len(delays) {
		t.Errorf("progress has %d lines, want one per deletion:\n%s", got, progress.String())
	}
	st := Summarize(Delays(rounds))
	if st.Max != rounds[1].Delay || st.Min != rounds[0].Delay || st.Median != rounds[2].Delay {
		t.Errorf("stats %+v do not match the rounds %v", st, Delays(rounds))
	}
	if got := ProfileDelay(st.Max, time.Second); got != 2*time.Second {
		t.Errorf("profile delay %s for a slowest withdrawal of %s + 1s, want 2s", got, st.Max)
	}
}

func TestMeasureAPodWithdrawnAtOnceIsZero(t *testing.T) {
	r := newRouter(t, 3, 0)
	load := startTestLoad(t, r.srv.URL, 100000)
	rounds, err := Measure(t.Context(), testConfig(1), r, load, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// A request routed before the withdrawal may still be on its way when
	// the delete call is made; none is sent after it.
	if rounds[0].Delay > 20*time.Millisecond || rounds[0].Served > 1 {
		t.Errorf("withdrawn before the delete call returned: got delay %s, %d served; want about 0", rounds[0].Delay, rounds[0].Served)
	}
}

func TestMeasureRefusesAWithdrawalLongerThanTheHold(t *testing.T) {
	r := newRouter(t, 3, 3*time.Second)
	load := startTestLoad(t, r.srv.URL, 100000)
	cfg := testConfig(1)
	cfg.Hold = time.Second
	_, err := Measure(t.Context(), cfg, r, load, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "raise --hold") || !strings.Contains(err.Error(), "deletion 1") {
		t.Fatalf("got %v, want deletion 1 refused, saying to raise --hold", err)
	}
}

func TestMeasureStopsWhenTheLoadIsExhausted(t *testing.T) {
	r := newRouter(t, 3, 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond)
	load := startTestLoad(t, r.srv.URL, 150)
	rounds, err := Measure(t.Context(), testConfig(3), r, load, io.Discard)
	if !errors.Is(err, ErrExhausted) {
		t.Fatalf("got %v after %d rounds, want ErrExhausted", err, len(rounds))
	}
	if n := len(load.Stop()); n > 150 {
		t.Errorf("the load sent %d requests, over its 150", n)
	}
}

func TestMeasureSaysWhichPodThePathNeverReaches(t *testing.T) {
	r := newRouter(t, 3, time.Second)
	r.mu.Lock()
	r.routed = r.routed[:2] // probe-3 is Ready but not routed
	r.mu.Unlock()
	load := startTestLoad(t, r.srv.URL, 100000)
	cfg := testConfig(1)
	cfg.RouteWait = 500 * time.Millisecond
	_, err := Measure(t.Context(), cfg, r, load, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "the path sent no request to Pod probe-3 in the last 1s") || !strings.Contains(err.Error(), "every probe Pod") {
		t.Fatalf("got %v, want probe-3 named as never reached", err)
	}
}

func TestMeasureEndsWithItsContext(t *testing.T) {
	r := newRouter(t, 3, 10*time.Second)
	load := startTestLoad(t, r.srv.URL, 100000)
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	cfg := testConfig(1)
	cfg.Hold = time.Minute
	start := time.Now()
	_, err := Measure(ctx, cfg, r, load, io.Discard)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the context's deadline", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("returned %s after a 500ms deadline", el)
	}
}

func TestWaitServing(t *testing.T) {
	notProbe := httptest.NewServer(http.NotFoundHandler())
	defer notProbe.Close()
	other := httptest.NewServer(Handler("old-run-pod"))
	defer other.Close()
	ours := httptest.NewServer(Handler("probe-1"))
	defer ours.Close()
	// Closed last, so that no server of this test takes its port.
	closed := httptest.NewServer(Handler("x"))
	closed.Close()
	pods := func(context.Context) ([]string, error) { return []string{"probe-1", "probe-2"}, nil }
	c := &http.Client{Timeout: time.Second}
	tests := []struct {
		name, url, want string
	}{
		{"an unreachable URL names the refusal", closed.URL, "connection refused"},
		{"a URL answered by something else names its status", notProbe.URL, "HTTP 404"},
		{"a URL answered by another probe names it", other.URL, "answered by Pod old-run-pod, not one of this run's probe Pods (probe-1, probe-2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := WaitServing(t.Context(), c, tt.url, pods, 200*time.Millisecond, 20*time.Millisecond)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.url+" never reached a probe Pod in 200ms") {
				t.Fatalf("got %v, want it to contain %q and the URL", err, tt.want)
			}
		})
	}
	pod, err := WaitServing(t.Context(), c, ours.URL, pods, time.Second, 20*time.Millisecond)
	if err != nil || pod != "probe-1" {
		t.Fatalf("got %q, %v; want probe-1", pod, err)
	}
}

// A path that routes by host is reached at an address with the host in
// the Host header; without one, the URL's own host goes.
func TestNewClientForSendsTheHostHeader(t *testing.T) {
	hosts := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hosts <- r.Host
		fmt.Fprint(w, "pod-a")
	}))
	defer srv.Close()
	for _, tc := range []struct{ host, want string }{{"probe.shop.example", "probe.shop.example"}, {"", srv.Listener.Addr().String()}} {
		Get(t.Context(), NewClientFor(tc.host), srv.URL+"/")
		if got := <-hosts; got != tc.want {
			t.Errorf("NewClientFor(%q) sent Host %q, want %q", tc.host, got, tc.want)
		}
	}
}
