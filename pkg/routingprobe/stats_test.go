package routingprobe

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestWithdrawalCountsOnlyTheDeletedPodAfterTheDelete(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	at := func(n int) time.Time { return t0.Add(ms(n)) }
	samples := []Sample{
		{Sent: at(-500), Pod: "a"}, // before the delete: routed, not withdrawn
		{Sent: at(100), Pod: "a"},
		{Sent: at(900), Pod: "b"}, // another Pod
		{Sent: at(700), Pod: "a"}, // answers arrive out of order
		{Sent: at(300), Pod: "a"},
		{Sent: at(2000), Err: "HTTP 502"},
	}
	d, n := Withdrawal(samples, "a", t0)
	if d != ms(700) || n != 3 {
		t.Errorf("got %s and %d served, want 700ms and 3", d, n)
	}
	if d, n := Withdrawal(samples, "c", t0); d != 0 || n != 0 {
		t.Errorf("a Pod sent nothing after its delete: got %s, %d; want 0, 0", d, n)
	}
}

func TestSummarizeByNearestRank(t *testing.T) {
	tests := []struct {
		name   string
		delays []time.Duration
		want   Stats
	}{
		{"no rounds", nil, Stats{}},
		{"one round is every figure", []time.Duration{ms(800)}, Stats{1, ms(800), ms(800), ms(800), ms(800)}},
		{"the median of four is the second, a measured value", []time.Duration{ms(400), ms(100), ms(300), ms(200)}, Stats{4, ms(100), ms(200), ms(400), ms(400)}},
		{"p90 of ten is the ninth", []time.Duration{ms(10), ms(9), ms(8), ms(7), ms(6), ms(5), ms(4), ms(3), ms(2), ms(1)}, Stats{10, ms(1), ms(5), ms(9), ms(10)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Summarize(tt.delays); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestProfileDelayRoundsUpToWholeSeconds(t *testing.T) {
	tests := []struct {
		name            string
		slowest, margin time.Duration
		want            time.Duration
	}{
		{"scenario 13's Traefik figure gives the traefik profile", ms(2077), time.Second, 4 * time.Second},
		{"a whole second stays", ms(2000), time.Second, 3 * time.Second},
		{"a millisecond over rounds up", ms(2001), time.Second, 4 * time.Second},
		{"no withdrawal and no margin is 0", 0, 0, 0},
		{"no margin", ms(100), 0, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ProfileDelay(tt.slowest, tt.margin); got != tt.want {
				t.Errorf("ProfileDelay(%s, %s) = %s, want %s", tt.slowest, tt.margin, got, tt.want)
			}
		})
	}
}

func TestPlotScalesToTheProfile(t *testing.T) {
	rounds := []Round{{Pod: "probe-a", Delay: ms(1000)}, {Pod: "probe-bb", Delay: ms(4000)}, {Pod: "probe-c", Delay: 0}}
	var b bytes.Buffer
	if err := Plot(&b, rounds, 4*time.Second); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"              0s                                      4s\n" +
		"  1 probe-a   ##########                              | 1.000s\n" +
		"  2 probe-bb  ########################################| 4.000s\n" +
		"  3 probe-c                                           | 0.000s\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestParsePod(t *testing.T) {
	for body, want := range map[string]string{
		"graceguard-probe pod=probe-7f9-abc\n": "probe-7f9-abc",
		"graceguard-probe pod=\n":              "",
		"<html>404</html>":                     "",
		"graceguard-probe pod=a b":             "",
	} {
		got, ok := ParsePod([]byte(body))
		if got != want || ok != (want != "") {
			t.Errorf("ParsePod(%q) = %q, %v; want %q", body, got, ok, want)
		}
	}
}

func TestResultRoundTripsThroughALog(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	r := ResultOf([]Round{{Pod: "probe-a", Deleted: t0, Delay: ms(1234), Served: 40, Failed: 1}},
		[]Sample{{Pod: "probe-a"}, {Err: "HTTP 502"}, {Pod: "probe-b"}}, 2)
	var b bytes.Buffer
	b.WriteString("deletion 1 of 1: Pod probe-a answered 40 requests\n")
	if err := WriteResult(&b, r); err != nil {
		t.Fatal(err)
	}
	got, err := ParseResult(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if got.Sent != 3 || got.Failed != 1 || got.Skipped != 2 || len(got.Rounds) != 1 || got.Rounds[0] != r.Rounds[0] {
		t.Errorf("got %+v, want %+v", got, r)
	}
	for log, want := range map[string]string{
		"":                                      "the client's log is empty",
		"starting\n--timeout reached: 0 of 3\n": "the client printed no result; its last line: --timeout reached: 0 of 3",
		resultPrefix + "{not json\n":            "the client's result does not parse",
	} {
		if _, err := ParseResult([]byte(log)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseResult(%q) = %v, want %q", log, err, want)
		}
	}
}

func TestRecentWindowCoversTheGapBetweenTwoRequestsToOnePod(t *testing.T) {
	for _, tt := range []struct {
		rate, pods int
		want       time.Duration
	}{
		{50, 4, time.Second},      // 80ms gaps: a second is plenty
		{2, 4, 8 * time.Second},   // 2s gaps
		{100, 3, time.Second},     // 30ms gaps
		{1, 11, 44 * time.Second}, // 11s gaps
	} {
		if got := RecentWindow(tt.rate, tt.pods); got != tt.want {
			t.Errorf("RecentWindow(%d/s, %d Pods) = %s, want %s", tt.rate, tt.pods, got, tt.want)
		}
	}
}
