package webhook

import (
	"container/list"
	"sync"
	"time"
)

// queue is the guard's decision of which reviews do work, and when:
// a bounded number at once (slots), the rest waiting in arrival order for
// as long as they can still finish in time, and none admitted that cannot.
//
// Why: a replica past its capacity must keep answering at capacity. If
// every review that arrives starts at once, they share the CPU and each
// takes longer the more arrive, until all of them finish after the API
// server gave up: the work is done and wasted (goodput collapses). So at
// most slots reviews work at once, the replica measures how fast it gets
// through them (service: a review's time in its slot; interval: the time
// between two slots freed while reviews wait, wall time including CPU
// throttling and whatever else the process did), and a review that
// arrives to a full set of slots waits only when the reviews ahead of it
// and its own service are expected to end before its latest finish
// (admitWithin); else it is shed at once, before any work, while its API
// server still has its timeout to retry (the API server's webhook client
// retries a 429 after its Retry-After, k8s.io/client-go
// rest/with_retry.go) or to apply the failure policy.
//
// Why first come, first served and not LIFO: LIFO serves fresh reviews
// under a standing queue by letting old ones go stale, then sheds them
// when their API server has no time left to retry. Admitting only what
// can finish keeps the queue's wait within the deadline instead, so every
// review served is served in time, and every review shed is shed on
// arrival. A waiter whose latest start passes anyway (the estimate grew,
// say a slow namespace read) is shed when it reaches the front, never
// started late.
//
// queue is a state machine over explicit times, so that tests can
// drive it with a clock of their own; guard.acquire adds the waiting.
type queue struct {
	mu    sync.Mutex
	slots int
	busy  int
	// maxWaiting bounds the queue; one more is shed on arrival.
	maxWaiting int
	waiting    list.List // of *waiter, oldest first
	// service is the estimated wall time a review holds its slot, from
	// the moment the queue grants it to its release: an exponentially
	// weighted mean of the measured ones (0 until one is).
	service time.Duration
	// interval is the estimated time between two releases while reviews
	// wait (each release hands its slot on): the replica's own measure of
	// how fast it gets through a queue, whatever else takes its CPU (TLS,
	// HTTP, the garbage collector, a quota's throttling) and however long
	// a granted waiter takes to be scheduled; 0 until measured.
	interval time.Duration
	// lastRelease is when the last slot was released, handedOn whether
	// it went to a waiter (so the time since then was spent backlogged).
	lastRelease time.Time
	handedOn    bool
}

// serviceWeight is the weight of a new measurement in the service
// estimate: a sixteenth, so that one slow review (a namespace read from
// the API server) moves it little, and a change of the CPU the replica
// gets shows within a few dozen reviews.
const serviceWeight = 16

// waiter is a review waiting for a slot.
type waiter struct {
	// latestStart is the last moment it can start and still finish in
	// time with the service estimate of its arrival.
	latestStart time.Time
	// ready is closed when the waiter is decided: granted a slot, or shed.
	ready   chan struct{}
	granted bool
	decided bool
	// grantedAt is when the queue gave it a slot: its slot time counts
	// from then, scheduling delays included.
	grantedAt time.Time
	elem      *list.Element
}

func newQueue(slots, maxWaiting int) *queue {
	return &queue{slots: slots, maxWaiting: maxWaiting}
}

// arrive decides a review that arrives at now and must finish by
// finishBy: granted a slot at once (w nil, ok), queued (w set, ok: wait
// for w.ready), or shed (!ok).
func (a *queue) arrive(now, finishBy time.Time) (w *waiter, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.busy < a.slots && a.waiting.Len() == 0 {
		a.busy++
		return nil, true
	}
	if a.waiting.Len() >= a.maxWaiting {
		return nil, false
	}
	start := now.Add(a.expectedWait(a.waiting.Len()))
	latest := finishBy.Add(-a.service)
	if start.After(latest) {
		return nil, false
	}
	w = &waiter{latestStart: latest, ready: make(chan struct{})}
	w.elem = a.waiting.PushBack(w)
	return w, true
}

// expectedWait is how long a review with ahead reviews queued before it
// waits for a slot: a slot frees every interval as measured while
// backlogged, and never faster than service/slots (the slots' own time).
func (a *queue) expectedWait(ahead int) time.Duration {
	n := int64(ahead + 1)
	return time.Duration(max(int64(a.interval)*n, int64(a.service)*n/int64(a.slots)))
}

// release frees a slot at now, after a review held it for held (0: the
// slot was taken but no review ran, nothing to learn from). The slot goes
// to the oldest waiter that can still start; those that cannot are shed.
func (a *queue) release(now time.Time, held time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if held > 0 {
		a.service = ewma(a.service, held)
	}
	if a.handedOn {
		a.interval = ewma(a.interval, now.Sub(a.lastRelease))
	}
	a.lastRelease, a.handedOn = now, false
	for a.waiting.Len() > 0 {
		w := a.waiting.Remove(a.waiting.Front()).(*waiter)
		w.decided = true
		if now.After(w.latestStart) {
			close(w.ready)
			continue
		}
		w.granted, w.grantedAt, a.handedOn = true, now, true
		close(w.ready)
		return
	}
	a.busy--
}

// ewma moves the estimate est towards a new measurement m.
func ewma(est, m time.Duration) time.Duration {
	if est == 0 {
		return m
	}
	return est + (m-est)/serviceWeight
}

// giveUp takes w out of the queue when its own wait ended (its latest
// start passed, or its request ended) before it was decided. It reports
// whether w was granted a slot meanwhile, which the caller then holds.
func (a *queue) giveUp(w *waiter) (granted bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if w.decided {
		return w.granted
	}
	a.waiting.Remove(w.elem)
	w.decided = true
	return false
}
