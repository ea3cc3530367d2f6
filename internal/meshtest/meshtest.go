// Package meshtest stands in for the Istio and Linkerd sidecar injectors in
// graceguard's tests: pure functions that inject a Pod the way each
// injector does, and an admission webhook serving them (for envtest).
//
// What the injectors add is generated from their real output, not written
// by hand. test/meshoracle runs Istio's own pkg/kube/inject (the version
// its go.mod pins, config rendered by Istio's chart renderer) and
// Linkerd's pkg/inject (a verbatim copy at the commit of
// test/meshoracle/third_party/README.md) on CanonicalPod, classic and
// native, and writes what each added (containers and their placement,
// volumes, annotations, labels) to testdata/MESH-FORM.yaml, each file's
// header naming its source. `make generate-standins` rewrites them; `make
// test-meshes` fails when they are stale. The generator leaves out what
// depends on the Pod and is not modelled here (the Pod's ports, name and
// owner in the proxy's environment, Istio's canonical-name label).
//
// This code does only what depends on the Pod, and test/meshoracle holds
// it to the real injectors on its matrix of Pods, in what graceguard reads
// (checkStandIn, l5dCheckStandIn), and in full on CanonicalPod:
//
//   - Istio: the form (the injector's Native, or
//     sidecar.istio.io/nativeSidecar) picks the file; PROXY_CONFIG from
//     proxy.istio.io/config, leaving out defaults, and its proxyMetadata
//     as variables; ISTIO_META_APP_CONTAINERS; app HTTP probes rewritten
//     to the agent's port 15020, with ISTIO_KUBE_APP_PROBERS; the
//     default-container annotations.
//   - Linkerd: the namespace's config annotations the Pod lacks are
//     copied to it (config.linkerd.io/*, the two config.alpha keys,
//     linkerd.io/inject; not the beta spelling); the form
//     (proxy.nativeSidecar, or config.linkerd.io/proxy-enable-native-sidecar
//     and then the beta and alpha spellings; an unparsable value leaves
//     the default) picks the file; config.linkerd.io/shutdown-grace-period
//     becomes LINKERD2_PROXY_SHUTDOWN_GRACE_PERIOD in milliseconds; on a
//     classic proxy a non-zero
//     config.alpha.linkerd.io/proxy-wait-before-exit-seconds becomes the
//     preStop `/bin/sleep N`; the linkerd.io/workload-ns label.
//
// Invariant: injecting an injected Pod changes nothing, as the real
// injectors skip Pods that already carry their proxy.
package meshtest

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Mesh is an injector this package stands in for.
type Mesh string

const (
	Istio   Mesh = "istio"
	Linkerd Mesh = "linkerd"
)

// Injector is one configuration of a mesh's injector.
type Injector struct {
	Mesh Mesh
	// Native injects the proxy as a native sidecar unless the Pod's
	// annotations say otherwise (Istio's NativeSidecars, Linkerd's
	// proxy.nativeSidecar).
	Native bool
}

// Wants reports whether the injector meshes this Pod in a namespace with
// these labels and annotations (the webhooks' selectors and the Pods'
// opt-outs).
func (in Injector) Wants(pod *corev1.Pod, nsLabels, nsAnnotations map[string]string) bool {
	switch in.Mesh {
	case Istio:
		v, ok := pod.Labels["sidecar.istio.io/inject"]
		if !ok {
			v, ok = pod.Annotations["sidecar.istio.io/inject"]
		}
		if ok {
			return v == "true"
		}
		return nsLabels["istio-injection"] == "enabled"
	case Linkerd:
		// pkg/inject/report.go, disabledByAnnotation: an invalid value on
		// the Pod or the namespace means no injection.
		valid := func(v string) bool { return v == "" || v == "enabled" || v == "disabled" || v == "ingress" }
		enables := func(v string) bool { return v == "enabled" || v == "ingress" }
		podV, nsV := pod.Annotations["linkerd.io/inject"], nsAnnotations["linkerd.io/inject"]
		switch {
		case !valid(podV) || !valid(nsV), pod.Spec.HostNetwork: // Linkerd never meshes the host network
			return false
		case enables(nsV):
			return podV != "disabled"
		}
		return enables(podV)
	}
	return false
}

// Inject returns the Pod as the injector would leave it, or the Pod
// unchanged when it is already injected or not wanted.
func (in Injector) Inject(pod *corev1.Pod, nsLabels, nsAnnotations map[string]string) *corev1.Pod {
	out := pod.DeepCopy()
	if !in.Wants(pod, nsLabels, nsAnnotations) || injected(out) {
		return out
	}
	if in.Mesh == Istio {
		in.istio(out)
	} else {
		in.linkerd(out, nsAnnotations)
	}
	return out
}

// injected reports a Pod either injector skips: it carries a proxy or its
// init container already (Linkerd's healthcheck.HasExistingSidecars,
// Istio's injectRequired).
func injected(p *corev1.Pod) bool {
	for _, c := range append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...) {
		if c.Name == "istio-proxy" || c.Name == "linkerd-proxy" {
			return true
		}
	}
	for _, c := range p.Spec.InitContainers {
		if c.Name == "istio-init" || c.Name == "linkerd-init" {
			return true
		}
	}
	return false
}

