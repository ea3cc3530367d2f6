package webhook_test

import (
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
		{name: "no concurrent reviews", edit: func(l *webhook.Limits) { l.MaxInFlight = 0 },
			want: []string{"--max-concurrent-reviews=0: want 1 to 10000"}},
		{name: "too many concurrent reviews", edit: func(l *webhook.Limits) { l.MaxInFlight = 10001 },
			want: []string{"--max-concurrent-reviews=10001: want 1 to 10000"}},
		{name: "room for less than the largest review", edit: func(l *webhook.Limits) { l.InFlightBytes = 1 << 20 },
			want: []string{"--max-inflight-review-bytes=1Mi: want at least 7340032 (7Mi), the largest review, or that review could never be answered"}},
		{name: "a negative number of waiting reviews", edit: func(l *webhook.Limits) { l.MaxWaiting = -1 },
			want: []string{"Limits.MaxWaiting=-1: want 0 or more"}},
		{name: "a negative wait", edit: func(l *webhook.Limits) { l.MaxWait = -time.Second },
			want: []string{"Limits.MaxWait=-1s: want 0 or more"}},
		{name: "every limit wrong at once", edit: func(l *webhook.Limits) { *l = webhook.Limits{MaxWaiting: -1, MaxWait: -1} },
			want: []string{"--webhook-timeout=0s", "--max-concurrent-reviews=0", "--max-inflight-review-bytes=0", "Limits.MaxWaiting=-1", "Limits.MaxWait=-1ns"}},
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
