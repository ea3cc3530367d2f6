package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
)

// Bad input gets a clean answer naming the problem, and the next review is
// answered as usual.
func TestBadInputIsAnsweredCleanly(t *testing.T) {
	f := newFixture(t)
	goodPod := review{op: admissionv1.Create, kind: "Pod", namespace: nsEnforce, object: pod("web", 30, nil, "")}
	for _, tc := range []struct {
		name        string
		path        string
		contentType string
		body        func(t testing.TB) []byte
		// wantCode is the status code inside the AdmissionReview; the HTTP
		// status is always 200.
		wantCode    int32
		wantMessage string
	}{
		{
			name: "a body that is not JSON is refused by controller-runtime with 400",
			path: PathMutatePod, body: func(testing.TB) []byte { return []byte("this is not an AdmissionReview") },
			wantCode: http.StatusBadRequest, wantMessage: "couldn't get version/kind",
		},
		{
			name: "an empty body is refused with 400",
			path: PathValidatePod, body: func(testing.TB) []byte { return nil },
			wantCode: http.StatusBadRequest, wantMessage: "request body is empty",
		},
		{
			name: "a body that is not application/json is refused with 400",
			path: PathValidateWorkloads, contentType: "text/plain", body: goodPod.body,
			wantCode: http.StatusBadRequest, wantMessage: "expected application/json",
		},
		{
			name:     "a Pod CREATE without an object names the problem",
			path:     PathMutatePod,
			body:     review{op: admissionv1.Create, kind: "Pod", namespace: nsEnforce}.body,
			wantCode: http.StatusBadRequest, wantMessage: "decoding Pod: there is no content to decode",
		},
		{
			name: "a Pod whose containers are not a list names the problem",
			path: PathValidatePod,
			body: review{op: admissionv1.Create, kind: "Pod", namespace: nsEnforce,
				object: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":"oops"}}`}.body,
			wantCode: http.StatusBadRequest, wantMessage: "decoding Pod:",
		},
		{
			name: "a Deployment sent to the Pod webhook is refused as an unsupported kind",
			path: PathMutatePod,
			body: review{op: admissionv1.Create, group: "apps", kind: "Deployment", namespace: nsEnforce,
				object: workload("Deployment", 1, template(nil, ""))}.body,
			wantCode: http.StatusBadRequest, wantMessage: "unsupported kind apps/v1 Deployment: mutate-pod reviews only v1 Pod",
		},
		{
			name: "a Service sent to the workload webhook is refused as an unsupported kind",
			path: PathValidateWorkloads,
			body: review{op: admissionv1.Create, kind: "Service", namespace: nsEnforce,
				object: `{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"}}`}.body,
			wantCode: http.StatusBadRequest, wantMessage: "unsupported kind v1 Service: validate-workloads reviews",
		},
		{
			name: "a workload UPDATE without its old object names the problem",
			path: PathValidateWorkloads,
			body: review{op: admissionv1.Update, group: "apps", kind: "Deployment", namespace: nsEnforce,
				object: workload("Deployment", 1, template(nil, ""))}.body,
			wantCode: http.StatusBadRequest, wantMessage: "decoding Deployment: the review has no oldObject",
		},
		{
			name: "a workload whose object is of another kind than the review says names the problem",
			path: PathValidateWorkloads,
			body: review{op: admissionv1.Create, group: "apps", kind: "Deployment", namespace: nsEnforce,
				object: pod("web", 30, nil, "")}.body,
			wantCode: http.StatusBadRequest, wantMessage: "decoding Deployment object:",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct := tc.contentType
			if ct == "" {
				ct = "application/json"
			}
			resp, err := http.Post(f.srv.URL+tc.path, ct, bytes.NewReader(tc.body(t)))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("HTTP %d, want 200 with the error inside the review", resp.StatusCode)
			}
			var out admissionv1.AdmissionReview
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
				t.Fatalf("the answer is not an AdmissionReview: %v", err)
			}
			r := out.Response
			if r == nil || r.Allowed || r.Result == nil {
				t.Fatalf("response %+v, want allowed: false with a status", r)
			}
			if r.Result.Code != tc.wantCode || !strings.Contains(r.Result.Message, tc.wantMessage) {
				t.Errorf("status %d %q, want %d and a message containing %q", r.Result.Code, r.Result.Message, tc.wantCode, tc.wantMessage)
			}
			if len(r.Patch) > 0 {
				t.Errorf("patch on an error: %s", r.Patch)
			}

			// The server keeps serving.
			next := f.send(t, PathMutatePod, goodPod)
			if !next.Allowed || !jsonEqual(t, next.Patch, basicPatch) {
				t.Errorf("the next review was answered %+v", next)
			}
		})
	}
}
