package server

import (
	"context"
	"testing"
	"time"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// WithNamespaceLookup replaces the manager's cached namespace reads by f;
// the manager then never reads namespaces from the API server.
func WithNamespaceLookup(f func(ctx context.Context, name string) (mutate.Namespace, error)) Option {
	return func(o *options) { o.namespaces = lookupFunc(f) }
}

type lookupFunc func(ctx context.Context, name string) (mutate.Namespace, error)

func (f lookupFunc) Namespace(ctx context.Context, name string) (mutate.Namespace, error) {
	return f(ctx, name)
}

// withObserver gives f the webhook server before it starts: tests read its
// connection tracker, and measurements loosen its limits.
func withObserver(f func(*webhookServer)) Option { return func(o *options) { o.observe = f } }

// counts returns the connections the tracker holds, how many of them are
// pending, and the most it ever held at once.
func (t *connTracker) counts() (open, pending, peak int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.open(), t.lists[connPending].n, t.peak
}

// waitSeen waits until the tracker has seen n connections since it started.
func (t *connTracker) waitSeen(tb testing.TB, n int) {
	tb.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		t.mu.Lock()
		seen := t.seen
		t.mu.Unlock()
		if seen >= n {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the server accepted %d connections in 2 minutes, want %d", seen, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pendingPeak is the most pending connections the tracker held at once.
func (t *connTracker) pendingPeak() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.peakPending
}

// seenCount is how many connections the tracker admitted or refused.
func (t *connTracker) seenCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seen
}
