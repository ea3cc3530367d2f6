package meshoracle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"istio.io/istio/pilot/pkg/features"
	"istio.io/istio/pilot/pkg/model"
	"istio.io/istio/pkg/config/mesh/meshwatcher"
	"istio.io/istio/pkg/kube"
	"istio.io/istio/pkg/kube/inject"
	"istio.io/istio/pkg/kube/multicluster"
	istiolog "istio.io/istio/pkg/log"
	"istio.io/istio/pkg/test"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/google/go-cmp/cmp"
)

// istiod is istiod's admission handler (inject.NewWebhook's /inject) on a
// loopback server, built as Istio's own webhook_test.go builds it: the
// rendered ConfigMap files, a mesh watcher, a fake config store and push
// context, and one cluster with one Node. ENABLE_NATIVE_SIDECARS is
// istiod's default (auto), so the Node's kubelet version decides classic
// or native, as on a real cluster.
type istiod struct {
	url string
}

// newIstiod starts istiod's handler for a cluster whose only Node runs
// kubelet kubeletVersion.
func newIstiod(t *testing.T, s istioSetup, kubeletVersion string) istiod {
	t.Helper()
	prev := features.EnableNativeSidecars
	features.EnableNativeSidecars = features.NativeSidecarModeAuto
	t.Cleanup(func() { features.EnableNativeSidecars = prev })

	dir := t.TempDir()
	configFile, valuesFile := filepath.Join(dir, "config"), filepath.Join(dir, "values")
	if err := os.WriteFile(configFile, []byte(s.rawConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(valuesFile, []byte(s.rawValues), 0o600); err != nil {
		t.Fatal(err)
	}
	watcher, err := inject.NewFileWatcher(configFile, valuesFile)
	if err != nil {
		t.Fatalf("istiod's injection config watcher: %v", err)
	}
	store := model.NewFakeStore()
	env := model.Environment{Watcher: meshwatcher.NewTestWatcher(s.mesh), ConfigStore: store}
	env.SetPushContext(&model.PushContext{ProxyConfigs: model.GetProxyConfigs(store, s.mesh)})

	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
		Status:     corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: kubeletVersion}},
	}
	stop := test.NewStop(t)
	multi := multicluster.NewFakeController()
	client := kube.NewFakeClient(node)
	mux := http.NewServeMux()
	wh, err := inject.NewWebhook(inject.WebhookParameters{
		Watcher: watcher, Env: &env, Mux: mux, MultiCluster: multi,
	})
	if err != nil {
		t.Fatalf("istiod's NewWebhook: %v", err)
	}
	multi.Add("Kubernetes", client, stop)
	client.RunAndWait(stop)
	wh.Run(stop)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return istiod{url: srv.URL + "/inject"}
}

