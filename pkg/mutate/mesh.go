package mutate

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/graceguard/graceguard/pkg/budget"
)

// Mesh is a service mesh whose proxy sidecar graceguard knows
// (docs/meshes.md has the decision table and its sources).
//
// The rule for every mesh: the proxy must keep routing until the app's
// admitted work is done, and the grace period must also cover the proxy's
// own exit. graceguard decides from the Pod's final shape, and before
// injection only from what the Pod and its namespace say for certain, so
// the result is the same whether the injector runs before or after it
// (graceguard's mutating webhook has reinvocationPolicy IfNeeded). It
// rewrites nothing the injector wrote but Istio's native-sidecar drain
// hook, which it replaces by the same drain after the routing window.
type Mesh string

const (
	MeshIstio   Mesh = "istio"
	MeshLinkerd Mesh = "linkerd"
)

// The proxy containers the meshes' injectors add, as regular containers
// (classic sidecars) or as native sidecars (init containers with
// restartPolicy Always).
const (
	ContainerIstioProxy   = "istio-proxy"
	ContainerLinkerdProxy = "linkerd-proxy"
)

// Istio's keys graceguard reads.
const (
	// AnnotationIstioInject is a Pod label (or, deprecated, annotation):
	// "true" or "false".
	AnnotationIstioInject = "sidecar.istio.io/inject"
	// LabelIstioInjection on a Namespace: "enabled" or "disabled".
	LabelIstioInjection = "istio-injection"
	// LabelIstioRev selects a revision's injector (Namespace or Pod).
	LabelIstioRev = "istio.io/rev"
	// AnnotationIstioProxyConfig is a ProxyConfig (YAML) for the Pod's
	// proxy: terminationDrainDuration, proxyMetadata.
	AnnotationIstioProxyConfig = "proxy.istio.io/config"
	// LabelIstioDataplaneMode on a Namespace or Pod: "ambient" puts the
	// Pod in Istio's ambient mesh (ztunnel, no sidecar); "none" on a Pod
	// takes it out of its namespace's.
	LabelIstioDataplaneMode = "istio.io/dataplane-mode"
	// LabelIstioManagedGateway on a Pod names the istiod controller that
	// deployed it; istioWaypointController is the waypoints' (Istio's
	// pkg/config/constants ManagedGatewayMeshControllerLabel, written by
	// istio-discovery's files/waypoint.yaml).
	LabelIstioManagedGateway = "gateway.istio.io/managed"
	istioWaypointController  = "istio.io-mesh-controller"
	// annotationIstioStatus marks a Pod Istio's injector has injected.
	annotationIstioStatus = "sidecar.istio.io/status"
	// Environment variables of istio-proxy that shape its exit.
	envIstioProxyConfig = "PROXY_CONFIG"
	envIstioExitOnZero  = "EXIT_ON_ZERO_ACTIVE_CONNECTIONS"
	envIstioMinDrain    = "MINIMUM_DRAIN_DURATION"
)

// IstioExitEnv are the environment variables of istio-proxy graceguard
// reads (EnvRead).
var IstioExitEnv = []string{envIstioProxyConfig, envIstioExitOnZero, envIstioMinDrain}

// Linkerd's keys graceguard reads; it writes the wait annotation.
const (
	// AnnotationLinkerdInject on a Pod or Namespace: "enabled",
	// "ingress" or "disabled".
	AnnotationLinkerdInject = "linkerd.io/inject"
	// AnnotationLinkerdWaitBeforeExit is a preStop `/bin/sleep N` the
	// injector puts on a classic linkerd-proxy: whole seconds.
	AnnotationLinkerdWaitBeforeExit = "config.alpha.linkerd.io/proxy-wait-before-exit-seconds"
	// AnnotationLinkerdShutdownGrace bounds the proxy's own drain after
	// SIGTERM: a Go duration.
	AnnotationLinkerdShutdownGrace = "config.linkerd.io/shutdown-grace-period"
	// AnnotationLinkerdNativeSidecar makes linkerd-proxy a native sidecar
	// (or, "false", a classic one); the beta and alpha spellings are older
	// names of the same setting, read after it in that order.
	AnnotationLinkerdNativeSidecar      = "config.linkerd.io/proxy-enable-native-sidecar"
	AnnotationLinkerdNativeSidecarBeta  = "config.beta.linkerd.io/proxy-enable-native-sidecar"
	AnnotationLinkerdNativeSidecarAlpha = "config.alpha.linkerd.io/proxy-enable-native-sidecar"
)

// istioDefaultDrain is Istio's default terminationDrainDuration and
// MINIMUM_DRAIN_DURATION (pkg/config/mesh/mesh.go,
// pilot/cmd/pilot-agent/options/options.go); istioConnCheck is how often
// pilot-agent polls for zero connections (pkg/envoy/agent.go).
const (
	istioDefaultDrain = 5 * time.Second
	istioConnCheck    = time.Second
)

// linkerdSleep is the command Linkerd's injector writes for
// proxy-wait-before-exit-seconds (charts/partials/templates/_proxy.tpl);
// graceguard writes the same shape when the injector ran first.
const linkerdSleep = "/bin/sleep"

