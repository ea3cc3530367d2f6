package budget

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestParseAnnotationReadsWhatAnnotationWrites(t *testing.T) {
	for _, b := range []Budget{
		{Routing: 8 * time.Second, Work: 30 * time.Second, Cleanup: 2 * time.Second, Margin: 5 * time.Second},
		{Routing: 1500 * time.Millisecond, Work: 90 * time.Second},
		{Routing: 5 * time.Second, Work: 20 * time.Second, Cleanup: 2 * time.Second, Margin: 3 * time.Second, Proxy: 27 * time.Second},
		{},
	} {
		s := b.Annotation(b.Grace())
		got, grace, err := ParseAnnotation(s)
		if err != nil || got != b || grace != b.Grace() {
			t.Errorf("ParseAnnotation(%q) = %+v, %d, %v; want %+v, %d", s, got, grace, err, b, b.Grace())
		}
	}
}

func TestParseAnnotationNamesTheProblem(t *testing.T) {
	for in, want := range map[string]string{
		"routing=5s work=20s cleanup=2s margin=3s":              "grace is missing",
		"routing=5s work=20s cleanup=2s margin=3s grace=thirty": `grace "thirty" is not whole seconds`,
		"routing=5s work=soon cleanup=2s margin=3s grace=30s":   `work "soon" is not a duration`,
		"routing=5s work=20s cleanup=2s margin=3s grace=30s x":  `"x" is not key=value`,
		"routing=5s work=20s work=2s margin=3s grace=30s":       "work given twice",
		"routing=5s work=20s slack=2s margin=3s grace=30s":      `unknown term "slack"`,
	} {
		if _, _, err := ParseAnnotation(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseAnnotation(%q) error = %v, want it to contain %q", in, err, want)
		}
	}
}

func FuzzParseAnnotation(f *testing.F) {
	f.Add("routing=8s work=30s cleanup=2s margin=5s grace=45s")
	f.Add("routing=1.5s work=1m cleanup=0s margin=0s grace=63s")
	f.Add("grace=1s")
	f.Fuzz(func(t *testing.T, s string) {
		b, grace, err := ParseAnnotation(s)
		if err != nil {
			return
		}
		if b.Validate() != nil || grace < 0 {
			t.Fatalf("ParseAnnotation(%q) accepted %+v grace %d", s, b, grace)
		}
		if b2, g2, err := ParseAnnotation(b.Annotation(grace)); err != nil || b2 != b || g2 != grace {
			t.Fatalf("%q does not round-trip: %+v %d %v", s, b2, g2, err)
		}
	})
}

func secs(n int) time.Duration { return time.Duration(n) * time.Second }

func TestSummarize(t *testing.T) {
	var obs []Observation
	for i := 1; i <= 20; i++ {
		obs = append(obs, Observation{Drain: secs(i)})
	}
	obs = append(obs, Observation{Drain: secs(10), Killed: true}, Observation{Drain: secs(4), HookFailed: true})
	e := Summarize(obs)
	want := Evidence{Samples: 22, Kills: 1, HookFailures: 1, P50: secs(10), P95: secs(19), Max: secs(20), Cut: secs(10)}
	if e != want {
		t.Errorf("Summarize = %+v\nwant        %+v", e, want)
	}
	// A hook that ran out the grace is a hook failure, never a drain or a kill.
	hung := Summarize(append(obs, Observation{Drain: secs(2), Killed: true, HookFailed: true, HookHung: true}))
	want.Samples, want.HookFailures, want.HooksHung = 23, 2, 1
	if hung != want {
		t.Errorf("Summarize with a hung hook = %+v\nwant                      %+v", hung, want)
	}
	if e := Summarize(nil); e != (Evidence{}) {
		t.Errorf("Summarize(nil) = %+v", e)
	}
	if e := Summarize([]Observation{{Drain: secs(7)}}); e.P50 != secs(7) || e.P95 != secs(7) || e.Max != secs(7) {
		t.Errorf("one sample: %+v", e)
	}
}

