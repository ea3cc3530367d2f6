package mutate

import (
	"fmt"
	"regexp"
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
// own exit. graceguard never rewrites what the mesh's injector wrote and
// decides from the Pod's final shape, so the result is the same whether
// the injector runs before or after it (graceguard's mutating webhook has
// reinvocationPolicy IfNeeded).
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
	// Environment variables of istio-proxy that shape its exit.
	envIstioProxyConfig = "PROXY_CONFIG"
	envIstioExitOnZero  = "EXIT_ON_ZERO_ACTIVE_CONNECTIONS"
	envIstioMinDrain    = "MINIMUM_DRAIN_DURATION"
)

// IstioExitEnv are the environment variables of istio-proxy graceguard
// reads: the webhook's decoder keeps only these of a container's env.
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
	// AnnotationLinkerdNativeSidecar makes linkerd-proxy a native sidecar;
	// the beta and alpha spellings are older names of the same setting.
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
	// linkerdNative: the annotations make linkerd-proxy a native sidecar.
	linkerdNative bool
	// linkerdWait is proxy-wait-before-exit-seconds (Pod over namespace).
	linkerdWait     *int64
	linkerdWaitPath *field.Path
	// linkerdShutdown is shutdown-grace-period, when set.
	linkerdShutdown *time.Duration
	// istioConfig is what proxy.istio.io/config says.
	istioConfig istioProxyConfig
}

// istioProxyConfig is the part of a ProxyConfig that shapes the proxy's exit.
type istioProxyConfig struct {
	drain     *time.Duration
	exitZero  *bool
	minDrain  *time.Duration
	fromWhere string
}

// readMesh reads the mesh settings of a target. Values graceguard relies
// on that do not parse are findings (invalid-mesh-setting): the mesh would
// ignore or refuse them, and the person should know. Keys of a mesh the
// Pod is not in are not read.
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
	m.istio = m.istio || (hasProxy && proxy.mesh == MeshIstio)
	if m.istio {
		if v, ok := ann[AnnotationIstioProxyConfig]; ok {
			cfg, err := parseIstioProxyConfig(v)
			if err != nil {
				bad = append(bad, Finding{DenyInvalidMeshSetting, field.Invalid(p.pod.Key(AnnotationIstioProxyConfig), clip(v), err.Error())})
			}
			cfg.fromWhere = AnnotationIstioProxyConfig
			m.istioConfig = cfg
		}
	}

	// Linkerd: the Pod's annotation decides, then the namespace's.
	switch v := ann[AnnotationLinkerdInject]; v {
	case "enabled", "ingress":
		m.linkerd = true
	case "disabled":
	default:
		m.linkerd = ns.Annotations[AnnotationLinkerdInject] == "enabled" || ns.Annotations[AnnotationLinkerdInject] == "ingress"
	}
	if !m.linkerd && !(hasProxy && proxy.mesh == MeshLinkerd) {
		return m, bad
	}
	// Linkerd copies the namespace's config annotations to Pods that lack
	// them, so the Pod's win and the namespace's count as the Pod's.
	read := func(key string) (string, *field.Path, Reason, bool) {
		if v, ok := ann[key]; ok {
			return v, p.pod.Key(key), DenyInvalidMeshSetting, true
		}
		if v, ok := ns.Annotations[key]; ok {
			return v, p.ns.Key(key), DenyInvalidMeshSetting, true
		}
		return "", nil, "", false
	}
	for _, key := range []string{AnnotationLinkerdNativeSidecar, AnnotationLinkerdNativeSidecarBeta, AnnotationLinkerdNativeSidecarAlpha} {
		v, path, r, ok := read(key)
		if !ok {
			continue
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad = append(bad, Finding{r, field.Invalid(path, clip(v), "must be true or false")})
		}
		m.linkerdNative = b
		break
	}
	if v, path, r, ok := read(AnnotationLinkerdWaitBeforeExit); ok {
		n, err := strconv.ParseUint(v, 10, 31)
		if err != nil {
			bad = append(bad, Finding{r, field.Invalid(path, clip(v), "must be whole seconds (e.g. 30), as Linkerd reads it; Linkerd ignores other values and the proxy would not wait")})
		} else {
			w := int64(n)
			m.linkerdWait, m.linkerdWaitPath = &w, path
		}
	}
	if v, path, r, ok := read(AnnotationLinkerdShutdownGrace); ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			bad = append(bad, Finding{r, field.Invalid(path, clip(v), "must be a Go duration (e.g. 30s), as Linkerd reads it; Linkerd ignores other values")})
		} else {
			m.linkerdShutdown = &d
		}
	}
	return m, bad
}

