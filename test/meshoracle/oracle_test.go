package meshoracle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	meshconfig "istio.io/api/mesh/v1alpha1"
	"istio.io/istio/operator/pkg/render"
	"istio.io/istio/pilot/pkg/features"
	"istio.io/istio/pkg/config/mesh"
	"istio.io/istio/pkg/kube/inject"
	istiolog "istio.io/istio/pkg/log"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/graceguard/graceguard/internal/meshtest"
	"github.com/graceguard/graceguard/pkg/manifest"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// istioSetup is Istio's injector as a default install configures it:
// the istio-sidecar-injector and istio ConfigMaps rendered by Istio's own
// chart renderer (the charts embedded in the module), as Istio's tests do.
type istioSetup struct {
	templates inject.Templates
	values    inject.ValuesConfig
	mesh      *meshconfig.MeshConfig
	// rawConfig and rawValues are the ConfigMap's config and values, as
	// istiod reads them from its mounted files.
	rawConfig, rawValues string
}

var (
	setupOnce sync.Once
	setup     istioSetup
	setupErr  error
)

func istio(t *testing.T) istioSetup {
	t.Helper()
	setupOnce.Do(func() { setup, setupErr = renderIstio() })
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	return setup
}

func renderIstio() (istioSetup, error) {
	var s istioSetup
	sets, _, err := render.GenerateManifest(nil, []string{"profile=empty", "components.pilot.enabled=true"}, false, nil, nil)
	if err != nil {
		return s, fmt.Errorf("rendering Istio's charts: %v", err)
	}
	for _, set := range sets {
		for _, o := range set.Manifests {
			if o.GetKind() != "ConfigMap" {
				continue
			}
			data, _ := o.Object["data"].(map[string]any)
			switch o.GetName() {
			case "istio-sidecar-injector":
				raw, _ := data["config"].(string)
				s.rawConfig = raw
				cfg, err := inject.UnmarshalConfig([]byte(raw))
				if err != nil {
					return s, err
				}
				s.templates = cfg.Templates
				vs, _ := data["values"].(string)
				s.rawValues = vs
				if s.values, err = inject.NewValuesConfig(vs); err != nil {
					return s, err
				}
			case "istio":
				md, _ := data["mesh"].(string)
				if s.mesh, err = mesh.ApplyMeshConfig(md, mesh.DefaultMeshConfig()); err != nil {
					return s, err
				}
			}
		}
	}
	if s.templates == nil || s.mesh == nil {
		return s, fmt.Errorf("Istio's charts rendered no istio-sidecar-injector or istio ConfigMap")
	}
	return s, nil
}

// injectIstio runs Istio's injector (kube-inject's IntoObject) on a Pod,
// classic or native as the cluster's ENABLE_NATIVE_SIDECARS decides.
func (s istioSetup) injectIstio(pod *corev1.Pod, native bool) (*corev1.Pod, error) {
	var mode features.NativeSidecarMode = features.NativeSidecarModeDisabled
	if native {
		mode = features.NativeSidecarModeEnabled
	}
	prev := features.EnableNativeSidecars
	features.EnableNativeSidecars = mode
	defer func() { features.EnableNativeSidecars = prev }()
	in := pod.DeepCopy()
	in.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	out, err := inject.IntoObject(nil, s.templates, s.values, "", s.mesh, in, func(string) {})
	if err != nil {
		return nil, err
	}
	p, ok := out.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("injector returned %T", out)
	}
	return p, nil
}

// The namespace graceguard and Istio both mesh.
var ns = mutate.Namespace{Name: "istio-shop", Labels: map[string]string{
	mutate.LabelInject: mutate.LabelInjectEnabled, mutate.LabelIstioInjection: "enabled",
}}

// graceguard is the mutating webhook's decision applied to the Pod, and
// the validating webhook's on the result (what the API server stores or
// refuses).
func graceguard(t *testing.T, pod *corev1.Pod) (*corev1.Pod, manifest.Result) {
	t.Helper()
	return graceguardIn(t, pod, ns)
}

