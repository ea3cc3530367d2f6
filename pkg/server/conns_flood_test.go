package server

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// floodConns is how many hostile connections each flood opens.
const floodConns = 10000

// floodRate paces the floods, in connections a second. From one address
// a flood evicts its own connections, not the reviews' (from another);
// faster floods do not grow what the server holds.
const floodRate = 2000

// perConnHeap bounds the heap one connection holds, whatever its client
// sends: measured at most 116 KB (unfinished headers of short distinct
// lines on a kept-alive connection, `make conns-report`), with room for
// fragmentation under churn.
const perConnHeap = 160 << 10

// floodHeapSlack is heap beyond the connections': the legitimate clients'
// own connections and reviews, the flood's handshakes in progress, the
// runtime.
const floodHeapSlack = 8 << 20

// Ten thousand hostile connections of each kind: the server never holds
// more than its caps, its heap stays under what the caps allow, and a
// review client, dialling afresh for each review and keeping one
// connection alive, gets every review answered throughout.
func TestConnectionFloodsAreBoundedAndReviewsAnswered(t *testing.T) {
	if err := raiseFileLimit(floodConns + 1000); err != nil {
		t.Fatalf("the floods need file descriptors: %v", err)
	}
	defaults := DefaultConfig()
	maxOpen, maxPending := defaults.MaxConnections, defaults.MaxPendingConnections
	bound := int64(maxOpen)*perConnHeap + floodHeapSlack
	for _, tc := range []struct {
		kind floodKind
		// evicts is the state of the connections the flood's own
		// connections take the place of.
		evicts connState
	}{
		{floodTCP, connPending},
		{floodHello, connPending},
		{floodIdle, connIdle},
		{floodHeaders, connPending},
		{floodIdleHeaders, connIdle},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			var ws *webhookServer
			h := startRunWith(t, []Option{withObserver(func(s *webhookServer) { ws = s })}, 0, 10*time.Second, 0)
			seen := ws.conns.seenCount()
			before := memNow(t)

			legit := startReviews(t, h)
			f := startFlood(t, tc.kind, h.webhookAddr(), floodConns, floodRate)
			c := f.wait(t)
			ws.conns.waitSeen(t, seen+c.opened)
			if c.opened < floodConns*9/10 {
				t.Fatalf("the flood opened %d of %d connections (%d failed)", c.opened, floodConns, c.failed)
			}

			// All of the flood is open (or was evicted): what the server holds now
			// is the most it holds.
			after := memNow(t)
			legit.mark()
			_, _, peak := ws.conns.counts()
			if peak > maxOpen {
				t.Errorf("the server held %d connections at once, over --max-connections=%d", peak, maxOpen)
			}
			if p := ws.conns.pendingPeak(); p > maxPending {
				t.Errorf("the server held %d pending connections at once, over --max-pending-connections=%d", p, maxPending)
			}
			if heap := after.heap - before.heap; heap > bound {
				t.Errorf("heap in use grew %.1f MiB with %d connections open, over the %.1f MiB the caps allow (%d x %d KiB + %d MiB)",
					mib(heap), peak, mib(bound), maxOpen, perConnHeap>>10, floodHeapSlack>>20)
			} else {
				t.Logf("%s: %d opened, %d failed; peak %d connections; heap +%.1f MiB (bound %.1f MiB)", tc.kind, c.opened, c.failed, peak, mib(heap), mib(bound))
			}
			if got := metricValue(t, h, ConnectionsEvictedName, tc.evicts.String()); got == 0 {
				t.Errorf("%s{state=%q} = 0 after the flood, want the evictions counted", ConnectionsEvictedName, tc.evicts)
			}
			// Under the tracker's lock, which every change of the gauge takes:
			// the reviews are still opening and closing connections.
			ws.conns.mu.Lock()
			gauge, open := metricValue(t, h, ConnectionsName, ""), ws.conns.open()
			ws.conns.mu.Unlock()
			if gauge != float64(open) {
				t.Errorf("%s sums to %v, the tracker holds %d", ConnectionsName, gauge, open)
			}
			f.stop()
			legit.stop(t)
			h.shutdown()
			if err := h.wait(t, 30*time.Second); err != nil {
				t.Errorf("Run after the flood: %v", err)
			}
		})
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// reviews sends reviews until stopped, alternately on a fresh connection
// and on one kept alive, and records every answer.
type reviews struct {
	done    chan struct{}
	stopped chan struct{}
	mu      sync.Mutex
	sent    [2]int // fresh, kept alive
	marked  [2]int // sent when mark was called
	failed  []string
}

func startReviews(t *testing.T, h *harness) *reviews {
	r := &reviews{done: make(chan struct{}), stopped: make(chan struct{})}
	fresh := h.client(false)
	fresh.Transport.(*http.Transport).DisableKeepAlives = true
	kept := h.client(false)
	// The reviews come from an address of their own, as the API server's
	// do on a cluster network: the flood, from 127.0.0.1, evicts its own.
	apiServer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	fresh.Transport.(*http.Transport).DialContext = apiServer.DialContext
	kept.Transport.(*http.Transport).DialContext = apiServer.DialContext
	go func() {
		defer close(r.stopped)
		for i := 0; ; i++ {
			select {
			case <-r.done:
				return
			default:
			}
			which, c := i%2, fresh
			if which == 1 {
				c = kept
			}
			// A review every few milliseconds: answers all along the flood,
			// and most of the CPU left to it.
			time.Sleep(5 * time.Millisecond)
			res := h.review(t, c, "shop")
			r.mu.Lock()
			r.sent[which]++
			if !res.mutated() {
				r.failed = append(r.failed, fmt.Sprintf("review %d (%s): %v", r.sent[which], [2]string{"fresh connection", "kept-alive connection"}[which], res.err))
			}
			r.mu.Unlock()
		}
	}()
	return r
}

// mark notes how many reviews were sent so far.
func (r *reviews) mark() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.marked = r.sent
}

// stop ends the reviews and fails t unless every one was answered, and
// each client sent some while the flood was open.
func (r *reviews) stop(t *testing.T) {
	t.Helper()
	close(r.done)
	<-r.stopped
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.failed {
		t.Error(f)
	}
	if r.marked[0] == 0 || r.marked[1] == 0 {
		t.Errorf("reviews sent while the flood opened its connections: %d fresh, %d kept alive; want some of each", r.marked[0], r.marked[1])
	}
	t.Logf("reviews answered: %d on fresh connections, %d kept alive (%d and %d during the flood), %d failed",
		r.sent[0], r.sent[1], r.marked[0], r.marked[1], len(r.failed))
}

// metricValue is the value of a connection metric with the given state
// label, or the sum over its labels when state is "".
func metricValue(t *testing.T, h *harness, name, state string) float64 {
	t.Helper()
	mfs, err := h.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if state != "" && labelValue(m, "state") != state {
				continue
			}
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return sum
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