// meshSettings is what the Pod's and namespace's labels and annotations
// say about its mesh, before or after injection.
type meshSettings struct {
	// istio and linkerd: the injector will mesh (or has meshed) the Pod.
	istio, linkerd bool
	// linkerdNative is what the annotations say about linkerd-proxy's
	// form: nil when they say nothing Linkerd reads, and then Linkerd's
	// install default decides (proxy.nativeSidecar, true since
	// edge-26.5.2), which graceguard cannot see before injection.
	linkerdNative *bool
	// linkerdWait is proxy-wait-before-exit-seconds (Pod over namespace).
	linkerdWait     *int64
	linkerdWaitPath *field.Path
	// linkerdShutdown is shutdown-grace-period, when set.
	linkerdShutdown *time.Duration
	// istioPending: the Pod declares istio-proxy, and Istio's injector
	// has yet to inject it (no sidecar.istio.io/status).
	istioPending bool
	// istioConfig is what proxy.istio.io/config says.
	istioConfig istioProxyConfig
	// ambient: the Pod is in Istio's ambient mesh, as the Pod's label or
	// (ambientFrom) the namespace's says.
	ambient     bool
	ambientFrom Source
	// waypoint: the Pod is an Istio waypoint, as its label says.
	waypoint bool
	// ignored are the mesh settings the mesh itself ignores: warnings.
	ignored []Finding
}

// istioProxyConfig is the part of a ProxyConfig that shapes the proxy's exit.
type istioProxyConfig struct {
	drain    *time.Duration
	exitZero *bool
	minDrain *time.Duration
}

// linkerdCopied are the keys Linkerd's injector copies from the namespace
// to a Pod that lacks them (pkg/inject AppendNamespaceAnnotations:
// ProxyAnnotations and ProxyAlphaConfigAnnotations). The beta spelling of
// the native-sidecar setting is in neither list: Linkerd reads it only on
// the Pod.
var linkerdCopied = map[string]bool{
	AnnotationLinkerdWaitBeforeExit:     true,
	AnnotationLinkerdShutdownGrace:      true,
	AnnotationLinkerdNativeSidecar:      true,
	AnnotationLinkerdNativeSidecarAlpha: true,
}

// readMesh reads the mesh settings of a target, each as its mesh reads
// it. A value the mesh refuses (Istio's injector refuses the Pod) is a
// finding (invalid-mesh-setting); a value the mesh ignores is a warning
// (mesh-setting-ignored), never a refusal: graceguard does not refuse what
// the mesh accepts. Keys of a mesh the Pod is not in are not read.
func readMesh(t Target, ann map[string]string, ns Namespace, p paths) (meshSettings, []Finding) {
	var m meshSettings
	var bad []Finding
	labels := t.Meta.Labels
	proxy, hasProxy := findProxy(t)

	// Istio: the Pod's label (or annotation) decides, then the namespace's.
	v, ok := labels[AnnotationIstioInject]
	if !ok {
		v, ok = ann[AnnotationIstioInject]
	}
	switch {
	case ok && v == "false":
	case ok && v == "true":
		m.istio = true
	default:
		_, rev := ns.Labels[LabelIstioRev]
		_, podRev := labels[LabelIstioRev]
		m.istio = ns.Labels[LabelIstioInjection] == "enabled" || (ns.Labels[LabelIstioInjection] != "disabled" && (rev || podRev))
	}
	// A Pod may declare istio-proxy itself, for Istio's injector to merge
	// its fields into the proxy it injects (gateways, per-Pod overrides);
	// until Istio marks the Pod injected, that is no proxy yet, and what
	// graceguard wrote into it would land in Istio's record of the Pod's
	// own containers (proxy.istio.io/overrides) in one webhook order only.
	m.istioPending = m.istio && hasProxy && proxy.mesh == MeshIstio && t.Meta.Annotations[annotationIstioStatus] == ""
	m.istio = m.istio || (hasProxy && proxy.mesh == MeshIstio)
	if m.istio {
		if v, ok := ann[AnnotationIstioProxyConfig]; ok {
			path := p.pod.Key(AnnotationIstioProxyConfig)
			cfg, ignored, err := parseIstioProxyConfig(v, path)
			if err != nil {
				bad = append(bad, Finding{DenyInvalidMeshSetting, field.Invalid(path, clip(v), err.Error())})
			}
			m.istioConfig = cfg
			m.ignored = append(m.ignored, ignored...)
		}
	}
	m.waypoint = labels[LabelIstioManagedGateway] == istioWaypointController
	// Ambient: the Pod's label decides, then the namespace's
	// (istio.io/dataplane-mode, Istio's ambient docs).
	if v, ok := labels[LabelIstioDataplaneMode]; ok {
		m.ambient, m.ambientFrom = v == "ambient", FromPodLabel
	} else if ns.Labels[LabelIstioDataplaneMode] == "ambient" {
		m.ambient, m.ambientFrom = true, FromNamespaceLabel
	}

	// Linkerd: injected when the namespace enables it and the Pod does not
	// disable it, or the Pod enables it; an invalid value on either means
	// no injection (pkg/inject/report.go, disabledByAnnotation), and so
	// does the host network, whatever the annotations say (Injectable).
	valid := func(v string) bool { return v == "" || v == "enabled" || v == "disabled" || v == "ingress" }
	enables := func(v string) bool { return v == "enabled" || v == "ingress" }
	podInject, nsInject := ann[AnnotationLinkerdInject], ns.Annotations[AnnotationLinkerdInject]
	switch {
	case !valid(nsInject) || !valid(podInject), t.Spec.HostNetwork:
	case enables(nsInject):
		m.linkerd = podInject != "disabled"
	default:
		m.linkerd = enables(podInject)
	}
	if !m.linkerd && !(hasProxy && proxy.mesh == MeshLinkerd) {
		return m, bad
	}
	// Linkerd copies the namespace's config annotations to Pods that lack
	// them, so the Pod's win and the namespace's count as the Pod's.
	read := func(key string) (string, *field.Path, bool) {
		if v, ok := ann[key]; ok {
			return v, p.pod.Key(key), true
		}
		if v, ok := ns.Annotations[key]; ok && linkerdCopied[key] {
			return v, p.ns.Key(key), true
		}
		return "", nil, false
	}
	ignore := func(path *field.Path, v, why string) {
		m.ignored = append(m.ignored, Finding{WarnMeshSettingIgnored, field.Invalid(path, clip(v), why)})
	}
	// The first spelling present decides; if it does not parse, Linkerd
	// uses its install default and reads no other spelling.
	for _, key := range []string{AnnotationLinkerdNativeSidecar, AnnotationLinkerdNativeSidecarBeta, AnnotationLinkerdNativeSidecarAlpha} {
		v, path, ok := read(key)
		if !ok {
			continue
		}
		if b, err := strconv.ParseBool(v); err != nil {
			ignore(path, v, "not a boolean; Linkerd ignores it (default: native)")
		} else {
			m.linkerdNative = &b
		}
		break
	}
	if v, path, ok := read(AnnotationLinkerdWaitBeforeExit); ok {
		if n, err := strconv.ParseUint(v, 10, 64); err != nil {
			ignore(path, v, "not whole seconds; Linkerd ignores it")
		} else {
			w := int64(min(n, math.MaxInt64))
			m.linkerdWait, m.linkerdWaitPath = &w, path
		}
	}
	// Linkerd's injector reads shutdown-grace-period with
	// time.ParseDuration and, if that fails, logs and ignores it; else it
	// writes LINKERD2_PROXY_SHUTDOWN_GRACE_PERIOD as whole milliseconds
	// (pkg/inject, "%dms"). linkerd2-proxy reads that variable with
	// ^\s*(\d+)(ms|s|m|h|d)?\s*$ and refuses to start on anything else
	// (linkerd/app/src/env.rs with env/types.rs parse_duration: InvalidEnvVar): a negative
	// duration, written "-30000ms", is a proxy that never starts.
	if v, path, ok := read(AnnotationLinkerdShutdownGrace); ok {
		d, err := time.ParseDuration(v)
		ms := int(d.Seconds() * 1000) // as the injector writes it
		switch {
		case err != nil:
			ignore(path, v, "not a Go duration (e.g. 30s, 2m); Linkerd's injector ignores it and the proxy keeps its own bound (2m)")
		case ms < 0:
			bad = append(bad, Finding{DenyInvalidMeshSetting, field.Invalid(path, clip(v),
				fmt.Sprintf("a negative duration: Linkerd's injector passes it on as LINKERD2_PROXY_SHUTDOWN_GRACE_PERIOD=%dms, which linkerd2-proxy refuses, so the proxy never starts; use a duration of 0s or more (e.g. 30s)", ms))})
		default:
			d = max(d, 0)
			m.linkerdShutdown = &d
		}
	}
	return m, bad
}