// graceguardIn is graceguard's decision for a Pod of namespace n.
func graceguardIn(t *testing.T, pod *corev1.Pod, n mutate.Namespace) (*corev1.Pod, manifest.Result) {
	t.Helper()
	p := pod.DeepCopy()
	p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	res, err := manifest.Process(manifest.Document{Source: "oracle", Raw: raw, APIVersion: "v1", Kind: "Pod", Namespace: n.Name, Name: p.Name}, n, mutate.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var out corev1.Pod
	if err := json.Unmarshal(res.Object, &out); err != nil {
		t.Fatal(err)
	}
	return &out, res
}

// scenario is one Pod, meshed classic or native.
type scenario struct {
	name   string
	pod    *corev1.Pod
	native bool
	// corpus: a Pod of Istio's own testdata, held to the invariants only.
	corpus bool
	// ownProxy: the Pod declares an istio-proxy container of its own,
	// which the stand-in injector does not model.
	ownProxy bool
	// wantDeny is the reason graceguard must refuse the stored Pod for
	// (the mesh would break it), or "".
	wantDeny mutate.Reason
}

func (sc scenario) mode() string {
	if sc.native {
		return "native"
	}
	return "classic"
}

// countKey names a line of the report: mesh, mode, corpus, and what.
func countKey(sc scenario, what string) string {
	return reportKey("istio "+sc.mode(), "istio testdata", sc.corpus, what)
}

// reportKey names a line of the report: the mesh and its mode, the matrix
// or the mesh's own corpus, and what, if anything.
func reportKey(meshMode, corpusName string, corpus bool, what string) string {
	kind := "matrix"
	if corpus {
		kind = corpusName
	}
	k := meshMode + ", " + kind
	if what != "" {
		k += ": " + what
	}
	return k
}

// outcome is what happened to a scenario in one webhook order.
type outcome struct {
	// injected is the injector's output, before graceguard's second call.
	injected *corev1.Pod
	stored   *corev1.Pod
	refused  string // the injector's error, or graceguard's denial
	reasons  []mutate.Reason
	warnings []mutate.Finding
}

// run runs a scenario in both orders the API server may call the two
// mutating webhooks (graceguard's has reinvocationPolicy IfNeeded,
// Istio's Never), then graceguard's validating webhook on the result.
func run(t *testing.T, s istioSetup, sc scenario) (injectorFirst, graceguardFirst outcome, meshErr error) {
	t.Helper()
	return bothOrders(t, "istio", sc.pod, ns, func(p *corev1.Pod) (*corev1.Pod, error) { return s.injectIstio(p, sc.native) })
}

// bothOrders runs the mesh's injector and graceguard on a Pod of namespace
// n in both webhook orders, then graceguard's validating webhook on each
// result. meshErr is the injector's refusal of the Pod as it was.
func bothOrders(t *testing.T, mesh string, pod *corev1.Pod, n mutate.Namespace, inject func(*corev1.Pod) (*corev1.Pod, error)) (injectorFirst, graceguardFirst outcome, meshErr error) {
	t.Helper()
	injected, meshErr := inject(pod)
	if meshErr != nil {
		injectorFirst.refused = mesh + ": " + meshErr.Error()
	} else {
		injectorFirst = decidedIn(t, injected, n)
		injectorFirst.injected = injected
	}
	g1, _ := graceguardIn(t, pod, n)
	if injected2, err := inject(g1); err != nil {
		graceguardFirst.refused = mesh + ": " + err.Error()
	} else {
		graceguardFirst = decidedIn(t, injected2, n)
	}
	return injectorFirst, graceguardFirst, meshErr
}

// decidedIn is graceguard's decision, both webhooks, on an injected Pod of
// namespace n: what is stored, or why it is refused, and the warnings.
func decidedIn(t *testing.T, injected *corev1.Pod, n mutate.Namespace) outcome {
	t.Helper()
	stored, res := graceguardIn(t, injected, n)
	o := outcome{stored: stored}
	if res.Validation != nil && res.Validation.Denied() {
		o.refused = "graceguard: " + res.Validation.Err().Error()
		for _, f := range res.Validation.Violations {
			o.reasons = append(o.reasons, f.Reason)
		}
	}
	if res.Mutation != nil {
		o.warnings = append(o.warnings, res.Mutation.Warnings...)
	}
	if res.Validation != nil {
		o.warnings = append(o.warnings, res.Validation.Warnings...)
	}
	return o
}

// invalidHandlers names a lifecycle hook of the Pod with more than one
// action, which the API server refuses, or "".
func invalidHandlers(p *corev1.Pod) string {
	if p == nil {
		return ""
	}
	for _, c := range append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...) {
		if c.Lifecycle == nil {
			continue
		}
		for what, h := range map[string]*corev1.LifecycleHandler{"preStop": c.Lifecycle.PreStop, "postStart": c.Lifecycle.PostStart} {
			if h == nil {
				continue
			}
			n := 0
			for _, set := range []bool{h.Exec != nil, h.HTTPGet != nil, h.TCPSocket != nil, h.Sleep != nil} {
				if set {
					n++
				}
			}
			if n > 1 {
				return c.Name + " " + what + " has two actions"
			}
		}
	}
	return ""
}

