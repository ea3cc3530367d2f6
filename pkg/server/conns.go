package server

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Connection limits: why they are what they are.
//
// The webhook's validating webhooks fail closed, and any in-cluster client
// can reach its port (the chart's NetworkPolicy is optional), so the number
// of connections, and what each may hold, is bounded by construction:
//
//   - at most connLimits.maxOpen connections are open, and at most
//     connLimits.maxPending of them have not sent a whole request yet (they
//     are in the TLS handshake, or the server is reading their first
//     request's headers); the others accepted wait, queued, for a pending
//     slot to start their handshake, holding a socket and nothing else (no
//     goroutine, no TLS state, no buffer);
//   - a handshake must end within connLimits.handshakeTimeout of its start,
//     and reads at most connLimits.maxHandshakeBytes from its client (a
//     real ClientHello is 1.5 KiB; crypto/tls would buffer a 64 KiB one);
//   - the http.Server bounds the rest: headers (maxHeaderBytes,
//     ReadHeaderTimeout), bodies (ReadTimeout and the review guard), idle
//     keep-alives (IdleTimeout).
//
// When a new connection arrives at a cap, the tracker makes room rather
// than refuse it: at the pending cap it closes a pending connection; at
// the open cap an idle one, else a pending one, else a queued one. The one
// closed is of the peer (remote IP) holding the most connections, the new
// one counted, and of its connections in that state the oldest pending or
// the one idle the longest. A peer never loses a pending connection to its
// own next one: when the peer holding the most is the newcomer's, the
// newcomer queues, and takes the first pending slot that frees, in the
// order accepted. At the open cap a peer's newcomer may close its own
// connection idle the longest, never its own pending or queued one. So
// the new one is refused only when every open connection is in a request,
// or when the peer holding the most is its own and none of it is idle.
//
// The queue is what lets the API server's own bursts through. It opens a
// connection per concurrent call (HTTP/1.1): a Job fan-out of 500 Pods on
// a 2-CPU control plane opened 197 at once, and evicting its own oldest
// pending ones for its newest (as the tracker did) failed those calls
// (107 evicted in one run of `make scale SCALE=smoke`; in larger runs, 61
// and 153 mutations skipped, the mutating webhook failing open). A queued
// connection waits at most for one turn of the pending slots: each frees
// within the handshake timeout and ReadHeaderTimeout, and at most
// maxOpen-maxPending connections queue.
//
// Refusing at a full cap would hand the webhook to whoever fills it first:
// a client opening maxPending/handshakeTimeout connections a second (43 at
// the defaults) that never finish a handshake would keep every slot taken,
// and the API server's own connections would be refused for as long as it
// likes. Evicting the oldest alone was not enough: a flood at R
// connections a second shortens the time any new connection has to finish
// its handshake and send its first request's headers to maxPending/R
// (64 ms for the default 128 pending slots at 2,000 connections a
// second), which the API server misses on a starved node, and idle
// kept-alive connections are closed while it starts to send on them (on a
// real node, 3 to 16% of ordinary Pod creates failed so during e2e
// scenario 8). Choosing the victim among the connections of the peer that
// holds the most makes a flood evict its own: the API server, which holds
// a few connections from its own address, loses one only while it holds
// at least as many as any other peer. A flood from many addresses can
// still take the API server's turn once each of them holds fewer than it
// does; that takes more addresses than the API server has connections,
// and the NetworkPolicy removes them all.
// Kept-alive connections are never closed for pending ones.
//
// A connection in a request is one a handler is serving, and is never
// closed to make room: a review the API server sent on a fresh connection
// is not cut off by a burst of new connections, its own or a flood's. The
// review guard bounds those (64 slots, 128 waiting at most a second), and a
// request whose body is left unread closes its connection right after its
// answer (endUnreadBodies), so no flood fills the open cap with them.

// connState is where a tracked connection is: its metric label too.
type connState uint8

const (
	// connPending: accepted, no whole request read yet (in the TLS
	// handshake, or its first request's headers).
	connPending connState = iota
	// connIdle: between requests (or reading the next one's headers:
	// http.Server's ConnState says active only once it has them).
	connIdle
	// connActive: in a request, a handler serving it.
	connActive
	// connQueued: accepted at the pending cap, waiting for a pending slot
	// to start its handshake.
	connQueued
	numConnStates
)

