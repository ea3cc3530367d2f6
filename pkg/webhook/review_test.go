package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// seen is a handler that keeps the request it was given and answers with
// something of everything an answer can carry.
type seen struct {
	calls int
	req   admission.Request
}

func (s *seen) Handle(_ context.Context, req admission.Request) admission.Response {
	s.calls++
	s.req = req
	return admission.Patched("", jsonpatch.Operation{Operation: "add", Path: "/metadata/annotations", Value: map[string]string{"seen": string(req.UID)}}).
		WithWarnings("w: " + string(req.UID))
}

// served is what a client of an endpoint sees, and what the handler saw.
type served struct {
	calls  int
	req    admission.Request
	status int
	body   []byte
}

func serveWith(h http.Handler, s *seen, body []byte, contentType string) served {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	r := httptest.NewRequest(http.MethodPost, PathMutatePod, rd)
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return served{calls: s.calls, req: s.req, status: rec.Code, body: rec.Body.Bytes()}
}

// both serves body with controller-runtime's admission.Webhook and with
// Endpoint, each around its own recording handler.
func both(body []byte, contentType string) (cr, lean served) {
	s1, s2 := &seen{}, &seen{}
	cr = serveWith(&admission.Webhook{Handler: s1, LogConstructor: func(logr.Logger, *admission.Request) logr.Logger { return logr.Discard() }}, s1, body, contentType)
	lean = serveWith(Serve(s2, logr.Discard()), s2, body, contentType)
	return cr, lean
}

// answer is the part of an answer that is the same however a refusal is
// worded.
type answer struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Response   struct {
		UID     string `json:"uid"`
		Allowed bool   `json:"allowed"`
		Status  struct {
			Code int32 `json:"code"`
		} `json:"status"`
	} `json:"response"`
}

// sameOutcome fails unless the two endpoints did the same: the handler was
// given the same request (every field, the objects' bytes included) or
// neither was called, and the client got the same answer: byte for byte
// when the handler answered, the same version, kind, uid, allowed and code
// when the review was refused before (only the wording of the decoding
// error may differ: encoding/json v1 and v2 word them differently).
func sameOutcome(t *testing.T, body []byte, cr, lean served) {
	t.Helper()
	if cr.status != lean.status {
		t.Fatalf("%q: HTTP %d from controller-runtime, %d from Endpoint", body, cr.status, lean.status)
	}
	if cr.calls != lean.calls {
		t.Fatalf("%q: the handler was called %d times by controller-runtime, %d by Endpoint\ncontroller-runtime: %s\nEndpoint: %s", body, cr.calls, lean.calls, cr.body, lean.body)
	}
	if cr.calls > 0 {
		want, comparable := kept(cr.req)
		if comparable && !reflect.DeepEqual(want, lean.req) {
			t.Fatalf("%q: the handler got different requests\ncontroller-runtime %#v\nEndpoint           %#v", body, cr.req.AdmissionRequest, lean.req.AdmissionRequest)
		}
		if !bytes.Equal(cr.body, lean.body) {
			t.Fatalf("%q: different answers\ncontroller-runtime %s\nEndpoint           %s", body, cr.body, lean.body)
		}
		return
	}
	var a, b answer
	if err := json.Unmarshal(cr.body, &a); err != nil {
		t.Fatalf("controller-runtime's answer %q: %v", cr.body, err)
	}
	if err := json.Unmarshal(lean.body, &b); err != nil {
		t.Fatalf("Endpoint's answer %q: %v", lean.body, err)
	}
	if a != b {
		t.Fatalf("%q: refused differently\ncontroller-runtime %s\nEndpoint           %s", body, cr.body, lean.body)
	}
}

