package bench

import (
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/graceguard/graceguard/test/harness/proc"
)

func TestGoBenchOutputIsParsed(t *testing.T) {
	out := `goos: linux
pkg: github.com/graceguard/graceguard/pkg/mutate
BenchmarkMutate/pod=huge-2         	   18834	     26779 ns/op	    159234 pod-bytes	   10408 B/op	      71 allocs/op
pkg: github.com/graceguard/graceguard/pkg/webhook
BenchmarkServe/pod=huge/handler=noop-2   100	   6524195 ns/op	  24.52 MB/s	  515384 B/op	     143 allocs/op
--- FAIL: BenchmarkBroken
PASS
`
	got := parseGoBench(strings.NewReader(out))
	if len(got) != 2 {
		t.Fatalf("parsed %d benchmarks, want 2: %+v", len(got), got)
	}
	m := got[0]
	if m.Package != "github.com/graceguard/graceguard/pkg/mutate" || m.Name != "BenchmarkMutate/pod=huge" || m.Iterations != 18834 ||
		m.NsPerOp != 26779 || m.BytesPerOp != 10408 || m.AllocsPerOp != 71 || m.Extra["pod-bytes"] != 159234 {
		t.Errorf("first benchmark parsed as %+v", m)
	}
	if s := got[1]; s.Name != "BenchmarkServe/pod=huge/handler=noop" || s.MBPerSec != 24.52 || s.Package != "github.com/graceguard/graceguard/pkg/webhook" {
		t.Errorf("second benchmark parsed as %+v", s)
	}
}

func TestPercentilesAreNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 1000; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	p := percentiles(d)
	if p.P50 != 500 || p.P99 != 990 || p.P999 != 999 || p.Max != 1000 || p.Mean != 500.5 {
		t.Errorf("percentiles of 1..1000 ms: %+v", p)
	}
	if p := percentiles(nil); p != (Percentile{}) {
		t.Errorf("no latencies gave %+v", p)
	}
}

func TestSuperlinearSweepsAreCaught(t *testing.T) {
	pts := func(f func(n float64) float64) []point {
		var out []point
		for _, n := range []int{0, 100, 500, 1500, 5000} {
			out = append(out, point{n, GoBench{AllocsPerOp: f(float64(n))}})
		}
		return out
	}
	allocs := func(b GoBench) float64 { return b.AllocsPerOp }
	for _, tc := range []struct {
		name string
		f    func(float64) float64
		want bool
	}{
		{"constant", func(float64) float64 { return 71 }, true},
		{"linear", func(n float64) float64 { return 140 + 2*n }, true},
		{"quadratic", func(n float64) float64 { return 140 + n*n/100 }, false},
	} {
		if got, _ := isLinear(pts(tc.f), allocs); got != tc.want {
			t.Errorf("%s sweep: linear = %t, want %t", tc.name, got, tc.want)
		}
	}
}