// meshReasons are graceguard's refusals that claim something about the
// mesh: never given for a Pod the mesh accepts and graceguard could fix.
var meshReasons = []mutate.Reason{mutate.DenyInvalidMeshSetting, mutate.DenyProxyExitsEarly, mutate.DenyNotMutated}

func basePod() *corev1.Pod {
	grace := int64(30) // the API server defaults it before any webhook
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns.Name, Labels: map[string]string{"app": "web"}, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{{
			Name: "app", Image: "registry.local/web:1",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		}}},
	}
}

// matrix is Pods × mesh settings × graceguard settings × classic/native.
func matrix() []scenario {
	type variant struct {
		name     string
		edit     func(*corev1.Pod)
		wantDeny mutate.Reason
	}
	ann := func(kv ...string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			for i := 0; i+1 < len(kv); i += 2 {
				p.Annotations[kv[i]] = kv[i+1]
			}
		}
	}
	pods := []variant{
		{name: "one container", edit: func(*corev1.Pod) {}},
		{name: "readiness probe", edit: func(p *corev1.Pod) {
			p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}}}
		}},
		{name: "two containers", edit: func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "worker", Image: "registry.local/worker:1"})
		}},
		{name: "own grace 120", edit: func(p *corev1.Pod) { g := int64(120); p.Spec.TerminationGracePeriodSeconds = &g }},
	}
	settings := []variant{
		{name: "defaults", edit: func(*corev1.Pod) {}},
		{name: "drain 30s", edit: ann(mutate.AnnotationIstioProxyConfig, "terminationDrainDuration: 30s")},
		{name: "drain 1m", edit: ann(mutate.AnnotationIstioProxyConfig, "terminationDrainDuration: 1m")},
		{name: "drain 1m30s", edit: ann(mutate.AnnotationIstioProxyConfig, "terminationDrainDuration: 1m30s")},
		{name: "drain 500ms", edit: ann(mutate.AnnotationIstioProxyConfig, "terminationDrainDuration: 500ms")},
		{name: "drain json", edit: ann(mutate.AnnotationIstioProxyConfig, `{"terminationDrainDuration": "45s"}`)},
		{name: "exit on zero", edit: ann(mutate.AnnotationIstioProxyConfig, "proxyMetadata:\n  EXIT_ON_ZERO_ACTIVE_CONNECTIONS: \"true\"\n  MINIMUM_DRAIN_DURATION: \"10s\"\n")},
		{name: "exit on zero unquoted", edit: ann(mutate.AnnotationIstioProxyConfig, "proxyMetadata:\n  EXIT_ON_ZERO_ACTIVE_CONNECTIONS: true\n"), wantDeny: mutate.DenyInvalidMeshSetting},
		{name: "drain not a duration", edit: ann(mutate.AnnotationIstioProxyConfig, "terminationDrainDuration: soon"), wantDeny: mutate.DenyInvalidMeshSetting},
		{name: "native by annotation", edit: ann("sidecar.istio.io/nativeSidecar", "true")},
		{name: "classic by annotation", edit: ann("sidecar.istio.io/nativeSidecar", "false")},
		{name: "containers name the proxy", edit: ann(mutate.AnnotationContainers, "app,istio-proxy")},
		{name: "prestop exec", edit: ann(mutate.AnnotationPreStop, "exec")},
		{name: "work 1m routing 8s", edit: ann(mutate.AnnotationMaxWork, "1m", mutate.AnnotationRoutingDelay, "8s")},
		{name: "routing 0", edit: ann(mutate.AnnotationRoutingDelay, "0s")},
	}
	var out []scenario
	for _, native := range []bool{false, true} {
		for _, pv := range pods {
			for _, sv := range settings {
				p := basePod()
				pv.edit(p)
				sv.edit(p)
				out = append(out, scenario{name: pv.name + ", " + sv.name, pod: p, native: native, wantDeny: sv.wantDeny})
			}
		}
		// A proxy wait of the team's own, shorter than the app's shutdown:
		// Istio keeps fields of a container named istio-proxy in the Pod,
		// so a classic proxy would exit while the app still drains.
		p := basePod()
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "istio-proxy", Image: "auto",
			Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 3}}}})
		sc := scenario{name: "own proxy wait 3s", pod: p, native: native, ownProxy: true}
		if !native {
			sc.wantDeny = mutate.DenyProxyExitsEarly
		}
		out = append(out, sc)
	}
	return out
}

