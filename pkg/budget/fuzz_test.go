package budget

import (
	"testing"
	"time"
)

// FuzzParseDuration: parsing never panics, and anything accepted is a
// duration within [0, MaxTerm] that round-trips through Format.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"30s", "1m30s", "1500ms", "30", "0", "-1", "1h", "61m", "", "9999999999999h", "1.5", " 5s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if d < 0 || d > MaxTerm {
			t.Fatalf("ParseDuration(%q) = %v outside [0, 1h]", s, d)
		}
		back, err := ParseDuration(Format(d))
		if err != nil || back != d {
			t.Fatalf("Format(%v) = %q does not parse back: %v, %v", d, Format(d), back, err)
		}
	})
}

// FuzzBudgetGrace: the grace a budget asks for always covers its sum, by
// less than one second, and the timeline with that grace always fits.
func FuzzBudgetGrace(f *testing.F) {
	f.Add(int64(5e9), int64(20e9), int64(2e9), int64(3e9))
	f.Add(int64(1500e6), int64(1), int64(0), int64(0))
	f.Add(int64(3600e9), int64(3600e9), int64(3600e9), int64(3600e9))
	f.Fuzz(func(t *testing.T, r, w, c, m int64) {
		clamp := func(v int64) time.Duration {
			if v < 0 {
				v = -v
			}
			if v < 0 { // MinInt64
				v = 0
			}
			return time.Duration(v % int64(MaxTerm+1))
		}
		b := Budget{Routing: clamp(r), Work: clamp(w), Cleanup: clamp(c), Margin: clamp(m)}
		if err := b.Validate(); err != nil {
			t.Fatalf("clamped budget invalid: %v", err)
		}
		g := b.Grace()
		gd := time.Duration(g) * time.Second
		if gd < b.Sum() || gd-b.Sum() >= time.Second {
			t.Fatalf("Grace() = %ds for sum %v", g, b.Sum())
		}
		hook := time.Duration(CeilSeconds(b.Routing)) * time.Second
		b2 := b
		b2.Routing = hook
		tl := NewTimeline(b2, hook, b2.Grace())
		if !tl.Fits() {
			t.Fatalf("a budget's own grace must fit it: %+v", tl)
		}
	})
}
