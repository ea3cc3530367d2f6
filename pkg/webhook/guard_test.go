package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// The namespace read of a review ends a fifth of the review's timeout
// (at least a second) before the API server stops waiting, so the
// "admitted unchanged" answer for an unreadable namespace arrives in time:
// with the chart's 5s, the read ends at 4s.
func TestNamespaceReadEndsBeforeTheReviewDeadline(t *testing.T) {
	for _, tc := range []struct {
		query   string
		want    time.Duration // from the start of the review to the read's deadline
		comment string
	}{
		{"?timeout=5s", 4 * time.Second, "the chart's timeoutSeconds"},
		{"?timeout=10s", 8 * time.Second, "the API server's default"},
		{"?timeout=2s", time.Second, "short: the answer keeps at least a second"},
		{"?timeout=1s", 500 * time.Millisecond, "shortest: half for the read, half for the answer"},
		{"?timeout=30s", 8 * time.Second, "capped by --webhook-timeout (10s here)"},
		{"", 8 * time.Second, "none sent: --webhook-timeout"},
		{"?timeout=bogus", 8 * time.Second, "unreadable: --webhook-timeout"},
	} {
		t.Run(tc.comment, func(t *testing.T) {
			var got time.Duration
			var start time.Time
			lookup := NamespaceLookupFunc(func(ctx context.Context, _ string) (mutate.Namespace, error) {
				dl, ok := ctx.Deadline()
				if !ok {
					t.Error("the namespace read has no deadline")
				}
				got = dl.Sub(start)
				return mutate.Namespace{}, context.DeadlineExceeded // as a read that hangs until it
			})
			eps := Endpoints(Config{Options: mutate.DefaultOptions(), Namespaces: lookup, Limits: DefaultLimits()})
			body := review{op: admissionv1.Create, kind: "Pod", namespace: nsEnforce, object: pod("web", 30, nil, "")}.body(t)
			req := httptest.NewRequest(http.MethodPost, PathMutatePod+tc.query, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			start = time.Now()
			eps[PathMutatePod].ServeHTTP(rec, req)
			if d := got - tc.want; d < -50*time.Millisecond || d > 50*time.Millisecond {
				t.Errorf("the read's deadline is %s after the review began, want %s", got, tc.want)
			}
			var out admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
				t.Fatalf("answer %s", rec.Body.Bytes())
			}
			if !out.Response.Allowed || len(out.Response.Patch) > 0 || len(out.Response.Warnings) != 1 || out.Response.Warnings[0] != NamespaceUnavailableWarning {
				t.Errorf("answer %+v, want admitted unchanged with the namespace-unavailable warning", out.Response)
			}
		})
	}
}