// The documents are rendered from results alone, and the SVG is well-formed.
func TestDocumentsRenderFromResults(t *testing.T) {
	r := &Results{
		Machine:  Machine{Host: proc.Host{NProc: 2, CPUModel: "test CPU", GoVersion: "go1.26.8"}},
		Settings: Settings{Rates: []int{500, 2000}, MaxWorkers: 16, NamespaceRate: 500},
		Pods:     []PodSize{{Name: "typical", Containers: 3, EnvVars: 14, PodBytes: 6486, SpecBytes: 3208, ReviewBytes: 7205}},
		GoBench: []GoBench{
			{Name: "BenchmarkMutate/pod=huge", NsPerOp: 26779, AllocsPerOp: 71},
			{Name: "BenchmarkServe/pod=typical/handler=noop", NsPerOp: 270000, AllocsPerOp: 131},
			{Name: "BenchmarkServe/pod=typical/handler=mutate-pod", NsPerOp: 777000, AllocsPerOp: 493},
		},
		Load: []LoadRun{
			{Server: ServerGraceguard, Rate: 500, Throughput: 500, Latency: Percentile{P50: 1, P99: 3}},
			{Server: ServerBaseline, Rate: 500, Throughput: 500, Latency: Percentile{P50: 0.7, P99: 2}},
			{Server: ServerGraceguard, Rate: 2000, Throughput: 1990, Latency: Percentile{P50: 2, P99: 90}, Cores: 1.4, CPUPerRequestUs: 700},
			{Server: ServerBaseline, Rate: 2000, Throughput: 2000, Latency: Percentile{P50: 1.5, P99: 40}, Cores: 1, CPUPerRequestUs: 500},
			{Server: ServerGraceguard, Rate: 0, Workers: 16, Throughput: 1300, Latency: Percentile{P50: 9, P99: 70}},
			{Server: ServerBaseline, Rate: 0, Workers: 16, Throughput: 2700, Latency: Percentile{P50: 4, P99: 23}},
		},
	}
	r.Targets = evaluate(r)
	md := r.Markdown()
	for _, tg := range r.Targets {
		if tg.Known && !tg.Met && tg.Why == "" && strings.Contains(tg.Goal, "p99") {
			t.Errorf("missed target %q has no explanation", tg.Goal)
		}
		if tg.Met && tg.Why != "" {
			t.Errorf("met target %q carries an explanation: %s", tg.Goal, tg.Why)
		}
	}
	for _, want := range []string{"| 2000 req/s | graceguard |", "max (16 workers)", "**missed**", "test CPU", "| typical | handler: mutate-pod | 777 µs | 2.88× |",
		"Why the missed targets are missed", "has p99 40.0 ms at this rate"} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks %q:\n%s", want, md)
		}
	}
	for _, bad := range []string{"NaN", "+Inf", "%!"} {
		if strings.Contains(md, bad) {
			t.Errorf("the Markdown contains %q", bad)
		}
	}
	svg := r.LatencySVG()
	d := xml.NewDecoder(strings.NewReader(svg))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v\n%s", err, svg)
		}
	}
	if n := strings.Count(svg, "<polyline"); n != 4 {
		t.Errorf("the SVG has %d lines, want 4 (p50 and p99 of graceguard and the baseline)", n)
	}
}