// parseIstioProxyConfig reads a ProxyConfig as Istio does
// (pkg/config/mesh MergeProxyConfig: sigs.k8s.io/yaml to JSON, then the
// protobuf JSON decoder): durations are JSON strings time.ParseDuration
// reads ("60s", "1m", "500ms"), proxyMetadata a map of JSON strings, and
// fields may be spelt in lowerCamelCase or as in the proto. What Istio's
// decoder refuses is an error: the injector refuses the Pod. Of
// proxyMetadata, EXIT_ON_ZERO_ACTIVE_CONNECTIONS and MINIMUM_DRAIN_DURATION
// become the proxy's environment, which pilot-agent reads with
// strconv.ParseBool and time.ParseDuration, falling back to its defaults
// for a value it cannot: those are warnings, at path.
func parseIstioProxyConfig(v string, path *field.Path) (istioProxyConfig, []Finding, error) {
	var cfg istioProxyConfig
	js, err := yaml.YAMLToJSON([]byte(v))
	if err != nil {
		return cfg, nil, fmt.Errorf("must be a ProxyConfig in YAML or JSON (e.g. terminationDrainDuration: 30s): %v", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(js, &raw); err != nil {
		return cfg, nil, fmt.Errorf("must be a ProxyConfig, a map of its fields (e.g. terminationDrainDuration: 30s)")
	}
	get := func(camel, snake string) json.RawMessage {
		if r, ok := raw[camel]; ok {
			return r
		}
		return raw[snake]
	}
	if r := get("terminationDrainDuration", "termination_drain_duration"); r != nil && string(r) != "null" {
		var s string
		if err := json.Unmarshal(r, &s); err != nil {
			return cfg, nil, fmt.Errorf("terminationDrainDuration %s must be a duration in quotes or YAML text, as Istio reads it (e.g. 30s, 1m, 500ms)", clip(string(r)))
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return cfg, nil, fmt.Errorf("terminationDrainDuration %q is not a duration as Istio reads it (e.g. 30s, 1m, 500ms)", clip(s))
		}
		// pilot-agent waits time.After(d): a negative duration is none.
		d = max(d, 0)
		cfg.drain = &d
	}
	var ignored []Finding
	if r := get("proxyMetadata", "proxy_metadata"); r != nil && string(r) != "null" {
		var md map[string]json.RawMessage
		if err := json.Unmarshal(r, &md); err != nil {
			return cfg, nil, fmt.Errorf("proxyMetadata must be a map of names to values in quotes")
		}
		// Every value must be a string, or Istio refuses the ProxyConfig.
		for _, k := range slices.Sorted(maps.Keys(md)) {
			var s string
			if err := json.Unmarshal(md[k], &s); err != nil {
				return cfg, nil, fmt.Errorf("proxyMetadata %s: %s must be a string: quote it (\"%s\"), or Istio's injector refuses the Pod",
					clip(k), clip(string(md[k])), clip(strings.Trim(string(md[k]), `"`)))
			}
			if k == envIstioExitOnZero || k == envIstioMinDrain {
				ignored = append(ignored, cfg.readEnv(k, s, path)...)
			}
		}
	}
	return cfg, ignored, nil
}

// readEnv reads one of the environment variables that shape
// istio-proxy's exit as pilot-agent does (pkg/env: strconv.ParseBool,
// time.ParseDuration; a value that does not parse is the default, with a
// warning in the proxy's log and here).
func (c *istioProxyConfig) readEnv(name, v string, path *field.Path) []Finding {
	switch name {
	case envIstioExitOnZero:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return []Finding{{WarnMeshSettingIgnored, field.Invalid(path, clip(v), name+" not true/false; pilot-agent uses false")}}
		}
		c.exitZero = &b
	case envIstioMinDrain:
		d, err := time.ParseDuration(v)
		if err != nil {
			return []Finding{{WarnMeshSettingIgnored, field.Invalid(path, clip(v), name+" not a duration; pilot-agent uses 5s")}}
		}
		c.minDrain = &d
	}
	return nil
}

// proxyRef is a mesh's proxy container found in a target.
type proxyRef struct {
	mesh   Mesh
	c      container
	native bool
}

// meshOf names the mesh whose proxy container is called name, or "".
func meshOf(name string) Mesh {
	switch name {
	case ContainerIstioProxy:
		return MeshIstio
	case ContainerLinkerdProxy:
		return MeshLinkerd
	}
	return ""
}

// findProxy finds the mesh proxy container, if the Pod has been injected.
// It looks at names only and builds the paths of the one it finds: a Pod
// may have thousands of containers (the webhook's allocation bounds).
func findProxy(t Target) (proxyRef, bool) {
	for i := range t.Spec.InitContainers {
		c := &t.Spec.InitContainers[i]
		if m := meshOf(c.Name); m != "" && isSidecar(c) {
			return proxyRef{m, t.initContainer(i), true}, true
		}
	}
	for i := range t.Spec.Containers {
		if m := meshOf(t.Spec.Containers[i].Name); m != "" {
			return proxyRef{m, t.container(i), false}, true
		}
	}
	return proxyRef{}, false
}

// proxyOnly reports whether every regular container of t is a mesh proxy:
// an Istio gateway or waypoint, whose proxy is the workload itself.
func proxyOnly(t Target) bool {
	for i := range t.Spec.Containers {
		if meshOf(t.Spec.Containers[i].Name) == "" {
			return false
		}
	}
	return len(t.Spec.Containers) > 0
}

// withoutAppTerms leaves the work and cleanup terms out of a proxy-only
// Pod's budget when they are the namespace's or the cluster's: those
// describe the apps, and this Pod has none. The proxy still waits out the
// routing window, then drains as its mesh makes it (the proxy term); the
// Pod's own graceguard.io/max-work or cleanup still counts.
func withoutAppTerms(t Target, s *Settings) {
	if !proxyOnly(t) {
		return
	}
	s.Sources = maps.Clone(s.Sources)
	for _, term := range []budget.Term{budget.Work, budget.Cleanup} {
		if src := s.Sources[term]; src != FromCluster && src != FromNamespace {
			continue
		}
		s.Sources[term] = FromProxyOnly
		if term == budget.Work {
			s.Budget.Work = 0
		} else {
			s.Budget.Cleanup = 0
		}
	}
}

// isProxy reports whether c is a mesh proxy, classic or native:
// graceguard handles it as a proxy, never as an app container.
func isProxy(c container) bool { return meshOf(c.c.Name) != "" }

// appTargets drops mesh proxies from the containers to treat as apps: a
// proxy must outlive the app, not drain beside it.
func appTargets(targets []container) []container {
	out := targets[:0:0]
	for _, c := range targets {
		if !isProxy(c) {
			out = append(out, c)
		}
	}
	return out
}

// MeshReport says what graceguard found and decided about a Pod's mesh.
type MeshReport struct {
	Mesh Mesh
	// Proxy is the proxy container's name; empty before injection.
	Proxy string
	// Native is true for a native sidecar proxy (SIGTERM after the app).
	Native bool
	// NeedWait is how long a classic proxy must wait before SIGTERM: the
	// app's whole shutdown (routing + work + cleanup), in whole seconds.
	NeedWait int64
	// Wait is the proxy's wait as the Pod will run it; WaitKnown is false
	// for a hook graceguard cannot measure (then Wait is a lower bound).
	// For Istio's native sidecar it is when its drain starts.
	Wait      time.Duration
	WaitKnown bool
	// Exit is the proxy's own exit after its SIGTERM, and why.
	Exit    time.Duration
	ExitWhy string
	// Forms, before injection when the proxy's form is not yet known,
	// says what each form will get once injected: graceguard decides then.
	Forms []string
	// ProxyOnly: the proxy is the Pod's only container (a gateway or a
	// waypoint); its wait is the routing window, there is no app.
	ProxyOnly bool
	// ProbesSkipped: graceguard added no probes (Istio rewrites probes at
	// injection, which only one webhook order would see).
	ProbesSkipped bool
}

// meshPlan is what graceguard does about the mesh proxy of one target.
type meshPlan struct {
	report  *MeshReport
	proxy   *proxyRef
	addHook *corev1.LifecycleHandler
	// annotation is Linkerd's wait annotation to set ("" for none).
	annotation string
	violations []Finding
	warnings   []Finding
	// term is the budget's Proxy term.
	term time.Duration
}

// planMesh decides, from the target as it is and b (the app's budget,
// routing term already raised to the app's own hooks), what graceguard
// adds for the mesh proxy and what the proxy adds to the budget.
//
// Before injection it plans only what the Pod and namespace make certain
// (a Linkerd proxy the annotations make classic); the rest waits for the
// proxy: the API server calls graceguard again after the injector.
func planMesh(t Target, s Settings, b budget.Budget) meshPlan {
	m := s.mesh
	app := b.Routing + b.Work + b.Cleanup
	need := budget.CeilSeconds(app)
	ref, injected := findProxy(t)
	injected = injected && !(ref.mesh == MeshIstio && m.istioPending)
	var plan meshPlan
	mr := &MeshReport{NeedWait: need, WaitKnown: true, ProxyOnly: proxyOnly(t)}
	switch {
	case injected:
		plan.proxy = &ref
		mr.Mesh, mr.Proxy, mr.Native = ref.mesh, ref.c.c.Name, ref.native
	case m.linkerd:
		mr.Mesh = MeshLinkerd
	case m.istio:
		mr.Mesh = MeshIstio
	default:
		return plan
	}
	plan.report = mr
	plan.warnings = append(plan.warnings, m.ignored...)
	mr.ProbesSkipped = mr.Mesh == MeshIstio && (s.ReadinessPath != "" || s.LivenessPath != "")
	routing := budget.CeilSeconds(b.Routing)

	if mr.Mesh == MeshLinkerd {
		plan.planLinkerd(t, m, b, injected)
		return plan
	}
	// Istio.
	_, exitWhy := istioExit(nil, m.istioConfig)
	if !injected {
		// Nothing to plan until the injector has run: graceguard is called
		// again then (reinvocation) and decides on the final shape.
		mr.ExitWhy = "decided once injected, in either form:"
		mr.Forms = []string{
			fmt.Sprintf("classic: waits %ds (the app's shutdown) before its SIGTERM, then %s", need, exitWhy),
			fmt.Sprintf("native (Istio's default since 1.27): its drain starts after the %ds routing window; SIGTERM after the app", routing),
		}
		return plan
	}
	c := ref.c
	var hook *corev1.LifecycleHandler
	if c.c.Lifecycle != nil {
		hook = c.c.Lifecycle.PreStop
	}
	if ref.native {
		plan.planIstioNative(c.c, m, hook, routing)
		return plan
	}
	// A classic proxy container: make it outlive the app.
	if hook != nil {
		hl := preStopLength(hook)
		mr.Wait, mr.WaitKnown = hl.D, hl.Known
		if !hl.Known {
			plan.warnings = append(plan.warnings, Finding{WarnHookUnknownLength, field.Invalid(c.path.Child("lifecycle", "preStop"), hl.Desc,
				fmt.Sprintf("mesh proxy wait of unknown length; it must outlast the app's %ds", need))})
		} else if hl.D < time.Duration(need)*time.Second {
			plan.violations = append(plan.violations, Finding{DenyProxyExitsEarly, field.Invalid(c.path.Child("lifecycle", "preStop"), hl.Desc,
				exitsEarly(need, b, fmt.Sprintf("make it at least %ds or remove it (graceguard adds one)", need)))})
		}
	} else {
		mr.Wait = time.Duration(need) * time.Second
		plan.addHook = &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: need}}
		if s.PreStop == PreStopExec {
			// The cluster has no sleep action: the same exec graceguard
			// gives the app (Istio's default proxyv2 image has sleep).
			plan.addHook = &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", strconv.FormatInt(need, 10)}}}
		}
	}
	mr.Exit, mr.ExitWhy = istioExit(c.c, m.istioConfig)
	plan.term = max(mr.Wait-app, 0) + mr.Exit
	return plan
}

