package meshoracle

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/linkerd/linkerd2/pkg/charts/linkerd2"
	"github.com/linkerd/linkerd2/pkg/inject"
	l5dk8s "github.com/linkerd/linkerd2/pkg/k8s"
	"github.com/linkerd/linkerd2/pkg/version"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/graceguard/graceguard/internal/meshtest"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// linkerdDir is Linkerd's source, copied from a repository snapshot
// (third_party/linkerd2/README.md names the commit).
const linkerdDir = "third_party/linkerd2"

// linkerdNS is the namespace graceguard and Linkerd both mesh; a scenario
// may add config annotations to it (Linkerd copies them to its Pods).
func linkerdNS(ann map[string]string) mutate.Namespace {
	n := mutate.Namespace{Name: "linkerd-shop",
		Labels:      map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled},
		Annotations: map[string]string{l5dk8s.ProxyInjectAnnotation: l5dk8s.ProxyInjectEnabled}}
	for k, v := range ann {
		n.Annotations[k] = v
	}
	return n
}

var (
	l5dOnce   sync.Once
	l5dValues *linkerd2.Values
	l5dErr    error
)

// linkerdDefaults are the values of a default install: the chart's
// values.yaml (proxy.nativeSidecar: true), with the trust anchors
// Linkerd's own webhook tests use.
func linkerdDefaults(t *testing.T) *linkerd2.Values {
	t.Helper()
	l5dOnce.Do(func() {
		logrus.SetLevel(logrus.ErrorLevel) // the injector logs each value it ignores; the test reports them itself
		l5dValues, l5dErr = linkerd2.NewValues()
		if l5dErr == nil {
			l5dValues.IdentityTrustAnchorsPEM = "IdentityTrustAnchorsPEM"
		}
	})
	if l5dErr != nil {
		t.Fatalf("Linkerd's chart values: %v", l5dErr)
	}
	return l5dValues
}

