package webhook_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/graceguard/graceguard/pkg/webhook"
)

func TestDefaultLimitsAreValid(t *testing.T) {
	if err := webhook.DefaultLimits().Validate(); err != nil {
		t.Fatalf("the documented defaults: %v", err)
	}
}

// Each limit set wrong: the error names the flag that sets it (or the
// field, for those no flag sets), the value as the flag prints it, and
// what is accepted.
func TestLimitsValidateNamesTheFlagTheValueAndWhatIsAccepted(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*webhook.Limits)
		want []string
	}{
		{name: "a timeout over a webhook's 30s", edit: func(l *webhook.Limits) { l.Timeout = 31 * time.Second },
			want: []string{"--webhook-timeout=31s: want 1s to 30s, the range of a webhook's timeoutSeconds"}},
		{name: "a timeout under 1s", edit: func(l *webhook.Limits) { l.Timeout = 500 * time.Millisecond },
			want: []string{"--webhook-timeout=500ms: want 1s to 30s"}},
		{name: "a negative number of concurrent reviews", edit: func(l *webhook.Limits) { l.MaxInFlight = -1 },
			want: []string{fmt.Sprintf("--max-concurrent-reviews=-1: want 0 to 10000 (0: %d per GOMAXPROCS, at least %d)", webhook.SlotsPerProc, webhook.MinSlots)}},
		{name: "too many concurrent reviews", edit: func(l *webhook.Limits) { l.MaxInFlight = 10001 },
			want: []string{"--max-concurrent-reviews=10001: want 0 to 10000"}},
		{name: "room for less than the largest review", edit: func(l *webhook.Limits) { l.InFlightBytes = 1 << 20 },
			want: []string{"--max-inflight-review-bytes=1Mi: want at least 7340032 (7Mi), the largest review, or that review could never be answered"}},
		{name: "a negative number of waiting reviews", edit: func(l *webhook.Limits) { l.MaxWaiting = -1 },
			want: []string{"Limits.MaxWaiting=-1: want 0 or more"}},
		{name: "every limit wrong at once", edit: func(l *webhook.Limits) { *l = webhook.Limits{MaxInFlight: -1, MaxWaiting: -1} },
			want: []string{"--webhook-timeout=0s", "--max-concurrent-reviews=-1", "--max-inflight-review-bytes=0", "Limits.MaxWaiting=-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := webhook.DefaultLimits()
			tc.edit(&l)
			err := l.Validate()
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v, want it to say %q", err, w)
				}
			}
		})
	}
	// The largest review itself is enough room.
	l := webhook.DefaultLimits()
	l.InFlightBytes = webhook.MaxReviewBytes
	if err := l.Validate(); err != nil {
		t.Errorf("room for exactly the largest review: %v", err)
	}
}

// --max-concurrent-reviews=0 derives the slots from GOMAXPROCS, which
// the chart sets from the CPU request: a replica works on as many reviews
// at once as its CPUs can run, a few per CPU.
func TestSlotsFollowGOMAXPROCSUnlessSet(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, tc := range []struct {
		procs int
		set   int64
		want  int
	}{
		{procs: 1, want: webhook.MinSlots},
		{procs: 2, want: webhook.MinSlots},
		{procs: 8, want: 8 * webhook.SlotsPerProc},
		{procs: 8, set: 3, want: 3},
	} {
		runtime.GOMAXPROCS(tc.procs)
		if got := (webhook.Limits{MaxInFlight: tc.set}).Slots(); got != tc.want {
			t.Errorf("GOMAXPROCS=%d --max-concurrent-reviews=%d: %d slots, want %d", tc.procs, tc.set, got, tc.want)
		}
	}
}