// planIstioNative replaces Istio's native-sidecar preStop (`pilot-agent
// request POST drain`, which starts Envoy's drain at deletion, while the
// app still serves its routing window: istio#51855, #60649) by the same
// request after the routing window, so the proxy keeps routing as long as
// the app does. Istio's hook is the only field of an injector graceguard
// rewrites; any other hook (global.proxy.lifecycle) is left alone.
func (plan *meshPlan) planIstioNative(c *corev1.Container, m meshSettings, hook *corev1.LifecycleHandler, routing int64) {
	mr := plan.report
	exit, exitWhy := istioExit(c, m.istioConfig)
	cmd, istios := istioDrainCommand(hook)
	mine, isMine := delayedDrainSeconds(hook)
	switch {
	case istios && routing == 0:
		// No routing window to wait for: Istio's hook stays, the proxy
		// drains from deletion and exits at once on its SIGTERM.
		mr.ExitWhy = "drains from deletion (its preStop calls /drain), exits on its SIGTERM after the app (istio#47226)"
	case istios || (isMine && mine == routing):
		if istios {
			plan.addHook = istioDelayedDrain(routing, cmd)
		}
		// Counted in the budget: where the hook cannot run, pilot-agent
		// drains at its SIGTERM, after the app.
		mr.Wait, mr.Exit, plan.term = secs(routing), exit, exit
		mr.ExitWhy = fmt.Sprintf("drains after the %ds routing window (istio#60649), exits on its SIGTERM after the app; counted: where the hook cannot run (no shell), it %s",
			routing, exitWhy)
	default:
		// A hook of its own (global.proxy.lifecycle), or none: it runs
		// from deletion as it is; without a drain before, pilot-agent
		// drains at its SIGTERM.
		hl := preStopLength(hook)
		mr.Wait, mr.WaitKnown, mr.Exit, plan.term = hl.D, hl.Known, exit, exit
		mr.ExitWhy = "SIGTERM after the app, then " + exitWhy
	}
}

