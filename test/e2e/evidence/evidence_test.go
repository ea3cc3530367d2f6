package evidence

import (
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testdata/run.json is the evidence of a real run (make e2e).

func TestRendersARealRun(t *testing.T) {
	r, err := Read(filepath.Join("testdata", "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	md := Markdown(r, "e2e")
	for _, want := range []string{
		"## Summary", "0. Install with the Helm chart | passed", "## What is real, what stands in",
		"![timeline of the lab and control deletions](e2e/timeline.svg)", "[evidence.json](e2e/evidence.json)",
		"A: graceguard", "B: no graceguard", "must be shorter than terminationGracePeriodSeconds",
		"apiserver_admission_webhook_request_total",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks %q", want)
		}
	}
	// Every number comes from the run: spot-check a few.
	if !strings.Contains(md, "| A: graceguard | `gg-e2e-rollout-a` |") {
		t.Error("no row for arm A")
	}
	svg := TimelineSVG(r)
	for _, want := range []string{"SIGKILL deadline", "sigterm", "work_completed", "request cut", "graceguard: predicted"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the SVG lacks %q", want)
		}
	}
	wellFormed(t, svg)
}

func TestRendersAnEmptyOrFailedRun(t *testing.T) {
	r := &Run{Schema: Schema}
	md := Markdown(r, ".")
	if !strings.Contains(md, "| 1. Pod deleted during an admitted request, graceguard | not run |") || !strings.Contains(md, "**FAILED**") {
		t.Errorf("an empty run renders as\n%s", md)
	}
	if TimelineSVG(r) != "" {
		t.Error("a run without the lab has a timeline")
	}
	r.Lab = &Deletion{Grace: 20}
	r.Lab.Checks.Add("the client gets the completed 200 response", "200 completed", false, "%s", "error (eof)")
	md = Markdown(r, ".")
	if !strings.Contains(md, "| the client gets the completed 200 response | 200 completed | error (eof) | **FAILED** |") {
		t.Errorf("a failed check renders as\n%s", md)
	}
	wellFormed(t, TimelineSVG(r))
}

func TestRenderFilesRoundTrips(t *testing.T) {
	r, err := Read(filepath.Join("testdata", "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := RenderFiles(r, dir, "e2e"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{MDName, "e2e/" + JSONName, "e2e/" + SVGName} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	again, err := Read(filepath.Join(dir, "e2e", JSONName))
	if err != nil {
		t.Fatal(err)
	}
	if Markdown(again, "e2e") != Markdown(r, "e2e") {
		t.Error("the JSON written does not render the same Markdown")
	}
}

func wellFormed(t *testing.T, svg string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(svg))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v", err)
		}
	}
}

func TestRendersTheMeshProxyScenario(t *testing.T) {
	r := &Run{Schema: Schema}
	at := func(s float64) At { v := Secs(s); return &v }
	r.MeshProxy = &MeshProxy{Requests: 4, Request: 15, Arms: []*MeshArm{
		{Name: "A: proxy named istio-proxy (mesh handling)", Budget: "routing=5s work=20s cleanup=2s proxy=5s margin=3s grace=35s", Grace: 35,
			AppPreStop: "sleep 5s", ProxyPreStop: "sleep 27s", Completed: 4, Clients: []string{"200 ok"}, ProxySIGTERM: at(28.5), AppShutdown: at(15.1)},
		{Name: "B: the same proxy named proxy", Grace: 30, AppPreStop: "sleep 5s", ProxyPreStop: "sleep 5s", Cut: 4, Clients: []string{"error (eof): EOF"}, ProxySIGTERM: at(6.9)},
	}}
	r.MeshProxy.Checks.Add("A: every request through the proxy completes", "4 of 4", true, "%d completed", 4)
	md := Markdown(r, ".")
	for _, want := range []string{
		"| 6. A naive proxy sidecar in front of the app | passed |",
		"## 6. A naive proxy sidecar in front of the app",
		"| A: proxy named istio-proxy (mesh handling) | `routing=5s work=20s cleanup=2s proxy=5s margin=3s grace=35s` | 35 | sleep 5s | sleep 27s | 4 / 0 |",
		"A: proxy named istio-proxy (mesh handling): 4 of 4 requests completed, proxy SIGTERM 28.50 s",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the mesh scenario renders without %q:\n%s", want, md)
		}
	}
}