// inject sends the Pod to istiod in an AdmissionReview, as the API server
// does, and applies the JSON patch it returns.
func (d istiod) inject(pod *corev1.Pod) (*corev1.Pod, error) {
	in := pod.DeepCopy()
	in.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("oracle"),
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: ns.Name,
			Name:      in.Name,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
		},
	}
	body, err := json.Marshal(review)
	if err != nil {
		return nil, err
	}
	resp, err := http.Post(d.url, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("istiod answered %s: %s", resp.Status, rb)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rb, &out); err != nil {
		return nil, fmt.Errorf("istiod's AdmissionReview: %v", err)
	}
	r := out.Response
	if r == nil {
		return nil, fmt.Errorf("istiod's AdmissionReview has no response: %s", rb)
	}
	if !r.Allowed {
		msg := ""
		if r.Result != nil {
			msg = r.Result.Message
		}
		return nil, fmt.Errorf("%s", msg)
	}
	if len(r.Patch) == 0 {
		return in, nil
	}
	if r.PatchType == nil || *r.PatchType != admissionv1.PatchTypeJSONPatch {
		return nil, fmt.Errorf("istiod's patch type is %v, want JSONPatch", r.PatchType)
	}
	patch, err := jsonpatch.DecodePatch(r.Patch)
	if err != nil {
		return nil, fmt.Errorf("istiod's patch: %v", err)
	}
	patched, err := patch.Apply(raw)
	if err != nil {
		return nil, fmt.Errorf("applying istiod's patch: %v", err)
	}
	var p corev1.Pod
	if err := json.Unmarshal(patched, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// TestIstiodWebhook holds graceguard to istiod's admission handler: the
// same matrix and corpus, invariants and known list as TestIstioInjector,
// through /inject in both webhook orders.
func TestIstiodWebhook(t *testing.T) {
	for _, sc := range istiolog.Scopes() {
		sc.SetOutputLevel(istiolog.NoneLevel)
	}
	s := istio(t)
	hooks := map[bool]istiod{false: newIstiod(t, s, "v1.32.9"), true: newIstiod(t, s, "v1.33.4")}
	scs := append(matrix(), corpus(t)...)
	counts := map[string]int{}
	key := func(sc scenario, what string) string {
		return reportKey("istiod "+sc.mode(), "istio testdata", sc.corpus, what)
	}
	for _, sc := range scs {
		name := fmt.Sprintf("%s (%s, istiod)", sc.name, sc.mode())
		d := hooks[sc.native]
		a, b, meshErr := bothOrders(t, "istiod", sc.pod, ns, d.inject)
		counts[key(sc, "")]++
		if meshErr != nil {
			counts[key(sc, "refused by istiod")]++
			checkMeshRefused(t, name, sc, b)
			continue
		}
		_, byAnnotation := sc.pod.Annotations["sidecar.istio.io/nativeSidecar"]
		if got := isNative(a.injected); !sc.corpus && !sc.ownProxy && !byAnnotation && got != sc.native {
			t.Errorf("%s: istiod injected native=%v on a kubelet chosen for native=%v", name, got, sc.native)
		}
		if why, ok := known[fmt.Sprintf("%s (%s)", sc.name, sc.mode())]; ok {
			var c collector
			checkBothOrders(&c, name, sc, a, b, map[string]int{}) // counted as known
			if len(c.found) == 0 {
				t.Errorf("%s: listed as a known disagreement (%s), but graceguard and istiod now agree: remove it from known", name, why)
			}
			counts[key(sc, "known disagreement (listed)")]++
			continue
		}
		if bad := invalidHandlers(a.injected); bad != "" {
			counts[key(sc, "istiod's output invalid ("+bad+")")]++
			continue
		}
		sub := map[string]int{}
		checkBothOrders(t, name, sc, a, b, sub)
		for k, n := range sub {
			counts["istiod"+k[len("istio"):]] += n
		}
		if !sc.corpus {
			// The handler and kube-inject must give the same Pod.
			viaCLI, err := s.injectIstio(sc.pod, sc.native)
			if err != nil {
				t.Errorf("%s: istiod injects, kube-inject refuses: %v", name, err)
			} else if diff := podDiff(viaCLI, a.injected); diff != "" {
				t.Errorf("%s: istiod's /inject and kube-inject differ (-kube-inject +istiod):\n%s", name, diff)
			}
		}
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range counts {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		t.Logf("%-84s %4d scenarios, both webhook orders", k, counts[k])
	}
	if counts["istiod classic, matrix"] == 0 || counts["istiod native, matrix"] == 0 || counts["istiod classic, istio testdata"] == 0 {
		t.Errorf("a mode ran no scenarios: %v", counts)
	}
}

// isNative: the Pod's istio-proxy is an init container (a native sidecar).
func isNative(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == "istio-proxy" })
}

// podDiff is the difference of two Pods' specs and annotations.
func podDiff(a, b *corev1.Pod) string {
	return cmp.Diff([]any{a.Spec, a.Annotations, a.Labels}, []any{b.Spec, b.Annotations, b.Labels})
}