var connStateNames = [numConnStates]string{"pending", "idle", "active", "queued"}

func (s connState) String() string { return connStateNames[s] }

// connLimits bound the webhook server's connections.
type connLimits struct {
	// maxOpen bounds the connections open at once.
	maxOpen int
	// maxPending bounds those that have not sent a whole request; less
	// than maxOpen, so that kept-alive connections always have room.
	maxPending int
	// handshakeTimeout bounds a TLS handshake, from its start: at accept,
	// or when a queued connection gets a pending slot.
	handshakeTimeout time.Duration
	// maxHandshakeBytes bounds what a handshake may read from its client.
	maxHandshakeBytes int
}

// errHandshakeTooLarge ends a handshake that read more than
// connLimits.maxHandshakeBytes.
var errHandshakeTooLarge = errors.New("TLS handshake larger than graceguard accepts")

// trackedConn is an accepted TCP connection under the tracker. The
// http.Server sees it wrapped in a *tls.Conn, whose NetConn returns it.
type trackedConn struct {
	net.Conn
	t *connTracker
	// handshaking is true until the handshake succeeded; until then
	// handshakeRead counts the bytes read (by the handshake goroutine only:
	// the connection is handed to the http.Server after).
	handshaking   atomic.Bool
	handshakeRead int

	// peer is the remote IP, set before admit: connections are evicted
	// from the peer holding the most.
	peer string

	// Guarded by t.mu.
	tracked    bool
	state      connState
	prev, next *trackedConn
	closeOnce  sync.Once
}

func (c *trackedConn) Read(p []byte) (int, error) {
	if !c.handshaking.Load() {
		return c.Conn.Read(p)
	}
	room := c.t.limits.maxHandshakeBytes - c.handshakeRead
	if room <= 0 {
		return 0, errHandshakeTooLarge
	}
	if len(p) > room {
		p = p[:room]
	}
	n, err := c.Conn.Read(p)
	c.handshakeRead += n
	return n, err
}

// Close closes the connection and stops tracking it.
func (c *trackedConn) Close() error {
	c.t.forget(c)
	return c.closeRaw()
}

func (c *trackedConn) closeRaw() error {
	err := net.ErrClosed
	c.closeOnce.Do(func() { err = c.Conn.Close() })
	return err
}

// connList is a list of tracked connections in the order they entered it.
type connList struct {
	head, tail *trackedConn
	n          int
}

func (l *connList) pushBack(c *trackedConn) {
	c.prev, c.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = c
	} else {
		l.head = c
	}
	l.tail = c
	l.n++
}

func (l *connList) remove(c *trackedConn) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		l.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		l.tail = c.prev
	}
	c.prev, c.next = nil, nil
	l.n--
}

// connTracker holds the open connections by state: pending and queued ones
// in accept order, idle ones in the order they became idle, active ones.
type connTracker struct {
	limits  connLimits
	metrics *connMetrics
	// start begins the handshake of a connection that became pending (nil:
	// nothing is started, for tests of the tracker alone). It is called
	// with mu held, and must not block.
	start func(*trackedConn)
	mu    sync.Mutex
	lists [numConnStates]connList
	// peers counts the tracked connections of each peer.
	peers map[string]int
	// For tests and measurements: the most open and pending at once, and
	// the connections admitted or refused.
	peak, peakPending, seen int
}

func newConnTracker(l connLimits, m *connMetrics) *connTracker {
	return &connTracker{limits: l, metrics: m, peers: map[string]int{}}
}

// open is the number of connections tracked.
func (t *connTracker) open() int {
	n := 0
	for i := range t.lists {
		n += t.lists[i].n
	}
	return n
}