func TestRendersTheNativeSidecarScenario(t *testing.T) {
	r := &Run{Schema: Schema}
	at := func(s float64) At { v := Secs(s); return &v }
	r.Native = &Native{RouterLag: 4, Routing: 8, Rate: 40, Work: 0.05, ClientTimeout: 5, Arms: []*NativeArm{
		{Name: "A: graceguard", Grace: 15, AppPreStop: "sleep 8s", ProxyPreStop: "exec sh -c sleep 8 && exec pilot-agent request --debug-port=15020 POST drain",
			Before: 120, During: 170, RouterDropped: at(4.4), Drain: at(8.9)},
		{Name: "B: opted out", Grace: 15, AppPreStop: "sleep 8s", ProxyPreStop: "exec pilot-agent request --debug-port=15020 POST drain",
			Before: 120, During: 170, Lost: 110, ByKind: map[string]int{"connection_refused": 110}, FirstLost: at(1.3), LastLost: at(4.4),
			RouterDropped: at(4.4), Drain: at(1.2), ProxyRequests: 180, ProxyDrained: 2},
	}}
	r.Native.Checks.Add("B: requests lost during withdrawal", "> 0 lost", true, "%d lost", 110)
	md := Markdown(r, ".")
	for _, want := range []string{
		"| 9. Istio native sidecar: its drain waits for the routing window | passed |",
		"## 9. Istio native sidecar: its drain waits for the routing window",
		"| B: opted out | `none` | 15 | sleep 8s | `exec pilot-agent request --debug-port=15020 POST drain` | 120 / 0 | 170 / 110 | connection_refused 110 (sent 1.30 s to 4.40 s) | 4.40 s | 1.20 s |",
		"B: opted out: the proxy relayed 180 requests, 2 of them answered while draining",
		"B: opted out: 110 of 170 requests lost during withdrawal, drain at 1.20 s",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the native sidecar scenario renders without %q:\n%s", want, md)
		}
	}
}

// testdata/run-tune.json is a real run with scenario 7 (budgets from
// evidence): its rounds, the recommend output and the report table render.
func TestRendersTheTuneScenario(t *testing.T) {
	r, err := Read(filepath.Join("testdata", "run-tune.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Tune == nil || len(r.Tune.Rounds) != 3 {
		t.Fatalf("the run has no scenario 7 with three rounds: %+v", r.Tune)
	}
	md := Markdown(r, "e2e")
	for _, want := range []string{
		"| 7. Budgets from evidence: observe, recommend, apply | passed |",
		"## 7. Budgets from evidence: observe, recommend, apply",
		"| 1. restart, max-work 5s | `routing=5s work=5s cleanup=2s margin=3s grace=15s` |",
		"kubectl graceguard recommend -n gg-e2e-tune",
		"NAME             WORKLOAD     SAMPLES",
		"Warning ShutdownKilled:",
		"| round 3: no failed request | 0 failed | 0 failed of",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks %q", want)
		}
	}
}

// testdata/run-alerts.json is a real run of scenarios 7 and 12 (make e2e,
// focused): the alerts a real Prometheus evaluated, when, and the checks.
func TestRendersTheAlertsScenario(t *testing.T) {
	r, err := Read(filepath.Join("testdata", "run-alerts.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Alerts == nil || len(r.Alerts.Episodes) == 0 || len(r.Alerts.Marks) == 0 {
		t.Fatalf("the run has no scenario 12 with episodes and marks: %+v", r.Alerts)
	}
	md := Markdown(r, "e2e")
	for _, want := range []string{
		"| 12. The chart's alerts in a real Prometheus | " + yes(len(r.Alerts.Checks.Failed()) == 0) + " | ",
		"## 12. The chart's alerts in a real Prometheus",
		"prometheus, version 3.16.0",
		"kube-state-metrics, version v2.19.1",
		"GraceguardNoReadyWebhook for 1m0s",
		"| 12. webhook Deployment scaled to 0 | ",
		"| alert | labels | pending from | firing from | resolved at |",
		"no endpoints available for service \"graceguard\"",
		"| GraceguardNoReadyWebhook fires, after pending for its for: 1m | firing, >= 60 s after pending |",
		"| round 1: GraceguardObservedKills fires for gg-e2e-tune; Prometheus counts the kills the report counts |",
		"| GraceguardObservedKills | namespace=gg-e2e-tune | never | 64.40 s | still active at the end |",
		"| GraceguardNoReadyWebhook | none | 184.40 s | 244.40 s | 259.40 s |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks %q", want)
		}
	}
	// A run from before scenario 12 existed has neither its section nor its row.
	r.Alerts = nil
	if md := Markdown(r, "e2e"); strings.Contains(md, "12. The chart's alerts") {
		t.Errorf("a run without alerts renders scenario 12")
	}
}

// testdata/run-broken-hook.json is a real run of scenario 10 (a broken
// preStop hook): both arms, the kubelet's events and what the observer
// reported render.
func TestRendersTheBrokenHookScenario(t *testing.T) {
	r, err := Read(filepath.Join("testdata", "run-broken-hook.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.BrokenHook == nil || len(r.BrokenHook.Arms) != 2 {
		t.Fatalf("the run has no scenario 10 with two arms: %+v", r.BrokenHook)
	}
	md := Markdown(r, "e2e")
	for _, want := range []string{
		"| 10. A broken preStop hook: one fails, one hangs | passed |",
		"## 10. A broken preStop hook: one fails, one hangs",
		"### a. the hook's binary is missing",
		"### b. the hook hangs",
		"may be missing from a distroless image",
		"Warning FailedPreStopHook: PreStopHook failed",
		"Warning PreStopHookFailed:",
		"$ kubectl graceguard recommend -n gg-e2e-broken-hook",
		"hook hung   1 of 1",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks %q", want)
		}
	}
}

