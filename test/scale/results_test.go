package scale

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/graceguard/graceguard/test/harness/promscrape"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }

// Quantiles of the API server's histograms read as histogram_quantile
// reads them: interpolated inside the bucket, and only a lower bound past
// the last finite one.
func TestHistogramQuantileInterpolatesInsideTheBucket(t *testing.T) {
	h := Histogram{Count: 100, Buckets: []Bucket{{Le: 0.025, Count: 90}, {Le: 0.005, Count: 10}, {Le: 0.1, Count: 100}}}
	for _, tc := range []struct {
		q     float64
		want  float64
		above bool
	}{
		{0.05, 0.0025, false}, // half of the first bucket, from 0
		{0.5, 0.015, false},   // 5 ms + 20 ms × 40/80
		{0.99, 0.0925, false}, // 25 ms + 75 ms × 9/10
		{1, 0.1, false},
	} {
		if got, above := h.Quantile(tc.q); !near(got, tc.want) || above != tc.above {
			t.Errorf("q%g = %g (above %v), want %g (above %v)", tc.q, got, above, tc.want, tc.above)
		}
	}
	h.Count = 110 // ten observations in +Inf
	if got, above := h.Quantile(0.99); got != 0.1 || !above {
		t.Errorf("q0.99 with 10%% beyond the last bucket = %g (above %v), want > 0.1", got, above)
	}
	if got, above := (Histogram{}).Quantile(0.5); got != 0 || above {
		t.Errorf("empty histogram: %g (above %v), want 0", got, above)
	}
}

// What happened between two scrapes is the later minus the earlier,
// bucket by bucket.
func TestHistogramSubIsTheObservationsBetweenTwoScrapes(t *testing.T) {
	before := Histogram{Count: 10, Sum: 1, Buckets: []Bucket{{Le: 0.005, Count: 4}, {Le: 0.025, Count: 10}}}
	after := Histogram{Count: 30, Sum: 1.5, Buckets: []Bucket{{Le: 0.005, Count: 4}, {Le: 0.025, Count: 28}}}
	d := after.Sub(before)
	if d.Count != 20 || !near(d.Sum, 0.5) || d.Buckets[0].Count != 0 || d.Buckets[1].Count != 18 {
		t.Errorf("Sub = %+v, want 20 observations, sum 0.5, buckets 0 and 18", d)
	}
	if got, _ := d.Quantile(0.5); got <= 0.005 {
		t.Errorf("the median of the later observations is %g, want above 5 ms: none were below", got)
	}
}

const apiserverMetrics = `# TYPE apiserver_request_total counter
apiserver_request_total{code="201",resource="pods",subresource="",verb="POST"} 120
apiserver_request_total{code="201",resource="pods",subresource="binding",verb="POST"} 118
apiserver_request_total{code="201",resource="shutdownreports",subresource="",verb="POST"} 3
apiserver_request_total{code="200",resource="shutdownreports",subresource="status",verb="PUT"} 5
# TYPE apiserver_admission_webhook_admission_duration_seconds histogram
apiserver_admission_webhook_admission_duration_seconds_bucket{name="mutate-pods.graceguard.io",operation="CREATE",rejected="false",type="admit",le="0.005"} 2
apiserver_admission_webhook_admission_duration_seconds_bucket{name="mutate-pods.graceguard.io",operation="CREATE",rejected="false",type="admit",le="0.025"} 8
apiserver_admission_webhook_admission_duration_seconds_bucket{name="mutate-pods.graceguard.io",operation="CREATE",rejected="false",type="admit",le="+Inf"} 10
apiserver_admission_webhook_admission_duration_seconds_sum{name="mutate-pods.graceguard.io",operation="CREATE",rejected="false",type="admit"} 0.2
apiserver_admission_webhook_admission_duration_seconds_count{name="mutate-pods.graceguard.io",operation="CREATE",rejected="false",type="admit"} 10
apiserver_admission_webhook_admission_duration_seconds_bucket{name="mutate-pods.graceguard.io",operation="UPDATE",rejected="false",type="admit",le="0.005"} 1
apiserver_admission_webhook_admission_duration_seconds_bucket{name="mutate-pods.graceguard.io",operation="UPDATE",rejected="false",type="admit",le="0.025"} 1
apiserver_admission_webhook_admission_duration_seconds_bucket{name="mutate-pods.graceguard.io",operation="UPDATE",rejected="false",type="admit",le="+Inf"} 1
apiserver_admission_webhook_admission_duration_seconds_sum{name="mutate-pods.graceguard.io",operation="UPDATE",rejected="false",type="admit"} 0.001
apiserver_admission_webhook_admission_duration_seconds_count{name="mutate-pods.graceguard.io",operation="UPDATE",rejected="false",type="admit"} 1
# TYPE graceguard_admission_decisions_total counter
graceguard_admission_decisions_total{decision="mutated",reason="ok",webhook="mutate-pod"} 9
graceguard_admission_decisions_total{decision="error",reason="overloaded",webhook="mutate-pod"} 2
graceguard_admission_decisions_total{decision="allowed",reason="ok",webhook="validate-workloads"} 4
`

