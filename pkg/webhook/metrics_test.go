package webhook

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/graceguard/graceguard/pkg/mutate"
)

func TestMetricsCountEveryDecision(t *testing.T) {
	f := newFixture(t)
	podIn := func(ns string, ann map[string]string) review {
		return review{op: admissionv1.Create, kind: "Pod", namespace: ns, object: pod("web", 30, ann, "")}
	}
	badDeployment := review{op: admissionv1.Create, group: "apps", kind: "Deployment", namespace: nsEnforce,
		object: workload("Deployment", 1, template(map[string]string{mutate.AnnotationMaxWork: "lots"}, ""))}
	sends := []struct {
		path string
		r    review
	}{
		{PathMutatePod, podIn(nsEnforce, nil)},
		{PathMutatePod, podIn(nsEnforce, map[string]string{mutate.AnnotationMaxWork: "60s"})},
		{PathMutatePod, podIn(nsWarn, nil)},
		{PathMutatePod, podIn(nsPlain, nil)},
		{PathMutatePod, podIn(nsSystem, nil)},
		{PathMutatePod, podIn(nsBroken, nil)},
		{PathMutatePod, review{op: admissionv1.Create, kind: "Pod", namespace: nsEnforce, object: `{"apiVersion":"v1","kind":"Pod","spec":{"containers":"oops"}}`}},
		{PathMutatePod, review{op: admissionv1.Delete, kind: "Pod", namespace: nsEnforce}},
		{PathValidatePod, podIn(nsEnforce, map[string]string{mutate.AnnotationMaxWork: "60s"})},
		{PathValidatePod, podIn(nsEnforce, map[string]string{mutate.AnnotationInject: "false"})},
		{PathValidateWorkloads, badDeployment},
	}
	for _, s := range sends {
		f.send(t, s.path, s.r)
	}
	// Dry runs count too: they are decisions a user saw.
	dry := badDeployment
	dry.dryRun = true
	f.send(t, PathValidateWorkloads, dry)

	for _, tc := range []struct {
		name     string
		labels   [3]string
		wantSeen float64
	}{
		{"a mutated Pod counts as mutated with its first change", [3]string{"mutate-pod", "mutated", "prestop-added"}, 2},
		{"a warn-mode Pod counts as warned", [3]string{"mutate-pod", "warned", "prestop-added"}, 1},
		{"a Pod in a namespace not opted in counts as skipped", [3]string{"mutate-pod", "skipped", "namespace-not-opted-in"}, 1},
		{"a Pod in kube-system counts as skipped, excluded", [3]string{"mutate-pod", "skipped", "namespace-excluded"}, 1},
		{"an unreadable namespace counts as an error", [3]string{"mutate-pod", "error", "namespace-unavailable"}, 1},
		{"an undecodable object counts as an error", [3]string{"mutate-pod", "error", "decode-error"}, 1},
		{"a DELETE counts as skipped, not applicable", [3]string{"mutate-pod", "skipped", "operation-not-applicable"}, 1},
		{"a Pod over budget that the mutating webhook did not treat counts as denied, not mutated (the root cause)", [3]string{"validate-pod", "denied", "not-mutated"}, 1},
		{"an opted-out Pod that passes counts as allowed, opted out", [3]string{"validate-pod", "allowed", "pod-opted-out"}, 1},
		{"a bad Deployment counts as denied, invalid annotation, dry run included", [3]string{"validate-workloads", "denied", "invalid-annotation"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := testutil.ToFloat64(f.metrics.decisions.WithLabelValues(tc.labels[:]...))
			if got != tc.wantSeen {
				t.Errorf("graceguard_admission_decisions_total%v = %v, want %v", tc.labels, got, tc.wantSeen)
			}
		})
	}

	if n := testutil.CollectAndCount(f.metrics.decisions); n != 10 {
		t.Errorf("%d decision series, want exactly the 10 above", n)
	}
	// Two Pods were patched: one left at 30s, one raised to 70s.
	want := `
# HELP graceguard_grace_period_seconds terminationGracePeriodSeconds of Pods the mutating webhook patched, as left by graceguard.
# TYPE graceguard_grace_period_seconds histogram
graceguard_grace_period_seconds_bucket{le="5"} 0
graceguard_grace_period_seconds_bucket{le="10"} 0
graceguard_grace_period_seconds_bucket{le="15"} 0
graceguard_grace_period_seconds_bucket{le="20"} 0
graceguard_grace_period_seconds_bucket{le="30"} 1
graceguard_grace_period_seconds_bucket{le="45"} 1
graceguard_grace_period_seconds_bucket{le="60"} 1
graceguard_grace_period_seconds_bucket{le="90"} 2
graceguard_grace_period_seconds_bucket{le="120"} 2
graceguard_grace_period_seconds_bucket{le="180"} 2
graceguard_grace_period_seconds_bucket{le="300"} 2
graceguard_grace_period_seconds_bucket{le="600"} 2
graceguard_grace_period_seconds_bucket{le="+Inf"} 2
graceguard_grace_period_seconds_sum 100
graceguard_grace_period_seconds_count 2
`
	if err := testutil.GatherAndCompare(f.reg, strings.NewReader(want), "graceguard_grace_period_seconds"); err != nil {
		t.Error(err)
	}

	// Every label value is from the bounded sets; no namespace or name.
	families, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				v := l.GetValue()
				ok := false
				switch l.GetName() {
				case "webhook":
					ok = slices.Contains(Names, Name(v))
				case "decision":
					ok = slices.Contains(Decisions, Decision(v))
				case "reason":
					ok = slices.Contains(MetricReasons, mutate.Reason(v))
				}
				if !ok {
					t.Errorf("%s has label %s=%q outside its bounded set", mf.GetName(), l.GetName(), v)
				}
			}
		}
	}
}

func TestNewMetricsTwiceOnOneRegistryShares(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewMetrics(reg)
	if err != nil {
		t.Fatalf("second registration: %v", err)
	}
	a.record(NameMutatePod, DecisionMutated, mutate.ChangePreStop)
	b.record(NameMutatePod, DecisionMutated, mutate.ChangePreStop)
	if got := testutil.ToFloat64(a.decisions.WithLabelValues("mutate-pod", "mutated", "prestop-added")); got != 2 {
		t.Errorf("count %v, want 2 (both Metrics on the same collectors)", got)
	}
}

func TestUnknownReasonsDoNotGrowTheLabelSet(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	m.record(NameValidatePod, DecisionDenied, mutate.Reason("shop/web"))
	if got := testutil.ToFloat64(m.decisions.WithLabelValues("validate-pod", "denied", "other")); got != 1 {
		t.Errorf("an unknown reason was not folded into \"other\"")
	}
	var nilMetrics *Metrics
	nilMetrics.record(NameValidatePod, DecisionDenied, mutate.DenyHookExceedsGrace) // must not panic
	nilMetrics.observeGrace(30)
}