// The creation arms are rendered with their ratios, spread, CPU and targets
// from results alone, and a missed target says why from the run's numbers.
func TestCreationArmsRender(t *testing.T) {
	arm := func(name, webhook string, rate, p50 float64, rounds []float64, cpu map[string]float64, mutated bool) ArmRun {
		a := ArmRun{Arm: name, Desc: "desc of " + name, Pods: 1000, PodsPerSec: rate, RoundPodsPerSec: rounds, Latency: Percentile{P50: p50, P99: 3 * p50},
			Webhook: webhook, CPUMsPerPod: cpu, WantMutated: mutated}
		if mutated {
			a.Mutated = a.Pods
		}
		return a
	}
	r := &Results{
		Machine: Machine{Host: proc.Host{NProc: 2}, KubeAPIServer: "v1.37.2"},
		Creation: &Creation{Rounds: 2, PodsPerRound: 500, Clients: 16, NativePolicy: "the same (...)", Arms: []ArmRun{
			arm(ArmNone, "", 800, 16, []float64{780, 820}, map[string]float64{procAPIServer: 1.4, procClient: 0.6}, false),
			arm(ArmNativePolicy, "", 200, 60, []float64{190, 210}, map[string]float64{procAPIServer: 8.4, procClient: 0.7}, true),
			arm(ArmNoopOneCall, procNoop, 500, 26, []float64{480, 520}, map[string]float64{procAPIServer: 2.3, procNoop: 0.33, procClient: 0.6}, false),
			arm(ArmNoopPatch, procNoop, 420, 31, []float64{400, 440}, map[string]float64{procAPIServer: 3.3, procNoop: 0.37, procClient: 0.66}, true),
			arm(ArmGraceguard, procGraceguard, 410, 32, []float64{400, 420}, map[string]float64{procAPIServer: 3.4, procGraceguard: 0.36, procClient: 0.67}, true),
		},
			Webhooks: []WebhookLatency{{Name: "mutate-pods.graceguard.io", Count: 1000, MeanMs: 6, P50Le: 0.005, P99Le: 0.025}, {Name: "validate-pods.graceguard.io", Skipped: 1000}},
		},
	}
	r.Targets = evaluate(r)
	md := r.Markdown()
	for _, want := range []string{
		"| graceguard | 410 | 400–420 | 32.0 |", "| graceguard | 0.512× |", "| validate-pods.graceguard.io | 0 | 1000 | – |",
		"graceguard as its chart registers it: Pod throughput ≥ 0.9× a one-call no-op webhook's | 0.820×", "**missed**",
		"reaches 0.840× of noop-one-call's", "graceguard reaches 0.976× of that arm's throughput",
		"Pod throughput ≥ 1.4× the native MutatingAdmissionPolicy's doing the same injection | 2.05×",
		"**Spread.**", "benchmarks-arms.svg",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks %q:\n%s", want, md)
		}
	}
	for _, bad := range []string{"NaN", "+Inf", "%!"} {
		if strings.Contains(md, bad) {
			t.Errorf("the Markdown contains %q", bad)
		}
	}
	d := xml.NewDecoder(strings.NewReader(r.ArmsSVG()))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the arms SVG is not well-formed XML: %v", err)
		}
	}
	if n := strings.Count(r.ArmsSVG(), "<rect x="); n != 5 {
		t.Errorf("the arms SVG has %d bars, want 5", n)
	}
}

// The why of a missed creation goal walks from the one-call no-op to
// graceguard through the arms that were run, with each step's change in
// throughput as measured.
func TestPatchStepsFollowTheArms(t *testing.T) {
	run := func(name string, pps float64) ArmRun { return ArmRun{Arm: name, PodsPerSec: pps} }
	c := &Creation{Arms: []ArmRun{run(ArmNone, 900), run(ArmNoopOneCall, 680), run(ArmNoopRecord, 610), run(ArmNoopOnePatch, 570),
		run(ArmNoopPatch, 530), run(ArmGraceguard, 547)}}
	got := patchSteps(c)
	for _, want := range []string{"the one-call no-op 680 Pods/s", "(noop-one-call-record) 610 Pods/s", "(-70 Pods/s)", "(noop-one-call-patch) 570 Pods/s",
		"(-40 Pods/s)", "(noop-chart-patch) 530 Pods/s", "graceguard computing the patch itself 547 Pods/s", "(+17 Pods/s)"} {
		if !strings.Contains(got, want) {
			t.Errorf("steps %q do not say %q", got, want)
		}
	}
	c.Arms = []ArmRun{run(ArmNoopOneCall, 680), run(ArmNoopPatch, 530), run(ArmGraceguard, 547)}
	if got := patchSteps(c); strings.Contains(got, ArmNoopRecord) || !strings.Contains(got, "(-150 Pods/s)") {
		t.Errorf("with the record and one-call patch arms not run, steps %q should skip them and compare the arms run", got)
	}
	c.Arms = []ArmRun{run(ArmNoopOneCall, 680), run(ArmGraceguard, 547)}
	if got := patchSteps(c); got != "" {
		t.Errorf("two arms make no steps, got %q", got)
	}
}