// The hostile scenario's summary joins the parts it has with "; ": with
// no attacker's report, the line starts with the ordinary creates.
func TestHostileSummaryWithoutTheAttackersReport(t *testing.T) {
	r := &Run{Schema: Schema, Hostile: &Hostile{Steady: &Steady{Sent: 10, Created: 9, P50: 0.0125, P99: 0.5}}}
	md := Markdown(r, ".")
	want := "| 8. A hostile tenant against the webhook | **FAILED** | ordinary creates: 9 of 10 admitted and mutated, p50 / p99 12 / 500 ms |"
	if !strings.Contains(md, want) {
		t.Errorf("the summary lacks %q:\n%s", want, md)
	}
}

func TestRendersTheQueueScenario(t *testing.T) {
	at := func(s float64) At { v := Secs(s); return &v }
	code := func(c int32) *int32 { return &c }
	r := &Run{Schema: Schema, Queue: &Queue{Namespace: "gg-e2e-queue", Server: "queue", Visibility: 20, Messages: 8, Batch: 4, Work: 3, AskedGrace: 3, DeletedInto: 2,
		Arms: []*QueueArm{
			{Name: "A: graceguard", Queue: "a", Pod: "consumer-a-1", Budget: "routing=0s work=12s cleanup=2s margin=3s grace=17s", Grace: 17, PreStop: "none",
				SIGTERM: at(1.2), InHand: 4, Unfinished: 3, LastAck: at(9.1), ShutdownComplete: at(9.1), ExitCode: code(0), Reason: "Completed", PodGone: at(10),
				LogOrder: []string{"leased m1 m2 m3 m4", "sigterm in_hand=4 unfinished=3", "acked 4", "shutdown_complete"}, Drained: at(15.3),
				Ledger: QueueLedger{Published: 8, Deliveries: 8, Acked: 8, DoneOnce: 8},
				Deliveries: []QueueDelivery{
					{ID: "m1", N: 1, Consumer: "consumer-a-1", Leased: at(-3.1), Started: at(-3.1), Done: at(-0.1), Acked: at(9.1)},
					{ID: "m5", N: 1, Consumer: "consumer-a-2", Leased: at(2.5), Started: at(2.5), Done: at(5.5), Acked: at(14.5)},
				}},
			{Name: "B: opted out", Queue: "b", Pod: "consumer-b-1", Grace: 3, PreStop: "none", SIGTERM: at(0.9), InHand: 4, Unfinished: 3,
				ExitCode: code(137), Reason: "Error", PodGone: at(4.5), Drained: at(30.2),
				Ledger: QueueLedger{Published: 8, Deliveries: 12, Redeliveries: 4, Expired: 4, Acked: 8, DoneOnce: 6, DoneTwice: 2, WorkCut: 1},
				Deliveries: []QueueDelivery{
					{ID: "m1", N: 1, Consumer: "consumer-b-1", Leased: at(-3.1), Started: at(-3.1), Done: at(-0.1), Expired: at(16.9)},
				}},
		}}}
	r.Queue.Checks.Add("A: every message done exactly once, none lost", "8 done once", true, "%d done once", 8)
	md := Markdown(r, ".")
	for _, want := range []string{
		"| 11. A queue consumer deleted mid-batch | passed | A: graceguard: 8 of 8 messages done once, 0 done twice, 0 cut, 0 redelivered, 0 lost; consumer exit code 0; " +
			"B: opted out: 6 of 8 messages done once, 2 done twice, 1 cut, 4 redelivered, 0 lost; consumer exit code 137 |",
		"## 11. A queue consumer deleted mid-batch",
		"Each arm's Pod is deleted 2.0 s into\nthe work of the second message of its first batch",
		"| A: graceguard | `routing=0s work=12s cleanup=2s margin=3s grace=17s` | 17 | none | 1.20 s | 4 / 3 | 0 | 9.10 s | exit code 0 (Completed); shutdown_complete at 9.10 s | 10.00 s | 15.30 s |",
		"| B: opted out | `none` | 3 | none | 0.90 s | 4 / 3 | 0 | not observed | exit code 137 (Error); no shutdown_complete | 4.50 s | 30.20 s |",
		"| B: opted out | 8 | 12 | 4 | 4 | 8 | 6 | 2 | 1 | 0 | 0 |",
		"| m1 | 1 | `consumer-a-1` (deleted) | -3.10 s | -3.10 s | -0.10 s | 9.10 s | never |",
		"| m5 | 1 | `consumer-a-2` | 2.50 s | 2.50 s | 5.50 s | 14.50 s | never |",
		"| m1 | 1 | `consumer-b-1` (deleted) | -3.10 s | -3.10 s | -0.10 s | never | 16.90 s |",
		"The deleted consumer's log: leased m1 m2 m3 m4 → sigterm in_hand=4 unfinished=3 → acked 4 → shutdown_complete.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the queue scenario renders without %q:\n%s", want, md)
		}
	}
}

