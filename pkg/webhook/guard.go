package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/graceguard/graceguard/pkg/flags"
)

// Limits bound what the reviews in flight may cost together. Whatever a
// client sends, graceguard holds at most InFlightBytes of request bodies,
// works on at most MaxInFlight reviews at once, keeps at most MaxWaiting
// waiting for a slot, and lets a review wait only while it can still be
// answered before its deadline (queue.go): a webhook with failurePolicy
// Fail must answer, or fail fast, never stall, and past its capacity it
// must keep answering at capacity rather than answer everyone too late.
type Limits struct {
	// MaxInFlight bounds the reviews doing work at once; 0 derives it
	// from GOMAXPROCS (Slots).
	MaxInFlight int64
	// Timeout bounds a review whose request names no timeout, and caps one
	// whose request names a longer one. The API server sends each webhook
	// configuration's timeoutSeconds as the request's ?timeout=.
	Timeout time.Duration
	// InFlightBytes bounds the request bodies held at once. A review
	// reserves its Content-Length (MaxReviewBytes when it sends none)
	// before its body is read.
	InFlightBytes int64
	// MaxWaiting bounds the reviews waiting for a slot; one more is shed
	// at once. How long one waits is bounded by its own deadline.
	MaxWaiting int64
}

// MaxReviewBytes is the largest request body a review may have:
// controller-runtime's own limit (the API server's 3 MiB objects, twice for
// an UPDATE's object and oldObject, fit).
const MaxReviewBytes = 7 << 20

// DefaultLimits are the documented defaults: slots from GOMAXPROCS, the
// API server's default webhook timeout, and room for two of the largest
// reviews at once or thousands of ordinary ones.
func DefaultLimits() Limits {
	return Limits{MaxInFlight: 0, Timeout: 10 * time.Second, InFlightBytes: 16 << 20, MaxWaiting: 128}
}

// Slots is the number of reviews that do work at once: MaxInFlight, or
// with 0, SlotsPerProc per GOMAXPROCS, at least MinSlots. A review is
// CPU work (decode, decide, encode; the namespace usually comes from the
// cache), so more at once than the CPUs can run only makes each slower:
// a few per CPU keep it busy while one reads its body or waits for a
// namespace read.
func (l Limits) Slots() int {
	if l.MaxInFlight > 0 {
		return int(l.MaxInFlight)
	}
	return max(MinSlots, SlotsPerProc*runtime.GOMAXPROCS(0))
}

// The derived number of slots (Limits.Slots).
const (
	SlotsPerProc = 2
	MinSlots     = 4
)

// Validate checks the limits as the webhook validates them at start-up,
// naming each flag at fault (or the field, for those no flag sets), its
// value and what is accepted; it reports everything wrong at once. Limits
// that passed Validate can answer every review the API server may send.
func (l Limits) Validate() error {
	errs := []error{flags.WebhookTimeout.Check(l.Timeout), flags.MaxConcurrentReviews.Check(l.MaxInFlight)}
	if l.InFlightBytes < MaxReviewBytes {
		errs = append(errs, flags.Invalid(flags.MaxInflightReviewBytes, flags.FormatBytes(l.InFlightBytes),
			fmt.Errorf("want at least %d (%s), the largest review, or that review could never be answered",
				MaxReviewBytes, flags.FormatBytes(MaxReviewBytes))))
	}
	if l.MaxWaiting < 0 {
		errs = append(errs, fmt.Errorf("Limits.MaxWaiting=%d: want 0 or more", l.MaxWaiting))
	}
	return errors.Join(errs...)
}

// guard applies Limits to every endpoint of one server: they share its
// slots, its queue and its budget of bytes.
type guard struct {
	Limits
	bytes   *semaphore.Weighted
	adm     *queue
	metrics *Metrics
	// now is the clock the queue decides by (time.Now; tests set their own).
	now func() time.Time
}

func newGuard(l Limits, m *Metrics) *guard {
	return &guard{Limits: l, bytes: semaphore.NewWeighted(l.InFlightBytes), adm: newQueue(l.Slots(), int(l.MaxWaiting)),
		metrics: m, now: time.Now}
}

// reviewBudget is what a review's context carries about its time.
type reviewBudget struct {
	// timeout is the review's whole time, from the request or Limits.
	timeout time.Duration
	// deadline is when the API server stops waiting.
	deadline time.Time
}