// kept is what Endpoint keeps of a request (boundedEnvelope): no user
// extra, at most maxGroupsKept groups. It reports false for a request
// with a string longer than Endpoint keeps whole, which it keeps clipped.
func kept(req admission.Request) (admission.Request, bool) {
	out := req
	out.UserInfo.Extra = nil
	if len(out.UserInfo.Groups) > maxGroupsKept {
		out.UserInfo.Groups = out.UserInfo.Groups[:maxGroupsKept]
	}
	r := req.AdmissionRequest
	for _, s := range append([]string{string(r.UID), r.Kind.Group, r.Kind.Version, r.Kind.Kind, r.Resource.Group, r.Resource.Version, r.Resource.Resource,
		r.SubResource, r.RequestSubResource, r.Name, r.Namespace, string(r.Operation), r.UserInfo.Username, r.UserInfo.UID}, r.UserInfo.Groups...) {
		if len(s) > maxEnvelopeString {
			return out, false
		}
	}
	return out, true
}

func reviewJSON(apiVersion string, req *admissionv1.AdmissionRequest) []byte {
	ar := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: "AdmissionReview"}, Request: req}
	b, err := json.Marshal(ar)
	if err != nil {
		panic(err)
	}
	return b
}

func fullRequest() *admissionv1.AdmissionRequest {
	pod := corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: nsEnforce},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1"}}}}
	raw, _ := json.Marshal(pod)
	dry := true
	return &admissionv1.AdmissionRequest{
		UID:                "7f0e1d2c-1111-2222-3333-444455556666",
		Kind:               metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource:           metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		RequestKind:        &metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		RequestResource:    &metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Name:               "p",
		Namespace:          nsEnforce,
		Operation:          admissionv1.Create,
		UserInfo:           authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:replicaset-controller", UID: "u", Groups: []string{"system:serviceaccounts", "system:authenticated"}, Extra: map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/credential-id": {"JTI=x"}}},
		Object:             runtime.RawExtension{Raw: raw},
		OldObject:          runtime.RawExtension{Raw: raw},
		Options:            runtime.RawExtension{Raw: []byte(`{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1"}`)},
		DryRun:             &dry,
		SubResource:        "",
		RequestSubResource: "",
	}
}

// FuzzReviewDecodeLikeControllerRuntime: whatever body a review has,
// Endpoint does what controller-runtime's admission.Webhook does with it:
// it refuses the same bodies with the same status, and for the others
// gives the handler the same request and the client the same bytes. The
// seeds are a real review of each version and the places where a one-pass
// decode could read differently: repeated and null members, names that
// differ in case (the API machinery reads the kind case-insensitively and
// the request case-sensitively), bad apiVersions, members of the wrong
// type, invalid UTF-8, trailing data.
func FuzzReviewDecodeLikeControllerRuntime(f *testing.F) {
	for _, seed := range []string{
		string(reviewJSON("admission.k8s.io/v1", fullRequest())),
		string(reviewJSON("admission.k8s.io/v1beta1", fullRequest())),
		string(reviewJSON("", fullRequest())),
		`{}`, `null`, ` {"request":null} `, `[]`, `"x"`, `{"request":{"uid":"a"}} x`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"a","name":"x"},"request":{"uid":"b"}}`,
		`{"request":{"uid":"a","name":"x"},"request":null,"request":{"uid":"b"}}`,
		`{"request":{"uid":"a","userInfo":{"groups":["x","y"],"extra":{"k":["1"]}}},"request":{"userInfo":{"groups":["z"],"extra":{"j":null}}}}`,
		`{"request":{"uid":"a","name":"x","name":null,"dryRun":true,"dryRun":null,"object":{"a":1},"object":null}}`,
		`{"APIVERSION":"admission.k8s.io/v1beta1","apiVersion":"admission.k8s.io/v1","Kind":"Other","request":{"uid":"a"}}`,
		"{\"\u212aind\":\"Kelvin\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"a\"}}",
		`{"Request":{"uid":"a"},"request":{"UID":"b","uid":"c"}}`,
		`{"apiVersion":"a/b/c","request":{"uid":"a"}}`, `{"apiVersion":5,"request":{"uid":"a"}}`, `{"kind":null,"request":{"uid":"a"}}`,
		`{"response":{"allowed":"yes"},"request":{"uid":"a"}}`, `{"response":{"uid":"r"},"request":{"uid":"a"}}`,
		`{"request":{"uid":5}}`, `{"request":{"dryRun":"true"}}`, `{"request":{"object":[1,2,{"x":"y"}],"oldObject":"s","options":7}}`,
		"{\"request\":{\"uid\":\"\xff\xfe\",\"object\":{\"n\":\"\xc3\x28\"}}}",
		`{"request":{"uid":"\ud800","name":"\u00e9\u0000"}}`,
		`{"request":{"uid":"a","object":{  "spaced" :  [ 1 ,2 ] }  }}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		cr, lean := both(body, "application/json")
		sameOutcome(t, body, cr, lean)
	})
}