// admit tracks a newly accepted connection, pending (its handshake
// started) or, at the pending cap, queued. To make room it may return a
// victim, already untracked, for the caller to close; it returns ok false,
// and tracks nothing, when the peer holding the most connections is the
// newcomer's and all of them are in a request, or when every open
// connection is.
func (t *connTracker) admit(c *trackedConn) (victim *trackedConn, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seen++
	t.metrics.accepted()
	pending, idle, queued := &t.lists[connPending], &t.lists[connIdle], &t.lists[connQueued]
	// The new connection counts for its peer: a flood's next connection
	// makes its own peer the one that gives way.
	t.peers[c.peer]++
	if pending.n >= t.limits.maxPending && pending.n > 0 {
		if v := t.victimLocked(pending); v.peer != c.peer {
			victim = v
		}
		// Else the newcomer's own peer holds the most: it queues.
	}
	if victim == nil && t.open() >= t.limits.maxOpen {
		if idle.n+pending.n+queued.n > 0 {
			v := t.victimLocked(idle, pending, queued)
			switch {
			case t.peers[v.peer] < t.peers[c.peer]:
				// The newcomer's peer holds the most, all of it in
				// requests: it gives way itself, not a smaller peer's
				// connection.
			case v.peer == c.peer && v.state != connIdle:
				// Its own connection that has not sent a request yet:
				// one of them fails either way, and the newcomer has
				// waited least.
			default:
				victim = v
			}
		}
		if victim == nil {
			t.dropPeerLocked(c.peer)
			t.metrics.refused()
			return nil, false
		}
	}
	if victim != nil {
		t.metrics.evicted(victim.state)
		// Not t.untrackLocked: the slot it frees is the newcomer's, not
		// the first queued one's.
		t.removeLocked(victim)
	}
	c.tracked, c.state = true, connQueued
	queued.pushBack(c)
	t.metrics.add(connQueued, 1)
	t.peak = max(t.peak, t.open())
	t.metrics.setPeak(t.peak)
	if pending.n < t.limits.maxPending {
		// Room for it: everyone queued before it is pending already
		// (fillLocked runs whenever a pending slot frees).
		t.startLocked(c)
	}
	return victim, true
}

// startLocked makes a queued connection pending and starts its handshake.
func (t *connTracker) startLocked(c *trackedConn) {
	t.moveLocked(c, connPending)
	t.peakPending = max(t.peakPending, t.lists[connPending].n)
	if t.start != nil {
		t.start(c)
	}
}

// fillLocked starts the queued connections, first accepted first, while
// pending slots are free.
func (t *connTracker) fillLocked() {
	for q := &t.lists[connQueued]; q.n > 0 && t.lists[connPending].n < t.limits.maxPending; {
		t.startLocked(q.head)
	}
}

// victimLocked returns the connection to close: of the peer holding the
// most connections, the first in the first of lists that has one (the one
// idle the longest, else the oldest pending). The peer comes first: a
// flood that never idles gives way with its pending connections rather
// than closing another peer's idle ones, which the API server may be
// reusing that instant (a POST on a connection just closed fails and is
// not retried). lists hold at least one connection.
func (t *connTracker) victimLocked(lists ...*connList) *trackedConn {
	var victim *trackedConn
	most := 0
	for _, l := range lists {
		for c := l.head; c != nil; c = c.next {
			if n := t.peers[c.peer]; n > most {
				victim, most = c, n
			}
		}
	}
	return victim
}

func (t *connTracker) dropPeerLocked(peer string) {
	if t.peers[peer]--; t.peers[peer] <= 0 {
		delete(t.peers, peer)
	}
}

// setState follows the http.Server's view of a connection (its ConnState
// hook): a request read is active, a finished one idle.
func (t *connTracker) setState(c *trackedConn, s http.ConnState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !c.tracked {
		return
	}
	switch s {
	case http.StateActive:
		t.moveLocked(c, connActive)
	case http.StateIdle:
		// Idle connections are kept in the order they became idle, so the
		// one closed to make room is the one unused the longest.
		t.moveLocked(c, connIdle)
	case http.StateClosed, http.StateHijacked:
		t.untrackLocked(c)
	}
}

func (t *connTracker) moveLocked(c *trackedConn, s connState) {
	if c.state == s {
		return
	}
	from := c.state
	t.lists[from].remove(c)
	t.metrics.add(from, -1)
	c.state = s
	t.lists[s].pushBack(c)
	t.metrics.add(s, 1)
	if from == connPending {
		t.fillLocked()
	}
}

// untrackLocked stops tracking c; a pending slot it frees goes to the
// first connection queued.
func (t *connTracker) untrackLocked(c *trackedConn) {
	if t.removeLocked(c) {
		t.fillLocked()
	}
}

// removeLocked stops tracking c, and says whether it freed a pending slot.
func (t *connTracker) removeLocked(c *trackedConn) (wasPending bool) {
	if !c.tracked {
		return false
	}
	t.lists[c.state].remove(c)
	t.metrics.add(c.state, -1)
	t.dropPeerLocked(c.peer)
	c.tracked = false
	return c.state == connPending
}

