package mutate_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/graceguard/graceguard/internal/meshtest"
	"github.com/graceguard/graceguard/pkg/manifest"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// meshCase is a Pod as its team writes it, in a namespace, meshed by one
// injector (internal/meshtest, generated from the real injectors' output).
type meshCase struct {
	name, what string
	injector   meshtest.Injector
	nsLabels   map[string]string
	nsAnn      map[string]string
	podAnn     map[string]string
	podLabels  map[string]string
	// injectedInput, when set, is a golden input of pkg/mutate
	// (testdata/NAME.yaml) that must hold exactly what the injector makes
	// of this Pod: the "injector ran first" shape the golden files show.
	injectedInput string
}

var istioNS = map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled, mutate.LabelIstioInjection: "enabled"}
var linkerdNSAnn = map[string]string{mutate.AnnotationLinkerdInject: "enabled"}

var meshCases = []meshCase{
	{name: "istio-classic", what: "Istio classic sidecar: istio-proxy gets a preStop sleep of the app's whole shutdown and drains 5s after it",
		injector: meshtest.Injector{Mesh: meshtest.Istio}, nsLabels: istioNS,
		podAnn: map[string]string{mutate.AnnotationMaxWork: "30s"}, injectedInput: "pod-istio-classic-injected"},
	{name: "istio-classic-probes", what: "Istio rewrites probes at injection: graceguard adds none and says so, in both orders",
		injector: meshtest.Injector{Mesh: meshtest.Istio}, nsLabels: istioNS,
		podAnn: map[string]string{mutate.AnnotationReadinessPath: "/readyz"}},
	{name: "istio-native", what: "Istio native sidecar (the default since 1.27): its drain hook runs after the routing window; the grace counts pilot-agent's drain at SIGTERM, for images without a shell",
		injector: meshtest.Injector{Mesh: meshtest.Istio, Native: true}, nsLabels: istioNS, injectedInput: "pod-istio-native-injected"},
	{name: "istio-drain-30s", what: "proxy.istio.io/config terminationDrainDuration 30s: the proxy term is 30s, read from the injected PROXY_CONFIG",
		injector: meshtest.Injector{Mesh: meshtest.Istio}, nsLabels: istioNS,
		podAnn: map[string]string{mutate.AnnotationIstioProxyConfig: "terminationDrainDuration: 30s"}, injectedInput: "pod-istio-drain-30s-injected"},
	{name: "istio-exit-on-zero", what: "EXIT_ON_ZERO_ACTIVE_CONNECTIONS: the proxy drains MINIMUM_DRAIN_DURATION (5s) and one connection check (1s)",
		injector: meshtest.Injector{Mesh: meshtest.Istio}, nsLabels: istioNS,
		podAnn: map[string]string{mutate.AnnotationIstioProxyConfig: "proxyMetadata:\n  EXIT_ON_ZERO_ACTIVE_CONNECTIONS: \"true\"\n"}},
	{name: "linkerd-classic", what: "Linkerd classic sidecar: graceguard sets proxy-wait-before-exit-seconds; the proxy gets Linkerd's /bin/sleep either way",
		injector: meshtest.Injector{Mesh: meshtest.Linkerd}, nsLabels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}, nsAnn: linkerdNSAnn,
		podAnn: map[string]string{mutate.AnnotationMaxWork: "30s"}, injectedInput: "pod-linkerd-classic-injected"},
	{name: "linkerd-classic-longer-wait", what: "a team's own proxy-wait-before-exit-seconds 90 is kept; the grace covers it (linkerd2#10058)",
		injector: meshtest.Injector{Mesh: meshtest.Linkerd}, nsLabels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}, nsAnn: linkerdNSAnn,
		podAnn: map[string]string{mutate.AnnotationLinkerdWaitBeforeExit: "90"}, injectedInput: "pod-linkerd-longer-wait-injected"},
	{name: "linkerd-native", what: "Linkerd native sidecar by annotation: no wait annotation, nothing on the proxy",
		injector: meshtest.Injector{Mesh: meshtest.Linkerd}, nsLabels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}, nsAnn: linkerdNSAnn,
		podAnn: map[string]string{mutate.AnnotationLinkerdNativeSidecar: "true"}, injectedInput: "pod-linkerd-native-injected"},
	{name: "linkerd-native-by-default", what: "Linkerd native sidecars cluster-wide (its default, invisible to graceguard before injection): no wait annotation in either order, the proxy budgeted 0s",
		injector: meshtest.Injector{Mesh: meshtest.Linkerd, Native: true}, nsLabels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}, nsAnn: linkerdNSAnn,
		injectedInput: "pod-linkerd-native-default-injected"},
	{name: "linkerd-native-default-namespace-wait", what: "Linkerd's default native sidecar in a namespace with a wait annotation: graceguard sets none, warns that Linkerd ignores the namespace's",
		injector: meshtest.Injector{Mesh: meshtest.Linkerd, Native: true}, nsLabels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled},
		nsAnn: map[string]string{mutate.AnnotationLinkerdInject: "enabled", mutate.AnnotationLinkerdWaitBeforeExit: "40"}},
	{name: "istio-drain-1m", what: "terminationDrainDuration 1m, as Istio reads it (Go duration; PROXY_CONFIG carries 60s): admitted, the proxy term is 60s",
		injector: meshtest.Injector{Mesh: meshtest.Istio}, nsLabels: istioNS,
		podAnn: map[string]string{mutate.AnnotationIstioProxyConfig: "terminationDrainDuration: 1m"}},
	{name: "istio-containers-names-proxy", what: "graceguard.io/containers names istio-proxy: skipped with a warning in both orders, never a missing container",
		injector: meshtest.Injector{Mesh: meshtest.Istio}, nsLabels: istioNS,
		podAnn: map[string]string{mutate.AnnotationContainers: "app,istio-proxy"}},
	{name: "istio-native-named", what: "a native istio-proxy named in graceguard.io/containers is still the proxy: its drain is delayed, no app sleep, no unknown-length warning",
		injector: meshtest.Injector{Mesh: meshtest.Istio, Native: true}, nsLabels: istioNS,
		podAnn: map[string]string{mutate.AnnotationContainers: "app,istio-proxy"}},
	{name: "istio-classic-exec", what: "graceguard.io/prestop: exec: the proxy's wait is an exec sleep too, for clusters without the sleep action",
		injector: meshtest.Injector{Mesh: meshtest.Istio}, nsLabels: istioNS,
		podAnn: map[string]string{mutate.AnnotationPreStop: "exec"}},
	{name: "linkerd-native-default-wait-20", what: "Linkerd's default native sidecar and a stale wait of 20s: admitted in both orders with a warning (Linkerd ignores the wait)",
		injector: meshtest.Injector{Mesh: meshtest.Linkerd, Native: true}, nsLabels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}, nsAnn: linkerdNSAnn,
		podAnn: map[string]string{mutate.AnnotationLinkerdWaitBeforeExit: "20"}},
	{name: "linkerd-native-default-wait-90", what: "Linkerd's default native sidecar and a stale wait of 90s: the same grace in both orders, the wait not counted",
		injector: meshtest.Injector{Mesh: meshtest.Linkerd, Native: true}, nsLabels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}, nsAnn: linkerdNSAnn,
		podAnn: map[string]string{mutate.AnnotationLinkerdWaitBeforeExit: "90"}},
	{name: "linkerd-native-named", what: "a native linkerd-proxy named in graceguard.io/containers gets no app sleep",
		injector: meshtest.Injector{Mesh: meshtest.Linkerd, Native: true}, nsLabels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}, nsAnn: linkerdNSAnn,
		podAnn: map[string]string{mutate.AnnotationContainers: "app,linkerd-proxy", mutate.AnnotationRoutingDelay: "8s"}},
	{name: "linkerd-native-shutdown-grace", what: "Linkerd native sidecar with shutdown-grace-period 30s: the proxy drains up to 30s after the app, and the grace covers it",
		injector: meshtest.Injector{Mesh: meshtest.Linkerd, Native: true}, nsLabels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}, nsAnn: linkerdNSAnn,
		podAnn: map[string]string{mutate.AnnotationLinkerdShutdownGrace: "30s"}},
	{name: "linkerd-classic-by-annotation", what: "Linkerd classic sidecar by annotation (proxy-enable-native-sidecar: false): the wait annotation is set before injection",
		injector: meshtest.Injector{Mesh: meshtest.Linkerd, Native: true}, nsLabels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}, nsAnn: linkerdNSAnn,
		podAnn: map[string]string{mutate.AnnotationLinkerdNativeSidecar: "false"}},
	{name: "linkerd-nlb-profile", what: "Linkerd behind an NLB (routing profile aws-nlb-ip): the proxy waits routing 2m + work + cleanup",
		injector: meshtest.Injector{Mesh: meshtest.Linkerd}, nsLabels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}, nsAnn: linkerdNSAnn,
		podAnn: map[string]string{mutate.AnnotationRoutingProfile: "aws-nlb-ip"}},
}