func TestRecommend(t *testing.T) {
	current := Budget{Routing: secs(5), Work: secs(5), Cleanup: secs(2), Margin: secs(3)}
	clean := func(ds ...int) []Observation {
		var out []Observation
		for _, d := range ds {
			out = append(out, Observation{Drain: secs(d)})
		}
		return out
	}
	kill := Observation{Drain: secs(10), Killed: true}
	for _, tc := range []struct {
		name      string
		obs       []Observation
		work      time.Duration
		enough    bool
		raise     bool
		lower     bool
		whyPrefix string
	}{
		{"nothing observed gives no advice", nil, 0, false, false, false, "no shutdown observed yet"},
		{"every Pod killed after 10s of drain: twice the cut drain, plus a second",
			[]Observation{kill, kill, kill}, secs(21), true, true, false,
			"3 of 3 Pods were SIGKILLed after draining 10s: the drain needed is longer and unknown"},
		{"a single kill is enough evidence to raise",
			[]Observation{kill}, secs(21), true, true, false, "the 1 Pod observed was SIGKILLed after draining 10s"},
		{"kills cut at 10s, and Pods with more grace drained in 12s: the measured 12s, plus a second",
			append(clean(11, 12, 12), kill), secs(13), true, true, false,
			"1 of 4 Pods was SIGKILLed after draining 10s, and the others drained in at most 12s"},
		{"clean drains: the longest, plus a second",
			clean(1, 2, 2, 3, 3), secs(4), true, false, true, "5 Pods drained after SIGTERM in at most 3s (p50 2s, p95 3s)"},
		{"too few clean drains: an indication only",
			clean(12, 12), secs(13), false, false, false, "too few samples: 2 of the 5 needed, and no kill; 2 Pods drained"},
		{"drains of any length, however absurd, advise at most MaxTerm, never a wrapped negative",
			[]Observation{{Drain: Infinity}, {Drain: Infinity, Killed: true}}, MaxTerm, true, true, false, "1 of 2 Pods was SIGKILLed after draining infinity"},
		{"a Pod whose hook ran out the grace says nothing of the work: no advice",
			[]Observation{{Drain: secs(2), Killed: true, HookFailed: true, HookHung: true}}, 0, false, false, false,
			"the 1 Pod observed had its preStop hook run out the grace: no drain measured says anything of the work"},
		{"hung hooks beside a kill: the kill decides, and the hung are said not to count",
			[]Observation{kill, {Drain: secs(2), Killed: true, HookHung: true}, {Drain: secs(2), HookHung: true}}, secs(21), true, true, false,
			"the 1 Pod observed was SIGKILLed after draining 10s"},
		{"a kill cut at any length: MaxTerm",
			[]Observation{{Drain: Infinity - 1, Killed: true}}, MaxTerm, true, true, false, "the 1 Pod observed was SIGKILLed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Recommend(Summarize(tc.obs), 5)
			raise, lower := a.Enough && a.Work > current.Work, a.Enough && a.Work < current.Work
			if a.Work != tc.work || a.Enough != tc.enough || raise != tc.raise || lower != tc.lower {
				t.Errorf("Recommend = work %s enough %v raise %v lower %v; want %s %v %v %v",
					Format(a.Work), a.Enough, raise, lower, Format(tc.work), tc.enough, tc.raise, tc.lower)
			}
			if !strings.HasPrefix(a.Why, tc.whyPrefix) {
				t.Errorf("Why = %q\nwant it to start with %q", a.Why, tc.whyPrefix)
			}
			if e := Summarize(tc.obs); e.HooksHung > 0 && e.HooksHung < e.Samples && !strings.HasSuffix(a.Why, fmt.Sprintf("; %s whose preStop hook ran out the grace not counted", pods(e.HooksHung))) {
				t.Errorf("Why = %q does not say the %d hung hooks were not counted", a.Why, e.HooksHung)
			}
		})
	}
	if g := (Advice{Work: secs(21)}).Grace(current); g != 31 {
		t.Errorf("grace for work 21s = %d, want 31 (5 + 21 + 2 + 3)", g)
	}
}

// FuzzRecommendCoversWhatWasSeen: advice never falls below a drain that
// ended on its own, and always exceeds a drain a kill cut short.
func FuzzRecommendCoversWhatWasSeen(f *testing.F) {
	f.Add(int64(12e9), false, int64(10e9), true)
	f.Add(int64(0), false, int64(3599e9), true)
	f.Fuzz(func(t *testing.T, d1 int64, k1 bool, d2 int64, k2 bool) {
		clamp := func(v int64) time.Duration {
			if v < 0 {
				v = -v
			}
			return time.Duration(max(v, 0) % int64(MaxTerm))
		}
		obs := []Observation{{Drain: clamp(d1), Killed: k1}, {Drain: clamp(d2), Killed: k2}}
		a := Recommend(Summarize(obs), 1)
		for _, o := range obs {
			if a.Work > MaxTerm {
				t.Fatalf("work %v over MaxTerm", a.Work)
			}
			if !o.Killed && a.Work < o.Drain {
				t.Fatalf("work %v below a drain seen, %v", a.Work, o.Drain)
			}
			if o.Killed && a.Work <= o.Drain && a.Work < MaxTerm {
				t.Fatalf("work %v does not exceed a drain cut by a kill, %v", a.Work, o.Drain)
			}
		}
	})
}

func TestSummarizeComparesRoutingWithTheWithdrawal(t *testing.T) {
	s := time.Second
	e := Summarize([]Observation{
		{Drain: 3 * s, Withdrawn: true, Withdrawal: 2 * s, Routing: 5 * s, RoutingKnown: true},
		{Drain: 3 * s, Withdrawn: true, Withdrawal: 8 * s, Routing: 5 * s, RoutingKnown: true},
		{Drain: 3 * s, Withdrawn: true, Withdrawal: 9 * s, Routing: 2 * s, RoutingKnown: true},
		{Drain: 3 * s, Withdrawn: true, Withdrawal: 5 * s, Routing: 5 * s, RoutingKnown: true}, // equal: covered
		{Drain: 3 * s, Withdrawn: true, Withdrawal: 30 * s},                                    // no budget: a figure, no comparison
		{Drain: 3 * s, Withdrawal: 99 * s, Routing: time.Second, RoutingKnown: true},           // no figure: ignored
	})
	want := RoutingEvidence{Compared: 4, Short: 2, By: 7 * s, Term: 2 * s, Withdrawal: 9 * s}
	if e.Routing != want || e.Withdrawn != 5 || e.WithdrawalMax != 30*s || e.WithdrawalP50 != 8*s || e.Samples != 6 {
		t.Errorf("evidence %+v; want routing %+v, 5 withdrawn, p50 8s, max 30s", e, want)
	}
	if e := Summarize([]Observation{{Drain: s}}); e.Withdrawn != 0 || e.Routing != (RoutingEvidence{}) || e.WithdrawalMax != 0 {
		t.Errorf("no withdrawal: %+v", e)
	}
}