// injectLinkerd is Linkerd's proxy-injector admitting a Pod: the steps of
// its admission handler (controller/proxy-injector/webhook.go, Inject)
// with the namespace's annotations given instead of read from the API,
// on an install whose proxy.nativeSidecar is native. It returns the Pod
// with the injector's patch applied.
func injectLinkerd(t *testing.T, pod *corev1.Pod, nsAnn map[string]string, native bool) (*corev1.Pod, error) {
	t.Helper()
	values, err := linkerdDefaults(t).DeepCopy()
	if err != nil {
		return nil, err
	}
	values.Proxy.NativeSidecar = native
	in := pod.DeepCopy()
	in.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	patch, err := linkerdPatch(values, nsAnn, raw)
	if err != nil {
		return nil, err
	}
	if len(patch) == 0 {
		return in, nil
	}
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, fmt.Errorf("Linkerd's patch: %v", err)
	}
	outRaw, err := p.Apply(raw)
	if err != nil {
		return nil, fmt.Errorf("applying Linkerd's patch: %v", err)
	}
	var out corev1.Pod
	if err := json.Unmarshal(outRaw, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// linkerdPatch is the JSON patch Linkerd's admission handler answers for
// a Pod (webhook.go, Inject, in its order of calls).
func linkerdPatch(values *linkerd2.Values, nsAnn map[string]string, raw []byte) ([]byte, error) {
	conf := inject.NewResourceConfig(values, inject.OriginWebhook, "linkerd").
		WithNsAnnotations(nsAnn).
		WithKind("Pod")
	report, err := conf.ParseMetaAndYAML(raw)
	if err != nil {
		return nil, err
	}
	if ok, _ := report.Injectable(); !ok {
		return conf.CreateOpaquePortsPatch()
	}
	conf.AppendPodAnnotation(l5dk8s.CreatedByAnnotation, fmt.Sprintf("linkerd/proxy-injector %s", version.Version))
	inject.AppendNamespaceAnnotations(conf.GetOverrideAnnotations(), conf.GetNsAnnotations(), conf.GetWorkloadAnnotations())
	if !conf.HasWorkloadAnnotation(l5dk8s.ProxyOpaquePortsAnnotation) {
		defaultPorts := strings.Split(conf.GetValues().Proxy.OpaquePorts, ",")
		if filtered := conf.FilterPodOpaquePorts(defaultPorts); len(filtered) != 0 {
			conf.AppendPodAnnotation(l5dk8s.ProxyOpaquePortsAnnotation, strings.Join(filtered, ","))
		}
	}
	return conf.GetPodPatch(true, inject.GetOverriddenValues)
}

// TestLinkerdHarness holds the harness to Linkerd's own webhook tests: on
// their fixtures, with their settings, it must answer their golden
// patches (controller/proxy-injector/webhook_test.go, TestGetPodPatch).
// Without this, the oracle could be running the injector wrongly.
func TestLinkerdHarness(t *testing.T) {
	data := filepath.Join(linkerdDir, "controller", "proxy-injector", "fake", "data")
	enabled := map[string]string{l5dk8s.ProxyInjectAnnotation: l5dk8s.ProxyInjectEnabled}
	nsConfig := map[string]string{
		l5dk8s.ProxyInjectAnnotation:                l5dk8s.ProxyInjectEnabled,
		l5dk8s.ProxyIgnoreOutboundPortsAnnotation:   "34567",
		l5dk8s.ProxyWaitBeforeExitSecondsAnnotation: "300",
		"config.linkerd.io/invalid-key":             "invalid-value",
	}
	cases := []struct {
		pod, patch string
		ns         map[string]string
	}{
		{"pod-inject-empty.yaml", "pod.patch.json", enabled},
		{"pod-inject-enabled.yaml", "pod.patch.json", enabled},
		{"pod-inject-enabled.yaml", "pod.patch.json", map[string]string{}},
		{"pod-with-debug-disabled.yaml", "pod.patch.json", map[string]string{}},
		{"pod-with-debug-enabled.yaml", "pod-with-debug.patch.json", enabled},
		{"pod-inject-enabled.yaml", "pod-with-ns-annotations.patch.json", nsConfig},
		{"pod-nativesidecar-inject-enabled.yaml", "pod.nativesidecar.patch.json", map[string]string{}},
	}
	for _, c := range cases {
		podYAML, err := os.ReadFile(filepath.Join(data, c.pod))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := yaml.YAMLToJSON(podYAML)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(data, c.patch))
		if err != nil {
			t.Fatal(err)
		}
		values, err := linkerdDefaults(t).DeepCopy()
		if err != nil {
			t.Fatal(err)
		}
		got, err := linkerdPatchTest(values, c.ns, raw, c.patch == "pod-with-ns-annotations.patch.json")
		if err != nil {
			t.Fatalf("%s: %v", c.pod, err)
		}
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(w, g); diff != "" {
			t.Errorf("%s: the injector's patch differs from Linkerd's golden %s (-golden +got):\n%s", c.pod, c.patch, diff)
		}
	}
}

// linkerdPatchTest is the patch as Linkerd's TestGetPodPatch asks for it:
// GetPodPatch alone, with its fake owner (ownerRetrieverFake), and the
// namespace's annotations copied when the test does (its "pod inherits
// config annotations" case).
func linkerdPatchTest(values *linkerd2.Values, nsAnn map[string]string, raw []byte, copyNS bool) ([]byte, error) {
	owner := func(*corev1.Pod) (string, string, error) { return l5dk8s.Deployment, "owner-deployment", nil }
	conf := inject.NewResourceConfig(values, inject.OriginWebhook, "linkerd").WithNsAnnotations(nsAnn).WithKind("Pod").WithOwnerRetriever(owner)
	if _, err := conf.ParseMetaAndYAML(raw); err != nil {
		return nil, err
	}
	if copyNS {
		inject.AppendNamespaceAnnotations(conf.GetOverrideAnnotations(), conf.GetNsAnnotations(), conf.GetWorkloadAnnotations())
	}
	return conf.GetPodPatch(true, inject.GetOverriddenValues)
}

