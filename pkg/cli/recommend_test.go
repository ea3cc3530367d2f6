package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
)

// withdrawnReport is a Deployment's report of five clean drains whose Pods
// were withdrawn from their EndpointSlices after the given seconds (nil:
// no EndpointSlice listed the Pod), with a routing term of 5s.
func withdrawnReport(withdrawals ...*int64) *v1alpha1.ShutdownReport {
	r := &v1alpha1.ShutdownReport{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "deployment-web"},
		Spec: v1alpha1.ShutdownReportSpec{Workload: v1alpha1.WorkloadReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}}}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i, w := range withdrawals {
		s := v1alpha1.Sample{Pod: "web-" + string(rune('a'+i)), Container: "app", Deleted: metav1.NewTime(t0.Add(time.Duration(i) * time.Minute)),
			GraceSeconds: 15, PreStopSeconds: 5, Exited: metav1.NewTime(t0.Add(time.Duration(i)*time.Minute + 9*time.Second)), Reason: "Completed",
			Outcome: v1alpha1.OutcomeExited, DrainSeconds: 4, Budget: "routing=5s work=5s cleanup=2s margin=3s grace=15s",
			Withdrawal: v1alpha1.WithdrawalNotListed}
		if w != nil {
			s.Withdrawal, s.WithdrawalSeconds = v1alpha1.WithdrawalWithdrawn, w
		}
		r.Status.Samples = append(r.Status.Samples, s)
		r.Status.Observed++
	}
	return r
}

func recommendText(t *testing.T, r *v1alpha1.ShutdownReport) string {
	t.Helper()
	var b bytes.Buffer
	if err := writeRecommendText(&b, []recommendation{recommendFor(r, 5)}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestRecommendComparesTheRoutingTermWithTheWithdrawal(t *testing.T) {
	for _, tc := range []struct {
		name        string
		report      *v1alpha1.ShutdownReport
		withdrawal  string
		routing     string
		yamlComment string
	}{
		{name: "routing 5s, the control plane withdrew after at most 8s: short by 3s",
			report:      withdrawnReport(new(int64(1)), new(int64(2)), new(int64(8)), new(int64(3)), nil),
			withdrawal:  "  withdrawal  p50 2s, p95 8s, max 8s of 4 (deletion to the last EndpointSlice marking the Pod not ready, as the observer saw it: the control plane's part; proxies follow); no EndpointSlice listed 1 of 5\n",
			routing:     "  routing     below the control plane's withdrawal in 1 of 4, by up to 3s (routing 5s, withdrawn after 8s): graceguard.io/routing-delay needs at least 8s, plus the proxies' own delay\n",
			yamlComment: "# Deployment shop/web: routing below the control plane's withdrawal in 1 of 4, by up to 3s (routing 5s, withdrawn after 8s): graceguard.io/routing-delay needs at least 8s, plus the proxies' own delay\n"},
		{name: "routing 5s covers a withdrawal of at most 5s",
			report:     withdrawnReport(new(int64(0)), new(int64(1)), new(int64(5)), new(int64(1)), new(int64(1))),
			withdrawal: "  withdrawal  p50 1s, p95 5s, max 5s of 5 (deletion to the last EndpointSlice marking the Pod not ready, as the observer saw it: the control plane's part; proxies follow)\n",
			routing:    "  routing     5s covers the control plane's withdrawal seen (max 5s); proxies withdraw later, which the observer cannot see\n"},
		{name: "no EndpointSlice listed any Pod: no figure, not 0",
			report:     withdrawnReport(nil, nil),
			withdrawal: "  withdrawal  no figure: no EndpointSlice listed 2 of 2\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := recommendText(t, tc.report)
			if !strings.Contains(out, tc.withdrawal) {
				t.Errorf("no withdrawal line\n%s\nin\n%s", tc.withdrawal, out)
			}
			if tc.routing == "" && strings.Contains(out, "  routing ") {
				t.Errorf("a routing line without any figure to compare:\n%s", out)
			}
			if !strings.Contains(out, tc.routing) {
				t.Errorf("no routing line\n%s\nin\n%s", tc.routing, out)
			}
			var y bytes.Buffer
			if err := writeRecommendYAML(&y, []recommendation{recommendFor(tc.report, 5)}); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(y.String(), "routing"); got != (tc.yamlComment != "") || !strings.Contains(y.String(), tc.yamlComment) {
				t.Errorf("-o yaml:\n%s\nwant the comment %q", y.String(), tc.yamlComment)
			}
		})
	}

	// Reports written before the observer watched EndpointSlices say nothing of it.
	old := withdrawnReport(nil, nil)
	for i := range old.Status.Samples {
		old.Status.Samples[i].Withdrawal = ""
	}
	if out := recommendText(t, old); strings.Contains(out, "withdrawal") || strings.Contains(out, "routing ") {
		t.Errorf("a report without withdrawals:\n%s", out)
	}
}