// protobufDuration is how Istio reads ProxyConfig durations (protobuf
// JSON): seconds with an s suffix.
var protobufDuration = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?s$`)

func parseIstioProxyConfig(v string) (istioProxyConfig, error) {
	var raw struct {
		TerminationDrainDuration *string           `json:"terminationDrainDuration"`
		ProxyMetadata            map[string]string `json:"proxyMetadata"`
	}
	var cfg istioProxyConfig
	if err := yaml.Unmarshal([]byte(v), &raw); err != nil {
		return cfg, fmt.Errorf("must be a ProxyConfig in YAML or JSON (e.g. terminationDrainDuration: 30s): %v", err)
	}
	if raw.TerminationDrainDuration != nil {
		d, err := protobufSeconds(*raw.TerminationDrainDuration)
		if err != nil {
			return cfg, fmt.Errorf("terminationDrainDuration %q %v", *raw.TerminationDrainDuration, err)
		}
		cfg.drain = &d
	}
	return cfg, cfg.readMetadata(raw.ProxyMetadata)
}

func protobufSeconds(s string) (time.Duration, error) {
	if !protobufDuration.MatchString(s) {
		return 0, fmt.Errorf("must be seconds with an s suffix, as Istio reads durations (e.g. 30s, 1.5s)")
	}
	f, err := strconv.ParseFloat(strings.TrimSuffix(s, "s"), 64)
	if err != nil || f > budget.MaxTerm.Seconds() {
		return 0, fmt.Errorf("must be at most 3600s")
	}
	return time.Duration(f * float64(time.Second)), nil
}

// readMetadata reads EXIT_ON_ZERO_ACTIVE_CONNECTIONS and
// MINIMUM_DRAIN_DURATION as pilot-agent does (strconv.ParseBool,
// time.ParseDuration).
func (c *istioProxyConfig) readMetadata(md map[string]string) error {
	if v, ok := md[envIstioExitOnZero]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("proxyMetadata %s %q must be true or false", envIstioExitOnZero, v)
		}
		c.exitZero = &b
	}
	if v, ok := md[envIstioMinDrain]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > budget.MaxTerm {
			return fmt.Errorf("proxyMetadata %s %q must be a Go duration up to 1h (e.g. 5s)", envIstioMinDrain, v)
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

// findProxy finds the mesh proxy container, if the Pod has been injected.
// It looks at names only and builds the paths of the one it finds: a Pod
// may have thousands of containers (the webhook's allocation bounds).
func findProxy(t Target) (proxyRef, bool) {
	meshOf := func(name string) Mesh {
		switch name {
		case ContainerIstioProxy:
			return MeshIstio
		case ContainerLinkerdProxy:
			return MeshLinkerd
		}
		return ""
	}
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

// isProxy reports whether c is a classic (regular container) mesh proxy:
// graceguard handles it as a proxy, never as an app container.
func isProxy(c container) bool {
	return !c.sidecar && (c.c.Name == ContainerIstioProxy || c.c.Name == ContainerLinkerdProxy)
}

// appTargets drops classic mesh proxies from the containers to treat as
// apps: a proxy must outlive the app, not drain beside it.
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
	Wait      time.Duration
	WaitKnown bool
	// Exit is the proxy's own exit after its SIGTERM, and why.
	Exit    time.Duration
	ExitWhy string
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
func planMesh(t Target, s Settings, b budget.Budget) meshPlan {
	m := s.mesh
	app := b.Routing + b.Work + b.Cleanup
	need := budget.CeilSeconds(app)
	ref, injected := findProxy(t)
	var plan meshPlan
	mr := &MeshReport{NeedWait: need, WaitKnown: true}
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
	mr.ProbesSkipped = mr.Mesh == MeshIstio && (s.ReadinessPath != "" || s.LivenessPath != "")

	// Linkerd's wait annotation: set before injection so Linkerd's own
	// injector writes the hook; set after injection too, so both webhook
	// orders end with the same Pod. Never over a value someone set, and
	// never when the annotations ask for a native sidecar (Linkerd's
	// template ignores the wait then, and its docs say not to combine).
	if mr.Mesh == MeshLinkerd && m.linkerd && !m.linkerdNative && m.linkerdWait == nil {
		plan.annotation = strconv.FormatInt(need, 10)
	}

	switch {
	case mr.Native:
		mr.Wait = 0
		if mr.Mesh == MeshIstio {
			mr.ExitWhy = "native sidecar: drains from deletion, exits on its SIGTERM after the app (istio#47226)"
		} else {
			mr.ExitWhy = "native sidecar: SIGTERM after the app exited"
		}
		return plan
	case !injected && mr.Mesh == MeshIstio:
		// Nothing to plan until the injector has run: graceguard is called
		// again then (reinvocation) and decides on the final shape.
		return plan
	case !injected:
		// Linkerd before injection: the wait the injector will write.
		if m.linkerdNative {
			return plan
		}
		mr.Wait = time.Duration(need) * time.Second
		if m.linkerdWait != nil {
			mr.Wait = time.Duration(*m.linkerdWait) * time.Second
			if *m.linkerdWait < need {
				plan.violations = append(plan.violations, Finding{DenyProxyExitsEarly, field.Invalid(m.linkerdWaitPath, strconv.FormatInt(*m.linkerdWait, 10),
					exitsEarly(need, b, fmt.Sprintf("raise it to %d or remove it (graceguard sets it)", need)))})
			}
		}
		mr.ExitWhy = "exits once its connections close, after the app (bounded by shutdown-grace-period)"
		plan.term = max(mr.Wait-app, 0)
		return plan
	}

	// A classic proxy container: make it outlive the app.
	c := ref.c
	if c.c.Lifecycle != nil && c.c.Lifecycle.PreStop != nil {
		hl := preStopLength(c.c.Lifecycle.PreStop)
		mr.Wait, mr.WaitKnown = hl.D, hl.Known
		if !hl.Known {
			plan.warnings = append(plan.warnings, Finding{WarnHookUnknownLength, field.Invalid(c.path.Child("lifecycle", "preStop"), hl.Desc,
				fmt.Sprintf("mesh proxy wait of unknown length; it must outlast the app's %ds", need))})
		} else if hl.D < time.Duration(need)*time.Second {
			fix := fmt.Sprintf("make it at least %ds or remove it (graceguard adds one)", need)
			if ref.mesh == MeshLinkerd {
				fix = fmt.Sprintf("raise %s to %d or remove it (graceguard sets it)", AnnotationLinkerdWaitBeforeExit, need)
			}
			plan.violations = append(plan.violations, Finding{DenyProxyExitsEarly, field.Invalid(c.path.Child("lifecycle", "preStop"), hl.Desc, exitsEarly(need, b, fix))})
		}
	} else {
		n := need
		if ref.mesh == MeshLinkerd && m.linkerdWait != nil {
			// Someone's wait the injector did not turn into a hook (the
			// annotation came after injection): write it as the injector
			// would, and hold it to the same rule.
			n = *m.linkerdWait
			if n < need {
				plan.violations = append(plan.violations, Finding{DenyProxyExitsEarly, field.Invalid(m.linkerdWaitPath, strconv.FormatInt(n, 10),
					exitsEarly(need, b, fmt.Sprintf("raise it to %d or remove it (graceguard sets it)", need)))})
			}
		}
		mr.Wait = time.Duration(n) * time.Second
		if ref.mesh == MeshLinkerd {
			plan.addHook = &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{linkerdSleep, strconv.FormatInt(n, 10)}}}
		} else {
			plan.addHook = &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: n}}
		}
	}
	if ref.mesh == MeshIstio {
		mr.Exit, mr.ExitWhy = istioExit(c.c, m.istioConfig)
	} else {
		mr.ExitWhy = "exits once its connections close, after the app (bounded by shutdown-grace-period)"
	}
	plan.term = max(mr.Wait-app, 0) + mr.Exit
	return plan
}

func exitsEarly(need int64, b budget.Budget, fix string) string {
	return fmt.Sprintf("the mesh proxy gets SIGTERM before the app is done at %ds (routing %s + work %s + cleanup %s) and cuts its last requests; %s",
		need, budget.Format(b.Routing), budget.Format(b.Work), budget.Format(b.Cleanup), fix)
}

// istioExit is how long a classic istio-proxy runs after its SIGTERM:
// terminationDrainDuration, or with EXIT_ON_ZERO_ACTIVE_CONNECTIONS its
// MINIMUM_DRAIN_DURATION and one connection check (pkg/envoy/agent.go).
// The container's environment (what the injector computed, mesh-wide
// defaults included) wins over the Pod's annotation.
func istioExit(c *corev1.Container, ann istioProxyConfig) (time.Duration, string) {
	cfg := ann
	for _, e := range c.Env {
		switch e.Name {
		case envIstioProxyConfig:
			if got, err := parseIstioProxyConfig(e.Value); err == nil {
				if got.drain != nil {
					cfg.drain = got.drain
				}
				if got.exitZero != nil {
					cfg.exitZero = got.exitZero
				}
				if got.minDrain != nil {
					cfg.minDrain = got.minDrain
				}
			}
		case envIstioExitOnZero:
			if b, err := strconv.ParseBool(e.Value); err == nil {
				cfg.exitZero = &b
			}
		case envIstioMinDrain:
			if d, err := time.ParseDuration(e.Value); err == nil && d >= 0 && d <= budget.MaxTerm {
				cfg.minDrain = &d
			}
		}
	}
	if cfg.exitZero != nil && *cfg.exitZero {
		d := istioDefaultDrain
		if cfg.minDrain != nil {
			d = *cfg.minDrain
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
		r.Changes = append(r.Changes, Change{Reason: ChangeProxyWait, Path: c.path.Child("lifecycle", "preStop"),
			Summary: preStopLength(plan.addHook).Desc + ": the " + string(plan.proxy.mesh) + " proxy exits after the app",
			Op:      setPreStop(c, plan.addHook)})
	}
}

// prepare completes r's budget with what the mesh proxy adds, records the
// routing profile, the mesh and the ceilings in r, and checks the need
// against the cap and the ceilings. It returns false, with r.Violations
// set, when the target must not be mutated. Warnings are recorded only
// with warn (Validate of a Pod leaves them to Mutate's response).
func prepare(t Target, s Settings, r *Report, warn bool) (meshPlan, budget.Fit, bool) {
	plan := planMesh(t, s, r.Budget)
	r.Budget.Proxy = plan.term
	r.Mesh, r.Profile, r.GraceFloor, r.Ceilings = plan.report, s.Profile, s.floor(), s.ceilings
	if warn {
		r.Warnings = append(r.Warnings, plan.warnings...)
	}
	f := fitOf(r.Budget, s, r.Grace)
	if len(plan.violations) > 0 {
		r.Violations = append(r.Violations, plan.violations...)
		return plan, f, false
	}
	if f.OverCap() {
		r.Violations = append(r.Violations, overCap(t, f, s))
		return plan, f, false
	}
	w, v := ceilingFindings(t, f.Need, s.ceilings)
	if len(v) > 0 {
		r.Violations = append(r.Violations, v...)
		return plan, f, false
	}
	if warn {
		r.Warnings = append(r.Warnings, w...)
	}
	return plan, f, true
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

// checkMutated denies, in enforce mode, a classic mesh proxy still without
// the wait graceguard adds: graceguard's mutating webhook did not run
// after the injector (its reinvocation failed); the controller retries.
func (plan meshPlan) checkMutated(s Settings, r *Report) {
	if plan.addHook == nil || s.Mode == ModeWarn {
		return
	}
	r.deny(DenyNotMutated, field.Required(plan.proxy.c.path.Child("lifecycle", "preStop"),
		fmt.Sprintf("graceguard's mutating webhook adds a %s wait here so the %s proxy outlives the app, and did not run after injection; create it again",
			preStopLength(plan.addHook).Desc, plan.proxy.mesh)))
}

// checkMeshWait denies a Linkerd wait annotation at least as long as the
// grace period, for Pods graceguard does not mutate: the kubelet would
// kill the proxy's preStop (exit 137, linkerd2#10058) before it ends.
// After injection checkHooks sees the hook itself.
func checkMeshWait(t Target, s Settings, r *Report) {
	m := s.mesh
	if m.linkerdWait == nil || m.linkerdNative {
		return
	}
	if ref, ok := findProxy(t); ok && (ref.native || ref.c.c.Lifecycle != nil && ref.c.c.Lifecycle.PreStop != nil) {
		return
	}
	if g := t.grace(); *m.linkerdWait >= g {
		r.deny(DenyHookExceedsGrace, field.Invalid(m.linkerdWaitPath, strconv.FormatInt(*m.linkerdWait, 10),
			fmt.Sprintf("must be shorter than terminationGracePeriodSeconds (%ds): Linkerd makes it the proxy's preStop sleep, which the kubelet kills at %ds (exit 137); shorten it or raise terminationGracePeriodSeconds", g, g)))
	}
}
