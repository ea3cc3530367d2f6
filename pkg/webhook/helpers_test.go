package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// Namespaces the fake lookup knows.
const (
	nsEnforce  = "shop"          // opted in, enforce (the default mode)
	nsWarn     = "shop-warn"     // opted in, graceguard.io/mode=warn
	nsPlain    = "plain"         // not opted in
	nsBroken   = "broken"        // the lookup fails
	nsOwn      = "graceguard"    // graceguard's own namespace: excluded
	nsSystem   = "kube-system"   // excluded
	nsLabelled = "kube-system-2" // opted in; only here to prove exclusion is by exact name
)

// fakeNamespaces is a NamespaceLookup over fixed namespaces that records
// which it was asked for. Excluded namespaces are labelled opted in, so a
// test sees it if exclusion ever depended on labels.
type fakeNamespaces struct {
	mu    sync.Mutex
	asked []string
}

func (f *fakeNamespaces) Namespace(_ context.Context, name string) (mutate.Namespace, error) {
	f.mu.Lock()
	f.asked = append(f.asked, name)
	f.mu.Unlock()
	optedIn := map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}
	switch name {
	case nsEnforce, nsOwn, nsSystem, nsLabelled:
		return mutate.Namespace{Name: name, Labels: optedIn}, nil
	case nsWarn:
		return mutate.Namespace{Name: name, Labels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled, mutate.LabelMode: "warn"}}, nil
	case nsPlain:
		return mutate.Namespace{Name: name, Labels: map[string]string{"team": "shop"}}, nil
	case nsBroken:
		return mutate.Namespace{}, errors.New("the API server is having a bad day")
	}
	return mutate.Namespace{}, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, name)
}

func (f *fakeNamespaces) wasAsked(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.asked, name)
}

// fixture is the three webhooks over the fake namespaces, with metrics on a
// registry of their own, served over real HTTP.
type fixture struct {
	opts    mutate.Options
	ns      *fakeNamespaces
	metrics *Metrics
	reg     *prometheus.Registry
	srv     *httptest.Server
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	opts := mutate.DefaultOptions()
	opts.ExcludedNamespaces = append(opts.ExcludedNamespaces, nsOwn)
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{ns: &fakeNamespaces{}, metrics: m, reg: reg, opts: opts}
	mux := http.NewServeMux()
	for path, h := range Endpoints(Config{Options: opts, Namespaces: f.ns, Metrics: m, Log: logr.Discard()}) {
		mux.Handle(path, h)
	}
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// review describes one AdmissionReview request.
type review struct {
	op        admissionv1.Operation
	group     string // "", "apps" or "batch"
	kind      string
	namespace string
	object    string // JSON, or "" for none
	oldObject string
	dryRun    bool
}

// body renders the review as an API server would send it.
func (r review) body(t testing.TB) []byte {
	t.Helper()
	resource := map[string]string{
		"Pod": "pods", "Deployment": "deployments", "StatefulSet": "statefulsets", "DaemonSet": "daemonsets",
		"ReplicaSet": "replicasets", "Job": "jobs", "CronJob": "cronjobs",
	}[r.kind]
	if resource == "" {
		resource = strings.ToLower(r.kind) + "s"
	}
	req := map[string]any{
		"uid":       "705ab4f5-6393-11e8-b7cc-42010a800002",
		"kind":      map[string]string{"group": r.group, "version": "v1", "kind": r.kind},
		"resource":  map[string]string{"group": r.group, "version": "v1", "resource": resource},
		"namespace": r.namespace,
		"name":      "web",
		"operation": string(r.op),
		"userInfo":  map[string]any{"username": "alice", "groups": []string{"system:authenticated"}},
		"dryRun":    r.dryRun,
	}
	if r.object != "" {
		req["object"] = json.RawMessage(r.object)
	}
	if r.oldObject != "" {
		req["oldObject"] = json.RawMessage(r.oldObject)
	}
	b, err := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// post sends a body to a webhook path and decodes the AdmissionReview
// that comes back, failing the test unless the HTTP status is 200.
func (f *fixture) post(t *testing.T, path string, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	resp, err := http.Post(f.srv.URL+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: HTTP %d", path, resp.StatusCode)
	}
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("POST %s: decoding the response: %v", path, err)
	}
	if out.Response == nil {
		t.Fatalf("POST %s: no response in the review", path)
	}
	return out.Response
}

func (f *fixture) send(t *testing.T, path string, r review) *admissionv1.AdmissionResponse {
	t.Helper()
	return f.post(t, path, r.body(t))
}

// ops decodes a response's JSON patch.
func ops(t *testing.T, resp *admissionv1.AdmissionResponse) []map[string]any {
	t.Helper()
	if len(resp.Patch) == 0 {
		return nil
	}
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("patch type %v, want JSONPatch", resp.PatchType)
	}
	var out []map[string]any
	if err := json.Unmarshal(resp.Patch, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// jsonEqual compares two JSON documents by value.
func jsonEqual(t *testing.T, got []byte, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad expected JSON: %v", err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	return bytes.Equal(gb, wb)
}

// pod renders a Pod with one container "app"; extra is spliced into the
// container, annotations into metadata.
func pod(name string, grace int, annotations map[string]string, container string) string {
	meta := map[string]any{"name": name, "uid": "u-" + name}
	if annotations != nil {
		meta["annotations"] = annotations
	}
	mb, _ := json.Marshal(meta)
	c := `{"name":"app","image":"registry.example/app:1"`
	if container != "" {
		c += "," + container
	}
	c += "}"
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":%s,"spec":{"terminationGracePeriodSeconds":%d,"containers":[%s]}}`, mb, grace, c)
}

// template renders a Pod template with one container "app".
func template(annotations map[string]string, container string) string {
	p := pod("ignored", 30, annotations, container)
	var m map[string]any
	_ = json.Unmarshal([]byte(p), &m)
	meta := m["metadata"].(map[string]any)
	delete(meta, "name")
	delete(meta, "uid")
	meta["labels"] = map[string]string{"app": "web"}
	b, _ := json.Marshal(map[string]any{"metadata": meta, "spec": m["spec"]})
	return string(b)
}

// workload renders a workload of kind around a Pod template.
func workload(kind string, replicas int, tpl string) string {
	selector := `"selector":{"matchLabels":{"app":"web"}}`
	switch kind {
	case "Deployment", "StatefulSet", "ReplicaSet":
		return fmt.Sprintf(`{"apiVersion":"apps/v1","kind":%q,"metadata":{"name":"web"},"spec":{"replicas":%d,%s,"template":%s}}`, kind, replicas, selector, tpl)
	case "DaemonSet":
		return fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"web"},"spec":{%s,"template":%s}}`, selector, tpl)
	case "Job":
		return fmt.Sprintf(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"web"},"spec":{"parallelism":%d,"template":%s}}`, replicas, tpl)
	case "CronJob":
		return fmt.Sprintf(`{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"web"},"spec":{"schedule":"*/5 * * * *","jobTemplate":{"spec":{"parallelism":%d,"template":%s}}}}`, replicas, tpl)
	}
	panic("unknown kind " + kind)
}

func groupOf(kind string) string {
	if w, ok := mutate.LookupWorkload(kind); ok {
		return w.Group
	}
	return ""
}
