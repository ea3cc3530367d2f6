// Package meshtest stands in for the Istio and Linkerd sidecar injectors in
// graceguard's tests: pure functions that add a proxy container, init
// container, volumes, labels and annotations the way each injector does,
// and an admission webhook serving them (for envtest).
//
// The shapes are reduced to what admission sees and graceguard reads (the
// proxy's name, placement, lifecycle, probes and environment, the
// annotations the injector adds); they are not the whole output.
//
//   - Istio: held to Istio's real injector. test/meshoracle runs Istio's
//     own pkg/kube/inject (istio.io/istio v0.0.0-20260827124520-eed52ebb66ad,
//     config rendered by Istio's chart renderer) on the same Pods and
//     fails when this stand-in differs from it in any of those fields:
//     classic sidecar as the last container; native sidecar (the default
//     since Istio 1.27 on 1.33+ nodes, or sidecar.istio.io/nativeSidecar)
//     as an init container with restartPolicy Always and a preStop
//     `pilot-agent request --debug-port=15020 POST drain`; app HTTP probes
//     rewritten to the agent's port 15020.
//   - Linkerd: written from Linkerd's code at edge-26.8.3
//     (linkerd/linkerd2@19a0d90d5a4a: pkg/inject/inject.go, report.go,
//     controller/proxy-injector/webhook.go, charts/partials/templates/_proxy.tpl,
//     charts/patch/templates/patch.json), and held to it: test/meshoracle
//     runs a verbatim copy of Linkerd's pkg/inject at that commit
//     (third_party/linkerd2: Linkerd's module is not on the Go module
//     proxy) on the same Pods, and fails when this stand-in differs from
//     it in what graceguard reads (l5dCheckStandIn). Native
//     sidecar by default (proxy.nativeSidecar, true since edge-26.5.2), or
//     by config.linkerd.io/proxy-enable-native-sidecar (then the beta and
//     alpha spellings; an unparsable value leaves the default): an init
//     container right after linkerd-init, without lifecycle hooks, with a
//     startup probe. Classic: the first container (proxy.await), postStart
//     linkerd-await and, for a non-zero
//     config.alpha.linkerd.io/proxy-wait-before-exit-seconds, preStop
//     `/bin/sleep N`. The namespace's config annotations the Pod lacks are
//     copied to it (config.linkerd.io/*, the two config.alpha keys,
//     linkerd.io/inject; not the beta spelling).
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

// Images of the injected containers.
const (
	IstioProxyImage   = "docker.io/istio/proxyv2:1.29.0"
	LinkerdProxyImage = "cr.l5d.io/linkerd/proxy:edge-26.8.3"
	LinkerdInitImage  = "cr.l5d.io/linkerd/proxy-init:v2.4.3"
)

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