// testdata/run-queue.json is a real run of scenario 11 (make e2e, focused
// on it): both arms, their ledgers and every delivery render.
func TestRendersARealRunOfTheQueueScenario(t *testing.T) {
	r, err := Read(filepath.Join("testdata", "run-queue.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Queue == nil || len(r.Queue.Arms) != 2 || len(r.Queue.Arms[1].Deliveries) != 12 {
		t.Fatalf("the run has no scenario 11 with two arms and arm B's 12 deliveries: %+v", r.Queue)
	}
	md := Markdown(r, "e2e")
	for _, want := range []string{
		"| 11. A queue consumer deleted mid-batch | passed | A: graceguard, max-work = the batch's work: 8 of 8 messages done once, 0 done twice, 0 cut, 0 redelivered, 0 lost; consumer exit code 0;",
		"| B: opted out, grace shorter than the batch | 8 | 12 | 4 | 4 | 8 | 6 | 2 | 1 | 0 | 0 |",
		"`routing=0s work=16s cleanup=2s margin=3s grace=21s`",
		"exit code 137 (Error); no shutdown_complete",
		"### B: opted out, grace shorter than the batch",
		"(deleted) | -6.00 s | -2.00 s | 2.00 s | never | 13.99 s |",
		"`registry.local/queue:e2e` (sha256:",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks %q", want)
		}
	}
}

func TestRendersTheIngressScenario(t *testing.T) {
	at := func(s float64) At { v := Secs(s); return &v }
	code := func(c int32) *int32 { return &c }
	r := &Run{Schema: Schema, Ingress: &Ingress{Traefik: "v3.6.12", Binary: "github.com/traefik/traefik/v3@v3.6.12 built by hack/traefik.sh with go1.26.8",
		Provider: "kubernetesIngress on namespaces a and b", Entrypoint: "127.0.0.1:40123", Throttle: 2,
		Withdrawal: &Withdrawal{Namespace: "gg-e2e-ingress-a", Workload: "withdraw", Replicas: 3, Rate: 90, PreStop: "sleep 10s", Quiet: 3,
			Rounds: []WithdrawalRound{{Pod: "withdraw-1", Routed: 40, LastRouted: at(1.234)}, {Pod: "withdraw-2", Routed: 0, LastRouted: at(0)}},
			Min:    0, Median: 0, P90: 1.234, Max: 1.234, Sent: 2000, Profile: "traefik", ProfileRouting: 3, ProfileMargin: 1},
		Rollout: &Rollout{Rate: 50, Work: 0.1, ClientTimeout: 5, Replicas: 3, Strategy: "RollingUpdate maxSurge=1 maxUnavailable=0", Arms: []*Arm{
			{Name: "A: graceguard, routing-profile traefik", Namespace: "gg-e2e-ingress-a", OptedIn: true, PreStop: "sleep 3s", Grace: 10, Sent: 900, Succeeded: 900},
			{Name: "B: no graceguard", Namespace: "gg-e2e-ingress-b", PreStop: "none", Grace: 30, Sent: 800, Succeeded: 790, Failed: 10, Rejected: 4,
				ByKind: map[string]int{"rejected_503": 4, "http_502": 6}, PerEndpoint: []EndpointFailures{{Endpoint: "traefik", Failed: 6, First: 2.5, Last: 3}}},
		}},
		Held: []*HeldRequest{
			{Name: "A: graceguard", Namespace: "gg-e2e-ingress-a", OptedIn: true, Pod: "held", Budget: "routing=3s work=10s cleanup=2s margin=3s grace=18s", Grace: 18,
				PreStop: "sleep 3s", Request: 10, Client: `200 {"completed":true,"id":2,"pod":"held"}`, ClientDone: at(9.5), SIGTERM: at(3.6),
				Late: `503 {"pod":"held","reason":"draining"}`, LateAt: at(3.7), ShutdownComplete: at(9.6), ExitCode: code(0)},
			{Name: "B: no graceguard, grace 3", Namespace: "gg-e2e-ingress-b", Pod: "held", Grace: 3, PreStop: "none", Request: 10,
				Client: "502 Bad Gateway", ClientDone: at(4.9), SIGTERM: at(1.6), ExitCode: code(137)},
		},
	}}
	r.Ingress.Checks.Add("withdrawal: measured over repeated deletions", ">= 10 deletions", true, "%d deletions", 12)
	md := Markdown(r, ".")
	for _, want := range []string{
		"| 13. Through a real ingress: Traefik | passed | Traefik v3.6.12; withdrawal over 2 deletions: min 0.000 s, median 0.000 s, p90 1.234 s, max 1.234 s; " +
			"rollout: A: graceguard, routing-profile traefik: 0 of 900 failed; B: no graceguard: 10 of 800 failed; " +
			"held request, A: graceguard: 200 completed at 9.50 s; held request, B: no graceguard, grace 3: 502 at 4.90 s |",
		"## 13. Through a real ingress: Traefik (seed test 10)",
		"| 1 | `withdraw-1` | 40 | 1.234 s | 0 |",
		"| 2 | `withdraw-2` | 0 | 0.000 s | 0 |",
		"max **1.234 s**; 0 of 2000 requests failed during the measurement.",
		"routing profile ships **3.0 s**",
		"| B: no graceguard | `gg-e2e-ingress-b` | preStop none, grace 30 | 800 | 790 | 10 | 4 | 0 | http_502 6, rejected_503 4 |",
		"| traefik | 6 | 2.50 s | 3.00 s | 0.50 s |",
		"| A: graceguard | `gg-e2e-ingress-a/held` | `routing=3s work=10s cleanup=2s margin=3s grace=18s` | 18 | sleep 3s | 10 s | 3.60 s | 9.50 s: 200 {\"completed\":true,\"id\":2,\"pod\":\"held\"} | 3.70 s: 503 {\"pod\":\"held\",\"reason\":\"draining\"} | 9.60 s | 0 |",
		"| B: no graceguard, grace 3 | `gg-e2e-ingress-b/held` | `none` | 3 | none | 10 s | 1.60 s | 4.90 s: 502 Bad Gateway | not sent | not observed | 137 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the ingress scenario renders without %q:\n%s", want, md)
		}
	}
}