// Sums select series by exact label values (an empty subresource is not
// the binding subresource), histograms add up across series, and by
// groups by the labels named.
func TestExpositionSelectsSeriesByExactLabels(t *testing.T) {
	f, err := promscrape.Parse([]byte(apiserverMetrics))
	if err != nil {
		t.Fatal(err)
	}
	e := exposition(f)
	if got := e.sum("apiserver_request_total", map[string]string{"verb": "POST", "resource": "pods", "subresource": "", "code": "201"}); got != 120 {
		t.Errorf("Pods created = %g, want 120 (not the 118 bindings)", got)
	}
	if got := e.sum("apiserver_request_total", map[string]string{"resource": "shutdownreports"}); got != 8 {
		t.Errorf("report writes = %g, want 8", got)
	}
	h := e.histogram("apiserver_admission_webhook_admission_duration_seconds", map[string]string{"name": "mutate-pods.graceguard.io", "type": "admit"})
	if h.Count != 11 || !near(h.Sum, 0.201) || !slices.Equal(h.Buckets, []Bucket{{0.005, 3}, {0.025, 9}}) {
		t.Errorf("histogram = %+v, want both operations added: 11 calls, buckets 3 and 9", h)
	}
	got := e.by("graceguard_admission_decisions_total", nil, "webhook", "decision")
	if got["mutate-pod/mutated"] != 9 || got["mutate-pod/error"] != 2 || got["validate-workloads/allowed"] != 4 || len(got) != 3 {
		t.Errorf("by webhook/decision = %v", got)
	}
	if got := e.sum("no_such_metric", nil); got != 0 {
		t.Errorf("an absent family sums to %g, want 0", got)
	}
}

// A run whose figures are round numbers, to check the extrapolation by
// hand.
func roundRun() *Results {
	return &Results{
		Memory: []MemoryStep{
			{Name: StepStarted, Namespaces: 1, TreatedPods: 0, Webhook: ProcMem{RSSMiB: 30, HeapLiveMiB: 6}, Observer: ProcMem{RSSMiB: 32, HeapLiveMiB: 7}},
			// 1,024 namespaces more: +2 MiB heap for the webhook (2 KiB each), +1 MiB for the observer.
			{Name: StepNamespaces, Namespaces: 1025, TreatedPods: 0, Webhook: ProcMem{RSSMiB: 33, HeapLiveMiB: 8}, Observer: ProcMem{RSSMiB: 34, HeapLiveMiB: 8}},
			// 2,048 treated Pods: +2 MiB heap for the observer (1 KiB each), nothing for the webhook.
			{Name: StepPods, Namespaces: 1025, TreatedPods: 2048, Webhook: ProcMem{RSSMiB: 33, HeapLiveMiB: 8}, Observer: ProcMem{RSSMiB: 38, HeapLiveMiB: 10}},
		},
		Admission: Admission{Decisions: map[string]float64{"mutate-pod/mutated": 1000, "validate-pod/allowed": 400, "validate-workloads/allowed": 100},
			WebhookCPUSeconds: 3, PodsCreated: 1200},
		Shutdowns: &Shutdowns{Shutdowns: 300, Recorded: 300, ObserverCPUSeconds: 1.5, ReportWrites: 60},
	}
}