func (t *connTracker) forget(c *trackedConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.untrackLocked(c)
}

// closeWhere closes the tracked connections that match.
func (t *connTracker) closeWhere(match func(*trackedConn) bool) {
	t.mu.Lock()
	var victims []*trackedConn
	for i := range t.lists {
		for c := t.lists[i].head; c != nil; c = c.next {
			if match(c) {
				victims = append(victims, c)
			}
		}
	}
	for _, c := range victims {
		// Not untrackLocked: a queued connection is not started now.
		t.removeLocked(c)
	}
	t.mu.Unlock()
	for _, c := range victims {
		_ = c.closeRaw()
	}
}

// connStateHook is the http.Server's ConnState for connections from a
// connListener of t.
func (t *connTracker) connStateHook(c net.Conn, s http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		if c, ok := tc.NetConn().(*trackedConn); ok {
			t.setState(c, s)
		}
	}
}

// connListener accepts TCP connections under a connTracker, does their TLS
// handshake itself (bounded in time and bytes), and hands the http.Server
// only connections whose handshake succeeded, as *tls.Conn: the server
// still sets r.TLS and negotiates HTTP/2 by ALPN.
type connListener struct {
	ln  net.Listener
	tls *tls.Config
	t   *connTracker

	ctx    context.Context // ends when the listener closes
	cancel context.CancelFunc
	conns  chan *tls.Conn
	done   chan struct{}
	once   sync.Once
	err    error // why accepting stopped, once done is closed
}

func newConnListener(ln net.Listener, cfg *tls.Config, t *connTracker) *connListener {
	ctx, cancel := context.WithCancel(context.Background())
	l := &connListener{ln: ln, tls: cfg, t: t, ctx: ctx, cancel: cancel,
		conns: make(chan *tls.Conn), done: make(chan struct{})}
	t.mu.Lock()
	t.start = func(c *trackedConn) { go l.handshake(c) }
	t.mu.Unlock()
	go l.acceptLoop()
	return l
}

func (l *connListener) acceptLoop() {
	var delay time.Duration
	for {
		raw, err := l.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Temporary() { //nolint:staticcheck // EMFILE and the like, as http.Server retries them
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				select {
				case <-time.After(delay):
					continue
				case <-l.done:
					return
				}
			}
			l.stop(err)
			return
		}
		delay = 0
		c := &trackedConn{Conn: raw, t: l.t, peer: peerOf(raw)}
		c.handshaking.Store(true)
		victim, ok := l.t.admit(c)
		if victim != nil {
			_ = victim.closeRaw()
		}
		if !ok {
			_ = raw.Close()
		}
		// Else its handshake has started, or starts when a pending slot
		// frees.
	}
}

func (l *connListener) handshake(c *trackedConn) {
	ctx, cancel := context.WithTimeout(l.ctx, l.t.limits.handshakeTimeout)
	defer cancel()
	conn := tls.Server(c, l.tls)
	if err := conn.HandshakeContext(ctx); err != nil {
		switch {
		case errors.Is(err, errHandshakeTooLarge):
			l.t.metrics.handshakeAborted(abortTooLarge)
		case ctx.Err() != nil && l.ctx.Err() == nil:
			l.t.metrics.handshakeAborted(abortTimeout)
		}
		_ = c.Close()
		return
	}
	c.handshaking.Store(false)
	select {
	case l.conns <- conn:
	case <-l.done:
		_ = c.Close()
	}
}

// Accept returns the next connection whose TLS handshake succeeded.
func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, l.err
	}
}

func (l *connListener) stop(err error) {
	l.once.Do(func() {
		l.err = err
		close(l.done)
		l.cancel()
	})
}

// Close stops accepting and ends the handshakes in progress; connections
// already handed to the http.Server are its to close.
func (l *connListener) Close() error {
	err := l.ln.Close()
	l.stop(net.ErrClosed)
	l.t.closeWhere(func(c *trackedConn) bool { return c.handshaking.Load() })
	return err
}

func (l *connListener) Addr() net.Addr { return l.ln.Addr() }

// peerOf is the remote IP of a connection, what eviction groups by.
func peerOf(c net.Conn) string {
	a := c.RemoteAddr()
	if a == nil {
		return ""
	}
	if tcp, ok := a.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}