// TestLinkerdKeys: graceguard reads Linkerd's settings under Linkerd's names.
func TestLinkerdKeys(t *testing.T) {
	for ours, theirs := range map[string]string{
		mutate.AnnotationLinkerdInject:             l5dk8s.ProxyInjectAnnotation,
		mutate.AnnotationLinkerdWaitBeforeExit:     l5dk8s.ProxyWaitBeforeExitSecondsAnnotation,
		mutate.AnnotationLinkerdShutdownGrace:      l5dk8s.ProxyShutdownGracePeriodAnnotation,
		mutate.AnnotationLinkerdNativeSidecar:      l5dk8s.ProxyEnableNativeSidecarAnnotation,
		mutate.AnnotationLinkerdNativeSidecarBeta:  l5dk8s.ProxyEnableNativeSidecarAnnotationBeta,
		mutate.AnnotationLinkerdNativeSidecarAlpha: l5dk8s.ProxyEnableNativeSidecarAnnotationAlpha,
		mutate.ContainerLinkerdProxy:               l5dk8s.ProxyContainerName,
	} {
		if ours != theirs {
			t.Errorf("graceguard reads %q where Linkerd reads %q", ours, theirs)
		}
	}
}

// l5dScenario is one Pod in one namespace, on a classic or native install.
type l5dScenario struct {
	name   string
	pod    *corev1.Pod
	nsAnn  map[string]string
	native bool // the install's proxy.nativeSidecar
	corpus bool // a Pod of Linkerd's own fixtures, held to the invariants only
	// wantDeny is the reason graceguard must refuse the stored Pod for, or "".
	wantDeny mutate.Reason
	// staleWait: the Pod's proxy ends native with a wait annotation that
	// Linkerd ignores; graceguard must warn of it in both orders.
	staleWait bool
}

func (sc l5dScenario) mode() string {
	if sc.native {
		return "native"
	}
	return "classic"
}

func l5dKey(sc l5dScenario, what string) string {
	return reportKey(fmt.Sprintf("linkerd %s install", sc.mode()), "linkerd fixtures", sc.corpus, what)
}

func l5dBasePod() *corev1.Pod {
	p := basePod()
	p.Namespace = "linkerd-shop"
	return p
}

