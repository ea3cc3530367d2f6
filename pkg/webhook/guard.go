package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/graceguard/graceguard/pkg/flags"
)

// Limits bound what the reviews in flight may cost together. Whatever a
// client sends, graceguard holds at most InFlightBytes of request bodies,
// keeps at most MaxWaiting reviews waiting for room, and gives up on a
// review when its deadline passes: a webhook with failurePolicy Fail must
// answer, or fail fast, never stall.
type Limits struct {
	// MaxInFlight bounds the reviews handled at once.
	MaxInFlight int64
	// Timeout bounds a review whose request names no timeout, and caps one
	// whose request names a longer one. The API server sends each webhook
	// configuration's timeoutSeconds as the request's ?timeout=.
	Timeout time.Duration
	// InFlightBytes bounds the request bodies held at once. A review
	// reserves its Content-Length (MaxReviewBytes when it sends none)
	// before its body is read.
	InFlightBytes int64
	// MaxWaiting bounds the reviews waiting for room; one more is shed at once.
	MaxWaiting int64
	// MaxWait bounds how long a review waits for room before it is shed.
	MaxWait time.Duration
}

// MaxReviewBytes is the largest request body a review may have:
// controller-runtime's own limit (the API server's 3 MiB objects, twice for
// an UPDATE's object and oldObject, fit).
const MaxReviewBytes = 7 << 20

// DefaultLimits are the documented defaults: the API server's default
// webhook timeout, and room for two of the largest reviews at once or
// thousands of ordinary ones.
func DefaultLimits() Limits {
	return Limits{MaxInFlight: 64, Timeout: 10 * time.Second, InFlightBytes: 16 << 20, MaxWaiting: 128, MaxWait: time.Second}
}

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
	if l.MaxWait < 0 {
		errs = append(errs, fmt.Errorf("Limits.MaxWait=%s: want 0 or more", l.MaxWait))
	}
	return errors.Join(errs...)
}

// guard applies Limits to every endpoint of one server: they share its
// budget of bytes.
type guard struct {
	Limits
	bytes   *semaphore.Weighted
	slots   *semaphore.Weighted
	waiting atomic.Int64
	metrics *Metrics
}

func newGuard(l Limits, m *Metrics) *guard {
	return &guard{Limits: l, bytes: semaphore.NewWeighted(l.InFlightBytes), slots: semaphore.NewWeighted(l.MaxInFlight), metrics: m}
}

// reviewBudget is what a review's context carries about its time.
type reviewBudget struct {
	// timeout is the review's whole time, from the request or Limits.
	timeout time.Duration
	// deadline is when the API server stops waiting.
	deadline time.Time
}

type budgetKey struct{}

// wrap guards one endpoint. The review runs on a context of its own: not
// cancelled when the server shuts down, so reviews in flight during the
// drain get their real answer, but ending at the review's deadline, so no
// work goes on after the API server gave up.
func (g *guard) wrap(name Name, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		timeout := requestTimeout(r, g.Timeout)
		deadline := start.Add(timeout)
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
		if !g.acquire(ctx, weight) {
			g.metrics.record(name, DecisionError, ReasonOverloaded)
			w.Header().Set("Retry-After", "1")
			http.Error(w, "graceguard is at its limit of reviews in flight; retry", http.StatusTooManyRequests)
			return
		}
		defer g.release(weight)
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

// acquire reserves a slot and weight bytes, waiting at most MaxWait (and
// never past the review's deadline) behind at most MaxWaiting others.
func (g *guard) acquire(ctx context.Context, weight int64) bool {
	if g.slots.TryAcquire(1) {
		if g.bytes.TryAcquire(weight) {
			return true
		}
		g.slots.Release(1)
	}
	if g.waiting.Add(1) > g.MaxWaiting {
		g.waiting.Add(-1)
		return false
	}
	defer g.waiting.Add(-1)
	ctx, cancel := context.WithTimeout(ctx, g.MaxWait)
	defer cancel()
	if g.slots.Acquire(ctx, 1) != nil {
		return false
	}
	if g.bytes.Acquire(ctx, weight) != nil {
		g.slots.Release(1)
		return false
	}
	return true
}

func (g *guard) release(weight int64) {
	g.bytes.Release(weight)
	g.slots.Release(1)
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