// nsName is the case's namespace: one per mesh, so that golden inputs
// sharing a namespace agree on it (test/envtest creates each once).
func (mc meshCase) nsName() string { return string(mc.injector.Mesh) + "-shop" }

func (mc meshCase) pod() *corev1.Pod {
	// The API server defaults the grace to 30, and its ServiceAccount
	// admission plugin sets the service account, before any webhook (the
	// injectors' projected token volumes need one).
	grace := int64(30)
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: mc.nsName(), Labels: mergeMaps(map[string]string{"app": "web"}, mc.podLabels), Annotations: mc.podAnn},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace, ServiceAccountName: "default", Containers: []corev1.Container{{
			Name: "app", Image: "registry.local/web:1",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		}}},
	}
}

func mergeMaps(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// orderGolden is what testdata/order/NAME.golden.yaml records.
type orderGolden struct {
	Case string `json:"case"`
	// GraceguardFirst lists what graceguard changed when it ran before the
	// injector, then when the API server called it again after.
	GraceguardFirst [][]string `json:"graceguardFirst"`
	// InjectorFirst lists what graceguard changed after the injector.
	InjectorFirst []string `json:"injectorFirst"`
	// Object is the Pod as stored, the same in both orders.
	Object json.RawMessage `json:"object"`
}

// TestMeshInjectionOrder runs graceguard and each stand-in injector in both
// orders the API server may call them (graceguard's webhook has
// reinvocationPolicy IfNeeded, the injectors Never) and checks that the
// stored Pod is the same, that graceguard called once more changes nothing,
// and that its budget fits.
func TestMeshInjectionOrder(t *testing.T) {
	for _, mc := range meshCases {
		t.Run(mc.name, func(t *testing.T) {
			ns := mutate.Namespace{Name: mc.nsName(), Labels: mc.nsLabels, Annotations: mc.nsAnn}
			pod := mc.pod()

			// Graceguard first, then the injector, then graceguard again.
			g1, r1 := graceguard(t, pod, ns)
			a, r2 := graceguard(t, mc.injector.Inject(g1, mc.nsLabels, mc.nsAnn), ns)
			// The injector first.
			injected := mc.injector.Inject(pod, mc.nsLabels, mc.nsAnn)
			b, rb := graceguard(t, injected, ns)

			aj, bj := mustJSON(t, a), mustJSON(t, b)
			if diff := cmp.Diff(string(bj), string(aj)); diff != "" {
				t.Fatalf("the stored Pod depends on the webhook order (-injector first +graceguard first):\n%s", diff)
			}
			if _, again := graceguard(t, a, ns); len(again.Changes) > 0 {
				t.Errorf("reinvoking graceguard on the stored Pod changes it: %v", again.Changes)
			}
			if v := mutate.Validate(mutate.ForPod(a.DeepCopy()), ns, mutate.DefaultOptions()); v.Denied() {
				t.Errorf("the stored Pod is denied: %v", v.Err())
			}
			if rb.Mesh == nil || rb.Mesh.Proxy == "" {
				t.Errorf("graceguard did not find the injected proxy: %+v", rb.Mesh)
			}
			if g := *b.Spec.TerminationGracePeriodSeconds; g < rb.Budget.Grace() {
				t.Errorf("grace %d below the budget %s", g, rb.Budget.Arithmetic())
			}

			// A native linkerd-proxy ignores proxy-wait-before-exit-seconds
			// (docs/meshes.md): graceguard must not set it in either order,
			// or its own record contradicts the proxy's 0s term.
			if rb.Mesh != nil && rb.Mesh.Mesh == mutate.MeshLinkerd && rb.Mesh.Native {
				for _, r := range []*mutate.Report{r1, r2, rb} {
					for _, c := range r.Changes {
						if c.Reason == mutate.ChangeMeshAnnotation {
							t.Errorf("a native Linkerd proxy got %s", c)
						}
					}
				}
			}
			if mc.injectedInput != "" {
				checkInjectedInput(t, mc, injected)
			}

			out := orderGolden{Case: mc.what, GraceguardFirst: [][]string{changes(r1), changes(r2)}, InjectorFirst: changes(rb)}
			var obj any
			if err := json.Unmarshal(bj, &obj); err != nil {
				t.Fatal(err)
			}
			out.Object, _ = json.Marshal(obj)
			compareGolden(t, filepath.Join("testdata", "order", mc.name+".golden.yaml"), out)
		})
	}
}

// graceguard is the mutating webhook's decision applied to the raw Pod
// through its JSON patch, as the API server does.
func graceguard(t *testing.T, pod *corev1.Pod, ns mutate.Namespace) (*corev1.Pod, *mutate.Report) {
	t.Helper()
	doc := manifest.Document{Source: "test", Raw: mustJSON(t, pod), APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name}
	res, err := manifest.Process(doc, ns, mutate.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var out corev1.Pod
	if err := json.Unmarshal(res.Object, &out); err != nil {
		t.Fatal(err)
	}
	return &out, res.Mutation
}

func changes(r *mutate.Report) []string {
	out := []string{}
	for _, c := range r.Changes {
		out = append(out, c.String())
	}
	return out
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkInjectedInput holds a golden input to what the stand-in injector
// makes of the case's Pod (UPDATE_GOLDEN=1 writes it).
func checkInjectedInput(t *testing.T, mc meshCase, injected *corev1.Pod) {
	t.Helper()
	path := filepath.Join("testdata", mc.injectedInput+".yaml")
	var nsLabels, nsAnn string
	if len(mc.nsLabels) > 0 {
		b, _ := yaml.Marshal(mc.nsLabels)
		nsLabels = "  labels:\n" + indent(string(b), "    ")
	}
	if len(mc.nsAnn) > 0 {
		b, _ := yaml.Marshal(mc.nsAnn)
		nsAnn = "  annotations:\n" + indent(string(b), "    ")
	}
	podYAML, err := yaml.Marshal(injected)
	if err != nil {
		t.Fatal(err)
	}
	want := "# " + mc.what + " (as the injector leaves it, before graceguard: written by TestMeshInjectionOrder from internal/meshtest)\n" +
		"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + mc.nsName() + "\n" + nsLabels + nsAnn + "---\n" + string(podYAML)
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (UPDATE_GOLDEN=1 writes it)", err)
	}
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("%s is not what the injector makes of the case's Pod (-want +got):\n%s", path, diff)
	}
}

func indent(s, pre string) string {
	var b bytes.Buffer
	for _, l := range bytes.SplitAfter([]byte(s), []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			b.WriteString(pre)
			b.Write(l)
		}
	}
	return b.String()
}