// l5dMatrix is Pods × Linkerd settings × graceguard settings × installs.
func l5dMatrix() []l5dScenario {
	type variant struct {
		name  string
		edit  func(*corev1.Pod)
		nsAnn map[string]string
		// deny: the reason to refuse for, on a classic proxy only (a
		// native one ignores the wait).
		deny mutate.Reason
		// denyEither: the reason to refuse for, whatever the proxy's form.
		denyEither mutate.Reason
		// native: what the Pod's annotations make the proxy (nil: the install decides).
		native *bool
		wait   bool
		// skipped: Linkerd's injector leaves the Pod alone.
		skipped bool
	}
	yes, no := true, false
	ann := func(kv ...string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			for i := 0; i+1 < len(kv); i += 2 {
				p.Annotations[kv[i]] = kv[i+1]
			}
		}
	}
	wait := l5dk8s.ProxyWaitBeforeExitSecondsAnnotation
	grace := l5dk8s.ProxyShutdownGracePeriodAnnotation
	pods := []variant{
		{name: "one container", edit: func(*corev1.Pod) {}},
		{name: "readiness probe", edit: func(p *corev1.Pod) {
			p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}}}
		}},
		{name: "two containers", edit: func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "worker", Image: "registry.local/worker:1"})
		}},
		{name: "own grace 120", edit: func(p *corev1.Pod) { g := int64(120); p.Spec.TerminationGracePeriodSeconds = &g }},
		// Linkerd's injector skips a Pod on the host network, though its
		// annotations ask for it (report.go, Injectable); it meshes one
		// without a service account token (the chart projects its own).
		{name: "host network", edit: func(p *corev1.Pod) { p.Spec.HostNetwork = true }, skipped: true},
		{name: "no service account token", edit: func(p *corev1.Pod) { f := false; p.Spec.AutomountServiceAccountToken = &f }},
	}
	settings := []variant{
		{name: "defaults", edit: func(*corev1.Pod) {}},
		{name: "wait 20", edit: ann(wait, "20"), wait: true, deny: mutate.DenyProxyExitsEarly},
		{name: "wait 90", edit: ann(wait, "90"), wait: true},
		{name: "wait 3", edit: ann(wait, "3"), wait: true, deny: mutate.DenyProxyExitsEarly},
		{name: "wait 0", edit: ann(wait, "0"), wait: true, deny: mutate.DenyProxyExitsEarly},
		{name: "wait not a number", edit: ann(wait, "soon")},
		{name: "namespace wait 90", nsAnn: map[string]string{wait: "90"}, wait: true},
		{name: "shutdown grace 30s", edit: ann(grace, "30s")},
		{name: "shutdown grace 1m30s", edit: ann(grace, "1m30s")},
		{name: "shutdown grace 500ms", edit: ann(grace, "500ms")},
		{name: "shutdown grace not a duration", edit: ann(grace, "soon")},
		// The injector passes it on as -30000ms, which linkerd2-proxy
		// refuses at start; -500us it writes as 0ms, which it reads.
		{name: "shutdown grace -30s", edit: ann(grace, "-30s"), denyEither: mutate.DenyInvalidMeshSetting},
		{name: "shutdown grace -500us", edit: ann(grace, "-500us")},
		{name: "namespace shutdown grace 45s", nsAnn: map[string]string{grace: "45s"}},
		{name: "wait 90 and shutdown grace 20s", edit: ann(wait, "90", grace, "20s"), wait: true},
		{name: "native by annotation", edit: ann(l5dk8s.ProxyEnableNativeSidecarAnnotation, "true"), native: &yes},
		{name: "classic by annotation", edit: ann(l5dk8s.ProxyEnableNativeSidecarAnnotation, "false"), native: &no},
		{name: "classic by beta annotation", edit: ann(l5dk8s.ProxyEnableNativeSidecarAnnotationBeta, "false"), native: &no},
		{name: "classic by alpha annotation", edit: ann(l5dk8s.ProxyEnableNativeSidecarAnnotationAlpha, "false"), native: &no},
		{name: "classic by namespace", nsAnn: map[string]string{l5dk8s.ProxyEnableNativeSidecarAnnotation: "false"}, native: &no},
		{name: "native annotation not a boolean", edit: ann(l5dk8s.ProxyEnableNativeSidecarAnnotation, "maybe")},
		{name: "classic by annotation, wait 20", edit: ann(l5dk8s.ProxyEnableNativeSidecarAnnotation, "false", wait, "20"), native: &no, wait: true, deny: mutate.DenyProxyExitsEarly},
		{name: "native by annotation, wait 20", edit: ann(l5dk8s.ProxyEnableNativeSidecarAnnotation, "true", wait, "20"), native: &yes, wait: true},
		{name: "containers name the proxy", edit: ann(mutate.AnnotationContainers, "app,linkerd-proxy")},
		{name: "prestop exec", edit: ann(mutate.AnnotationPreStop, "exec")},
		{name: "work 1m routing 8s", edit: ann(mutate.AnnotationMaxWork, "1m", mutate.AnnotationRoutingDelay, "8s")},
		{name: "routing 0", edit: ann(mutate.AnnotationRoutingDelay, "0s")},
		{name: "injection disabled", edit: ann(l5dk8s.ProxyInjectAnnotation, l5dk8s.ProxyInjectDisabled)},
	}
	var out []l5dScenario
	for _, native := range []bool{false, true} {
		for _, pv := range pods {
			for _, sv := range settings {
				p := l5dBasePod()
				pv.edit(p)
				if sv.edit != nil {
					sv.edit(p)
				}
				proxyNative := native
				if sv.native != nil {
					proxyNative = *sv.native
				}
				sc := l5dScenario{name: pv.name + ", " + sv.name, pod: p, nsAnn: sv.nsAnn, native: native, staleWait: sv.wait && proxyNative && !pv.skipped}
				// A wait shorter than the app's shutdown on a classic
				// proxy: Linkerd writes it as the proxy's preStop, and
				// the proxy exits while the app still drains. The Pod
				// with its own grace of 120 still needs more than 20.
				if !proxyNative && !pv.skipped {
					sc.wantDeny = sv.deny
				}
				if sv.denyEither != "" && !pv.skipped {
					sc.wantDeny = sv.denyEither
				}
				out = append(out, sc)
			}
		}
	}
	return out
}