// Each ratio to a native policy is stated with the policy and the Pods it
// was measured on, and says so when the pair did not compare the same work.
func TestPolicyRatiosNameThePolicyAndThePods(t *testing.T) {
	arm := func(name string, rate, p99 float64, rounds ...float64) ArmRun {
		return ArmRun{Arm: name, Pods: 1000, Mutated: 1000, WantMutated: true, PodsPerSec: rate, RoundPodsPerSec: rounds, Latency: Percentile{P50: p99 / 3, P99: p99}}
	}
	c := &Creation{Rounds: 2, PodsPerRound: 500, Clients: 16,
		NativePolicy:      "the same (routing=5s work=40s cleanup=2s margin=3s grace=50s; a 5s preStop sleep on each of 3 containers, a readiness probe on app)",
		OneMutationPolicy: "the same (routing=5s work=40s cleanup=2s margin=3s grace=50s; a 5s preStop sleep on each of 3 containers, no readiness probe added)",
		Arms: []ArmRun{
			arm(ArmNone, 800, 40, 780, 820), arm(ArmNoopOneCall, 600, 60, 590, 610),
			arm(ArmNativePolicy, 225, 300, 200, 250), arm(ArmNativeOneMutation, 500, 155, 480, 520),
			arm(ArmGraceguard, 547, 100, 540, 554), arm(ArmGraceguardNoProbe, 550, 98, 540, 560),
		}}
	c.Arms[0].Mutated, c.Arms[1].Mutated = 0, 0
	r := &Results{Machine: Machine{Host: proc.Host{NProc: 2}}, Creation: c}
	md := r.Markdown()
	if s := r.Summary(); !strings.Contains(s, "2.43× the two-mutation policy's rate") || !strings.Contains(s, "1.10× the one-mutation policy's rate") {
		t.Errorf("the terminal summary lacks the ratios to the native policies:\n%s", s)
	}
	for _, want := range []string{
		"**graceguard beside the native policies**, each ratio with the policy and the Pods it was measured on: as its chart installs it, graceguard creates Pods at 2.43× the two-mutation policy's rate on Pods with a readiness annotation " +
			"(graceguard 547 vs native-policy 225 Pods/s, p99 100 vs 300 ms; rounds 2.22×–2.70×); " +
			"and 1.10× the one-mutation policy's rate on Pods without one (graceguard-no-probe-pods 550 vs native-one-mutation 500 Pods/s, p99 98.0 vs 155 ms; rounds 1.08×–1.12×).",
		"The one-mutation policy's Pods and graceguard's, compared on a dry run of the typical Pod without `graceguard.io/readiness-path`: the same (",
		"| native-one-mutation | 500 |", "| graceguard-no-probe-pods | 550 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks %q:\n%s", want, md)
		}
	}

	c.OneMutationPolicy = "differ: app readinessProbe differs"
	c.Arms[5].Errors, c.Arms[5].Mutated = 3, 997
	got := vsPolicies(c)
	for _, want := range []string{"1.10× the one-mutation policy's rate on Pods without one",
		"but graceguard-no-probe-pods had 3 errors and 997 of 1000 Pods with the record; the two arms did not make the same Pod of it"} {
		if !strings.Contains(got, want) {
			t.Errorf("with the one-mutation pair flawed, the sentence %q does not say %q", got, want)
		}
	}
	if strings.Contains(got, "policy's rate on Pods with a readiness annotation (graceguard 547 vs native-policy 225 Pods/s, p99 100 vs 300 ms; rounds 2.22×–2.70×), but") {
		t.Errorf("the two-mutation pair is flawed in %q, though it is not", got)
	}

	// A run without the one-mutation pair (before it, or -arms leaving it
	// out) renders the page it rendered before: no sentence.
	c.Arms = c.Arms[:3]
	c.Arms = append(c.Arms, arm(ArmGraceguard, 547, 100, 540, 554))
	c.OneMutationPolicy = ""
	if md := (&Results{Machine: Machine{Host: proc.Host{NProc: 2}}, Creation: c}).Markdown(); strings.Contains(md, "beside the native policies") || strings.Contains(md, "one-mutation") {
		t.Errorf("a run without the one-mutation pair mentions it:\n%s", md)
	}
}