// istioDrainCommand returns Istio's native-sidecar drain hook
// (manifests/charts/istio-control/istio-discovery/files/injection-template.yaml:
// `pilot-agent request --debug-port=PORT POST drain`), when h is it.
func istioDrainCommand(h *corev1.LifecycleHandler) ([]string, bool) {
	if h == nil || h.Exec == nil || h.Sleep != nil || h.HTTPGet != nil || h.TCPSocket != nil {
		return nil, false
	}
	c := h.Exec.Command
	if len(c) != 5 || c[0] != "pilot-agent" || c[1] != "request" || c[3] != "POST" || c[4] != "drain" {
		return nil, false
	}
	// The port comes from an annotation (status.sidecar.istio.io/port);
	// graceguard puts the command in a shell script, so only digits.
	port, ok := strings.CutPrefix(c[2], "--debug-port=")
	if !ok || port == "" || len(port) > 5 || strings.Trim(port, "0123456789") != "" {
		return nil, false
	}
	return c, true
}

// istioDelayedDrain is graceguard's preStop for Istio's native sidecar:
// Istio's own drain request, after the routing window. It needs a shell,
// which Istio's default proxyv2 image has; where it cannot run (the
// distroless variant), pilot-agent drains at its SIGTERM instead, which
// the budget counts.
func istioDelayedDrain(seconds int64, cmd []string) *corev1.LifecycleHandler {
	return &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{
		"sh", "-c", "sleep " + strconv.FormatInt(seconds, 10) + " && exec " + strings.Join(cmd, " "),
	}}}
}