// l5dCorpus is the Pods of Linkerd's proxy-injector fixtures
// (controller/proxy-injector/fake/data: Pods and Deployments), on both installs.
func l5dCorpus(t *testing.T) []l5dScenario {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(linkerdDir, "controller", "proxy-injector", "fake", "data", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Linkerd fixtures in %s: %v", linkerdDir, err)
	}
	var out []l5dScenario
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, ok := podOf(b)
		if !ok {
			continue
		}
		p.Namespace = "linkerd-shop"
		for _, native := range []bool{false, true} {
			out = append(out, l5dScenario{name: filepath.Base(f), pod: p.DeepCopy(), native: native, corpus: true})
		}
	}
	return out
}

// runLinkerd runs a scenario in both webhook orders, then graceguard's
// validating webhook on the result.
func runLinkerd(t *testing.T, sc l5dScenario) (injectorFirst, graceguardFirst outcome) {
	t.Helper()
	n := linkerdNS(sc.nsAnn)
	injectorFirst, graceguardFirst, _ = bothOrders(t, "linkerd", sc.pod, n, func(p *corev1.Pod) (*corev1.Pod, error) {
		return injectLinkerd(t, p, n.Annotations, sc.native)
	})
	return injectorFirst, graceguardFirst
}

// TestLinkerdInjector holds graceguard to Linkerd's real injector.
func TestLinkerdInjector(t *testing.T) {
	scs := append(l5dMatrix(), l5dCorpus(t)...)
	counts := map[string]int{}
	for _, sc := range scs {
		name := fmt.Sprintf("%s (%s install)", sc.name, sc.mode())
		a, b := runLinkerd(t, sc)
		counts[l5dKey(sc, "")]++
		if strings.HasPrefix(a.refused, "linkerd: ") || strings.HasPrefix(b.refused, "linkerd: ") {
			t.Errorf("%s: Linkerd's injector fails: %q / %q", name, a.refused, b.refused)
			continue
		}
		if bad := invalidHandlers(a.injected); bad != "" {
			counts[l5dKey(sc, "Linkerd's output invalid ("+bad+")")]++
			continue
		}
		l5dCheckBothOrders(t, name, sc, a, b, counts)
		if !sc.corpus {
			l5dCheckStandIn(t, name, sc)
		}
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range counts {
			if !yield(k) {
				return
			}
		}
	}) {
		t.Logf("%-84s %4d scenarios, both webhook orders", k, counts[k])
	}
	for _, k := range []string{"linkerd classic install, matrix", "linkerd native install, matrix", "linkerd classic install, linkerd fixtures", "linkerd native install, linkerd fixtures"} {
		if counts[k] == 0 {
			t.Errorf("%s ran no scenarios: %v", k, counts)
		}
	}
}