type budgetKey struct{}

// RetryAfterSeconds is the Retry-After of a shed review's 429: the API
// server's webhook client waits this long and sends the review again,
// within its own timeout; a whole second is the shortest it reads.
const RetryAfterSeconds = 1

// smallBody is the largest body read before its review queues, and read
// (and discarded) before a shed review's answer so that the connection
// stays open for the API server's retry: a new TLS handshake costs an
// overloaded replica more CPU than reading an ordinary review does. An
// ordinary Pod's review is a few KiB to a few dozen.
const smallBody = 64 << 10

// readBack is a body already read: its bytes, then the error reading it
// ended with, if any.
type readBack struct {
	*bytes.Reader
	err error
}

func (b readBack) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	if err == io.EOF && b.err != nil {
		err = b.err
	}
	return n, err
}

func (readBack) Close() error { return nil }

// wrap guards one endpoint. The review runs on a context of its own: not
// cancelled when the server shuts down, so reviews in flight during the
// drain get their real answer, but ending at the review's deadline, so no
// work goes on after the API server gave up.
func (g *guard) wrap(name Name, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		timeout := requestTimeout(r, g.Timeout)
		deadline := time.Now().Add(timeout)
		ctx, cancel := context.WithDeadline(context.WithoutCancel(r.Context()), deadline)
		defer cancel()
		ctx = context.WithValue(ctx, budgetKey{}, reviewBudget{timeout: timeout, deadline: deadline})

		// Reading the body must end by the deadline too: a client that
		// trickles it is cut off, not waited for.
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(deadline)
		_ = rc.SetWriteDeadline(deadline.Add(time.Second))

		weight := int64(MaxReviewBytes)
		if r.ContentLength >= 0 && r.ContentLength < MaxReviewBytes {
			weight = max(r.ContentLength, 1)
		}
		if r.ContentLength > MaxReviewBytes {
			g.metrics.record(name, DecisionError, ReasonTooLarge)
			http.Error(w, fmt.Sprintf("request body of %d bytes is over graceguard's limit of %d", r.ContentLength, MaxReviewBytes), http.StatusRequestEntityTooLarge)
			return
		}
		// The queue decides on its own clock (g.now).
		start := g.now()
		// A body of an ordinary review's size is read before the review
		// queues, its bytes reserved first. net/http then watches the
		// connection (its background read starts at the body's end), so a
		// review whose API server gave up and closed the connection, or
		// that is still waiting when this replica shuts down, leaves the
		// queue (429: the API server retries it, on another replica when
		// this one is going) instead of being worked on for nobody.
		early := r.Body != nil && r.Body != http.NoBody && r.ContentLength >= 0 && r.ContentLength <= smallBody
		if early {
			if !g.bytes.TryAcquire(weight) {
				g.metrics.record(name, DecisionError, ReasonOverloaded)
				shed(w, r)
				return
			}
			body, err := io.ReadAll(io.LimitReader(r.Body, smallBody+1))
			r.Body = readBack{Reader: bytes.NewReader(body), err: err}
		}
		granted, ok := g.acquire(ctx, r.Context(), start, start.Add(admitWithin(timeout)), weight, early)
		if !ok {
			if early {
				g.bytes.Release(weight)
			}
			g.metrics.record(name, DecisionError, ReasonOverloaded)
			shed(w, r)
			return
		}
		defer func() { g.release(weight, g.now().Sub(granted)) }()
		if r.Body != nil && r.Body != http.NoBody {
			// A body longer than it said, or unannounced and over the limit,
			// is cut off at the limit (controller-runtime then refuses it).
			r.Body = http.MaxBytesReader(w, r.Body, MaxReviewBytes)
		}
		// What the review keeps of its objects comes out of the same
		// budget as the bodies (meter).
		m := &meter{take: g.bytes.TryAcquire}
		defer func() { g.bytes.Release(m.granted) }()
		ctx = context.WithValue(ctx, meterKey{}, m)
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// shed answers a review the guard has no room for: 429 with Retry-After,
// which the API server's webhook client retries after that long within
// its own timeout. A small body is read first, so that the connection is
// kept for the retry instead of closed unread (see pkg/server,
// endUnreadBodies).
func shed(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength >= 0 && r.ContentLength <= smallBody {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, smallBody+1))
	}
	w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
	http.Error(w, "graceguard is at its capacity and could not answer this review in time; retry", http.StatusTooManyRequests)
}

