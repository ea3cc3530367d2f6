package webhook

import (
	"context"
	"errors"
)

// meter counts the bytes a review keeps of its objects (reader charges
// every string, list element and structure it keeps). A review keeps at
// most MaxKeptBytes; past keptAllowance, each keptChunk more is taken from
// the guard's in-flight budget before it is kept, so the reviews in flight
// keep at most --max-inflight-review-bytes together, bodies and what they
// keep of them alike. The first keptAllowance (what an ordinary Pod keeps)
// costs the budget nothing: MaxInFlight of them are a fixed, small part
// of the process.
type meter struct {
	kept    int
	granted int64
	// take reserves bytes of the guard's budget without waiting; nil when
	// no guard is in front (a handler called directly).
	take func(n int64) bool
	// busy: the guard had no room; the review is shed (429), not cut.
	busy bool
}

const (
	keptAllowance = 64 << 10
	keptChunk     = 256 << 10
)

// charge records n more bytes kept. It reports false when the review may
// keep no more: past MaxKeptBytes, or the guard has no room (busy).
func (m *meter) charge(n int) bool {
	m.kept += n
	if m.kept > MaxKeptBytes {
		return false
	}
	for int64(m.kept) > keptAllowance+m.granted {
		if m.take == nil {
			return true
		}
		if !m.take(keptChunk) {
			m.busy = true
			return false
		}
		m.granted += keptChunk
	}
	return true
}

// errBusy: the guard had no room for what a review keeps.
var errBusy = errors.New("graceguard is at its limit of bytes in flight; retry")

type meterKey struct{}

// meterFrom is the review's meter, which the guard put in ctx, or one of
// its own (without a guard's budget) for a handler called directly.
func meterFrom(ctx context.Context) *meter {
	if m, ok := ctx.Value(meterKey{}).(*meter); ok {
		return m
	}
	return &meter{}
}