func l5dCheckBothOrders(t *testing.T, name string, sc l5dScenario, a, b outcome, counts map[string]int) {
	t.Helper()
	if (a.refused == "") != (b.refused == "") {
		t.Errorf("%s: refused in one order only:\n  injector first: %q\n  graceguard first: %q", name, a.refused, b.refused)
		return
	}
	if a.refused == "" {
		aj, _ := json.Marshal(a.stored)
		bj, _ := json.Marshal(b.stored)
		if diff := cmp.Diff(string(aj), string(bj)); diff != "" {
			t.Errorf("%s: the stored Pod depends on the webhook order (-injector first +graceguard first):\n%s", name, diff)
		}
	}
	if sc.staleWait {
		for order, o := range map[string]outcome{"injector first": a, "graceguard first": b} {
			if !slices.ContainsFunc(o.warnings, func(f mutate.Finding) bool {
				return f.Reason == mutate.WarnMeshSettingIgnored && strings.Contains(f.Err.Field, l5dk8s.ProxyWaitBeforeExitSecondsAnnotation)
			}) {
				t.Errorf("%s (%s): a native proxy ignores %s; graceguard does not warn of it: %v", name, order, l5dk8s.ProxyWaitBeforeExitSecondsAnnotation, o.warnings)
			}
		}
		counts[l5dKey(sc, "native, the wait annotation warned of")]++
	}
	proxy, _ := findContainer(a.stored, l5dk8s.ProxyContainerName)
	switch {
	case sc.wantDeny != "":
		if !slices.Contains(a.reasons, sc.wantDeny) || !slices.Contains(b.reasons, sc.wantDeny) {
			t.Errorf("%s: graceguard must refuse with %s in both orders: %q / %q", name, sc.wantDeny, a.refused, b.refused)
		}
		var c collector
		l5dCheckTimeline(&c, name, a.stored)
		if len(c.found) == 0 {
			t.Errorf("%s: graceguard must refuse, yet the stored Pod's timeline holds", name)
		}
		why := "refused by graceguard, the proxy exits early"
		if sc.wantDeny == mutate.DenyInvalidMeshSetting {
			why = "refused by graceguard, the proxy would not start"
		}
		counts[l5dKey(sc, why)]++
	case a.refused != "":
		var c collector
		l5dCheckTimeline(&c, name, a.stored)
		for _, r := range a.reasons {
			if !sc.corpus || (slices.Contains(meshReasons, r) && len(c.found) == 0) {
				t.Errorf("%s: the mesh accepts the Pod; graceguard refuses it (%s): %s", name, r, a.refused)
			}
		}
		counts[l5dKey(sc, "refused by graceguard, the timeline broken")]++
	case proxy == nil:
		counts[l5dKey(sc, "not injected by Linkerd")]++
	default:
		l5dCheckTimeline(t, name, a.stored)
		if proxy.RestartPolicy != nil {
			counts[l5dKey(sc, "injected native")]++
		} else {
			counts[l5dKey(sc, "injected classic")]++
		}
	}
}

// l5dCheckTimeline reads the stored Pod as the kubelet and linkerd-proxy
// run it. Classic: the proxy's preStop wait must outlast the app's
// shutdown, and the grace cover the wait and the proxy's shutdown grace
// after. Native: the kubelet sends the proxy SIGTERM once the app's
// containers exited; the grace must cover the app, the proxy's own
// preStop, if any, and its shutdown grace. The proxy's shutdown grace is
// LINKERD2_PROXY_SHUTDOWN_GRACE_PERIOD as the injector renders it; unset,
// 0: the app is gone by then, and only a connection held open past the
// grace makes the proxy run to its own bound (2m).
func l5dCheckTimeline(t reporter, name string, p *corev1.Pod) {
	t.Helper()
	terms, ok := budgetTerms(p.Annotations["graceguard.io/budget"])
	if !ok {
		t.Errorf("%s: no graceguard.io/budget on the stored Pod", name)
		return
	}
	app := terms["routing"] + terms["work"] + terms["cleanup"]
	grace := time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second
	proxy, native := findContainer(p, l5dk8s.ProxyContainerName)
	if proxy == nil {
		t.Errorf("%s: Linkerd injected no linkerd-proxy", name)
		return
	}
	var drain time.Duration
	for _, e := range proxy.Env {
		if e.Name == "LINKERD2_PROXY_SHUTDOWN_GRACE_PERIOD" {
			d, ok := l5dProxyDuration(e.Value)
			if !ok {
				t.Errorf("%s: linkerd2-proxy refuses LINKERD2_PROXY_SHUTDOWN_GRACE_PERIOD=%q and never starts", name, e.Value)
				return
			}
			drain = d
		}
	}
	var pre *corev1.LifecycleHandler
	if proxy.Lifecycle != nil {
		pre = proxy.Lifecycle.PreStop
	}
	wait, ok := sleepOf(pre)
	if !ok {
		t.Errorf("%s: linkerd-proxy's preStop is not a wait: %+v", name, pre)
		return
	}
	if native {
		if need := app + wait + drain; grace < need {
			t.Errorf("%s: grace %s does not cover the app's %s, the native proxy's preStop %s and its shutdown grace %s", name, grace, app, wait, drain)
		}
		return
	}
	if wait < app {
		t.Errorf("%s: the classic proxy gets SIGTERM at %s, before the app's shutdown ends at %s", name, wait, app)
	}
	if need := max(wait, app) + drain; grace < need {
		t.Errorf("%s: grace %s does not cover the proxy's wait %s and shutdown grace %s after the app's %s", name, grace, wait, drain, app)
	}
}