// delayedDrainSeconds reads back istioDelayedDrain's hook: its seconds.
func delayedDrainSeconds(h *corev1.LifecycleHandler) (int64, bool) {
	if h == nil || h.Exec == nil || len(h.Exec.Command) != 3 || h.Exec.Command[0] != "sh" || h.Exec.Command[1] != "-c" {
		return 0, false
	}
	rest, ok := strings.CutPrefix(h.Exec.Command[2], "sleep ")
	if !ok {
		return 0, false
	}
	n, drain, ok := strings.Cut(rest, " && exec ")
	if !ok {
		return 0, false
	}
	sec, err := strconv.ParseInt(n, 10, 64)
	if err != nil || sec <= 0 {
		return 0, false
	}
	if _, ok := istioDrainCommand(&corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: strings.Split(drain, " ")}}); !ok {
		return 0, false
	}
	return sec, true
}

// planLinkerd plans a Linkerd proxy. Before injection, graceguard acts
// only when the annotations make the proxy classic: then it sets the wait
// annotation for the injector to turn into the proxy's preStop, or holds
// a wait someone set to the app's shutdown. When they say nothing, Linkerd's
// install default decides (native since edge-26.5.2), which graceguard
// cannot see: it plans nothing and decides once the proxy is there.
func (plan *meshPlan) planLinkerd(t Target, m meshSettings, b budget.Budget, injected bool) {
	mr := plan.report
	app := b.Routing + b.Work + b.Cleanup
	need := mr.NeedWait
	native := mr.Native
	classic := injected && !mr.Native
	if !injected && m.linkerdNative != nil {
		native, classic = *m.linkerdNative, !*m.linkerdNative
	}
	shutdown, shutdownWhy := linkerdExit(m)
	switch {
	case native:
		mr.Native = true
		mr.Exit, mr.ExitWhy = shutdown, "SIGTERM after the app exited, then "+shutdownWhy
		plan.term = shutdown
		if m.linkerdWait != nil {
			plan.warnings = append(plan.warnings, Finding{WarnMeshSettingIgnored, field.Invalid(m.linkerdWaitPath, strconv.FormatInt(*m.linkerdWait, 10),
				"ignored for a native sidecar; remove it")})
		}
		return
	case !classic:
		mr.ExitWhy = "decided once injected, in either form:"
		mr.Forms = []string{
			fmt.Sprintf("classic: waits %ds (the app's shutdown) before its SIGTERM, then %s", need, shutdownWhy),
			"native (Linkerd's default since edge-26.5.2): SIGTERM after the app exited, then " + shutdownWhy,
		}
		return
	}
	// Classic: the wait annotation, set before injection for Linkerd's
	// injector to write the hook, and after it too so that both webhook
	// orders end with the same Pod. Never over a value someone set.
	if m.linkerd && m.linkerdWait == nil {
		plan.annotation = strconv.FormatInt(need, 10)
	}
	mr.ExitWhy = shutdownWhy
	mr.Exit = shutdown
	if !injected {
		mr.Wait = time.Duration(need) * time.Second
		if m.linkerdWait != nil {
			mr.Wait = secs(*m.linkerdWait)
			if *m.linkerdWait < need {
				plan.violations = append(plan.violations, Finding{DenyProxyExitsEarly, field.Invalid(m.linkerdWaitPath, strconv.FormatInt(*m.linkerdWait, 10),
					exitsEarly(need, b, fmt.Sprintf("raise it to %d or remove it (graceguard sets it)", need)))})
			}
		}
		plan.term = classicTerm(mr.Wait, app, shutdown, b)
		return
	}
	c := plan.proxy.c
	if c.c.Lifecycle != nil && c.c.Lifecycle.PreStop != nil {
		hl := preStopLength(c.c.Lifecycle.PreStop)
		mr.Wait, mr.WaitKnown = hl.D, hl.Known
		if !hl.Known {
			plan.warnings = append(plan.warnings, Finding{WarnHookUnknownLength, field.Invalid(c.path.Child("lifecycle", "preStop"), hl.Desc,
				fmt.Sprintf("mesh proxy wait of unknown length; it must outlast the app's %ds", need))})
		} else if hl.D < time.Duration(need)*time.Second {
			plan.violations = append(plan.violations, Finding{DenyProxyExitsEarly, field.Invalid(c.path.Child("lifecycle", "preStop"), hl.Desc,
				exitsEarly(need, b, fmt.Sprintf("raise %s to %d or remove it (graceguard sets it)", AnnotationLinkerdWaitBeforeExit, need)))})
		}
	} else {
		n := need
		if m.linkerdWait != nil {
			// Someone's wait the injector did not turn into a hook (the
			// annotation came after injection, or is 0): write it as the
			// injector would, and hold it to the same rule.
			n = *m.linkerdWait
			if n < need {
				plan.violations = append(plan.violations, Finding{DenyProxyExitsEarly, field.Invalid(m.linkerdWaitPath, strconv.FormatInt(n, 10),
					exitsEarly(need, b, fmt.Sprintf("raise it to %d or remove it (graceguard sets it)", need)))})
			}
		}
		mr.Wait = secs(n)
		plan.addHook = &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{linkerdSleep, strconv.FormatInt(n, 10)}}}
	}
	plan.term = classicTerm(mr.Wait, app, shutdown, b)
}