// corpus is the Pods of Istio's own injector testdata
// (pkg/kube/inject/testdata/inject/*.yaml: Pods and workloads' templates),
// classic and native.
func corpus(t *testing.T) []scenario {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "istio.io/istio").Output()
	if err != nil {
		t.Fatalf("finding Istio's module: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "pkg", "kube", "inject", "testdata", "inject")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Istio testdata in %s: %v", dir, err)
	}
	var scs []scenario
	for _, f := range files {
		if strings.HasSuffix(f, ".iop.yaml") || strings.HasSuffix(f, ".mesh.yaml") || strings.HasSuffix(f, ".values.yaml") {
			continue // injector settings, not inputs
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(b, []byte("\n---")) {
			p, ok := podOf(doc)
			if !ok {
				continue
			}
			for _, native := range []bool{false, true} {
				scs = append(scs, scenario{name: fmt.Sprintf("%s#%d", filepath.Base(f), i), pod: p, native: native, corpus: true})
			}
		}
	}
	return scs
}

// podOf is the Pod a document makes: a Pod, or a workload's template.
func podOf(doc []byte) (*corev1.Pod, bool) {
	var tm metav1.TypeMeta
	if yaml.Unmarshal(doc, &tm) != nil {
		return nil, false
	}
	var p corev1.Pod
	switch tm.Kind {
	case "Pod":
		if yaml.Unmarshal(doc, &p) != nil {
			return nil, false
		}
	case "Deployment", "DaemonSet", "StatefulSet", "ReplicaSet":
		var d appsv1.Deployment // the template is at the same place in all four
		if yaml.Unmarshal(doc, &d) != nil {
			return nil, false
		}
		p.ObjectMeta, p.Spec = d.Spec.Template.ObjectMeta, d.Spec.Template.Spec
	default:
		return nil, false
	}
	if len(p.Spec.Containers) == 0 {
		return nil, false
	}
	p.Namespace = ns.Name
	if p.Name == "" {
		p.Name = "corpus"
	}
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	if p.Spec.TerminationGracePeriodSeconds == nil {
		g := int64(30)
		p.Spec.TerminationGracePeriodSeconds = &g
	}
	return &p, true
}

