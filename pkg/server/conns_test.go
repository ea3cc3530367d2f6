package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/graceguard/graceguard/pkg/webhook"
)

// stubConn is a net.Conn that only counts closes.
type stubConn struct {
	net.Conn
	name   string
	closed int
}

func (c *stubConn) Close() error { c.closed++; return nil }

// trackerWith returns a tracker with the caps and metrics on a registry
// of its own.
func trackerWith(t *testing.T, maxOpen, maxPending int) (*connTracker, *connMetrics) {
	t.Helper()
	m, err := newConnMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return newConnTracker(connLimits{maxOpen: maxOpen, maxPending: maxPending, handshakeTimeout: time.Second, maxHandshakeBytes: 1024}, m), m
}

// accept admits a connection named name and returns it, with the name of
// the one closed to make room ("" for none) and whether it was admitted.
func accept(tr *connTracker, name string) (*trackedConn, string, bool) {
	return acceptFrom(tr, "", name)
}

// acceptFrom is accept for a connection from peer.
func acceptFrom(tr *connTracker, peer, name string) (*trackedConn, string, bool) {
	c := &trackedConn{Conn: &stubConn{name: name}, t: tr, peer: peer}
	victim, ok := tr.admit(c)
	if victim == nil {
		return c, "", ok
	}
	_ = victim.closeRaw()
	return c, victim.Conn.(*stubConn).name, ok
}

// served moves c through one request to idle.
func served(tr *connTracker, c *trackedConn) {
	tr.setState(c, http.StateNew)
	tr.setState(c, http.StateActive)
	tr.setState(c, http.StateIdle)
}

func TestTrackerMakesRoomByEvictingTheOldestPendingThenTheLongestIdle(t *testing.T) {
	for _, tc := range []struct {
		name string
		// steps: "+x" accepts x from peer p, its handshake started (want
		// nothing evicted unless "+x>y": y evicted; "+x~": queued, "+x!":
		// refused; "+x@q": from peer q), "active x" starts x's first
		// request, "idle x" takes x through one request, "req x" starts a
		// later request on idle x, "close x", "started x": x's handshake
		// has started since it queued.
		steps []string
	}{
		{"at the pending cap another peer's connection takes the oldest pending of the peer holding the most", []string{
			"+a", "+b", "+c", "+d@q>a", "+e@q>b"}},
		{"at the pending cap a peer's connection queues behind its own, and starts when one is done", []string{
			"+a", "+b", "+c", "+d~", "idle a", "started d"}},
		{"queued connections start in the order accepted", []string{
			"+a", "+b", "+c", "+d~", "close b", "started d", "+e~", "active c", "started e"}},
		{"a connection in its first request is not evicted, even at the pending cap", []string{
			"+a", "active a", "+b", "+c", "+d", "+e@q>b"}},
		{"finished connections are not evicted for pending ones", []string{
			"+a", "idle a", "+b", "+c", "+d", "+e@q>b", "+f@q>c"}},
		{"at the open cap the connection idle the longest makes room, not the first accepted", []string{
			"+a", "idle a", "+b", "idle b", "+c", "idle c", "+d", "idle d",
			"req a", "idle a", // a was used last: b is now idle the longest
			"+e>b", "+f>c"}},
		{"at the open cap with none idle another peer's connection takes the oldest pending", []string{
			"+a", "idle a", "req a", "+b", "idle b", "req b", "+c", "+d", "+e@q>c"}},
		{"at the open cap a peer's connection is refused rather than close its own pending one", []string{
			"+a", "active a", "+b", "active b", "+c", "+d", "+e!", "idle a", "+f>a"}},
		{"a new connection is refused only when every open one is in a request", []string{
			"+a", "active a", "+b", "idle b", "req b", "+c", "active c", "+d", "idle d", "req d", "+e!", "idle d", "+f>d"}},
		{"closed connections leave room", []string{
			"+a", "+b", "+c", "close a", "+d", "+e~"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, _ := trackerWith(t, 4, 3)
			started := map[*trackedConn]bool{}
			tr.start = func(c *trackedConn) { started[c] = true }
			conns := map[string]*trackedConn{}
			for _, step := range tc.steps {
				verb, arg, _ := strings.Cut(step, " ")
				switch {
				case strings.HasPrefix(step, "+"):
					name, want, refused, queued, peer := strings.TrimPrefix(step, "+"), "", false, false, "p"
					if n, v, ok := strings.Cut(name, ">"); ok {
						name, want = n, v
					}
					if n, ok := strings.CutSuffix(name, "!"); ok {
						name, refused = n, true
					}
					if n, ok := strings.CutSuffix(name, "~"); ok {
						name, queued = n, true
					}
					if n, q, ok := strings.Cut(name, "@"); ok {
						name, peer = n, q
					}
					c, evicted, ok := acceptFrom(tr, peer, name)
					if ok == refused || evicted != want {
						t.Fatalf("%s: admitted %v, evicted %q; want admitted %v, evicted %q", step, ok, evicted, !refused, want)
					}
					if want != "" && conns[want].Conn.(*stubConn).closed != 1 {
						t.Fatalf("%s: %s not closed", step, want)
					}
					if ok && started[c] == queued {
						t.Fatalf("%s: handshake started %v, want %v", step, started[c], !queued)
					}
					conns[name] = c
				case verb == "idle":
					served(tr, conns[arg])
				case verb == "active":
					tr.setState(conns[arg], http.StateActive)
				case verb == "req":
					tr.setState(conns[arg], http.StateActive)
				case verb == "close":
					tr.setState(conns[arg], http.StateClosed)
				case verb == "started":
					if c := conns[arg]; !started[c] || c.state != connPending {
						t.Fatalf("%s: handshake started %v, state %s; want started, pending", step, started[c], c.state)
					}
				default:
					t.Fatalf("bad step %q", step)
				}
				if open, pending, _ := tr.counts(); open > 4 || pending > 3 {
					t.Fatalf("after %s: %d open, %d pending, over the caps 4 and 3", step, open, pending)
				}
				for name, c := range conns {
					if c.tracked && c.state != connQueued && !started[c] {
						t.Fatalf("after %s: %s is %s, its handshake never started", step, name, c.state)
					}
				}
			}
		})
	}
}