// classicTerm is the budget's proxy term for a proxy that waits wait
// before its SIGTERM, then runs shutdown: what it runs past the app's
// shutdown app. Without a margin and an exit counted, the grace would end
// with the wait, and a hook as long as its grace is killed
// (prestop-exceeds-grace): graceguard refused the Pod it had just made.
// The least whole second is counted for the exit, as for a named sidecar.
func classicTerm(wait, app, shutdown time.Duration, b budget.Budget) time.Duration {
	t := saturatingAdd(max(wait-app, 0), shutdown)
	if wait > 0 && shutdown == 0 && b.Margin == 0 {
		t += time.Second
	}
	return t
}

// linkerdExit is how long linkerd-proxy runs after its SIGTERM, as the
// budget counts it: the shutdown-grace-period set for the Pod (Linkerd
// passes it to the proxy, LINKERD2_PROXY_SHUTDOWN_GRACE_PERIOD), the most
// the proxy keeps draining connections. Without one, 0: by then the app
// has exited, the proxy closes its connections and exits, and only a
// connection held open past the grace gets it killed, which cuts nothing
// of the app's (the proxy's own bound is 2m).
func linkerdExit(m meshSettings) (time.Duration, string) {
	if m.linkerdShutdown != nil {
		return *m.linkerdShutdown, fmt.Sprintf("drains its connections for at most %s (shutdown-grace-period)", budget.Format(*m.linkerdShutdown))
	}
	return 0, "exits once its connections close; the app is gone by then (the proxy's own bound: 2m)"
}

func exitsEarly(need int64, b budget.Budget, fix string) string {
	return fmt.Sprintf("the mesh proxy gets SIGTERM before the app is done at %ds (routing %s + work %s + cleanup %s) and cuts its last requests; %s",
		need, budget.Format(b.Routing), budget.Format(b.Work), budget.Format(b.Cleanup), fix)
}

// istioExit is how long istio-proxy runs after its SIGTERM, as
// pilot-agent decides (pkg/envoy/agent.go, terminate):
// terminationDrainDuration, or with EXIT_ON_ZERO_ACTIVE_CONNECTIONS its
// MINIMUM_DRAIN_DURATION and one connection check. The ProxyConfig is the
// container's PROXY_CONFIG with the Pod's annotation over it (pilot-agent's
// order, pilot/cmd/pilot-agent/config); the two variables are the
// container's environment, which pilot-agent reads (the injector writes
// proxyMetadata there). Before injection (c nil), the annotation's.
func istioExit(c *corev1.Container, ann istioProxyConfig) (time.Duration, string) {
	cfg := ann
	if c != nil {
		var env istioProxyConfig
		for _, e := range c.Env {
			switch e.Name {
			case envIstioProxyConfig:
				if got, _, err := parseIstioProxyConfig(e.Value, nil); err == nil {
					env.drain = got.drain
				}
			case envIstioExitOnZero, envIstioMinDrain:
				env.readEnv(e.Name, e.Value, nil)
			}
		}
		if ann.drain != nil {
			env.drain = ann.drain
		}
		cfg = env
	}
	if cfg.exitZero != nil && *cfg.exitZero {
		d := istioDefaultDrain
		if cfg.minDrain != nil {
			d = max(*cfg.minDrain, 0)
		}
		return d + istioConnCheck, fmt.Sprintf("EXIT_ON_ZERO_ACTIVE_CONNECTIONS: drains %s, then exits at zero connections", budget.Format(d))
	}
	d := istioDefaultDrain
	why := "terminationDrainDuration (Istio's default)"
	if cfg.drain != nil {
		d, why = *cfg.drain, "terminationDrainDuration"
	}
	return d, fmt.Sprintf("drains for %s after its SIGTERM: %s", budget.Format(d), why)
}

