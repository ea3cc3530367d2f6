package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// The namespace read of a review ends a fifth of the review's timeout
// (at least a second) before the API server stops waiting, so the
// "admitted unchanged" answer for an unreadable namespace arrives in time:
// with the chart's 5s, the read ends at 4s.
func TestNamespaceReadEndsBeforeTheReviewDeadline(t *testing.T) {
	for _, tc := range []struct {
		query   string
		want    time.Duration // from the start of the review to the read's deadline
		comment string
	}{
		{"?timeout=5s", 4 * time.Second, "the chart's timeoutSeconds"},
		{"?timeout=10s", 8 * time.Second, "the API server's default"},
		{"?timeout=2s", time.Second, "short: the answer keeps at least a second"},
		{"?timeout=1s", 500 * time.Millisecond, "shortest: half for the read, half for the answer"},
		{"?timeout=30s", 8 * time.Second, "capped by --webhook-timeout (10s here)"},
		{"", 8 * time.Second, "none sent: --webhook-timeout"},
		{"?timeout=bogus", 8 * time.Second, "unreadable: --webhook-timeout"},
	} {
		t.Run(tc.comment, func(t *testing.T) {
			var got time.Duration
			var start time.Time
			lookup := NamespaceLookupFunc(func(ctx context.Context, _ string) (mutate.Namespace, error) {
				dl, ok := ctx.Deadline()
				if !ok {
					t.Error("the namespace read has no deadline")
				}
				got = dl.Sub(start)
				return mutate.Namespace{}, context.DeadlineExceeded // as a read that hangs until it
			})
			eps := Endpoints(Config{Options: mutate.DefaultOptions(), Namespaces: lookup, Limits: DefaultLimits()})
			body := review{op: admissionv1.Create, kind: "Pod", namespace: nsEnforce, object: pod("web", 30, nil, "")}.body(t)
			req := httptest.NewRequest(http.MethodPost, PathMutatePod+tc.query, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			start = time.Now()
			eps[PathMutatePod].ServeHTTP(rec, req)
			if d := got - tc.want; d < -50*time.Millisecond || d > 50*time.Millisecond {
				t.Errorf("the read's deadline is %s after the review began, want %s", got, tc.want)
			}
			var out admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
				t.Fatalf("answer %s", rec.Body.Bytes())
			}
			if !out.Response.Allowed || len(out.Response.Patch) > 0 || len(out.Response.Warnings) != 1 || out.Response.Warnings[0] != NamespaceUnavailableWarning {
				t.Errorf("answer %+v, want admitted unchanged with the namespace-unavailable warning", out.Response)
			}
		})
	}
}

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// guarded is one endpoint behind a guard of one slot on a fake clock, with
// a handler that counts its calls and, while hold is set, blocks until
// released.
type guarded struct {
	clock   *fakeClock
	g       *guard
	h       http.Handler
	reg     *prometheus.Registry
	calls   atomic.Int32
	started chan struct{}
	release chan struct{}
	// took is how much the fake clock moves during each call.
	took time.Duration
	hold atomic.Bool
}

func newGuarded(t *testing.T) *guarded {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	gd := &guarded{clock: &fakeClock{now: time.Unix(1_000_000, 0)}, reg: reg, started: make(chan struct{}, 8), release: make(chan struct{})}
	l := DefaultLimits()
	l.MaxInFlight = 1
	gd.g = newGuard(l, m)
	gd.g.now = gd.clock.Now
	gd.h = gd.g.wrap(NameMutatePod, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gd.calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		gd.clock.Add(gd.took)
		if gd.hold.Load() {
			gd.started <- struct{}{}
			<-gd.release
		}
		w.WriteHeader(http.StatusOK)
	}))
	return gd
}

func (gd *guarded) serve(timeout string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, PathMutatePod+"?timeout="+timeout, strings.NewReader(`{"request":{}}`))
	rec := httptest.NewRecorder()
	gd.h.ServeHTTP(rec, req)
	return rec
}

func (gd *guarded) shed() float64 {
	return testutil.ToFloat64(gd.mustCounter(string(NameMutatePod), string(DecisionError), string(ReasonOverloaded)))
}

func (gd *guarded) mustCounter(labels ...string) prometheus.Counter {
	fams, _ := gd.reg.Gather()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if got["webhook"] == labels[0] && got["decision"] == labels[1] && got["reason"] == labels[2] {
				c.Add(m.GetCounter().GetValue())
			}
		}
	}
	return c
}