var always = corev1.ContainerRestartPolicyAlways

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
	env := []corev1.EnvVar{
		{Name: "PILOT_CERT_PROVIDER", Value: "istiod"},
		{Name: "CA_ADDR", Value: "istiod.istio-system.svc:15012"},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "INSTANCE_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "PROXY_CONFIG", Value: string(pc) + "\n"},
		{Name: "ISTIO_META_APP_CONTAINERS", Value: strings.Join(appNames, ",")},
		{Name: "ISTIO_META_CLUSTER_ID", Value: "Kubernetes"},
	}
	for _, k := range slices.Sorted(maps.Keys(metadata)) {
		env = append(env, corev1.EnvVar{Name: k, Value: metadata[k]})
	}
	if len(probers) > 0 {
		b, _ := json.Marshal(probers)
		env = append(env, corev1.EnvVar{Name: "ISTIO_KUBE_APP_PROBERS", Value: string(b)})
	}
	f, t := false, true
	uid := int64(1337)
	proxy := corev1.Container{
		Name:  "istio-proxy",
		Image: IstioProxyImage,
		Args:  []string{"proxy", "sidecar", "--domain", "$(POD_NAMESPACE).svc.cluster.local", "--proxyLogLevel=warning", "--proxyComponentLogLevel=misc:error", "--log_output_level=default:info"},
		Ports: []corev1.ContainerPort{{ContainerPort: 15090, Name: "http-envoy-prom", Protocol: corev1.ProtocolTCP}},
		Env:   env,
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz/ready", Port: intstr.FromInt32(15021)}},
			PeriodSeconds: 15, TimeoutSeconds: 3, FailureThreshold: 4},
		SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &f, Privileged: &f, ReadOnlyRootFilesystem: &t, RunAsUser: &uid, RunAsGroup: &uid, RunAsNonRoot: &t,
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "workload-socket", MountPath: "/var/run/secrets/workload-spiffe-uds"},
			{Name: "istiod-ca-cert", MountPath: "/var/run/secrets/istio"},
			{Name: "istio-data", MountPath: "/var/lib/istio/data"},
			{Name: "istio-envoy", MountPath: "/etc/istio/proxy"},
			{Name: "istio-podinfo", MountPath: "/etc/istio/pod"},
		},
	}
	initC := corev1.Container{
		Name:  "istio-init",
		Image: IstioProxyImage,
		Args: []string{"istio-iptables", "-p", "15001", "-z", "15006", "-u", "1337", "-m", "REDIRECT", "-i", "*", "-x", "", "-b", "*",
			"-d", "15090,15021,15020", "--log_output_level=default:info"},
		SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}, Drop: []corev1.Capability{"ALL"}}},
	}
	if native {
		// Started before the app, stopped after it; the preStop starts the
		// drain at deletion (istio#47226).
		proxy.RestartPolicy = &always
		proxy.StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz/ready", Port: intstr.FromInt32(15021)}},
			PeriodSeconds: 1, TimeoutSeconds: 3, FailureThreshold: 600}
		proxy.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
			Command: []string{"pilot-agent", "request", "--debug-port=15020", "POST", "drain"}}}}
		p.Spec.InitContainers = append(p.Spec.InitContainers, initC, proxy)
	} else {
		p.Spec.InitContainers = append(p.Spec.InitContainers, initC)
		p.Spec.Containers = append(p.Spec.Containers, proxy)
	}
	p.Spec.Volumes = append(p.Spec.Volumes,
		corev1.Volume{Name: "workload-socket", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: "istio-envoy", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
		corev1.Volume{Name: "istio-data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: "istio-podinfo", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
			{Path: "annotations", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations"}},
		}}}},
		corev1.Volume{Name: "istiod-ca-cert", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "istio-ca-root-cert"}}}},
	)
	status := map[string]any{"initContainers": []string{"istio-init"}, "containers": []string{"istio-proxy"},
		"volumes": []string{"workload-socket", "istio-envoy", "istio-data", "istio-podinfo", "istiod-ca-cert"}, "imagePullSecrets": nil, "revision": "default"}
	if native {
		status["initContainers"] = []string{"istio-init", "istio-proxy"}
		status["containers"] = nil
	}
	b, _ := json.Marshal(status)
	setAnnotation(p, "sidecar.istio.io/status", string(b))
	setAnnotation(p, "kubectl.kubernetes.io/default-container", p.Spec.Containers[0].Name)
	setLabel(p, "security.istio.io/tlsMode", "istio")
	setLabel(p, "service.istio.io/canonical-revision", "latest")
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
	env := []corev1.EnvVar{
		{Name: "_pod_name", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "_pod_ns", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "_pod_containerName", Value: "linkerd-proxy"},
		{Name: "LINKERD2_PROXY_LOG", Value: "warn,linkerd=info,hickory=error,linkerd_proxy_http::client[{headers}]=off"},
		{Name: "LINKERD2_PROXY_DESTINATION_SVC_ADDR", Value: "linkerd-dst-headless.linkerd.svc.cluster.local.:8086"},
		{Name: "LINKERD2_PROXY_ADMIN_LISTEN_ADDR", Value: "[::]:4191"},
		{Name: "LINKERD2_PROXY_INBOUND_LISTEN_ADDR", Value: "[::]:4143"},
	}
	if v, ok := p.Annotations["config.linkerd.io/shutdown-grace-period"]; ok {
		// Rendered in milliseconds; a value that does not parse is ignored.
		if d, err := time.ParseDuration(v); err == nil {
			env = append(env, corev1.EnvVar{Name: "LINKERD2_PROXY_SHUTDOWN_GRACE_PERIOD", Value: fmt.Sprintf("%dms", int(d.Seconds()*1000))})
		}
	}
	t := true
	uid := int64(2102)
	proxy := corev1.Container{
		Name:  "linkerd-proxy",
		Image: LinkerdProxyImage,
		Env:   env,
		Ports: []corev1.ContainerPort{{ContainerPort: 4143, Name: "linkerd-proxy"}, {ContainerPort: 4191, Name: "linkerd-admin"}},
		LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/live", Port: intstr.FromInt32(4191)}},
			InitialDelaySeconds: 10, TimeoutSeconds: 1},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(4191)}},
			InitialDelaySeconds: 2, TimeoutSeconds: 1},
		SecurityContext:          &corev1.SecurityContext{ReadOnlyRootFilesystem: &t, RunAsNonRoot: &t, RunAsUser: &uid},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		VolumeMounts:             []corev1.VolumeMount{{Name: "linkerd-identity-end-entity", MountPath: "/var/run/linkerd/identity/end-entity"}},
	}
	initC := corev1.Container{
		Name:  "linkerd-init",
		Image: LinkerdInitImage,
		Args: []string{"--incoming-proxy-port", "4143", "--outgoing-proxy-port", "4140", "--proxy-uid", "2102",
			"--inbound-ports-to-ignore", "4190,4191,4567,4568", "--outbound-ports-to-ignore", "4567,4568"},
		SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}}},
		VolumeMounts:    []corev1.VolumeMount{{Name: "linkerd-proxy-init-xtables-lock", MountPath: "/run"}},
	}
	p.Spec.Volumes = append(p.Spec.Volumes,
		corev1.Volume{Name: "linkerd-proxy-init-xtables-lock", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: "linkerd-identity-end-entity", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
	)
	if native {
		proxy.RestartPolicy = &always
		proxy.StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(4191)}},
			PeriodSeconds: 1, FailureThreshold: 120}
		p.Spec.InitContainers = append([]corev1.Container{initC, proxy}, p.Spec.InitContainers...)
	} else {
		// proxy.await (the default): first container, and the app starts
		// only once linkerd-await returns.
		proxy.Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
			Command: []string{"/usr/lib/linkerd/linkerd-await", "--timeout=2m", "--port=4191"}}}}
		if v, ok := p.Annotations["config.alpha.linkerd.io/proxy-wait-before-exit-seconds"]; ok {
			if n, err := strconv.ParseUint(v, 10, 64); err == nil && n > 0 {
				proxy.Lifecycle.PreStop = &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sleep", strconv.FormatUint(n, 10)}}}
			}
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, initC)
		p.Spec.Containers = append([]corev1.Container{proxy}, p.Spec.Containers...)
	}
	setAnnotation(p, "linkerd.io/created-by", "linkerd/proxy-injector edge-26.8.3")
	setAnnotation(p, "linkerd.io/proxy-version", "edge-26.8.3")
	setAnnotation(p, "linkerd.io/trust-root-sha256", "3a9b3f0c1e4f9f1a0a0ab9a0b5f8c1c9d2e5f0a7b6c4d3e2f1a0b9c8d7e6f5a4")
	setAnnotation(p, "kubectl.kubernetes.io/default-container", p.Spec.Containers[min(1, len(p.Spec.Containers)-1)].Name)
	if native {
		setAnnotation(p, "kubectl.kubernetes.io/default-container", p.Spec.Containers[0].Name)
	}
	setLabel(p, "linkerd.io/control-plane-ns", "linkerd")
	setLabel(p, "linkerd.io/workload-ns", p.Namespace)
}
