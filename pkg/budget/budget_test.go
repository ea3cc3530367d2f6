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

func TestProxyTerm(t *testing.T) {
	b := Budget{Routing: 5 * time.Second, Work: 20 * time.Second, Cleanup: 2 * time.Second, Margin: 3 * time.Second, Proxy: 5 * time.Second}
	if got := b.Grace(); got != 35 {
		t.Errorf("Grace = %d, want 35: a mesh proxy draining 5s after the app needs grace for it", got)
	}
	if got, want := b.Arithmetic(), "routing 5s + work 20s + cleanup 2s + proxy 5s + margin 3s"; got != want {
		t.Errorf("Arithmetic = %q, want %q", got, want)
	}
	if got, want := b.Annotation(35), "routing=5s work=20s cleanup=2s proxy=5s margin=3s grace=35s"; got != want {
		t.Errorf("Annotation = %q, want %q", got, want)
	}
	b.Proxy = 0
	if got, want := b.Annotation(30), "routing=5s work=20s cleanup=2s margin=3s grace=30s"; got != want {
		t.Errorf("without a proxy the annotation is unchanged: %q, want %q", got, want)
	}
	tl := NewTimeline(Budget{Routing: 5 * time.Second, Work: 20 * time.Second, Cleanup: 2 * time.Second, Margin: 3 * time.Second, Proxy: 5 * time.Second}, 5*time.Second, 30)
	if tl.ProxyExited != 32*time.Second || tl.Fits() || tl.Slack() != -2*time.Second {
		t.Errorf("the proxy exits 5s after the app (27s) at 32s, past a 30s deadline: %+v fits=%v", tl, tl.Fits())
	}
	if ev := tl.Events(); ev[len(ev)-1].Name != "mesh proxy exits" {
		t.Errorf("events: %+v", ev)
	}
}

func TestProfiles(t *testing.T) {
	builtin := BuiltinProfiles()
	for _, p := range builtin {
		if err := p.Validate(); err != nil || p.Source == "" || p.Basis == "" {
			t.Errorf("built-in %s: %v (source %q, basis %q)", p.Name, err, p.Source, p.Basis)
		}
		if len(p.Source) > 96 {
			t.Errorf("built-in %s: source longer than a line of explain: %q", p.Name, p.Source)
		}
	}
	nlb, ok := FindProfile(builtin, ProfileAWSNLBIP)
	if !ok || nlb.Routing != 2*time.Minute {
		t.Fatalf("aws-nlb-ip = %+v, %v", nlb, ok)
	}
	for _, tc := range []struct {
		spec string
		want string // "" means an error mentioning errPart
		err  string
	}{
		{"corp-lb=45s", "corp-lb=45s", ""},
		{"aws-nlb-ip=150s,grace-floor=3m", "aws-nlb-ip=2m30s,grace-floor=3m", ""},
		{" edge=30 ", "edge=30s", ""},
		{"corp-lb", "", "want NAME=ROUTING"},
		{"corp-lb=", "", "want NAME=ROUTING"},
		{"Corp_LB=5s", "", "not a DNS-1123 label"},
		{"corp-lb=forever", "", `routing delay "forever" is not a duration`},
		{"corp-lb=2h", "", "longer than 1h; want a Go duration"},
		{"corp-lb=5s,floor=1m", "", `unknown setting "floor"`},
		{"corp-lb=5s,grace-floor=-1s", "", "grace-floor"},
	} {
		p, err := ParseProfile(tc.spec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), strings.TrimSpace(tc.spec)) {
				t.Errorf("ParseProfile(%q) error %v, want one naming the value and %q", tc.spec, err, tc.err)
			}
			continue
		}
		if err != nil || p.String() != tc.want || p.Basis != BasisOperator {
			t.Errorf("ParseProfile(%q) = %v (%s), %v; want %s", tc.spec, p, p.Basis, err, tc.want)
		}
	}
	own, _ := ParseProfile("aws-nlb-ip=150s")
	extra, _ := ParseProfile("corp-lb=45s")
	merged, err := MergeProfiles(builtin, []Profile{own, extra})
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := FindProfile(merged, ProfileAWSNLBIP); p.Routing != 150*time.Second || p.Basis != BasisOperator {
		t.Errorf("an operator's profile replaces the built-in of the same name: %+v", p)
	}
	if got := ProfileNames(merged); len(got) != len(builtin)+1 || got[len(got)-1] != "corp-lb" {
		t.Errorf("names %v", got)
	}
	if _, err := MergeProfiles(builtin, []Profile{extra, extra}); err == nil || !strings.Contains(err.Error(), `"corp-lb" is given twice`) {
		t.Errorf("a profile given twice: %v", err)
	}
}

func TestCeiling(t *testing.T) {
	c := Ceiling{Limit: 15 * time.Second}
	if c.Exceeded(15) || !c.Exceeded(16) {
		t.Errorf("a 15s ceiling holds a 15s budget and cuts a 16s one")
	}
	if (Ceiling{}).Exceeded(1 << 40) {
		t.Errorf("an unset ceiling never cuts")
	}
}
