package budget

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want time.Duration
		err  error
	}{
		{"a Go duration in seconds", "30s", 30 * time.Second, nil},
		{"a compound Go duration", "1m30s", 90 * time.Second, nil},
		{"milliseconds", "1500ms", 1500 * time.Millisecond, nil},
		{"bare whole seconds", "30", 30 * time.Second, nil},
		{"zero", "0", 0, nil},
		{"spaces around are ignored", " 5s ", 5 * time.Second, nil},
		{"exactly one hour is accepted", "1h", time.Hour, nil},
		{"3600 bare seconds is one hour", "3600", time.Hour, nil},
		{"empty is refused", "", 0, ErrSyntax},
		{"words are refused", "thirty", 0, ErrSyntax},
		{"a number with a unit Go does not know", "30sec", 0, ErrSyntax},
		{"fractional bare seconds are refused", "1.5", 0, ErrSyntax},
		{"negative bare seconds", "-5", 0, ErrNegative},
		{"negative Go duration", "-5s", 0, ErrNegative},
		{"over an hour", "61m", 0, ErrTooLong},
		{"over an hour in bare seconds", "3601", 0, ErrTooLong},
		{"bare seconds that overflow int64", "99999999999999999999999", 0, ErrTooLong},
		{"a Go duration that overflows", "9999999999999h", 0, ErrTooLong},
		{"a huge negative bare number", "-99999999999999999999999", 0, ErrNegative},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDuration(tt.in)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("ParseDuration(%q) error = %v, want %v", tt.in, err, tt.err)
				}
				msg := err.Error()
				if !strings.Contains(msg, `"`+tt.in+`"`) || !strings.Contains(msg, AcceptedForms) {
					t.Errorf("error %q must name the value and the accepted forms", msg)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestCeilSeconds(t *testing.T) {
	for _, tt := range []struct {
		in   time.Duration
		want int64
	}{
		{0, 0}, {-time.Second, 0}, {time.Nanosecond, 1}, {time.Second, 1},
		{1500 * time.Millisecond, 2}, {30 * time.Second, 30}, {30*time.Second + 1, 31},
	} {
		if got := CeilSeconds(tt.in); got != tt.want {
			t.Errorf("CeilSeconds(%v) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestDefaultsSumToKubernetesDefaultGrace(t *testing.T) {
	b := Budget{Routing: 5 * time.Second, Work: 20 * time.Second, Cleanup: 2 * time.Second, Margin: 3 * time.Second}
	if got := b.Grace(); got != 30 {
		t.Fatalf("default budget needs grace %d, want 30 (Kubernetes' default)", got)
	}
}

func TestBudgetReadsForPeople(t *testing.T) {
	b := Budget{Routing: 8 * time.Second, Work: 30 * time.Second, Cleanup: 2 * time.Second, Margin: 5 * time.Second}
	if got, want := b.Annotation(45), "routing=8s work=30s cleanup=2s margin=5s grace=45s"; got != want {
		t.Errorf("Annotation = %q, want %q", got, want)
	}
	if got, want := b.Arithmetic(), "routing 8s + work 30s + cleanup 2s + margin 5s"; got != want {
		t.Errorf("Arithmetic = %q, want %q", got, want)
	}
	if b.Largest() != Work {
		t.Errorf("Largest = %s, want work", b.Largest())
	}
	sub := Budget{Routing: 1500 * time.Millisecond, Work: 90 * time.Second, Cleanup: time.Hour}
	if got, want := sub.Annotation(3692), "routing=1.5s work=1m30s cleanup=1h margin=0s grace=3692s"; got != want {
		t.Errorf("Annotation = %q, want %q", got, want)
	}
}

func TestGraceRoundsTheSumUp(t *testing.T) {
	// Rounding each term would give 2+1 = 3; the sum 2.0s needs only 2.
	b := Budget{Routing: 1500 * time.Millisecond, Work: 500 * time.Millisecond}
	if got := b.Grace(); got != 2 {
		t.Fatalf("Grace = %d, want 2", got)
	}
}

func TestCheck(t *testing.T) {
	b := Budget{Routing: 8 * time.Second, Work: 30 * time.Second, Cleanup: 2 * time.Second, Margin: 5 * time.Second}
	if f := Check(b, 30, 10*time.Minute); f.Fits() || f.Need != 45 || f.OverCap() {
		t.Errorf("45s budget in 30s grace: %+v fits=%v overcap=%v", f, f.Fits(), f.OverCap())
	}
	if f := Check(b, 45, 10*time.Minute); !f.Fits() {
		t.Errorf("45s budget must fit a 45s grace")
	}
	if f := Check(b, 45, 40*time.Second); !f.OverCap() {
		t.Errorf("45s budget must be over a 40s cap")
	}
	if f := Check(b, 45, 0); f.OverCap() {
		t.Errorf("a zero cap means no cap")
	}
}

func TestTimeline(t *testing.T) {
	def := Budget{Routing: 5 * time.Second, Work: 20 * time.Second, Cleanup: 2 * time.Second, Margin: 3 * time.Second}
	t.Run("the default budget exits with its margin before SIGKILL", func(t *testing.T) {
		tl := NewTimeline(def, 5*time.Second, 30)
		if tl.SIGTERM != 5*time.Second || tl.Drained != 25*time.Second || tl.Exited != 27*time.Second || tl.Deadline != 30*time.Second {
			t.Fatalf("timeline = %+v", tl)
		}
		if !tl.Fits() || tl.Slack() != 3*time.Second {
			t.Fatalf("fits=%v slack=%v", tl.Fits(), tl.Slack())
		}
	})
	t.Run("a hook longer than grace is cut and SIGKILL follows 2s after", func(t *testing.T) {
		tl := NewTimeline(def, 40*time.Second, 30)
		if !tl.HookCut || tl.SIGTERM != 30*time.Second || tl.Deadline != 32*time.Second || tl.Fits() {
			t.Fatalf("timeline = %+v", tl)
		}
	})
	t.Run("without a hook the app spends the routing time after SIGTERM", func(t *testing.T) {
		tl := NewTimeline(def, 0, 30)
		if tl.SIGTERM != 0 || tl.Drained != 25*time.Second || tl.Deadline != 30*time.Second || !tl.Fits() {
			t.Fatalf("timeline = %+v", tl)
		}
	})
	t.Run("grace too short for the work is reported as not fitting", func(t *testing.T) {
		tl := NewTimeline(def, 5*time.Second, 20)
		if tl.Fits() || tl.Slack() >= 0 {
			t.Fatalf("timeline = %+v slack %v", tl, tl.Slack())
		}
	})
	t.Run("events are in time order, also when SIGKILL comes first", func(t *testing.T) {
		for _, grace := range []int64{30, 10} {
			ev := NewTimeline(def, 5*time.Second, grace).Events()
			for i := 1; i < len(ev); i++ {
				if ev[i].At < ev[i-1].At {
					t.Fatalf("grace %d: events out of order: %+v", grace, ev)
				}
			}
		}
	})
	t.Run("a grace period near the API's maximum does not overflow", func(t *testing.T) {
		tl := NewTimeline(def, 5*time.Second, 1<<62)
		if tl.Deadline <= 0 || !tl.Fits() {
			t.Fatalf("timeline = %+v", tl)
		}
	})
}