// testdata/run-ingress.json is a real run of scenario 13 (make e2e,
// focused on it, with the traefik profile at 4s): the withdrawal rounds,
// both rollout arms and both held requests render.
func TestRendersARealRunOfTheIngressScenario(t *testing.T) {
	r, err := Read(filepath.Join("testdata", "run-ingress.json"))
	if err != nil {
		t.Fatal(err)
	}
	in := r.Ingress
	if in == nil || in.Withdrawal == nil || len(in.Withdrawal.Rounds) != 12 || in.Rollout == nil || len(in.Rollout.Arms) != 2 || len(in.Held) != 2 {
		t.Fatalf("the run has no scenario 13 with 12 withdrawal rounds, two rollout arms and two held requests: %+v", in)
	}
	md := Markdown(r, "e2e")
	for _, want := range []string{
		"| 13. Through a real ingress: Traefik | passed | Traefik v3.6.12; withdrawal over 12 deletions: min 0.192 s, median 0.927 s, p90 1.695 s, max 1.966 s; " +
			"rollout: A: graceguard, routing-profile traefik: 0 of 763 failed; B: no graceguard: 71 of 703 failed; " +
			"held request, A: graceguard, routing-profile traefik: 200 completed at 9.95 s; held request, B: no graceguard, grace 3: 502 at 4.30 s |",
		"| 6 | `withdraw-949d45548-xhcmw` | 60 | 1.966 s | 0 |",
		"max **1.966 s**; 0 of 4454 requests failed during the measurement.",
		"routing profile ships **4.0 s**",
		"| A: graceguard, routing-profile traefik | `gg-e2e-ingress-a` | preStop sleep 4s, grace 30; `routing=4s work=2s cleanup=2s margin=3s grace=30s` | 763 | 763 | 0 |",
		"| B: no graceguard | `gg-e2e-ingress-b` | preStop none, grace 30 | 703 | 632 | 71 | 2 | 48 | http_502 21, rejected_503 2, timeout 48 |",
		"| B: no graceguard, grace 3 | `gg-e2e-ingress-b/held` | `none` | 3 | none | 10 s | 1.26 s | 4.30 s: 502 Bad Gateway |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks %q", want)
		}
	}
}

func TestRendersTheDrainScenario(t *testing.T) {
	r := &Run{Schema: Schema, Drain: &Drain{Node: "gg-node2", To: "gg-node", Taint: "graceguard.io/second-node:NoSchedule", NodeUp: 2.5,
		PDB: "maxUnavailable: 1", Command: "kubectl drain gg-node2 --ignore-daemonsets", Replicas: 3, RouterLag: 2, Rate: 50, Work: 0.1, ClientTimeout: 5,
		Arms: []*DrainArm{
			{Arm: Arm{Name: "A: graceguard", Namespace: "gg-e2e-drain-a", OptedIn: true, PreStop: "sleep 5s", Grace: 30, Budget: "routing=5s work=2s cleanup=2s margin=3s grace=30s",
				Sent: 1500, Succeeded: 1500, Rollout: 31.5},
				Before: []PodNode{{Pod: "web-1", Node: "gg-node2"}}, After: []PodNode{{Pod: "web-4", Node: "gg-node"}},
				DrainTime: 28.25, Evicted: []string{"gg-e2e-drain-a/web-1"}, Refused: 4, Floor: 2, Changes: 17,
				Log: []DrainLine{{At: 0.1, Line: "node/gg-node2 cordoned"}, {At: 5.2, Line: "pod/web-1 evicted"}}},
			{Arm: Arm{Name: "B: no graceguard", Namespace: "gg-e2e-drain-b", PreStop: "none", Grace: 30, Sent: 900, Succeeded: 880, Failed: 20,
				ByKind: map[string]int{"connection_refused": 20}, Rollout: 22},
				DrainTime: 20, ExitCode: 1, Refused: 3, Floor: 2},
		}}}
	r.Drain.Checks.Add("arm A (graceguard): no failed request through the drain", "0 failed", true, "0 failed of 1500")
	md := Markdown(r, ".")
	for _, want := range []string{
		"| 14. A node drain under load, with a PodDisruptionBudget | passed | A: graceguard: 0 of 1500 failed, ready floor 2 of 3, 4 evictions refused by the budget; " +
			"B: no graceguard: 20 of 900 failed, ready floor 2 of 3, 3 evictions refused by the budget |",
		"A second node, `gg-node2`, joins for this scenario (Ready in 2.5 s)",
		"PodDisruptionBudget `maxUnavailable: 1`. Then `kubectl drain gg-node2 --ignore-daemonsets`",
		"| A: graceguard | preStop sleep 5s, grace 30; `routing=5s work=2s cleanup=2s margin=3s grace=30s` | 1500 | 1500 | 0 | none | 4 | 2 of 3 | 28.2 s, exit 0 | 31.5 s |",
		"| B: no graceguard | preStop none, grace 30 | 900 | 880 | 20 | connection_refused 20 | 3 | 2 of 3 | 20.0 s, exit 1 | 22.0 s |",
		"  5.20  pod/web-1 evicted\n",
		"Before: `web-1` on `gg-node2`. After: `web-4` on `gg-node`.",
		"A node-pressure eviction by the kubelet does\nnot: it kills with a grace of 1 s",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the drain scenario renders without %q:\n%s", want, md)
		}
	}
}