// The envelope's figures are the start plus the measured costs times the
// units, and the per-review and per-shutdown rates times their number.
func TestExtrapolateIsLinearInTheMeasuredCosts(t *testing.T) {
	x := roundRun().Extrapolate(Envelope{Nodes: 5000, Pods: 150001, Namespaces: 10001, RestartFraction: 0.1})
	if s := x.WebhookPerNamespace; s == nil || !near(s.HeapKiB, 2) || !near(s.RSSKiB, 3) || s.Units != 1024 {
		t.Errorf("webhook per namespace = %+v, want 2 KiB heap, 3 KiB RSS over 1,024", s)
	}
	if s := x.ObserverPerPod; s == nil || !near(s.HeapKiB, 1) || !near(s.RSSKiB, 2) {
		t.Errorf("observer per Pod = %+v, want 1 KiB heap, 2 KiB RSS", s)
	}
	// Webhook: 6 MiB + 2 KiB × 10,000 more namespaces.
	if w := x.Webhook; w == nil || !near(w.HeapLiveMiB, 6+2*10000.0/1024) || !near(w.RSSMiB, 30+3*10000.0/1024) {
		t.Errorf("webhook at the envelope = %+v", w)
	}
	// Observer: 7 MiB + 1 KiB × 10,000 namespaces + 1 KiB × 150,001 Pods.
	if o := x.Observer; o == nil || !near(o.HeapLiveMiB, 7+1*10000.0/1024+1*150001.0/1024) {
		t.Errorf("observer at the envelope = %+v", o)
	}
	// 1,500 reviews for 1,000 Pods at 2 ms each.
	if !near(x.ReviewsPerPod, 1.5) || !near(x.AdmitCPUSeconds, 150001*1.5*0.002) {
		t.Errorf("reviews per Pod %g, CPU to admit %g; want 1.5 and %g", x.ReviewsPerPod, x.AdmitCPUSeconds, 150001*1.5*0.002)
	}
	// A tenth of 150,001 Pods: 15,000 shutdowns at 5 ms and 0.2 writes each.
	if x.RestartShutdowns != 15000 || !near(x.RestartObserverCPUSeconds, 75) || !near(x.RestartReportWrites, 3000) {
		t.Errorf("restart: %d shutdowns, %g CPU-seconds, %g writes; want 15,000, 75 and 3,000", x.RestartShutdowns, x.RestartObserverCPUSeconds, x.RestartReportWrites)
	}
}

// A run that did not get as far as a step projects nothing it would need.
func TestExtrapolateLeavesOutWhatWasNotMeasured(t *testing.T) {
	r := roundRun()
	r.Memory = r.Memory[:2]
	r.Shutdowns = nil
	x := r.Extrapolate(Kubernetes)
	if x.ObserverPerPod != nil || x.Observer != nil {
		t.Errorf("no Pods step, yet per Pod %+v and a projection %+v", x.ObserverPerPod, x.Observer)
	}
	if x.Webhook == nil {
		t.Error("the webhook's projection needs only the namespaces step, and is missing")
	}
	if x.RestartObserverCPUSeconds != 0 || x.RestartReportWrites != 0 {
		t.Errorf("no churn, yet restart figures %g, %g", x.RestartObserverCPUSeconds, x.RestartReportWrites)
	}
	if x := (&Results{}).Extrapolate(Kubernetes); x.Webhook != nil || x.WebhookPerNamespace != nil || x.AdmitCPUSeconds != 0 {
		t.Errorf("an empty run projects %+v", x)
	}
}

func TestObservedOnceNeedsEveryShutdownAndKillExactly(t *testing.T) {
	for _, tc := range []struct {
		s    Shutdowns
		want bool
	}{
		{Shutdowns{Shutdowns: 10, Kills: 2, Recorded: 10, RecordedKills: 2}, true},
		{Shutdowns{Shutdowns: 10, Kills: 2, Recorded: 9, RecordedKills: 2}, false},
		{Shutdowns{Shutdowns: 10, Kills: 2, Recorded: 11, RecordedKills: 2}, false}, // one recorded twice
		{Shutdowns{Shutdowns: 10, Kills: 2, Recorded: 10, RecordedKills: 1}, false},
		{Shutdowns{}, false}, // nothing shut down proves nothing
	} {
		if got := tc.s.ObservedOnce(); got != tc.want {
			t.Errorf("%+v: ObservedOnce %v, want %v", tc.s, got, tc.want)
		}
	}
}

// Every preset is valid, and bad sizes are refused with the option, its
// value and what is accepted.
func TestOptionsValidate(t *testing.T) {
	for name, o := range Scenarios {
		if err := o.Validate(); err != nil {
			t.Errorf("scenario %s: %v", name, err)
		}
	}
	o := Scenarios["smoke"]
	o.Nodes, o.RestartFraction, o.MaxWork, o.SlowDeployments = 2, 1.5, "five", 9
	err := o.Validate()
	for _, want := range []string{"nodes: 2: 2 nodes of 110 Pods hold 220 Pods", "restart-fraction: 1.5: must be 0 to 1",
		`max-work: "five": must be a Go duration`, "slow-deployments: 9: must be 0 to deployments-per-namespace (4)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to say %q", err, want)
		}
	}
}