// TestIstioInjector holds graceguard to Istio's real injector.
func TestIstioInjector(t *testing.T) {
	// Istio logs each Pod it refuses; the test reports them itself.
	for _, sc := range istiolog.Scopes() {
		sc.SetOutputLevel(istiolog.NoneLevel)
	}
	s := istio(t)
	scs := append(matrix(), corpus(t)...)
	counts := map[string]int{}
	for _, sc := range scs {
		name := fmt.Sprintf("%s (%s)", sc.name, sc.mode())
		a, b, meshErr := run(t, s, sc)
		counts[countKey(sc, "")]++
		if meshErr != nil {
			counts[countKey(sc, "refused by Istio")]++
			checkMeshRefused(t, name, sc, b)
			continue
		}
		if why, ok := known[name]; ok {
			var c collector
			checkBothOrders(&c, name, sc, a, b, map[string]int{}) // counted as known
			if len(c.found) == 0 {
				t.Errorf("%s: listed as a known disagreement (%s), but graceguard and Istio now agree: remove it from known", name, why)
			}
			counts[countKey(sc, "known disagreement (listed)")]++
			continue
		}
		if bad := invalidHandlers(a.injected); bad != "" {
			// Istio's own output is refused by the API server.
			counts[countKey(sc, "Istio's output invalid ("+bad+")")]++
			continue
		}
		checkBothOrders(t, name, sc, a, b, counts)
		if !sc.corpus && !sc.ownProxy {
			checkStandIn(t, name, s, sc)
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
	if counts["istio classic, matrix"] == 0 || counts["istio native, matrix"] == 0 || counts["istio classic, istio testdata"] == 0 {
		t.Errorf("a mode ran no scenarios: %v", counts)
	}
}

// checkMeshRefused: Istio refuses the Pod; graceguard must refuse it too
// when it is the one to say so (the injector failing open, or not yet
// run), and for the same kind of reason.
func checkMeshRefused(t *testing.T, name string, sc scenario, graceguardFirst outcome) {
	t.Helper()
	if sc.corpus {
		return // Istio's testdata meant for other injector settings
	}
	if graceguardFirst.refused == "" {
		t.Errorf("%s: Istio refuses the Pod, but not after graceguard ran first", name)
	}
	_, res := graceguard(t, sc.pod)
	if res.Validation == nil || !slices.ContainsFunc(res.Validation.Violations, func(f mutate.Finding) bool { return f.Reason == mutate.DenyInvalidMeshSetting }) {
		t.Errorf("%s: Istio refuses the Pod; graceguard does not say why (%s): %v", name, mutate.DenyInvalidMeshSetting, res.Validation.Violations)
	}
	if sc.wantDeny != mutate.DenyInvalidMeshSetting {
		t.Errorf("%s: Istio refuses a Pod the matrix means to be valid", name)
	}
}

func checkBothOrders(t reporter, name string, sc scenario, a, b outcome, counts map[string]int) {
	t.Helper()
	if (a.refused == "") != (b.refused == "") {
		t.Errorf("%s: refused in one order only:\n  injector first: %q\n  graceguard first: %q", name, a.refused, b.refused)
		return
	}
	if a.refused == "" {
		// Istio records the containers a template also defines, as the
		// Pod declared them, in proxy.istio.io/overrides (to re-apply
		// them on re-injection): graceguard's sleep is in that record
		// only when graceguard ran first. The record aside, the Pods
		// must be the same.
		if a.stored.Annotations[istioOverrides] != b.stored.Annotations[istioOverrides] {
			counts[countKey(sc, "Istio's overrides record differs by order")]++
		}
		aj, bj := withoutOverrides(a.stored), withoutOverrides(b.stored)
		if diff := cmp.Diff(string(aj), string(bj)); diff != "" {
			t.Errorf("%s: the stored Pod depends on the webhook order (-injector first +graceguard first):\n%s", name, diff)
		}
	}
	switch {
	case sc.wantDeny != "":
		if !slices.Contains(a.reasons, sc.wantDeny) || !slices.Contains(b.reasons, sc.wantDeny) {
			t.Errorf("%s: graceguard must refuse with %s in both orders: %q / %q", name, sc.wantDeny, a.refused, b.refused)
		}
	case a.refused != "":
		// A refusal for a mesh reason must be one the stored Pod bears
		// out: its timeline, read with Istio's parsing, is broken.
		var c collector
		checkTimeline(&c, name, a.stored, sc.native, sc.corpus)
		for _, r := range a.reasons {
			if !sc.corpus || (slices.Contains(meshReasons, r) && len(c.found) == 0) {
				t.Errorf("%s: the mesh accepts the Pod; graceguard refuses it (%s): %s", name, r, a.refused)
			}
		}
		counts[countKey(sc, "refused by graceguard, the timeline broken")]++
	case a.stored.Annotations["sidecar.istio.io/status"] == "":
		// Istio left the Pod alone (opted out, host network): no proxy.
		counts[countKey(sc, "not injected by Istio")]++
	default:
		checkTimeline(t, name, a.stored, sc.native, sc.corpus)
		if !slices.ContainsFunc(a.stored.Spec.Containers, func(c corev1.Container) bool { return c.Name != "istio-proxy" }) {
			// A gateway: graceguard leaves the apps' work and cleanup out.
			counts[countKey(sc, "proxy-only Pod (a gateway), the timeline holds")]++
		}
	}
}

// reporter is testing.T's, or a collector's.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

// collector gathers what a check finds, for the known disagreements
// and for holding a refusal to the timeline it claims is broken.
type collector struct{ found []string }

func (c *collector) Helper() {}
func (c *collector) Errorf(format string, args ...any) {
	c.found = append(c.found, fmt.Sprintf(format, args...))
}

const istioOverrides = "proxy.istio.io/overrides"

func withoutOverrides(p *corev1.Pod) []byte {
	q := p.DeepCopy()
	delete(q.Annotations, istioOverrides)
	b, _ := json.Marshal(q)
	return b
}

// known are the corpus Pods on which graceguard and Istio are known to
// disagree, and why; each must still disagree (the test fails when one
// is fixed, so the list cannot rot).
var known = map[string]string{
	// A manifest kube-injected in classic mode, re-injected by a native
	// mode injector: Istio merges the old proxy's lifecycle into the
	// native one. Run first, graceguard gave the classic proxy its wait,
	// which Istio then merges beside its own drain hook (two handlers,
	// which the API server refuses). graceguard cannot tell from the Pod
	// that Istio will re-inject it in another form.
	"merge-probers.yaml#0 (native)": "re-injection from classic to native",
	// A Pod of nothing but a declared istio-proxy: graceguard treats it
	// before injection (a proxy-only Pod: the routing window, no app
	// terms) and skips it after, when a native injector has moved the
	// proxy to the init containers and no regular container is left.
	// Before injection graceguard cannot know which form the node gets.
	"only-proxy-container.yaml#0 (native)": "a Pod without an app container",
}

// checkTimeline reads the stored Pod as the kubelet and pilot-agent run
// it, with Istio's own parsing of the proxy's settings, and checks that
// the proxy keeps routing until the app's work is done and that the
// grace covers every term.
func checkTimeline(t reporter, name string, p *corev1.Pod, native, corpus bool) {
	t.Helper()
	terms, ok := budgetTerms(p.Annotations["graceguard.io/budget"])
	if !ok {
		t.Errorf("%s: no graceguard.io/budget on the stored Pod", name)
		return
	}
	app := terms["routing"] + terms["work"] + terms["cleanup"]
	grace := time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second
	proxy, inInit := findContainer(p, "istio-proxy")
	if proxy == nil {
		if !corpus { // Istio's testdata has proxyless templates (grpc-simple)
			t.Errorf("%s: Istio injected no istio-proxy", name)
		}
		return
	}
	// The Pod's annotation overrides the cluster's mode (Istio's template).
	if v, ok := p.Annotations["sidecar.istio.io/nativeSidecar"]; ok {
		native = v != "false"
	}
	if inInit != native && !corpus {
		t.Errorf("%s: istio-proxy is a native sidecar: %v, want %v", name, inInit, native)
		return
	}
	native = inInit // templates of Istio's testdata (gateways) choose their own form
	drain := istioDrain(t, name, proxy)
	var pre *corev1.LifecycleHandler
	if proxy.Lifecycle != nil {
		pre = proxy.Lifecycle.PreStop
	}
	if !native {
		wait, ok := sleepOf(pre)
		if !ok {
			t.Errorf("%s: the classic proxy's preStop is not a wait: %+v", name, pre)
			return
		}
		if wait < app {
			t.Errorf("%s: the proxy gets SIGTERM at %s, before the app's shutdown ends at %s", name, wait, app)
		}
		if need := max(wait, app) + drain; grace < need {
			t.Errorf("%s: grace %s does not cover the proxy's wait %s and drain %s after the app's %s", name, grace, wait, drain, app)
		}
		return
	}
	// Native: SIGTERM after the app exited; the drain request must not
	// come while the app is still in its routing window.
	if start, direct := drainStart(pre); direct && start < terms["routing"] {
		t.Errorf("%s: the native proxy starts draining at %s, inside the %s routing window", name, start, terms["routing"])
	}
	if need := app + drain; grace < need {
		t.Errorf("%s: grace %s does not cover the app's %s and the proxy's drain %s", name, grace, app, drain)
	}
}

// istioDrain is how long pilot-agent runs after its SIGTERM, from the
// container's environment as pilot-agent reads it (PROXY_CONFIG through
// Istio's mesh.ApplyProxyConfig; EXIT_ON_ZERO_ACTIVE_CONNECTIONS: its
// MINIMUM_DRAIN_DURATION and one connection check, pkg/envoy/agent.go).
func istioDrain(t reporter, name string, c *corev1.Container) time.Duration {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	mc := mesh.DefaultMeshConfig()
	if v := env["PROXY_CONFIG"]; v != "" {
		var err error
		if mc, err = mesh.ApplyProxyConfig(v, mc); err != nil {
			t.Errorf("%s: PROXY_CONFIG does not parse as Istio reads it: %v", name, err)
		}
	}
	drain := mc.GetDefaultConfig().GetTerminationDrainDuration().AsDuration()
	if b, _ := strconv.ParseBool(env["EXIT_ON_ZERO_ACTIVE_CONNECTIONS"]); b {
		drain = 5 * time.Second
		if d, err := time.ParseDuration(env["MINIMUM_DRAIN_DURATION"]); err == nil {
			drain = d
		}
		drain += time.Second
	}
	return drain
}

func findContainer(p *corev1.Pod, name string) (*corev1.Container, bool) {
	for i := range p.Spec.InitContainers {
		if c := &p.Spec.InitContainers[i]; c.Name == name && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			return c, true
		}
	}
	for i := range p.Spec.Containers {
		if c := &p.Spec.Containers[i]; c.Name == name {
			return c, false
		}
	}
	return nil, false
}

// sleepOf is a hook's wait: a sleep action or `sleep N`.
func sleepOf(h *corev1.LifecycleHandler) (time.Duration, bool) {
	switch {
	case h == nil:
		return 0, true
	case h.Sleep != nil:
		return time.Duration(h.Sleep.Seconds) * time.Second, true
	case h.Exec != nil && len(h.Exec.Command) == 2 && strings.HasSuffix(h.Exec.Command[0], "sleep"):
		n, err := strconv.ParseInt(h.Exec.Command[1], 10, 64)
		return time.Duration(n) * time.Second, err == nil
	}
	return 0, false
}

var delayedDrain = regexp.MustCompile(`^sleep ([0-9]+) && exec pilot-agent request --debug-port=[0-9]+ POST drain$`)

// drainStart is when a native proxy's preStop asks Envoy to drain, and
// whether it does.
func drainStart(h *corev1.LifecycleHandler) (time.Duration, bool) {
	if h == nil || h.Exec == nil {
		return 0, false
	}
	c := h.Exec.Command
	if len(c) == 5 && c[0] == "pilot-agent" && c[3] == "POST" && c[4] == "drain" {
		return 0, true
	}
	if len(c) == 3 && c[0] == "sh" && c[1] == "-c" {
		if m := delayedDrain.FindStringSubmatch(c[2]); m != nil {
			n, _ := strconv.Atoi(m[1])
			return time.Duration(n) * time.Second, true
		}
	}
	return 0, false
}

// budgetTerms reads graceguard.io/budget ("routing=5s work=20s ...").
func budgetTerms(v string) (map[string]time.Duration, bool) {
	out := map[string]time.Duration{}
	for _, f := range strings.Fields(v) {
		k, d, ok := strings.Cut(f, "=")
		if !ok {
			return nil, false
		}
		dd, err := time.ParseDuration(d)
		if err != nil {
			return nil, false
		}
		out[k] = dd
	}
	_, ok := out["routing"]
	return out, ok
}

// checkStandIn holds internal/meshtest's Istio stand-in (which the
// product's unit and envtest suites use) to the real injector, in what
// graceguard reads: where the proxy is, its restart policy and preStop,
// its drain as pilot-agent reads it, and the app's probes.
func checkStandIn(t *testing.T, name string, s istioSetup, sc scenario) {
	t.Helper()
	real, err := s.injectIstio(sc.pod, sc.native)
	if err != nil {
		return
	}
	fake := meshtest.Injector{Mesh: meshtest.Istio, Native: sc.native}.Inject(sc.pod.DeepCopy(), ns.Labels, ns.Annotations)
	type shape struct {
		Native     bool
		Index      int
		Restart    *corev1.ContainerRestartPolicy
		PreStop    *corev1.LifecycleHandler
		Drain      time.Duration
		ExitOnZero string
		MinDrain   string
		AppProbes  []*corev1.Probe
		AppNames   []string
	}
	shapeOf := func(p *corev1.Pod) shape {
		var sh shape
		c, inInit := findContainer(p, "istio-proxy")
		if c == nil {
			return sh
		}
		sh.Native, sh.Restart = inInit, c.RestartPolicy
		list := p.Spec.Containers
		if inInit {
			list = p.Spec.InitContainers
		}
		sh.Index = slices.IndexFunc(list, func(x corev1.Container) bool { return x.Name == "istio-proxy" })
		if c.Lifecycle != nil {
			sh.PreStop = c.Lifecycle.PreStop
		}
		sh.Drain = istioDrain(t, name, c)
		for _, e := range c.Env {
			switch e.Name {
			case "EXIT_ON_ZERO_ACTIVE_CONNECTIONS":
				sh.ExitOnZero = e.Value
			case "MINIMUM_DRAIN_DURATION":
				sh.MinDrain = e.Value
			}
		}
		for _, a := range p.Spec.Containers {
			if a.Name != "istio-proxy" {
				sh.AppNames = append(sh.AppNames, a.Name)
				sh.AppProbes = append(sh.AppProbes, a.ReadinessProbe)
			}
		}
		return sh
	}
	if diff := cmp.Diff(shapeOf(real), shapeOf(fake)); diff != "" {
		t.Errorf("%s: internal/meshtest's Istio differs from Istio's injector (-real +stand-in):\n%s", name, diff)
	}
}