// testdata/run-drain.json is a real run of scenario 14 (make e2e, focused
// on it): both arms drained off the second node render with their kubectl
// output.
func TestRendersARealRunOfTheDrainScenario(t *testing.T) {
	r, err := Read(filepath.Join("testdata", "run-drain.json"))
	if err != nil {
		t.Fatal(err)
	}
	d := r.Drain
	if d == nil || len(d.Arms) != 2 || len(d.Arms[0].Log) == 0 || len(d.Arms[1].After) != 3 {
		t.Fatalf("the run has no scenario 14 with two drained arms: %+v", d)
	}
	md := Markdown(r, "e2e")
	for _, want := range []string{
		"| 14. A node drain under load, with a PodDisruptionBudget | passed | A: graceguard: 0 of 1195 failed, ready floor 2 of 3, 3 evictions refused by the budget; " +
			"B: no graceguard: 101 of 1090 failed, ready floor 2 of 3, 3 evictions refused by the budget |",
		"| A: graceguard | preStop sleep 5s, grace 30; `routing=5s work=2s cleanup=2s margin=3s grace=30s` | 1195 | 1195 | 0 | none | 3 | 2 of 3 | 17.9 s, exit 0 | 17.9 s |",
		"| B: no graceguard | preStop none, grace 30 | 1090 | 989 | 101 | connection_refused 17, host_unreachable 7, rejected_503 3, timeout 74 | 3 | 2 of 3 | 12.8 s, exit 0 | 13.8 s |",
		" 17.89  node/gg-node2 drained\n",
		"| A: graceguard: the PodDisruptionBudget refused evictions, and kubectl retried them | > 0 refused | 3 refused | passed |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks %q", want)
		}
	}
}

func TestRendersTheDegradeScenario(t *testing.T) {
	r := &Run{Schema: Schema, Degrade: &Degrade{Replicas: 10, RouterLag: 2, Rate: 50, Work: 0.1, ClientTimeout: 5,
		Arms: []*DegradeArm{
			{Arm: Arm{Name: "a: graceguard down", Namespace: "gg-e2e-degrade", OptedIn: true, Sent: 2000, Succeeded: 2000, Rollout: 61.5},
				Disruption: "both replicas SIGKILLed, kept down", ByFloor: 10, FailOpen: 30, Alert: "firing"},
			{Arm: Arm{Name: "b: graceguard starved", Namespace: "gg-e2e-degrade", OptedIn: true, Sent: 1900, Succeeded: 1900, Rollout: 55},
				Disruption: "held to 50m, CPU hogs", ByWebhook: 7, ByFloor: 3, Shed: 2},
		}}}
	r.Degrade.Checks.Add("a: no creation refused", "0", true, "0")
	md := Markdown(r, ".")
	for _, want := range []string{
		"| 15. graceguard down or starved during a rollout | passed | a: graceguard down: 0 of 2000 failed, 0 creations refused, 0 hooks past grace; " +
			"b: graceguard starved: 0 of 1900 failed, 0 creations refused, 0 hooks past grace |",
		"## 15. graceguard down or starved during a rollout (issue 41)",
		"| a: graceguard down | both replicas SIGKILLed, kept down | 2000 | 2000 | 0 | none | 0 | 0 / 10 / 0 | 0 | 0 / 30 | 61.5 s |",
		"| b: graceguard starved | held to 50m, CPU hogs | 1900 | 1900 | 0 | none | 0 | 7 / 3 / 0 | 0 | 2 / 0 | 55.0 s |",
		"a: graceguard down: GraceguardNoReadyWebhook firing.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the degrade scenario renders without %q:\n%s", want, md)
		}
	}
}