// The churn restarts its share of the Deployments, spread over them so
// that slow ones (the first of each namespace) and others are among them.
func TestRestartSetSpreadsOverTheDeployments(t *testing.T) {
	o := Scenarios["smoke"]
	got := restartSet(o)
	if len(got) != o.Restarted() || o.Restarted() != 4 {
		t.Fatalf("restartSet = %v, want %d Deployments", got, o.Restarted())
	}
	slow, other := 0, 0
	for _, g := range got {
		if g%o.DeploymentsPerNamespace < o.SlowDeployments {
			slow++
		} else {
			other++
		}
	}
	if slow == 0 || other == 0 {
		t.Errorf("restartSet = %v: %d slow, %d others; want both", got, slow, other)
	}
}

// The binaries run with the chart's flags, but reached the harness's way.
func TestChartArgsKeepTheChartsSettingsNotItsConnections(t *testing.T) {
	got := chartArgs([]string{"--port=9443", "--cert-dir=/tmp/certs", "--cert-mode=self-managed", "--max-concurrent-reviews=64",
		"observe", "--flush-interval=10s", "--metrics-bind-address=:8080", "--webhook-timeout=5s"})
	want := []string{"--max-concurrent-reviews=64", "observe", "--flush-interval=10s", "--webhook-timeout=5s"}
	if !slices.Equal(got, want) {
		t.Errorf("chartArgs = %v, want %v", got, want)
	}
}

func TestCountSeparatesThousands(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 150000: "150,000", -1234567: "-1,234,567", 2.5: "2.50"} {
		if got := count(v); got != want {
			t.Errorf("count(%g) = %q, want %q", v, got, want)
		}
	}
}

func TestPercentilesAreTheNearestRank(t *testing.T) {
	got := percentiles([]float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1})
	if want := (Percentiles{P50: 5, P90: 9, P99: 10, Max: 10, Mean: 5.5}); got != want {
		t.Errorf("percentiles = %+v, want %+v", got, want)
	}
	if got := percentiles(nil); got != (Percentiles{}) {
		t.Errorf("percentiles(nil) = %+v, want zero", got)
	}
}

// Whether a process fits the chart's limit at the envelope is judged on
// what it would need: its live heap there plus what it held beyond its
// live heap at the start.
func TestTheEnvelopeVerdictIsOnTheLiveHeapAndTheOverhead(t *testing.T) {
	r := roundRun()
	// Webhook: 6 + 2 KiB × 9,999 namespaces ≈ 25.5 MiB live, + 24 MiB beyond it at the start ≈ 49.5 MiB.
	for limit, want := range map[float64]string{128: "within the chart's limit of 128 MiB (39%)", 40: "**over** the chart's limit of 40.0 MiB (124%)"} {
		r.Chart.WebhookMemoryLimitMiB = limit
		if got := r.extrapolationPage(Kubernetes).Table.String(); !strings.Contains(got, "needs about 49.5 MiB: "+want) {
			t.Errorf("limit %g MiB: the table says\n%s\nwant it to say %q", limit, got, want)
		}
	}
}

// A failover's loss is the shutdowns the reports lack; more recorded than
// shut down is not a negative loss (the run flags it as recorded twice).
func TestAFailoverLosesWhatTheReportsLack(t *testing.T) {
	for _, c := range []struct {
		f        Failover
		lost     int
		lostPerc float64
	}{
		{Failover{Shutdowns: 9, Recorded: 7}, 2, 100 * 2.0 / 9},
		{Failover{Shutdowns: 9, Recorded: 9}, 0, 0},
		{Failover{Shutdowns: 9, Recorded: 11}, 0, 0},
		{Failover{}, 0, 0},
	} {
		if got := c.f.Lost(); got != c.lost {
			t.Errorf("%+v: lost %d, want %d", c.f, got, c.lost)
		}
		if got := c.f.LostPercent(); got != c.lostPerc {
			t.Errorf("%+v: lost %.3f%%, want %.3f%%", c.f, got, c.lostPerc)
		}
	}
}
