package helmhook

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"
)

// answerer stands in for graceguard's webhook server: it answers each
// review for its UID (or as answer says) and records what it was sent.
type answerer struct {
	mu     sync.Mutex
	got    []admissionv1.AdmissionRequest
	paths  []string
	answer func(w http.ResponseWriter, ar *admissionv1.AdmissionReview)
}

func (a *answerer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var ar admissionv1.AdmissionReview
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &ar); err != nil || ar.Request == nil {
		http.Error(w, "not a review", http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	a.got = append(a.got, *ar.Request)
	a.paths = append(a.paths, r.URL.Path+"?"+r.URL.RawQuery)
	a.mu.Unlock()
	if a.answer != nil {
		a.answer(w, &ar)
		return
	}
	ar.Response = &admissionv1.AdmissionResponse{UID: ar.Request.UID, Allowed: true}
	ar.Request = nil
	_ = json.NewEncoder(w).Encode(&ar)
}

// configs are the chart's two configurations (one mutating webhook, a Pod
// and a workload validating webhook), calling url with caBundle.
func configs(url string, caBundle []byte) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	five := int32(5)
	cc := func(path string) admissionregistrationv1.WebhookClientConfig {
		u := url + path
		return admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: caBundle}
	}
	rule := func(group, resource string) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: []string{resource}}}}
	}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "graceguard"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "mutate-pods.graceguard.io", ClientConfig: cc("/mutate-v1-pod"), Rules: rule("", "pods"), TimeoutSeconds: &five}}}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "graceguard"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			{Name: "validate-pods.graceguard.io", ClientConfig: cc("/validate-v1-pod"), Rules: rule("", "pods"), TimeoutSeconds: &five},
			{Name: "validate-workloads.graceguard.io", ClientConfig: cc("/validate-workloads"), Rules: rule("apps", "deployments"), TimeoutSeconds: &five},
		}}
	return m, v
}

var serviceCheck = SelftestConfig{Check: CheckService, Namespace: "graceguard-system", MutatingWebhookConfiguration: "graceguard",
	ValidatingWebhookConfiguration: "graceguard", Timeout: time.Second}

func TestServiceCheckCallsEveryWebhookAsTheAPIServerDoes(t *testing.T) {
	a := &answerer{}
	srv := httptest.NewTLSServer(a)
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	m, v := configs(srv.URL, ca)
	kube := fake.NewClientset(m, v)

	var out bytes.Buffer
	if err := Selftest(context.Background(), serviceCheck, kube, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a line per webhook, got:\n%s", out.String())
	}
	for i, want := range []string{
		"mutate-pods.graceguard.io: " + srv.URL + "/mutate-v1-pod answered a Pod review allowed in ",
		"validate-pods.graceguard.io: " + srv.URL + "/validate-v1-pod answered a Pod review allowed in ",
		"validate-workloads.graceguard.io: " + srv.URL + "/validate-workloads answered a Deployment review allowed in ",
	} {
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d = %q, want it to start with %q", i, lines[i], want)
		}
	}
	if want := []string{"/mutate-v1-pod?timeout=5s", "/validate-v1-pod?timeout=5s", "/validate-workloads?timeout=5s"}; strings.Join(a.paths, " ") != strings.Join(want, " ") {
		t.Errorf("called %v, want %v (the webhook's timeoutSeconds passed as the API server passes it)", a.paths, want)
	}
	for _, r := range a.got {
		if r.Namespace != "graceguard-system" || r.Operation != admissionv1.Create || r.DryRun == nil || !*r.DryRun {
			t.Errorf("review %s %s/%s %s dryRun=%v: want a dry-run CREATE in the release namespace, which graceguard never treats", r.Kind.Kind, r.Namespace, r.Name, r.Operation, r.DryRun)
		}
	}
	// The workload review holds a Deployment whose Pod template the
	// workload webhook reads.
	d := &unstructured.Unstructured{}
	if err := json.Unmarshal(a.got[2].Object.Raw, &d.Object); err != nil {
		t.Fatal(err)
	}
	if cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers"); d.GetKind() != "Deployment" || d.GetAPIVersion() != "apps/v1" || len(cs) != 1 {
		t.Errorf("the workload review's object: %v", d.Object)
	}
}