func TestRendersTheDBSidecarScenario(t *testing.T) {
	ran := time.Date(2026, 12, 7, 19, 5, 0, 0, time.UTC)
	one, three, twelve := 1, 3, 12
	r := &Run{Schema: Schema, Started: ran, Env: Env{GitCommit: "abc"}, DBSidecar: &DBSidecar{Started: ran, Env: Env{GitCommit: "abc", Kubernetes: "v1.37.2", DrainappImage: "registry.local/drainapp:e2e", DrainappDigest: "sha256:d"},
		Sidecar: "db-proxy", Listen: "127.0.0.1:5432", Annotations: []string{"graceguard.io/max-work: 8s", "graceguard.io/routing-delay: 5s"},
		Replicas: 3, Strategy: "RollingUpdate maxSurge=1 maxUnavailable=0", RouterLag: 2, Rate: 20, Work: 6, ClientTimeout: 16,
		Arms: []*SidecarArm{
			{Arm: Arm{Name: "A: named", Namespace: "gg-e2e-sidecar-a", OptedIn: true, PreStop: "sleep 5s", Grace: 18, Budget: "routing=5s grace=18s",
				Sent: 700, Succeeded: 700, Rollout: 30, Load: 40}, Named: "db-proxy", SidecarPreStop: "sleep 15s",
				Pods: []SidecarPod{{Pod: "web-a", AppActive: &three, AppDone: AtOf(2500 * time.Millisecond), SidecarSIGTERM: AtOf(9 * time.Second), SidecarActive: new(int)}}},
			{Arm: Arm{Name: "B: not named", Namespace: "gg-e2e-sidecar-b", OptedIn: true, PreStop: "sleep 5s", Grace: 18,
				Sent: 690, Succeeded: 650, Failed: 40, ByKind: map[string]int{"http_502": 40}, Rollout: 25, Load: 35,
				Samples: []Failure{{At: 7.5, Endpoint: "10.244.0.9", Kind: "http_502", Detail: `HTTP 502 {"reason":"backend"}`}}}, SidecarPreStop: "sleep 5s",
				Pods: []SidecarPod{{Pod: "web-b", AppActive: &twelve, AppDone: AtOf(20 * time.Millisecond), BackendFailed: 12, SidecarSIGTERM: AtOf(3 * time.Millisecond), SidecarActive: &one}}},
		}}}
	r.DBSidecar.Checks.Add("A: no failed request", "0 failed", true, "0 failed of 700 (none)")
	md := Markdown(r, ".")
	for _, want := range []string{
		"| 16. A database proxy sidecar named in graceguard.io/sidecars | passed | A: named: 0 of 700 failed, the sidecar's preStop sleep 15s; " +
			"B: not named: 40 of 690 failed, the sidecar's preStop sleep 5s |",
		"## 16. A database proxy sidecar named in graceguard.io/sidecars (issue 43)",
		"opted in with `graceguard.io/max-work: 8s`, `graceguard.io/routing-delay: 5s`, is restarted",
		"| A: named | `db-proxy` | preStop sleep 5s, grace 18; `routing=5s grace=18s` | sleep 15s | 700 | 700 | 0 | none | 30.0 s | 40.0 s |",
		"| B: not named | unset | preStop sleep 5s, grace 18 | sleep 5s | 690 | 650 | 40 | http_502 40 | 25.0 s | 35.0 s |",
		"| A: named | `web-a` | 3 | 2.50 s | 0 | 9.00 s | 0 |",
		"| B: not named | `web-b` | 12 | 0.02 s | 12 | 0.00 s | 1 |",
		"| 7.50 s | 10.244.0.9 | http_502 | HTTP 502 {\"reason\":\"backend\"} |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the sidecar scenario renders without %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "Recorded by a run of its own") {
		t.Error("the scenario of the page's own run is said to come from another run")
	}
	// Recorded by a focused run and shown beside a full run of another
	// commit: the section says so.
	r.Started, r.Env.GitCommit = ran.Add(-time.Hour), "def"
	md = Markdown(r, ".")
	for _, want := range []string{
		"Recorded by a run of its own, not the run above: 2026-12-07 19:05 UTC, commit abc; Kubernetes v1.37.2",
		"`registry.local/drainapp:e2e` (sha256:d)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the scenario of another run does not say so (%q):\n%s", want, md)
		}
	}
}

func TestRendersTheMeasureRoutingScenario(t *testing.T) {
	ran := time.Date(2026, 12, 7, 22, 30, 0, 0, time.UTC)
	r := &Run{Schema: Schema, Started: ran, Env: Env{GitCommit: "abc"}, MeasureRouting: &MeasureRouting{Started: ran, Commit: "abc",
		Image: "registry.local/graceguard:dev", KubeProxy: "v1.37.2, iptables mode", Traefik: "3.6.12",
		HostToClusterIP: "GET 10.244.128.9:8080: 200 ok",
		Reference:       &Withdrawal{Rounds: make([]WithdrawalRound, 12), Min: 0.3, Median: 0.95, P90: 1.2, Max: 1.8, Sent: 900},
		Runs: []*RoutingRun{
			{Name: "ClusterIP, run 1", Path: "clusterip", Args: []string{"kubectl", "graceguard", "measure-routing", "--in-cluster"},
				Delays: []Secs{0.4, 0.6}, Min: 0.4, Median: 0.4, P90: 0.6, Max: 0.6, Sent: 500, Profile: "2s", Duration: 80,
				Output: "Routing profile node-clusterip: 2s, the slowest withdrawal 0.600s + margin 1s, rounded up to whole seconds.\n"},
			{Name: "Traefik, run 1", Path: "traefik", Args: []string{"kubectl", "graceguard", "measure-routing", "--url", "http://127.0.0.1:1/"},
				Delays: []Secs{0.9, 1.7}, Min: 0.9, Median: 0.9, P90: 1.7, Max: 1.7, Sent: 600, Failed: 1, Profile: "3s", Duration: 90},
		}}}
	r.MeasureRouting.Checks.Add("Traefik, run 1: agrees", "each median within the other's min..max", true, "ok")
	md := Markdown(r, ".")
	for _, want := range []string{
		"| 17. kubectl graceguard measure-routing through Traefik and kube-proxy | passed | scenario 13's method through Traefik: median 0.950 s, max 1.800 s; " +
			"ClusterIP, run 1: median 0.400 s, max 0.600 s, profile 2s; Traefik, run 1: median 0.900 s, max 1.700 s, profile 3s |",
		"## 17. kubectl graceguard measure-routing through Traefik and kube-proxy (issue 42)",
		"| scenario 13's method through Traefik | 12 | 0.300 s | 0.950 s | 1.200 s | 1.800 s | 900 | 0 | | | |",
		"| ClusterIP, run 1 | 2 | 0.400 s | 0.400 s | 0.600 s | 0.600 s | 500 | 0 | 2s | 0 | 80.0 s |",
		"| Traefik, run 1 | 2 | 0.900 s | 0.900 s | 1.700 s | 1.700 s | 600 | 1 | 3s | 0 | 90.0 s |",
		"<details><summary>Traefik, run 1: <code>kubectl graceguard measure-routing --url http://127.0.0.1:1/</code></summary>",
		"Routing profile node-clusterip: 2s, the slowest withdrawal 0.600s",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the measure-routing scenario renders without %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "Recorded by a run of its own") {
		t.Error("the scenario of the page's own run is said to come from another run")
	}
}