// Refusals before any decoding: the same status and answer as
// controller-runtime's. (An empty body that is there is YAML for null to
// the API machinery: an empty review, which both give the handler.)
func TestEndpointRefusesLikeControllerRuntime(t *testing.T) {
	good := reviewJSON("admission.k8s.io/v1", fullRequest())
	for _, tc := range []struct {
		name        string
		body        []byte
		contentType string
		refused     bool
	}{
		{"no body", nil, "application/json", true},
		{"an empty body", []byte{}, "application/json", false},
		{"YAML", []byte("request:\n  uid: a\n"), "application/json", false},
		{"no content type", good, "", true},
		{"another content type", good, "application/json; charset=utf-8", true},
		{"over 7 MiB", append(append([]byte(`{"request":{"uid":"a","name":"`), bytes.Repeat([]byte("x"), maxRequestSize)...), `"}}`...), "application/json", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cr, lean := both(tc.body, tc.contentType)
			sameOutcome(t, tc.body, cr, lean)
			if (cr.calls == 0) != tc.refused {
				t.Fatalf("the handler was called %d times, want refused=%t", cr.calls, tc.refused)
			}
		})
	}
}

// A body longer than its Content-Length says, or without one, is read
// whole all the same.
func TestEndpointReadsBodiesOfUnknownLength(t *testing.T) {
	body := reviewJSON("admission.k8s.io/v1", fullRequest())
	for _, cl := range []int64{-1, 0, 10, int64(len(body))} {
		s := &seen{}
		r := httptest.NewRequest(http.MethodPost, PathMutatePod, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.ContentLength = cl
		rec := httptest.NewRecorder()
		Serve(s, logr.Discard()).ServeHTTP(rec, r)
		if s.calls != 1 || !strings.Contains(rec.Body.String(), `"allowed":true`) || s.req.UID != fullRequest().UID {
			t.Errorf("Content-Length %d: %d calls, %s", cl, s.calls, rec.Body.String())
		}
	}
}

// A handler that panics is answered 500 with the request's uid, as
// controller-runtime answers it.
func TestEndpointRecoversPanicsLikeControllerRuntime(t *testing.T) {
	body := reviewJSON("admission.k8s.io/v1", fullRequest())
	h := admission.HandlerFunc(func(context.Context, admission.Request) admission.Response { panic("boom") })
	run := func(e http.Handler) []byte {
		r := httptest.NewRequest(http.MethodPost, PathMutatePod, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, r)
		return rec.Body.Bytes()
	}
	cr := run(&admission.Webhook{Handler: h, LogConstructor: func(logr.Logger, *admission.Request) logr.Logger { return logr.Discard() }})
	lean := run(Serve(h, logr.Discard()))
	if !bytes.Equal(cr, lean) || !strings.Contains(string(lean), `"code":500`) || !strings.Contains(string(lean), string(fullRequest().UID)) {
		t.Fatalf("controller-runtime %s\nEndpoint %s", cr, lean)
	}
}