// l5dDuration is how linkerd2-proxy reads a duration from its
// environment (linkerd/app/src/env/types.rs, parse_duration, at the proxy
// the edge-26.8.3 chart pins): whole units of ms, s, m, h or d, a bare 0;
// anything else is InvalidEnvVar, and the proxy does not start. The
// proxy is Rust, not buildable here: this is the one rule the oracle
// copies rather than runs.
var l5dDuration = regexp.MustCompile(`^\s*(\d+)(ms|s|m|h|d)?\s*$`)

var l5dUnits = map[string]time.Duration{"ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}

func l5dProxyDuration(s string) (time.Duration, bool) {
	m := l5dDuration.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, false
	}
	if m[2] == "" {
		return 0, n == 0
	}
	return time.Duration(n) * l5dUnits[m[2]], true
}

// l5dCheckStandIn holds internal/meshtest's Linkerd stand-in (which the
// product's unit and envtest suites use) to the real injector, in what
// graceguard reads: where the proxy is, its restart policy and lifecycle,
// its shutdown grace, the annotations it copies, and the app containers.
func l5dCheckStandIn(t *testing.T, name string, sc l5dScenario) {
	t.Helper()
	n := linkerdNS(sc.nsAnn)
	real, err := injectLinkerd(t, sc.pod, n.Annotations, sc.native)
	if err != nil {
		return
	}
	fake := meshtest.Injector{Mesh: meshtest.Linkerd, Native: sc.native}.Inject(sc.pod.DeepCopy(), n.Labels, n.Annotations)
	type shape struct {
		Native      bool
		Index       int
		InitNames   []string
		Restart     *corev1.ContainerRestartPolicy
		Lifecycle   *corev1.Lifecycle
		Shutdown    string
		AppNames    []string
		AppProbes   []*corev1.Probe
		Annotations map[string]string
	}
	shapeOf := func(p *corev1.Pod) shape {
		var sh shape
		c, inInit := findContainer(p, l5dk8s.ProxyContainerName)
		for _, ic := range p.Spec.InitContainers {
			sh.InitNames = append(sh.InitNames, ic.Name)
		}
		for _, a := range p.Spec.Containers {
			if a.Name != l5dk8s.ProxyContainerName {
				sh.AppNames = append(sh.AppNames, a.Name)
				sh.AppProbes = append(sh.AppProbes, a.ReadinessProbe)
			}
		}
		sh.Annotations = map[string]string{}
		for k, v := range p.Annotations {
			if strings.HasPrefix(k, "config.") || k == l5dk8s.ProxyInjectAnnotation {
				sh.Annotations[k] = v
			}
		}
		if c == nil {
			return sh
		}
		list := p.Spec.Containers
		if inInit {
			list = p.Spec.InitContainers
		}
		sh.Native, sh.Restart, sh.Lifecycle = inInit, c.RestartPolicy, c.Lifecycle
		sh.Index = slices.IndexFunc(list, func(x corev1.Container) bool { return x.Name == l5dk8s.ProxyContainerName })
		for _, e := range c.Env {
			if e.Name == "LINKERD2_PROXY_SHUTDOWN_GRACE_PERIOD" {
				sh.Shutdown = e.Value
			}
		}
		return sh
	}
	if diff := cmp.Diff(shapeOf(real), shapeOf(fake)); diff != "" {
		t.Errorf("%s: internal/meshtest's Linkerd differs from Linkerd's injector (-real +stand-in):\n%s", name, diff)
	}
}