// The gauge follows each connection's state; evictions and refusals are
// counted by the state of the connection closed.
func TestTrackerMetrics(t *testing.T) {
	tr, m := trackerWith(t, 3, 2)
	a, _, _ := accept(tr, "a")
	served(tr, a)
	b, _, _ := accept(tr, "b")
	served(tr, b)
	tr.setState(b, http.StateActive)
	accept(tr, "c")
	gauge := func(s connState) float64 { return testutil.ToFloat64(m.openG[s]) }
	if gauge(connPending) != 1 || gauge(connIdle) != 1 || gauge(connActive) != 1 {
		t.Fatalf("gauge pending %v idle %v active %v, want 1 each", gauge(connPending), gauge(connIdle), gauge(connActive))
	}
	accept(tr, "d")          // the open cap: a, idle, makes room
	acceptFrom(tr, "q", "e") // the pending cap: c, another peer's, makes room
	if got := testutil.ToFloat64(m.evictedC[connIdle]); got != 1 {
		t.Errorf("evicted idle = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.evictedC[connPending]); got != 1 {
		t.Errorf("evicted pending = %v, want 1", got)
	}
	if gauge(connPending) != 2 || gauge(connIdle) != 0 || gauge(connActive) != 1 {
		t.Fatalf("gauge pending %v idle %v active %v, want 2, 0, 1", gauge(connPending), gauge(connIdle), gauge(connActive))
	}
	tr.setState(b, http.StateClosed)
	if gauge(connActive) != 0 {
		t.Errorf("gauge active %v after the close, want 0", gauge(connActive))
	}
	tr2, m2 := trackerWith(t, 1, 1)
	x, _, _ := accept(tr2, "x")
	served(tr2, x)
	tr2.setState(x, http.StateActive)
	if _, _, ok := accept(tr2, "y"); ok {
		t.Fatal("admitted while the only connection is in a request")
	}
	if got := testutil.ToFloat64(m2.refusedC); got != 1 {
		t.Errorf("refused = %v, want 1", got)
	}
	tr3, m3 := trackerWith(t, 3, 1)
	p, _, _ := accept(tr3, "p")
	accept(tr3, "q") // the pending cap, the same peer: it queues
	queued := func() float64 { return testutil.ToFloat64(m3.openG[connQueued]) }
	if queued() != 1 || testutil.ToFloat64(m3.openG[connPending]) != 1 {
		t.Fatalf("gauge queued %v pending %v, want 1 each", queued(), testutil.ToFloat64(m3.openG[connPending]))
	}
	served(tr3, p)
	if queued() != 0 || testutil.ToFloat64(m3.openG[connPending]) != 1 {
		t.Fatalf("gauge queued %v pending %v once p's request came, want 0 and 1", queued(), testutil.ToFloat64(m3.openG[connPending]))
	}
}

// A handshake that sends more than a handshake needs, or does not finish
// in time, is ended and counted; the server keeps answering.
func TestHandshakesAreBoundedInBytesAndTime(t *testing.T) {
	var ws *webhookServer
	h := startRunWith(t, []Option{withObserver(func(s *webhookServer) {
		ws = s
		s.conns.limits.handshakeTimeout = 500 * time.Millisecond
	})}, 0, 10*time.Second, 0)

	big, err := net.Dial("tcp", h.webhookAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	// A 64 KiB ClientHello: crypto/tls would buffer it all.
	_, _ = big.Write(craftedPartialHello(64 << 10))
	silent, err := net.Dial("tcp", h.webhookAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	for name, c := range map[string]net.Conn{"too large": big, "silent": silent} {
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, err := io.Copy(io.Discard, c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("%s: the handshake was not ended", name)
		}
	}
	// The client sees its connection closed just before the server counts
	// the abort.
	for _, reason := range []string{abortTooLarge, abortTimeout} {
		c := ws.conns.metrics.abortedC[reason]
		for deadline := time.Now().Add(10 * time.Second); testutil.ToFloat64(c) == 0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if got := testutil.ToFloat64(c); got != 1 {
			t.Errorf("%s{reason=%q} = %v, want 1", HandshakesAbortedName, reason, got)
		}
	}
	if r := h.review(t, h.client(false), "shop"); !r.mutated() {
		t.Fatalf("review after the handshakes: %v", r.err)
	}
}

// A request whose body never comes is answered and its connection closed
// at once when the handler does not read the body (a 404, a refusal),
// rather than held in a request until the read timeout.
func TestUnreadBodiesEndTheirConnection(t *testing.T) {
	h := startRun(t, 0, 10*time.Second, 0, func(c *Config) { c.Limits.Timeout = 30 * time.Second })
	for _, path := range []string{"/nowhere", webhook.PathValidatePod} {
		t.Run(path, func(t *testing.T) {
			conn := h.rawConn(t)
			defer conn.Close()
			length := 1000
			if path == webhook.PathValidatePod {
				length = webhook.MaxReviewBytes + 1 // refused with 413, unread
			}
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", path, length)
			_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			_, err = br.ReadByte()
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("HTTP %d, then the connection was held open, waiting for the body", resp.StatusCode)
			}
			if err == nil {
				t.Fatal("bytes after the answer")
			}
		})
	}
	// Reviews that read their body keep their connection.
	c := h.client(false)
	if r := h.review(t, c, "shop"); !r.mutated() {
		t.Fatal(r.err)
	}
	if r := h.review(t, c, "shop"); !r.mutated() || !r.reused {
		t.Fatalf("second review: %v, reused %v; want the connection kept", r.err, r.reused)
	}
}

// A flood from one address evicts its own connections: the API server's
// kept-alive and new connections, from another address, stay open however
// long the flood goes on, while the caps hold. A peer loses one only while
// it holds the most.
// A flood that never idles (its connections stay in the handshake or in a
// request) must not make room by closing the API server's kept-alive
// connections: the API server reuses an idle connection without warning,
// and a POST on one just closed fails (write: broken pipe) and is not
// retried, so the Pod's mutation is skipped.
func TestTrackerKeepsAnotherPeersIdleConnectionsWhenTheFloodNeverIdles(t *testing.T) {
	tr, _ := trackerWith(t, 64, 32)
	var api []*trackedConn
	for i := range 8 {
		c := &trackedConn{Conn: &stubConn{name: fmt.Sprintf("api-%d", i)}, t: tr, peer: "10.0.0.1"}
		if victim, ok := tr.admit(c); !ok || victim != nil {
			t.Fatalf("api-%d: admitted %v, evicted %v", i, ok, victim)
		}
		served(tr, c)
		api = append(api, c)
	}
	for i := range 1000 {
		c := &trackedConn{Conn: &stubConn{name: fmt.Sprintf("flood-%d", i)}, t: tr, peer: "10.0.0.9"}
		victim, ok := tr.admit(c)
		if !ok {
			// Every other connection is in the flood's requests: refusing
			// is the designed answer then.
			continue
		}
		if victim != nil {
			if name := victim.Conn.(*stubConn).name; strings.HasPrefix(name, "api-") {
				t.Fatalf("flood-%d evicted the API server's idle %s", i, name)
			}
			_ = victim.closeRaw()
		}
		// Half the flood's connections get into a request and stay there.
		if i%2 == 0 {
			tr.setState(c, http.StateNew)
			tr.setState(c, http.StateActive)
		}
	}
	for _, c := range api {
		if c.Conn.(*stubConn).closed != 0 {
			t.Fatalf("%s was closed", c.Conn.(*stubConn).name)
		}
	}
}

func TestTrackerEvictsFromThePeerHoldingTheMost(t *testing.T) {
	tr, _ := trackerWith(t, 64, 32)
	from := func(peer, name string) (*trackedConn, string, bool) {
		c := &trackedConn{Conn: &stubConn{name: name}, t: tr, peer: peer}
		victim, ok := tr.admit(c)
		if victim == nil {
			return c, "", ok
		}
		_ = victim.closeRaw()
		return c, victim.Conn.(*stubConn).name, ok
	}
	var api []*trackedConn
	for i := range 3 {
		c, evicted, ok := from("10.0.0.1", fmt.Sprintf("api-%d", i))
		if !ok || evicted != "" {
			t.Fatalf("api-%d: admitted %v, evicted %q", i, ok, evicted)
		}
		served(tr, c)
		api = append(api, c)
	}
	for i := range 1000 {
		name := fmt.Sprintf("flood-%d", i)
		c, evicted, ok := from("10.0.0.9", name)
		if !ok {
			// At the open cap with none of its own idle: the flood holds
			// the most, and gives way itself.
			continue
		}
		if strings.HasPrefix(evicted, "api-") {
			t.Fatalf("%s evicted the API server's %s", name, evicted)
		}
		// Half the flood finishes its handshake and idles.
		if i%2 == 0 {
			served(tr, c)
		}
		// The API server dials afresh now and then, mid-flood.
		if i%100 == 50 {
			c, evicted, ok := from("10.0.0.1", fmt.Sprintf("api-new-%d", i))
			if !ok || strings.HasPrefix(evicted, "api-") {
				t.Fatalf("the API server's new connection: admitted %v, evicted %q", ok, evicted)
			}
			served(tr, c)
			api = append(api, c)
		}
		if open, pending, _ := tr.counts(); open > 64 || pending > 32 {
			t.Fatalf("after %s: %d open, %d pending, over the caps 64 and 32", name, open, pending)
		}
	}
	for _, c := range api[:3] {
		if c.Conn.(*stubConn).closed != 0 {
			t.Fatalf("%s was closed", c.Conn.(*stubConn).name)
		}
	}
	// With the flood gone, a peer holding the most gives way to others.
	tr2, _ := trackerWith(t, 4, 3)
	tr = tr2
	for i := range 4 {
		c, _, _ := from("10.0.0.1", fmt.Sprintf("api-%d", i))
		served(tr, c)
	}
	if _, evicted, ok := from("10.0.0.2", "other"); !ok || evicted != "api-0" {
		t.Fatalf("at the open cap a new peer's connection: admitted %v, evicted %q; want api-0, the longest idle of the peer holding the most", ok, evicted)
	}
}

// The peak gauge is the tracker's own count, exact at the cap: the e2e
// suite's bound check reads it rather than a sum of the state gauges.
func TestPeakGaugeIsTheMostOpenAtOnce(t *testing.T) {
	tr, m := trackerWith(t, 4, 3)
	for i := range 20 {
		c := &trackedConn{Conn: &stubConn{name: fmt.Sprintf("c-%d", i)}, t: tr, peer: fmt.Sprintf("10.0.0.%d", i%3)}
		if victim, ok := tr.admit(c); ok && victim != nil {
			_ = victim.closeRaw()
		}
		if i%2 == 0 {
			served(tr, c)
		}
	}
	if got := testutil.ToFloat64(m.peakG); got != 4 {
		t.Fatalf("%s = %g, want 4, the cap the tracker held", ConnectionsPeakName, got)
	}
	// Every connection counts as accepted, the refused and evicted too:
	// its rate is how often the API server dials.
	if got := testutil.ToFloat64(m.acceptC); got != 20 {
		t.Fatalf("%s = %g, want 20, every connection admit saw", ConnectionsAcceptedName, got)
	}
}

// The API server opens a connection per concurrent call: a burst of calls
// is a burst of new connections from one address, more than the pending
// cap at once on a busy control plane. Every one of them gets its review
// answered: those past the cap queue for a pending slot instead of
// closing the burst's own older connections (which failed those calls,
// and the mutating webhook's failed calls are let through unmutated).
func TestABurstOfTheAPIServersOwnConnectionsIsAnsweredWhole(t *testing.T) {
	var ws *webhookServer
	h := startRunWith(t, []Option{withObserver(func(s *webhookServer) { ws = s })}, 0, 10*time.Second, 0)
	defaults := DefaultConfig()
	n := defaults.MaxPendingConnections * 3 / 2
	if n > defaults.MaxConnections {
		t.Fatalf("a burst of %d is over --max-connections=%d", n, defaults.MaxConnections)
	}
	// Every connection of the burst is accepted before any of them sends
	// its ClientHello: all of them are pending at once, as when the
	// handshakes of a burst wait for a starved CPU.
	seen := ws.conns.seenCount()
	raw := make([]net.Conn, n)
	for i := range raw {
		c, err := net.DialTimeout("tcp", h.webhookAddr(), 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		raw[i] = c
	}
	ws.conns.waitSeen(t, seen+n)
	if open, pending, _ := ws.conns.counts(); open != n || pending != defaults.MaxPendingConnections {
		t.Fatalf("%d open, %d pending; want all %d open and %d pending, the cap", open, pending, n, defaults.MaxPendingConnections)
	}
	if q := metricValue(t, h, ConnectionsName, connQueued.String()); q != float64(n-defaults.MaxPendingConnections) {
		t.Errorf("%s{state=%q} = %v, want %d", ConnectionsName, connQueued, q, n-defaults.MaxPendingConnections)
	}
	results := make(chan reviewResult, n)
	for _, c := range raw {
		go func() {
			client := h.client(false)
			tr := client.Transport.(*http.Transport)
			tr.DisableKeepAlives = true
			tr.DialContext = func(context.Context, string, string) (net.Conn, error) { return c, nil }
			results <- h.review(t, client, "shop")
		}()
	}
	failed := 0
	for range n {
		if r := <-results; !r.mutated() {
			failed++
			if failed <= 5 {
				t.Errorf("a review of the burst was not answered: %v", r.err)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of the burst's %d reviews were not answered", failed, n)
	}
	for _, state := range []connState{connPending, connIdle, connQueued} {
		if got := metricValue(t, h, ConnectionsEvictedName, state.String()); got != 0 {
			t.Errorf("%s{state=%q} = %v, want 0: the burst closed its own connections", ConnectionsEvictedName, state, got)
		}
	}
}