// apply makes the plan's changes on t and records them in r.
func (plan meshPlan) apply(t Target, r *Report) {
	if plan.annotation != "" && t.Meta.Annotations[AnnotationLinkerdWaitBeforeExit] != plan.annotation {
		r.Changes = append(r.Changes, Change{
			Reason:  ChangeMeshAnnotation,
			Path:    t.MetaPath.Child("annotations").Key(AnnotationLinkerdWaitBeforeExit),
			Summary: plan.annotation + " (Linkerd's injector turns it into the proxy's preStop wait)",
			Op:      setMeta(t, "annotations", &t.Meta.Annotations, AnnotationLinkerdWaitBeforeExit, plan.annotation),
		})
	}
	if plan.addHook != nil {
		c := plan.proxy.c
		what := ": the " + string(plan.proxy.mesh) + " proxy exits after the app"
		if plan.report.ProxyOnly {
			what = ": the " + string(plan.proxy.mesh) + " proxy serves through the routing window"
		}
		if plan.proxy.native {
			what = ": the " + string(plan.proxy.mesh) + " proxy drains after the routing window"
		}
		r.Changes = append(r.Changes, Change{Reason: ChangeProxyWait, Path: c.path.Child("lifecycle", "preStop"),
			Summary: shortenTo(preStopLength(plan.addHook).Desc, 60) + what,
			Op:      setPreStop(c, plan.addHook)})
	}
}

// prepare completes r's budget with what the mesh proxy adds, records the
// routing profile, the mesh and the ceilings in r, and checks the need
// against the cap and the ceilings. It returns false, with r.Violations
// set, when the target must not be mutated. Warnings are recorded only
// with warn (Validate of a Pod leaves them to Mutate's response).
func prepare(t Target, s Settings, r *Report, warn bool) (meshPlan, sidecarPlans, budget.Fit, bool) {
	plan := planMesh(t, s, r.Budget)
	sidecars := planSidecars(t, s, r.Budget)
	// The mesh proxy and the sidecars all wait from deletion: the one
	// that runs longest after the app sets the term.
	r.Budget.Proxy = max(plan.term, sidecars.term())
	r.Mesh, r.Profile, r.GraceFloor, r.Ceilings = plan.report, s.Profile, s.floor(), s.ceilings
	r.Sidecars = sidecars.reports()
	sv, sw := sidecars.findings()
	if warn {
		r.Warnings = append(append(r.Warnings, plan.warnings...), sw...)
	}
	f := fitOf(r.Budget, s, r.Grace)
	if len(plan.violations) > 0 || len(sv) > 0 {
		r.Violations = append(append(r.Violations, plan.violations...), sv...)
		return plan, sidecars, f, false
	}
	if f.OverCap() {
		r.Violations = append(r.Violations, overCap(t, f, s))
		return plan, sidecars, f, false
	}
	w, v := ceilingFindings(t, f.Need, s.ceilings)
	if len(v) > 0 {
		r.Violations = append(r.Violations, v...)
		return plan, sidecars, f, false
	}
	if warn {
		r.Warnings = append(r.Warnings, w...)
	}
	return plan, sidecars, f, true
}

// skipProbes reports whether graceguard adds no probes to this Pod (an
// Istio Pod, whose probes Istio rewrites at injection), and warns once.
func (plan meshPlan) skipProbes(p paths, r *Report) bool {
	if plan.report == nil || !plan.report.ProbesSkipped {
		return false
	}
	r.warn(WarnMeshProbes, p.pod.Key(AnnotationReadinessPath), "",
		"not added: Istio rewrites probes")
	return true
}

// checkMutated denies, in enforce mode, a mesh proxy still without what
// graceguard adds (a classic proxy's wait, the delay of Istio's native
// drain): graceguard's mutating webhook did not run after the injector
// (its reinvocation failed); the controller retries.
func (plan meshPlan) checkMutated(s Settings, r *Report) {
	if plan.addHook == nil || s.Mode == ModeWarn {
		return
	}
	what := fmt.Sprintf("adds a %s wait here so the %s proxy outlives the app", preStopLength(plan.addHook).Desc, plan.proxy.mesh)
	if plan.proxy.native {
		what = fmt.Sprintf("delays the %s proxy's drain here until the routing window is over", plan.proxy.mesh)
	}
	r.deny(DenyNotMutated, field.Required(plan.proxy.c.path.Child("lifecycle", "preStop"),
		"graceguard's mutating webhook "+what+", and did not run after injection; create it again"))
}

// checkMeshWait denies a Linkerd wait annotation at least as long as the
// grace period, for Pods graceguard does not mutate, when the annotations
// make the proxy classic: Linkerd makes it the proxy's preStop sleep,
// which the kubelet would kill (exit 137, linkerd2#10058). After
// injection checkHooks sees the hook itself; when the annotations say
// nothing, Linkerd's install default decides (native since edge-26.5.2,
// which ignores the wait), and the injected Pod is checked.
func checkMeshWait(t Target, s Settings, r *Report) {
	m := s.mesh
	if m.linkerdWait == nil || m.linkerdNative == nil || *m.linkerdNative {
		return
	}
	if _, ok := findProxy(t); ok {
		return
	}
	if g := t.grace(); *m.linkerdWait >= g {
		r.deny(DenyHookExceedsGrace, field.Invalid(m.linkerdWaitPath, strconv.FormatInt(*m.linkerdWait, 10),
			MsgLinkerdWaitExceedsGrace.Fill("{grace}", strconv.FormatInt(g, 10))))
	}
}