// A review that the queue ahead of it keeps from finishing before its
// deadline is refused at once with 429 and Retry-After, before its handler
// runs: the API server still has its whole timeout to retry it. One that
// can finish in time waits, and is served.
func TestAReviewThatCannotFinishInTimeIsShedBeforeItsHandlerRuns(t *testing.T) {
	gd := newGuarded(t)
	// One review teaches the guard that a review holds its slot 3s.
	gd.took = 3 * time.Second
	if rec := gd.serve("10s"); rec.Code != http.StatusOK {
		t.Fatalf("the first review: %d %s", rec.Code, rec.Body)
	}
	gd.took = 0
	// Another holds the only slot.
	gd.hold.Store(true)
	busy := make(chan *httptest.ResponseRecorder, 1)
	go func() { busy <- gd.serve("10s") }()
	<-gd.started
	gd.hold.Store(false)

	// 5s: admitted if answered within 4s (admitWithin); the slot frees
	// in about 3s, then it needs 3s: it cannot make it.
	rec := gd.serve("5s")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != strconv.Itoa(RetryAfterSeconds) {
		t.Fatalf("a review that cannot finish in time: %d, Retry-After %q; want 429 with Retry-After %d", rec.Code, rec.Header().Get("Retry-After"), RetryAfterSeconds)
	}
	if n := gd.calls.Load(); n != 2 {
		t.Errorf("its handler ran: %d calls, want 2 (the two before it)", n)
	}
	if n := gd.shed(); n != 1 {
		t.Errorf("%v reviews counted overloaded, want 1", n)
	}

	// 10s: answered within 8s, so starting by 5s; the slot frees in
	// about 3s: it waits, and is served once the slot frees.
	waited := make(chan *httptest.ResponseRecorder, 1)
	go func() { waited <- gd.serve("10s") }()
	for {
		if _, waiting, _ := gd.g.adm.state(); waiting == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if n := gd.calls.Load(); n != 2 {
		t.Fatalf("the waiting review ran before the slot freed: %d calls", n)
	}
	gd.release <- struct{}{}
	for _, c := range []chan *httptest.ResponseRecorder{busy, waited} {
		if rec := <-c; rec.Code != http.StatusOK {
			t.Errorf("a review with time to wait: %d %s, want 200", rec.Code, rec.Body)
		}
	}
	if n := gd.calls.Load(); n != 3 {
		t.Errorf("%d calls, want 3", n)
	}
}

// A waiting review whose latest start passes before a slot frees is shed
// then, without running: it is never started too late to answer.
func TestAWaitingReviewIsShedAtItsLatestStart(t *testing.T) {
	gd := newGuarded(t)
	gd.hold.Store(true)
	busy := make(chan *httptest.ResponseRecorder, 1)
	go func() { busy <- gd.serve("10s") }()
	<-gd.started
	// No service measured yet: it may wait until its latest finish, half
	// of a 1s timeout (admitWithin).
	if rec := gd.serve("1s"); rec.Code != http.StatusTooManyRequests {
		t.Errorf("a review still waiting at its latest start: %d, want 429", rec.Code)
	}
	if n := gd.calls.Load(); n != 1 {
		t.Errorf("%d calls, want 1: the shed review must not run", n)
	}
	if _, waiting, _ := gd.g.adm.state(); waiting != 0 {
		t.Errorf("%d left waiting, want 0", waiting)
	}
	gd.release <- struct{}{}
	if rec := <-busy; rec.Code != http.StatusOK {
		t.Errorf("the review in flight: %d", rec.Code)
	}
	if busy, _, _ := gd.g.adm.state(); busy != 0 {
		t.Errorf("%d slots still held after every review ended", busy)
	}
}

// overload drives a queue with a simulated server: reviews arrive at rate
// a second for d, each takes service(i) in its slot, and must be answered
// by its arrival plus finish. It returns the reviews served, how many
// finished late, and how many started after their latest start.
func overload(slots int, rate float64, d, finish time.Duration, service func(i int) time.Duration) (served, late, startedLate int) {
	q := newQueue(slots, 128)
	t0 := time.Unix(0, 0)
	type job struct {
		i               int
		arrived         time.Time
		w               *waiter
		started, finish time.Time
	}
	var running []*job // sorted by finish
	var queued []*job
	start := func(j *job, at time.Time) {
		j.started, j.finish = at, at.Add(service(j.i))
		if j.w != nil && at.After(j.w.latestStart) {
			startedLate++
		}
		k := sort.Search(len(running), func(k int) bool { return running[k].finish.After(j.finish) })
		running = slices.Insert(running, k, j)
	}
	// settle hands slots the queue granted, and drops the shed.
	settle := func(at time.Time) {
		kept := queued[:0]
		for _, j := range queued {
			select {
			case <-j.w.ready:
				if j.w.granted {
					start(j, at)
				}
			default:
				kept = append(kept, j)
			}
		}
		queued = kept
	}
	n := int(rate * d.Seconds())
	for i := 0; i < n || len(running) > 0; {
		arrival := t0.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		// The next event: a completion, a waiter's latest start, or an arrival.
		next, kind := arrival, "arrive"
		if i >= n {
			next, kind = t0.Add(100*d), ""
		}
		if len(running) > 0 && !running[0].finish.After(next) {
			next, kind = running[0].finish, "finish"
		}
		for _, j := range queued {
			if j.w.latestStart.Before(next) {
				next, kind = j.w.latestStart, "expire"
			}
		}
		switch kind {
		case "finish":
			j := running[0]
			running = running[1:]
			served++
			if j.finish.After(j.arrived.Add(finish)) {
				late++
			}
			q.release(next, j.finish.Sub(j.started))
			settle(next)
		case "expire":
			for _, j := range queued {
				if !j.w.latestStart.After(next) {
					if q.giveUp(j.w) {
						start(j, next)
					}
				}
			}
			settle(next)
			kept := queued[:0]
			for _, j := range queued {
				if j.started.IsZero() && j.w.latestStart.After(next) {
					kept = append(kept, j)
				}
			}
			queued = kept
		case "arrive":
			j := &job{i: i, arrived: arrival}
			i++
			w, ok := q.arrive(arrival, arrival.Add(finish))
			switch {
			case !ok:
			case w == nil:
				start(j, arrival)
			default:
				j.w = w
				queued = append(queued, j)
			}
		default:
			return served, late, startedLate
		}
	}
	return served, late, startedLate
}

// At twice its capacity a replica still answers at least 90% of its
// capacity, and every review it answers within its deadline: the queue
// admits only what can finish, and sheds the rest on arrival. Simulated,
// so it counts and never times: 4 slots, 20ms a review (200 reviews/s),
// 400 a second offered for a minute, each with the chart's 5s timeout
// (admitted if answered within 4s).
func TestAtTwiceItsCapacityAReplicaServesInTime(t *testing.T) {
	const (
		slots    = 4
		per      = 20 * time.Millisecond
		capacity = slots * float64(time.Second) / float64(per)
		d        = time.Minute
	)
	finish := admitWithin(5 * time.Second)
	for _, tc := range []struct {
		name    string
		service func(i int) time.Duration
	}{
		{"every review alike", func(int) time.Duration { return per }},
		{"reviews from a tenth to twice the mean", func(i int) time.Duration { return per / 10 * time.Duration(1+i%20) }},
		{"one review in a hundred 50 times slower (a namespace read from the API server)", func(i int) time.Duration {
			if i%100 == 0 {
				return 50 * per
			}
			return per / 2
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			served, late, startedLate := overload(slots, 2*capacity, d, finish, tc.service)
			if want := int(0.9 * capacity * d.Seconds()); served < want {
				t.Errorf("served %d in %s, want at least %d (90%% of its capacity)", served, d, want)
			}
			if late > 0 || startedLate > 0 {
				t.Errorf("%d of %d served reviews finished after their deadline, %d started after their latest start; want none", late, served, startedLate)
			}
		})
	}
}

// A waiting review whose API server gave up (its connection closed, which
// ends the request's context once its body was read) leaves the queue
// without running: no work is done for nobody.
func TestAWaitingReviewWhoseClientLeftDoesNotRun(t *testing.T) {
	gd := newGuarded(t)
	gd.hold.Store(true)
	busy := make(chan *httptest.ResponseRecorder, 1)
	go func() { busy <- gd.serve("10s") }()
	<-gd.started
	cctx, leave := context.WithCancel(context.Background())
	req := httptest.NewRequest(http.MethodPost, PathMutatePod+"?timeout=10s", strings.NewReader(`{"request":{}}`)).WithContext(cctx)
	left := make(chan int, 1)
	go func() {
		rec := httptest.NewRecorder()
		gd.h.ServeHTTP(rec, req)
		left <- rec.Code
	}()
	for {
		if _, waiting, _ := gd.g.adm.state(); waiting == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	leave()
	if code := <-left; code != http.StatusTooManyRequests {
		t.Errorf("a waiting review whose client left: %d, want 429", code)
	}
	gd.release <- struct{}{}
	<-busy
	if n := gd.calls.Load(); n != 1 {
		t.Errorf("%d calls, want 1: the review whose client left must not run", n)
	}
}