func setAnnotation(p *corev1.Pod, k, v string) {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[k] = v
}

func setLabel(p *corev1.Pod, k, v string) {
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[k] = v
}

// ---- Istio ----------------------------------------------------------------

func (in Injector) istio(p *corev1.Pod) {
	native := in.Native
	if v, ok := p.Annotations["sidecar.istio.io/nativeSidecar"]; ok {
		native = v != "false"
	}
	// ProxyConfig: the Pod's annotation over the mesh's defaults; the
	// injector writes it to PROXY_CONFIG, leaving out defaults
	// (pkg/kube/inject/template.go), and proxyMetadata as env vars.
	proxyConfig := map[string]any{}
	var metadata map[string]string
	if v, ok := p.Annotations["proxy.istio.io/config"]; ok {
		var cfg map[string]any
		if err := yamlToJSON(v, &cfg); err == nil {
			if d, ok := cfg["terminationDrainDuration"]; ok && d != "5s" {
				proxyConfig["terminationDrainDuration"] = d
			}
			if md, ok := cfg["proxyMetadata"].(map[string]any); ok {
				metadata = map[string]string{}
				for k, v := range md {
					metadata[k] = fmt.Sprint(v)
					proxyConfig["proxyMetadata"] = md
				}
			}
		}
	}
	pc, _ := json.Marshal(proxyConfig)

	var appNames []string
	probers := map[string]any{}
	for i := range p.Spec.Containers {
		c := &p.Spec.Containers[i]
		appNames = append(appNames, c.Name)
		for kind, probe := range map[string]*corev1.Probe{"readyz": c.ReadinessProbe, "livez": c.LivenessProbe, "startupz": c.StartupProbe} {
			if probe == nil || probe.HTTPGet == nil {
				continue
			}
			path := "/app-health/" + c.Name + "/" + kind
			probers[path] = map[string]any{"httpGet": probe.HTTPGet, "timeoutSeconds": probe.TimeoutSeconds}
			probe.HTTPGet = &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(15020)}
		}
	}
	apply(p, Istio, native)
	proxy := container(p, "istio-proxy")
	setEnv(proxy, "PROXY_CONFIG", string(pc)+"\n")
	setEnv(proxy, "ISTIO_META_APP_CONTAINERS", strings.Join(appNames, ","))
	for _, k := range slices.Sorted(maps.Keys(metadata)) {
		setEnv(proxy, k, metadata[k])
	}
	if len(probers) > 0 {
		b, _ := json.Marshal(probers)
		setEnv(proxy, "ISTIO_KUBE_APP_PROBERS", string(b))
	}
	if len(appNames) > 0 { // a gateway's Pod has only the proxy
		setAnnotation(p, "kubectl.kubernetes.io/default-container", appNames[0])
		setAnnotation(p, "kubectl.kubernetes.io/default-logs-container", appNames[0])
	}
}

// ---- Linkerd --------------------------------------------------------------

func (in Injector) linkerd(p *corev1.Pod, nsAnnotations map[string]string) {
	// Config annotations the Pod lacks are copied from the namespace
	// (pkg/inject AppendNamespaceAnnotations: ProxyAnnotations, all
	// config.linkerd.io/*, ProxyAlphaConfigAnnotations and linkerd.io/inject).
	for k, v := range nsAnnotations {
		copied := strings.HasPrefix(k, "config.linkerd.io/") || k == "linkerd.io/inject" ||
			k == "config.alpha.linkerd.io/proxy-wait-before-exit-seconds" || k == "config.alpha.linkerd.io/proxy-enable-native-sidecar"
		if _, ok := p.Annotations[k]; copied && !ok {
			setAnnotation(p, k, v)
		}
	}
	// ApplyAnnotationOverrides: the first spelling present decides; a
	// value that does not parse leaves the default.
	native := in.Native
	for _, k := range []string{"config.linkerd.io/proxy-enable-native-sidecar", "config.beta.linkerd.io/proxy-enable-native-sidecar", "config.alpha.linkerd.io/proxy-enable-native-sidecar"} {
		if v, ok := p.Annotations[k]; ok {
			if b, err := strconv.ParseBool(v); err == nil {
				native = b
			}
			break
		}
	}
	apply(p, Linkerd, native)
	proxy := container(p, "linkerd-proxy")
	if v, ok := p.Annotations["config.linkerd.io/shutdown-grace-period"]; ok {
		// Rendered in milliseconds; a value that does not parse is ignored.
		if d, err := time.ParseDuration(v); err == nil {
			setEnv(proxy, "LINKERD2_PROXY_SHUTDOWN_GRACE_PERIOD", fmt.Sprintf("%dms", int(d.Seconds()*1000)))
		}
	}
	if !native && proxy.Lifecycle != nil {
		// proxy.await (the default): the app starts only once
		// linkerd-await returns (the generated postStart); a non-zero
		// wait becomes the proxy's preStop.
		if v, ok := p.Annotations["config.alpha.linkerd.io/proxy-wait-before-exit-seconds"]; ok {
			if n, err := strconv.ParseUint(v, 10, 64); err == nil && n > 0 {
				proxy.Lifecycle.PreStop = &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sleep", strconv.FormatUint(n, 10)}}}
			}
		}
	}
	setLabel(p, "linkerd.io/workload-ns", p.Namespace)
}