func TestServiceCheckFailsSayingWhy(t *testing.T) {
	good := &answerer{}
	srv := httptest.NewTLSServer(good)
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	otherCA := strangerCA(t)

	for _, tc := range []struct {
		name     string
		caBundle []byte
		answer   func(w http.ResponseWriter, ar *admissionv1.AdmissionReview)
		drop     bool // no configurations at all
		want     []string
	}{
		{name: "no configuration", drop: true,
			want: []string{`reading MutatingWebhookConfiguration graceguard: mutatingwebhookconfigurations.admissionregistration.k8s.io "graceguard" not found`, "still failing after 300ms"}},
		{name: "no caBundle yet", caBundle: nil,
			want: []string{"webhook mutate-pods.graceguard.io (MutatingWebhookConfiguration graceguard): its caBundle is empty: the serving CA is not injected yet"}},
		{name: "a caBundle that does not trust the server", caBundle: otherCA,
			want: []string{"webhook mutate-pods.graceguard.io", "POST " + srv.URL + "/mutate-v1-pod", "certificate signed by unknown authority"}},
		{name: "an HTTP error", caBundle: ca, answer: func(w http.ResponseWriter, _ *admissionv1.AdmissionReview) {
			http.Error(w, "too many requests", http.StatusTooManyRequests)
		}, want: []string{"POST " + srv.URL + "/mutate-v1-pod: HTTP 429: too many requests"}},
		{name: "an answer for another review", caBundle: ca, answer: func(w http.ResponseWriter, ar *admissionv1.AdmissionReview) {
			ar.Response = &admissionv1.AdmissionResponse{UID: "someone-else", Allowed: true}
			_ = json.NewEncoder(w).Encode(ar)
		}, want: []string{"the AdmissionReview answers no request"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			good.answer = tc.answer
			kube := fake.NewClientset()
			if !tc.drop {
				m, v := configs(srv.URL, tc.caBundle)
				kube = fake.NewClientset(m, v)
			}
			var out bytes.Buffer
			c := serviceCheck
			c.Timeout = 300 * time.Millisecond
			err := Selftest(context.Background(), c, kube, &out)
			if err == nil {
				t.Fatalf("passed:\n%s", out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if !strings.Contains(out.String(), "not yet (0s): ") {
				t.Errorf("the reason was not printed while retrying:\n%s", out.String())
			}
		})
	}
}

func TestADenialIsAnAnswer(t *testing.T) {
	a := &answerer{answer: func(w http.ResponseWriter, ar *admissionv1.AdmissionReview) {
		ar.Response = &admissionv1.AdmissionResponse{UID: ar.Request.UID, Allowed: false, Result: &metav1.Status{Code: 403, Message: "no"}}
		_ = json.NewEncoder(w).Encode(ar)
	}}
	srv := httptest.NewTLSServer(a)
	defer srv.Close()
	m, v := configs(srv.URL, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	var out bytes.Buffer
	if err := Selftest(context.Background(), serviceCheck, fake.NewClientset(m, v), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "answered a Pod review denied (403: no)") {
		t.Errorf("output:\n%s", out.String())
	}
}

func TestAServiceIsCalledByItsDNSName(t *testing.T) {
	path, port := "/mutate-v1-pod", int32(8443)
	for _, tc := range []struct {
		cc         admissionregistrationv1.WebhookClientConfig
		url, sname string
	}{
		{admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "gg", Name: "graceguard", Path: &path}},
			"https://graceguard.gg.svc:443/mutate-v1-pod", "graceguard.gg.svc"},
		{admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "gg", Name: "graceguard", Port: &port}},
			"https://graceguard.gg.svc:8443", "graceguard.gg.svc"},
	} {
		u, name, err := endpoint(tc.cc)
		if err != nil || u.String() != tc.url || name != tc.sname {
			t.Errorf("%+v: %v, %q, %v; want %s for %s", tc.cc.Service, u, name, err, tc.url, tc.sname)
		}
	}
	if _, _, err := endpoint(admissionregistrationv1.WebhookClientConfig{}); err == nil || !strings.Contains(err.Error(), "neither a service nor a url") {
		t.Errorf("an empty client config: %v", err)
	}
}

func TestRetryPrintsEachNewReasonOnce(t *testing.T) {
	n := 0
	var out bytes.Buffer
	lines, err := retry(context.Background(), time.Second, time.Millisecond, &out, func(context.Context) ([]string, error) {
		n++
		switch {
		case n <= 2:
			return nil, errFake("no endpoints")
		case n == 3:
			return nil, errFake("no caBundle")
		}
		return []string{"ok"}, nil
	})
	if err != nil || len(lines) != 1 {
		t.Fatalf("%v, %v", lines, err)
	}
	if got := strings.Count(out.String(), "not yet"); got != 2 || !strings.Contains(out.String(), "no endpoints") || !strings.Contains(out.String(), "no caBundle") {
		t.Errorf("want each reason once:\n%s", out.String())
	}
}

func TestRetryKeepsTheReasonNotTheDeadline(t *testing.T) {
	var out bytes.Buffer
	_, err := retry(context.Background(), 50*time.Millisecond, time.Millisecond, &out, func(ctx context.Context) ([]string, error) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
			return nil, errFake("connection refused")
		}
	})
	if err == nil || !strings.Contains(err.Error(), "connection refused (still failing after 50ms)") {
		t.Errorf("error %v, want the last real reason", err)
	}
}

// strangerCA is a CA certificate that signed nothing the test serves
// (every httptest server has the same certificate).
func strangerCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "stranger"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

type errFake string

func (e errFake) Error() string { return string(e) }