func TestRendersTheArgoRolloutScenario(t *testing.T) {
	ran := time.Date(2026, 12, 7, 22, 5, 0, 0, time.UTC)
	r := &Run{Schema: Schema, Started: ran, Env: Env{GitCommit: "abc"}, ArgoRollout: &ArgoRollout{Started: ran, Env: Env{GitCommit: "abc"},
		Version: "v1.10.1", Controller: "v1.10.1+unknown", CRDs: []string{"rollouts.argoproj.io"},
		WebhookRule: "validate-workloads.graceguard.io: argoproj.io/v1alpha1 rollouts", Annotations: []string{"graceguard.io/routing-delay: 5s"},
		Replicas: 4, Strategy: "canary maxSurge=1 maxUnavailable=0, no trafficRouting", Steps: []string{"setWeight 25", "pause 5s"},
		RouterLag: 2, Rate: 50, Work: 0.1, ClientTimeout: 5,
		Arms: []*ArgoArm{
			{Arm: Arm{Name: "A: graceguard", OptedIn: true, PreStop: "sleep 5s", Grace: 30, Budget: "routing=5s grace=30s", Sent: 900, Succeeded: 900, Rollout: 50, Load: 60},
				FromHash: "aaa", ToHash: "bbb", Phase: "Healthy", Revision: "2", StepEvents: []string{"Rollout step 1/2 completed (setWeight: 25)"}},
			{Arm: Arm{Name: "B: no graceguard", PreStop: "none", Grace: 30, Sent: 800, Succeeded: 700, Failed: 100, ByKind: map[string]int{"eof": 100}, Rollout: 45, Load: 55,
				Samples: []Failure{{At: 7.5, Endpoint: "10.244.0.9", Kind: "eof", Detail: "EOF"}}},
				FromHash: "ccc", ToHash: "ddd", Phase: "Healthy", Revision: "2"},
		},
		Warning: ArgoWarning{Strategy: "blueGreen scaleDownDelaySeconds=2", Routing: "5s",
			Warnings: []string{"spec.strategy.blueGreen.scaleDownDelaySeconds: 2s < routing 5s: scaled down before routes move; raise to 5"}}}}
	r.ArgoRollout.Checks.Add("A (graceguard): no failed request", "0 failed", true, "0 failed of 900 (none)")
	md := Markdown(r, ".")
	for _, want := range []string{
		"| 18. Argo Rollouts' real controller: a canary under load | passed | v1.10.1+unknown: A: graceguard: 0 of 900 failed, Healthy at revision 2; " +
			"B: no graceguard: 100 of 800 failed, Healthy at revision 2; blueGreen scaleDownDelaySeconds=2: warned \"spec.strategy.blueGreen.scaleDownDelaySeconds: 2s < routing 5s",
		"## 18. Argo Rollouts' real controller: a canary under load (issue 43)",
		"| A: graceguard | sleep 5s, grace 30; `routing=5s grace=30s` | aaa → bbb | Healthy, 2 | 900 | 900 | 0 | none | 50.0 s | 60.0 s |",
		"| B: no graceguard | none, grace 30 | ccc → ddd | Healthy, 2 | 800 | 700 | 100 | eof 100 | 45.0 s | 55.0 s |",
		"A: graceguard: the controller's steps: Rollout step 1/2 completed (setWeight: 25).",
		"B: no graceguard: the controller's steps: none.",
		"the API server returned `spec.strategy.blueGreen.scaleDownDelaySeconds: 2s < routing 5s: scaled down before routes move; raise to 5`.",
		"| 7.50 s | 10.244.0.9 | eof | EOF |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Argo scenario renders without %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "Recorded by a run of its own") {
		t.Error("the scenario of the page's own run is said to come from another run")
	}
}