func compareGolden(t *testing.T, path string, v any) {
	t.Helper()
	got, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_GOLDEN=1 to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("outcome differs from %s (-want +got):\n%s", path, diff)
	}
}

// FuzzMeshOrder: for Pods with arbitrary budget annotations and mesh
// settings, meshed by either injector in either mode, the stored Pod does
// not depend on the webhook order, graceguard called again changes
// nothing, and when graceguard admitted it the grace covers the budget,
// mesh proxy included.
func FuzzMeshOrder(f *testing.F) {
	f.Add(uint8(0), false, "5s", "20s", "", "", "")
	f.Add(uint8(1), false, "8", "30s", "40", "", "/ready")
	f.Add(uint8(1), true, "1500ms", "0", "5", "", "")
	f.Add(uint8(0), false, "2m", "1m", "", "terminationDrainDuration: 30s", "/ready")
	f.Add(uint8(0), true, "5s", "20s", "", "proxyMetadata: {EXIT_ON_ZERO_ACTIVE_CONNECTIONS: \"true\"}", "")
	f.Add(uint8(1), false, "x", "20s", "30s", "", "")
	f.Fuzz(func(t *testing.T, mesh uint8, native bool, routing, work, wait, istioConfig, readiness string) {
		mc := meshCase{nsLabels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}, podAnn: map[string]string{}}
		if mesh%2 == 0 {
			mc.injector = meshtest.Injector{Mesh: meshtest.Istio, Native: native}
			mc.nsLabels = istioNS
			if istioConfig != "" {
				mc.podAnn[mutate.AnnotationIstioProxyConfig] = istioConfig
			}
		} else {
			mc.injector = meshtest.Injector{Mesh: meshtest.Linkerd, Native: native}
			mc.nsAnn = linkerdNSAnn
			if wait != "" {
				mc.podAnn[mutate.AnnotationLinkerdWaitBeforeExit] = wait
			}
		}
		for k, v := range map[string]string{mutate.AnnotationRoutingDelay: routing, mutate.AnnotationMaxWork: work, mutate.AnnotationReadinessPath: readiness} {
			if v != "" {
				mc.podAnn[k] = v
			}
		}
		ns := mutate.Namespace{Name: mc.nsName(), Labels: mc.nsLabels, Annotations: mc.nsAnn}
		pod := mc.pod()
		// The API server keeps only valid UTF-8; so must the comparison.
		pod = roundTrip(t, pod)
		g1, _ := graceguard(t, pod, ns)
		a, _ := graceguard(t, mc.injector.Inject(g1, mc.nsLabels, mc.nsAnn), ns)
		b, rb := graceguard(t, mc.injector.Inject(pod, mc.nsLabels, mc.nsAnn), ns)
		if aj, bj := mustJSON(t, a), mustJSON(t, b); string(aj) != string(bj) {
			t.Fatalf("the stored Pod depends on the webhook order:\n%s", cmp.Diff(string(bj), string(aj)))
		}
		if _, again := graceguard(t, a, ns); len(again.Changes) > 0 {
			t.Fatalf("reinvoking graceguard changes the stored Pod: %v", again.Changes)
		}
		if !rb.Applied {
			return
		}
		if g := *b.Spec.TerminationGracePeriodSeconds; g < rb.Budget.Grace() {
			t.Fatalf("grace %d below the budget %s", g, rb.Budget.Arithmetic())
		}
		v := mutate.Validate(mutate.ForPod(b.DeepCopy()), ns, mutate.DefaultOptions())
		for _, f := range v.Violations {
			if f.Reason == mutate.DenyBudgetExceedsGrace || f.Reason == mutate.DenyProxyExitsEarly || f.Reason == mutate.DenyNotMutated {
				t.Fatalf("a Pod graceguard mutated fails its own check: %v", v.Err())
			}
		}
	})
}

func roundTrip(t *testing.T, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	var out corev1.Pod
	if err := json.Unmarshal(mustJSON(t, p), &out); err != nil {
		t.Fatal(err)
	}
	return &out
}