// acquire takes a slot and weight bytes for a review that arrived at
// start and must be answered by finishBy: at once, or after a wait that
// the queue expects to end in time, and never past the review's latest
// start; the bytes are held already when haveBytes. It returns when the
// slot was granted, or false, having taken nothing, when the review is
// shed or its client went away (client ends: its connection closed, or
// the server shuts down).
func (g *guard) acquire(ctx, client context.Context, start, finishBy time.Time, weight int64, haveBytes bool) (time.Time, bool) {
	wt, ok := g.adm.arrive(start, finishBy)
	if !ok {
		return time.Time{}, false
	}
	granted := start
	if wt != nil {
		if !g.wait(ctx, client, wt) {
			return time.Time{}, false
		}
		granted = wt.grantedAt
	}
	if haveBytes || g.bytes.TryAcquire(weight) {
		return granted, true
	}
	bctx, cancel := context.WithDeadline(ctx, finishBy)
	defer cancel()
	if g.bytes.Acquire(bctx, weight) != nil {
		g.adm.release(g.now(), 0)
		return time.Time{}, false
	}
	return granted, true
}

// wait waits until wt is granted a slot (true) or shed, its latest start
// passed, or its request or client ended (false).
func (g *guard) wait(ctx, client context.Context, wt *waiter) bool {
	t := time.NewTimer(wt.latestStart.Sub(g.now()))
	defer t.Stop()
	select {
	case <-wt.ready:
		return wt.granted
	case <-t.C:
	case <-ctx.Done():
	case <-client.Done():
	}
	if g.adm.giveUp(wt) {
		// Granted meanwhile: the slot is held.
		return true
	}
	return false
}

// release gives back a review's bytes and slot; it held the slot for held.
func (g *guard) release(weight int64, held time.Duration) {
	g.bytes.Release(weight)
	g.adm.release(g.now(), held)
}

// requestTimeout is the timeout the API server sent (?timeout=5s, the
// webhook configuration's timeoutSeconds), capped by max; max when it sent
// none or one that does not parse.
func requestTimeout(r *http.Request, maxTimeout time.Duration) time.Duration {
	v := r.URL.Query().Get("timeout")
	if v == "" {
		return maxTimeout
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		// A bare number is seconds, as in the API server's own ?timeout=.
		n, nerr := strconv.Atoi(v)
		if nerr != nil {
			return maxTimeout
		}
		d = time.Duration(n) * time.Second
	}
	if d <= 0 || d > maxTimeout {
		return maxTimeout
	}
	return d
}

// admitWithin is how soon after its handler starts a review of timeout
// must be expected to be answered for the guard to admit it: the time the
// namespace read gets too (lookupDeadline), 4s of the chart's 5s. The
// rest is for what the guard cannot see: the time the request took to
// reach the handler and the answer's way back.
//
// Why not less: a review shed with 429 waits its Retry-After second in
// the API server on an idle connection, and past 25 idle connections the
// API server's transport closes the rest, so each shed review tends to
// come back on a new connection: a TLS handshake the overloaded replica
// pays (measured: under a 20m quota with 64 creators, handshakes took a
// fifth of its CPU once it shed a few hundred reviews). A replica past
// its capacity keeps its goodput by serving what it can in time, in
// order, and shedding only what cannot be.
func admitWithin(timeout time.Duration) time.Duration { return timeout - answerMargin(timeout) }

// lookupDeadline is when a namespace read for the review in ctx must end:
// early enough to answer in time. The answer keeps a fifth of the review's
// time, and at least a second, for building and sending it; the chart's
// 5 s timeout leaves the lookup 4 s. Without a review budget in ctx (a
// handler called directly), fallback bounds it.
func lookupDeadline(ctx context.Context, fallback time.Duration) time.Time {
	b, ok := ctx.Value(budgetKey{}).(reviewBudget)
	if !ok {
		return time.Now().Add(fallback - answerMargin(fallback))
	}
	return b.deadline.Add(-answerMargin(b.timeout))
}

func answerMargin(timeout time.Duration) time.Duration {
	return min(max(timeout/5, time.Second), timeout/2)
}
