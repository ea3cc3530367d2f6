package chart_test

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/graceguard/graceguard/pkg/cel"
	"github.com/graceguard/graceguard/pkg/mutate"
)

const certDir = "/tmp/k8s-webhook-server/serving-certs"

func TestDefaultsRunTwoSpreadReplicasProtectedByABudget(t *testing.T) {
	r := render(t, "")
	d := r.deployment(t)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %v, want 2", d.Spec.Replicas)
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Errorf("rolling update %+v lets a replica go before its successor is ready", ru)
	}
	pod := d.Spec.Template
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
		t.Fatalf("the Deployment's selector %v does not select its own Pods %v (%v)", d.Spec.Selector, pod.Labels, err)
	}

	pdb := get[*policyv1.PodDisruptionBudget](t, r, "PodDisruptionBudget", fullname)
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("PDB minAvailable = %v, want 1", pdb.Spec.MinAvailable)
	}
	if s, _ := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); !s.Matches(labels.Set(pod.Labels)) {
		t.Errorf("the PDB selector %v does not select the webhook Pods", pdb.Spec.Selector)
	}
	if p := pdb.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.AlwaysAllow {
		t.Errorf("unhealthyPodEvictionPolicy = %v: a crash-looping replica would block node drains", p)
	}

	tsc := pod.Spec.TopologySpreadConstraints
	if len(tsc) != 1 || tsc[0].TopologyKey != "kubernetes.io/hostname" || tsc[0].WhenUnsatisfiable != corev1.ScheduleAnyway || tsc[0].MaxSkew != 1 {
		t.Fatalf("topologySpreadConstraints = %+v, want one across kubernetes.io/hostname, ScheduleAnyway", tsc)
	}
	if s, _ := metav1.LabelSelectorAsSelector(tsc[0].LabelSelector); !s.Matches(labels.Set(pod.Labels)) {
		t.Errorf("the spread constraint does not count the webhook's own Pods")
	}
	// A fail-closed admission webhook is cluster-critical (Gatekeeper's
	// default too), with the quota that lets it run outside kube-system
	// where the platform limits critical classes.
	if pod.Spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priorityClassName = %q by default, want system-cluster-critical", pod.Spec.PriorityClassName)
	}
	q := get[*corev1.ResourceQuota](t, r, "ResourceQuota", fullname+"-critical-pods")
	if sel := q.Spec.ScopeSelector; sel == nil || len(sel.MatchExpressions) != 1 || sel.MatchExpressions[0].ScopeName != corev1.ResourceQuotaScopePriorityClass ||
		!slices.Equal(sel.MatchExpressions[0].Values, []string{"system-cluster-critical"}) {
		t.Errorf("critical-pods quota scope = %+v, want PriorityClass In [system-cluster-critical]", q.Spec.ScopeSelector)
	}
	if n := q.Spec.Hard[corev1.ResourcePods]; n.Value() < int64(*d.Spec.Replicas)+1 {
		t.Errorf("critical-pods quota allows %s Pods, fewer than the replicas and a surge", n.String())
	}
	// Replicas prefer different nodes (soft: a single node still runs both).
	aff := pod.Spec.Affinity
	if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
		len(aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 0 {
		t.Fatalf("affinity = %+v, want one preferred pod anti-affinity term", aff)
	}
	term := aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
	if s, _ := metav1.LabelSelectorAsSelector(term.LabelSelector); term.TopologyKey != "kubernetes.io/hostname" || !s.Matches(labels.Set(pod.Labels)) {
		t.Errorf("anti-affinity term %+v does not keep the webhook's own Pods apart by node", term)
	}
	if got := r.container(t).Image; got != "registry.local/graceguard:v0.1.0" {
		t.Errorf("image = %q, want the repository at the chart's appVersion", got)
	}
}

func TestDefaultsAreRestricted(t *testing.T) {
	r := render(t, "")
	spec := r.deployment(t).Spec.Template.Spec
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
		psc.RunAsGroup == nil || *psc.RunAsGroup != 65532 || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext = %+v, want non-root 65532:65532 with RuntimeDefault seccomp", psc)
	}
	sc := r.container(t).SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("container securityContext = %+v, want no escalation, read-only root, all capabilities dropped", sc)
	}
	if sc != nil && sc.Privileged != nil && *sc.Privileged {
		t.Error("privileged container")
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Error("host namespaces shared")
	}
	// The only writable path: the in-memory cert dir the webhook fills
	// (assertCertDirInMemory).
	if ms := r.container(t).VolumeMounts; len(ms) != 1 || ms[0].MountPath != certDir {
		t.Errorf("volume mounts %+v: want only the cert dir", ms)
	}
}

func TestOwnPodsFollowGraceguardsAdvice(t *testing.T) {
	r := render(t, "")
	pod := r.deployment(t).Spec.Template
	c := r.container(t)

	if pod.Annotations["graceguard.io/inject"] != "false" {
		t.Errorf("Pod annotations %v lack graceguard.io/inject: \"false\"", pod.Annotations)
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds != 5 {
		t.Fatalf("preStop = %+v, want the native sleep action for 5s", c.Lifecycle)
	}
	if c.Lifecycle.PreStop.Exec != nil {
		t.Error("preStop exec needs a sleep binary the distroless image lacks")
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || *g != 40 {
		t.Errorf("terminationGracePeriodSeconds = %v, want 40 (5 preStop + 10 delay + 15 drain + 5 margin, rounded up)", g)
	}
	f := flags(t, c)
	if f["shutdown-delay"] != "10s" || f["drain-timeout"] != "15s" {
		t.Errorf("--shutdown-delay=%q --drain-timeout=%q, want 10s and 15s", f["shutdown-delay"], f["drain-timeout"])
	}

	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	rp, lp := c.ReadinessProbe, c.LivenessProbe
	if rp == nil || rp.HTTPGet == nil || rp.HTTPGet.Path != "/readyz" || rp.HTTPGet.Port.String() != "health" {
		t.Fatalf("readinessProbe = %+v, want GET /readyz on the health port", rp)
	}
	if lp == nil || lp.HTTPGet == nil || lp.HTTPGet.Path != "/healthz" || lp.HTTPGet.Port.String() != "health" {
		t.Fatalf("livenessProbe = %+v, want GET /healthz on the health port", lp)
	}
	if ports["health"] != 8081 || f["health-probe-bind-address"] != ":8081" {
		t.Errorf("health port %d, --health-probe-bind-address=%q; want both 8081", ports["health"], f["health-probe-bind-address"])
	}
	// Withdrawn within the preStop sleep: a replica that stops being ready
	// is out of the endpoints before SIGTERM.
	if w := rp.PeriodSeconds * rp.FailureThreshold; w > 5 {
		t.Errorf("readiness takes up to %ds to notice a failing /readyz, longer than the 5s preStop sleep", w)
	}

	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if e := env["POD_NAMESPACE"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("POD_NAMESPACE = %+v, want the Pod's namespace from the downward API", e)
	}
}

func TestEveryServerFlagIsRendered(t *testing.T) {
	f := flags(t, render(t, "").container(t))
	want := map[string]string{
		"port":                                     "9443",
		"health-probe-bind-address":                ":8081",
		"metrics-bind-address":                     ":8080",
		"cert-dir":                                 certDir,
		"shutdown-delay":                           "10s",
		"drain-timeout":                            "15s",
		"default-routing-delay":                    "5s",
		"default-max-work":                         "20s",
		"default-cleanup":                          "2s",
		"default-safety-margin":                    "3s",
		"max-grace-period":                         "10m",
		"prestop-handler":                          "sleep",
		"default-mode":                             "enforce",
		"untreated-pods":                           "admit",
		"excluded-namespaces":                      "kube-system",
		"enable-http2":                             "false",
		"zap-log-level":                            "info",
		"zap-encoder":                              "json",
		"cert-mode":                                "self-managed",
		"cert-secret-name":                         "graceguard-cert",
		"service-name":                             fullname,
		"mutating-webhook-configuration":           fullname,
		"validating-webhook-configuration":         fullname,
		"webhook-timeout":                          "5s",
		"max-concurrent-reviews":                   "0",
		"max-inflight-review-bytes":                "16Mi",
		"max-connections":                          "256",
		"max-pending-connections":                  "128",
		"default-routing-profile":                  "",
		"karpenter-termination-grace-period":       "0",
		"karpenter-ceiling-action":                 "warn",
		"node-shutdown-grace-period":               "0",
		"node-shutdown-grace-period-critical-pods": "0",
		"node-shutdown-ceiling-action":             "warn",
	}
	for k, v := range want {
		if got, ok := f[k]; !ok || got != v {
			t.Errorf("--%s=%q (present %v), want %q", k, got, ok, v)
		}
	}
	for k := range f {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected flag --%s=%s", k, f[k])
		}
	}
}

func TestValuesReachTheFlags(t *testing.T) {
	r := render(t, `
shutdown: {delay: 1500ms, drainTimeout: 20, terminationGracePeriodSeconds: 60}
metrics: {enabled: false}
ports: {webhook: 10250}
config:
  defaultRoutingDelay: 8s
  defaultMaxWork: 1m30s
  defaultCleanup: 0
  defaultSafetyMargin: 5s
  maxGracePeriod: 15m
  prestopHandler: exec
  defaultMode: warn
  excludedNamespaces: [monitoring, kube-system, istio-system]
  logLevel: debug
  logFormat: console
  enableHTTP2: true
  routingProfiles:
    corp-lb: {routingDelay: 45s}
    aws-nlb-ip: {routingDelay: 150s, graceFloor: 3m}
  defaultRoutingProfile: corp-lb
  karpenterTerminationGracePeriod: 48h
  karpenterCeilingAction: deny
  nodeShutdownGracePeriod: 30s
  nodeShutdownGracePeriodCriticalPods: 10
  nodeShutdownCeilingAction: warn
  maxConnections: 1000
  maxPendingConnections: 300
`)
	c := r.container(t)
	f := flags(t, c)
	for k, v := range map[string]string{
		"shutdown-delay": "1500ms", "drain-timeout": "20", "metrics-bind-address": "0", "port": "10250",
		"default-routing-delay": "8s", "default-max-work": "1m30s", "default-cleanup": "0", "default-safety-margin": "5s",
		"max-grace-period": "15m", "prestop-handler": "exec", "default-mode": "warn",
		"excluded-namespaces": "kube-system,monitoring,istio-system", "zap-log-level": "debug", "zap-encoder": "console",
		"enable-http2": "true", "default-routing-profile": "corp-lb", "karpenter-termination-grace-period": "48h",
		"karpenter-ceiling-action": "deny", "node-shutdown-grace-period": "30s", "node-shutdown-grace-period-critical-pods": "10",
		"node-shutdown-ceiling-action": "warn", "max-connections": "1000", "max-pending-connections": "300",
	} {
		if f[k] != v {
			t.Errorf("--%s=%q, want %q", k, f[k], v)
		}
	}
	var profiles []string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--routing-profile="); ok {
			profiles = append(profiles, v)
		}
	}
	if got, want := strings.Join(profiles, " "), "aws-nlb-ip=150s,grace-floor=3m corp-lb=45s"; got != want {
		t.Errorf("--routing-profile flags %q, want %q (one per profile, in name order)", got, want)
	}
	for _, p := range c.Ports {
		if p.Name == "metrics" {
			t.Error("metrics port declared with metrics disabled")
		}
		if p.Name == "webhook" && p.ContainerPort != 10250 {
			t.Errorf("webhook containerPort = %d, want 10250 like --port", p.ContainerPort)
		}
	}
	ns := nsSelector(t, r.mutating(t).Webhooks[0].NamespaceSelector)
	for _, name := range []string{"monitoring", "istio-system"} {
		if ns.Matches(labels.Set{"graceguard.io/inject": "enabled", "kubernetes.io/metadata.name": name}) {
			t.Errorf("excluded namespace %s is still sent to the webhook", name)
		}
	}
}

func TestServiceRoutesTheWebhooksToThePods(t *testing.T) {
	r := render(t, "")
	svc := get[*corev1.Service](t, r, "Service", fullname)
	pod := r.deployment(t).Spec.Template
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
		t.Fatalf("Service selector %v misses the webhook Pods %v", svc.Spec.Selector, pod.Labels)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.String() != "webhook" {
		t.Fatalf("Service ports = %+v, want 443 -> webhook", svc.Spec.Ports)
	}
	var webhookPort int32
	for _, p := range r.container(t).Ports {
		if p.Name == "webhook" {
			webhookPort = p.ContainerPort
		}
	}
	if webhookPort != 9443 {
		t.Errorf("container port webhook = %d, want 9443", webhookPort)
	}
	check := func(name string, cc admissionv1.WebhookClientConfig, path string) {
		s := cc.Service
		if s == nil || s.Name != svc.Name || s.Namespace != namespace || s.Port == nil || *s.Port != 443 || s.Path == nil || *s.Path != path {
			t.Errorf("%s clientConfig.service = %+v, want %s/%s:443%s", name, s, namespace, svc.Name, path)
		}
		if cc.URL != nil {
			t.Errorf("%s has a URL", name)
		}
	}
	m := r.mutating(t)
	if len(m.Webhooks) != 1 {
		t.Fatalf("%d mutating webhooks, want 1", len(m.Webhooks))
	}
	check(m.Webhooks[0].Name, m.Webhooks[0].ClientConfig, "/mutate-v1-pod")
	check("validate-pods", r.validatingHook(t, "validate-pods.graceguard.io").ClientConfig, "/validate-v1-pod")
	check("validate-pods-warn", r.validatingHook(t, "validate-pods-warn.graceguard.io").ClientConfig, "/validate-v1-pod")
	check("validate-workloads", r.validatingHook(t, "validate-workloads.graceguard.io").ClientConfig, "/validate-workloads")
	if n := len(r.validating(t).Webhooks); n != 3 {
		t.Errorf("%d validating webhooks, want 3", n)
	}
}

func nsSelector(t *testing.T, s *metav1.LabelSelector) labels.Selector {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		t.Fatalf("selector %+v: %v", s, err)
	}
	return sel
}

func TestWebhooksOnlyReachOptedInNamespacesAndNeverGraceguardItself(t *testing.T) {
	r := render(t, "")
	ns := func(name, inject string) labels.Set {
		l := labels.Set{"kubernetes.io/metadata.name": name}
		if inject != "" {
			l["graceguard.io/inject"] = inject
		}
		return l
	}
	// The Pod validating webhooks split opted-in namespaces by mode
	// (test/harness/chart's TestModeSelectorsPartitionNamespaces): the warn one
	// is tried on namespaces in warn mode.
	inWarnMode := func(l labels.Set) labels.Set {
		w := labels.Set{"graceguard.io/mode": "warn"}
		for k, v := range l {
			w[k] = v
		}
		return w
	}
	namespaces := []struct {
		labels labels.Set
		sent   bool
	}{
		{ns("shop", "enabled"), true},
		{ns("shop", ""), false},
		{ns("shop", "true"), false}, // only "enabled" opts in
		{ns("kube-system", "enabled"), false},
		{ns(namespace, "enabled"), false},
	}

	type hook struct {
		name              string
		ns, obj           *metav1.LabelSelector
		conds             []admissionv1.MatchCondition
		pods              bool
		sideEffects       *admissionv1.SideEffectClass
		reviewVersions    []string
		failurePolicy     *admissionv1.FailurePolicyType
		timeout           *int32
		wantFailurePolicy admissionv1.FailurePolicyType
		// conds are the names of the matchConditions after not-a-mirror-pod.
		wantConds []string
		warn      bool
	}
	m := r.mutating(t).Webhooks[0]
	vp := r.validatingHook(t, "validate-pods.graceguard.io")
	vpw := r.validatingHook(t, "validate-pods-warn.graceguard.io")
	vw := r.validatingHook(t, "validate-workloads.graceguard.io")
	hooks := []hook{
		{m.Name, m.NamespaceSelector, m.ObjectSelector, m.MatchConditions, true, m.SideEffects, m.AdmissionReviewVersions, m.FailurePolicy, m.TimeoutSeconds, admissionv1.Ignore, []string{"not-opted-out"}, false},
		{vp.Name, vp.NamespaceSelector, vp.ObjectSelector, vp.MatchConditions, true, vp.SideEffects, vp.AdmissionReviewVersions, vp.FailurePolicy, vp.TimeoutSeconds, admissionv1.Ignore, []string{"not-proven-by-cel"}, false},
		{vpw.Name, vpw.NamespaceSelector, vpw.ObjectSelector, vpw.MatchConditions, true, vpw.SideEffects, vpw.AdmissionReviewVersions, vpw.FailurePolicy, vpw.TimeoutSeconds, admissionv1.Ignore, nil, true},
		{vw.Name, vw.NamespaceSelector, vw.ObjectSelector, vw.MatchConditions, false, vw.SideEffects, vw.AdmissionReviewVersions, vw.FailurePolicy, vw.TimeoutSeconds, admissionv1.Ignore, nil, false},
	}
	for _, h := range hooks {
		sel := nsSelector(t, h.ns)
		for _, n := range namespaces {
			l := n.labels
			if h.warn {
				l = inWarnMode(l)
			}
			if got := sel.Matches(l); got != n.sent {
				t.Errorf("%s: namespace %v sent = %v, want %v", h.name, n.labels, got, n.sent)
			}
		}
		if h.sideEffects == nil || *h.sideEffects != admissionv1.SideEffectClassNone {
			t.Errorf("%s: sideEffects = %v, want None (dry runs must reach it)", h.name, h.sideEffects)
		}
		if !slices.Equal(h.reviewVersions, []string{"v1"}) {
			t.Errorf("%s: admissionReviewVersions = %v", h.name, h.reviewVersions)
		}
		if h.failurePolicy == nil || *h.failurePolicy != h.wantFailurePolicy {
			t.Errorf("%s: failurePolicy = %v, want %s", h.name, h.failurePolicy, h.wantFailurePolicy)
		}
		if h.timeout == nil || *h.timeout != 5 {
			t.Errorf("%s: timeoutSeconds = %v, want 5", h.name, h.timeout)
		}
		// No objectSelector: a label anyone can put on a Pod must not let
		// it skip the hook-versus-grace check. graceguard's own Pods are
		// left out by namespace.
		if h.obj != nil {
			t.Errorf("%s: objectSelector %v: a Pod carrying those labels would skip graceguard", h.name, h.obj)
		}
		if !h.pods {
			continue
		}
		want := `!has(object.metadata.annotations) || !('kubernetes.io/config.mirror' in object.metadata.annotations)`
		var names []string
		for _, c := range h.conds[min(1, len(h.conds)):] {
			names = append(names, c.Name)
		}
		if len(h.conds) == 0 || h.conds[0].Expression != want || !slices.Equal(names, h.wantConds) {
			t.Errorf("%s: matchConditions = %+v, want one skipping mirror Pods (%s), then %v", h.name, h.conds, want, h.wantConds)
		}
	}
	if p := m.ReinvocationPolicy; p == nil || *p != admissionv1.IfNeededReinvocationPolicy {
		t.Errorf("mutating reinvocationPolicy = %v, want IfNeeded", p)
	}
	if len(vw.MatchConditions) != 1 || !strings.Contains(vw.MatchConditions[0].Expression, "request.operation != 'UPDATE'") {
		t.Errorf("workload matchConditions = %+v, want one sending only creations and template changes", vw.MatchConditions)
	}
}

func TestWebhookRules(t *testing.T) {
	r := render(t, "")
	type rule struct{ groups, versions, resources, ops string }
	flat := func(rs []admissionv1.RuleWithOperations) []rule {
		var out []rule
		for _, x := range rs {
			ops := make([]string, len(x.Operations))
			for i, o := range x.Operations {
				ops[i] = string(o)
			}
			if x.Scope == nil || *x.Scope != admissionv1.NamespacedScope {
				t.Errorf("rule %+v is not Namespaced", x)
			}
			out = append(out, rule{strings.Join(x.APIGroups, ","), strings.Join(x.APIVersions, ","), strings.Join(x.Resources, ","), strings.Join(ops, ",")})
		}
		return out
	}
	podCreate := []rule{{"", "v1", "pods", "CREATE"}}
	if got := flat(r.mutating(t).Webhooks[0].Rules); !slices.Equal(got, podCreate) {
		t.Errorf("mutating rules = %+v, want Pods CREATE only (the spec is immutable after)", got)
	}
	for _, name := range []string{"validate-pods.graceguard.io", "validate-pods-warn.graceguard.io"} {
		if got := flat(r.validatingHook(t, name).Rules); !slices.Equal(got, podCreate) {
			t.Errorf("%s rules = %+v, want Pods CREATE only", name, got)
		}
	}
	// The chart registers exactly the workloads graceguard's table marks
	// as reviewed, one rule per group/version, in the table's order; an
	// optional kind (a CRD's) only where it is served (TestArgoRolloutsRule).
	var want []rule
	for _, w := range mutate.Workloads {
		if !w.Reviewed || w.Optional {
			continue
		}
		if n := len(want); n > 0 && want[n-1].groups == w.Group && want[n-1].versions == w.Version {
			want[n-1].resources += "," + w.Resource
			continue
		}
		want = append(want, rule{w.Group, w.Version, w.Resource, "CREATE,UPDATE"})
	}
	if got := flat(r.validatingHook(t, "validate-workloads.graceguard.io").Rules); !slices.Equal(got, want) {
		t.Errorf("workload rules = %+v, want %+v", got, want)
	}
}

func TestFailurePoliciesAndTimeoutsFromValues(t *testing.T) {
	r := render(t, `
webhooks:
  mutatePods: {failurePolicy: Fail, timeoutSeconds: 3}
  validatePods: {failurePolicy: Fail, timeoutSeconds: 30}
  validateWorkloads: {failurePolicy: Fail, timeoutSeconds: 1}
`)
	m := r.mutating(t).Webhooks[0]
	vp := r.validatingHook(t, "validate-pods.graceguard.io")
	vpw := r.validatingHook(t, "validate-pods-warn.graceguard.io")
	vw := r.validatingHook(t, "validate-workloads.graceguard.io")
	for _, c := range []struct {
		name    string
		policy  *admissionv1.FailurePolicyType
		timeout *int32
		want    admissionv1.FailurePolicyType
		wantT   int32
	}{
		{"mutate", m.FailurePolicy, m.TimeoutSeconds, admissionv1.Fail, 3},
		{"validate pods", vp.FailurePolicy, vp.TimeoutSeconds, admissionv1.Fail, 30},
		{"validate pods (warn mode)", vpw.FailurePolicy, vpw.TimeoutSeconds, admissionv1.Fail, 30},
		{"validate workloads", vw.FailurePolicy, vw.TimeoutSeconds, admissionv1.Fail, 1},
	} {
		if c.policy == nil || *c.policy != c.want || c.timeout == nil || *c.timeout != c.wantT {
			t.Errorf("%s: failurePolicy %v timeoutSeconds %v, want %s %d", c.name, c.policy, c.timeout, c.want, c.wantT)
		}
	}
}

func TestSelfManagedCertificates(t *testing.T) {
	r := render(t, "")
	f := flags(t, r.container(t))

	s := get[*corev1.Secret](t, r, "Secret", f["cert-secret-name"])
	if len(s.Data) != 0 || len(s.StringData) != 0 || s.Type != corev1.SecretTypeOpaque {
		t.Errorf("Secret %s has data %v / type %s: a templated value would overwrite the rotator's certificates on upgrade", s.Name, s.Data, s.Type)
	}
	if s.Annotations["helm.sh/resource-policy"] != "" {
		t.Errorf("Secret %s outlives the release (%v); a reinstall would adopt a CA no webhook configuration trusts", s.Name, s.Annotations)
	}
	if !r.has("Service", f["service-name"]) {
		t.Errorf("--service-name=%s names no rendered Service", f["service-name"])
	}
	if f["mutating-webhook-configuration"] != r.mutating(t).Name || f["validating-webhook-configuration"] != r.validating(t).Name {
		t.Errorf("webhook configuration flags %q %q do not name the rendered configurations", f["mutating-webhook-configuration"], f["validating-webhook-configuration"])
	}
	assertCertDirInMemory(t, r)

	for _, h := range r.mutating(t).Webhooks {
		if len(h.ClientConfig.CABundle) != 0 {
			t.Errorf("%s carries a caBundle in the template; Helm would then own it and could overwrite the rotator's", h.Name)
		}
	}
	for _, h := range r.validating(t).Webhooks {
		if len(h.ClientConfig.CABundle) != 0 {
			t.Errorf("%s carries a caBundle in the template", h.Name)
		}
	}
	if strings.Contains(stripComments(r.manifest), "caBundle") {
		t.Error("the self-managed manifest mentions caBundle, even empty; Helm would own the field and clash with the rotator")
	}
	if a := r.mutating(t).Annotations; a["cert-manager.io/inject-ca-from"] != "" {
		t.Errorf("self-managed webhook configuration asks cert-manager to inject: %v", a)
	}
	for _, k := range r.keys() {
		if strings.HasPrefix(k, "Certificate/") || strings.HasPrefix(k, "Issuer/") {
			t.Errorf("self-managed mode renders %s", k)
		}
	}
}

// assertCertDirInMemory: in self-managed mode the webhook writes the
// certificates from its Secret into --cert-dir itself, so the dir is a
// writable in-memory emptyDir, and no Secret volume waits on the kubelet.
func assertCertDirInMemory(t *testing.T, r *rendered) {
	t.Helper()
	spec := r.deployment(t).Spec.Template.Spec
	if f := flags(t, r.container(t)); f["cert-dir"] != certDir {
		t.Errorf("--cert-dir=%s, want %s", f["cert-dir"], certDir)
	}
	for _, m := range r.container(t).VolumeMounts {
		if m.MountPath != certDir {
			continue
		}
		if m.ReadOnly {
			t.Errorf("volume %s at %s is read-only: the webhook cannot write its certificates there", m.Name, certDir)
		}
		for _, v := range spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			if v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory || v.EmptyDir.SizeLimit == nil {
				t.Errorf("volume %s at %s is %+v, want an in-memory emptyDir with a size limit (the key stays off the node's disk)", v.Name, certDir, v.VolumeSource)
			}
			return
		}
	}
	t.Errorf("nothing is mounted at --cert-dir %s: the read-only root filesystem leaves the webhook nowhere to write its certificates", certDir)
}

func assertCertsMounted(t *testing.T, r *rendered, secret string) {
	t.Helper()
	spec := r.deployment(t).Spec.Template.Spec
	var vol *corev1.Volume
	for i := range spec.Volumes {
		if spec.Volumes[i].Secret != nil && spec.Volumes[i].Secret.SecretName == secret {
			vol = &spec.Volumes[i]
		}
	}
	if vol == nil {
		t.Fatalf("Secret %s is not a volume of the webhook Pods: %+v", secret, spec.Volumes)
	}
	mounted := false
	for _, m := range r.container(t).VolumeMounts {
		if m.Name == vol.Name && m.MountPath == certDir && m.ReadOnly {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("volume %s is not mounted read-only at %s", vol.Name, certDir)
	}
	if f := flags(t, r.container(t)); f["cert-dir"] != certDir {
		t.Errorf("--cert-dir=%s, but the certificates are mounted at %s", f["cert-dir"], certDir)
	}
	if m := vol.Secret.DefaultMode; m == nil || *m != 0o440 {
		t.Errorf("certificate files mode = %v, want 0440 (readable through fsGroup only)", m)
	}
}

func TestRBACIsLeastPrivilege(t *testing.T) {
	r := render(t, "")
	f := flags(t, r.container(t))
	sa := r.deployment(t).Spec.Template.Spec.ServiceAccountName
	if !r.has("ServiceAccount", sa) {
		t.Fatalf("the Pods run as ServiceAccount %q, which is not rendered", sa)
	}
	cr := get[*rbacv1.ClusterRole](t, r, "ClusterRole", fullname)
	role := get[*rbacv1.Role](t, r, "Role", fullname)
	for _, rules := range [][]rbacv1.PolicyRule{cr.Rules, role.Rules} {
		for _, rule := range rules {
			for _, v := range rule.Verbs {
				if !slices.Contains([]string{"get", "list", "watch", "update"}, v) {
					t.Errorf("rule %+v grants %q", rule, v)
				}
				if v == "update" && len(rule.ResourceNames) == 0 {
					t.Errorf("rule %+v writes without resourceNames", rule)
				}
			}
			if slices.Contains(rule.Resources, "*") || slices.Contains(rule.APIGroups, "*") {
				t.Errorf("wildcard rule %+v", rule)
			}
		}
	}
	can := func(rules []rbacv1.PolicyRule, group, resource, name, verb string) bool {
		for _, rule := range rules {
			if slices.Contains(rule.APIGroups, group) && slices.Contains(rule.Resources, resource) && slices.Contains(rule.Verbs, verb) &&
				(len(rule.ResourceNames) == 0 || slices.Contains(rule.ResourceNames, name)) {
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		rules                       []rbacv1.PolicyRule
		group, resource, name, verb string
		want                        bool
	}{
		{cr.Rules, "", "namespaces", "", "watch", true},
		{cr.Rules, "", "namespaces", "shop", "update", false},
		// Lists and watches carry a metadata.name field selector, which
		// the API server authorizes by resourceNames: everything by name.
		{cr.Rules, "admissionregistration.k8s.io", "mutatingwebhookconfigurations", f["mutating-webhook-configuration"], "list", true},
		{cr.Rules, "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "someone-elses", "list", false},
		{cr.Rules, "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "watch", false},
		{cr.Rules, "admissionregistration.k8s.io", "mutatingwebhookconfigurations", f["mutating-webhook-configuration"], "update", true},
		{cr.Rules, "admissionregistration.k8s.io", "validatingwebhookconfigurations", f["validating-webhook-configuration"], "update", true},
		{cr.Rules, "admissionregistration.k8s.io", "validatingwebhookconfigurations", "someone-elses", "update", false},
		{cr.Rules, "", "secrets", "", "get", false},
		{role.Rules, "", "secrets", f["cert-secret-name"], "watch", true},
		{role.Rules, "", "secrets", f["cert-secret-name"], "update", true},
		{role.Rules, "", "secrets", "", "list", false},
		{role.Rules, "", "secrets", "sh.helm.release.v1.graceguard.v1", "get", false},
		{role.Rules, "", "secrets", "sh.helm.release.v1.graceguard.v1", "update", false},
		{role.Rules, "", "secrets", "", "create", false},
	} {
		if got := can(c.rules, c.group, c.resource, c.name, c.verb); got != c.want {
			t.Errorf("can %s %s/%s %q = %v, want %v", c.verb, c.group, c.resource, c.name, got, c.want)
		}
	}
	for _, b := range []struct {
		kind     string
		subjects []rbacv1.Subject
		ref      rbacv1.RoleRef
	}{
		{"ClusterRoleBinding", get[*rbacv1.ClusterRoleBinding](t, r, "ClusterRoleBinding", fullname).Subjects, get[*rbacv1.ClusterRoleBinding](t, r, "ClusterRoleBinding", fullname).RoleRef},
		{"RoleBinding", get[*rbacv1.RoleBinding](t, r, "RoleBinding", fullname).Subjects, get[*rbacv1.RoleBinding](t, r, "RoleBinding", fullname).RoleRef},
	} {
		if len(b.subjects) != 1 || b.subjects[0].Name != sa || b.subjects[0].Namespace != namespace {
			t.Errorf("%s subjects = %+v, want the Pods' ServiceAccount %s/%s", b.kind, b.subjects, namespace, sa)
		}
		if b.ref.Name != fullname {
			t.Errorf("%s binds %+v", b.kind, b.ref)
		}
	}
}

func TestCertManagerWithItsOwnCA(t *testing.T) {
	r := render(t, "certificates: {mode: cert-manager}")
	f := flags(t, r.container(t))
	if f["cert-mode"] != "files" {
		t.Errorf("--cert-mode=%s, want files", f["cert-mode"])
	}
	for _, k := range []string{"cert-secret-name", "service-name", "mutating-webhook-configuration", "validating-webhook-configuration"} {
		if _, ok := f[k]; ok {
			t.Errorf("--%s rendered outside self-managed mode", k)
		}
	}
	if names := r.kinds("Issuer"); !slices.Equal(names, []string{"graceguard-ca", "graceguard-selfsigned"}) {
		t.Errorf("Issuers = %v, want a self-signed one and the CA it makes", names)
	}
	serving := *get[*map[string]any](t, r, "Certificate", "graceguard-serving")
	spec := serving["spec"].(map[string]any)
	secret := spec["secretName"].(string)
	assertCertsMounted(t, r, secret)
	dns := spec["dnsNames"].([]any)
	if len(dns) == 0 || dns[0] != "graceguard.graceguard-system.svc" {
		t.Errorf("serving certificate dnsNames = %v, want the name the API server dials first", dns)
	}
	if issuer := spec["issuerRef"].(map[string]any); issuer["name"] != "graceguard-ca" || issuer["kind"] != "Issuer" {
		t.Errorf("serving certificate issuerRef = %v, want the chart's CA Issuer", issuer)
	}
	if spec["duration"] != "2160h" || spec["renewBefore"] != "720h" {
		t.Errorf("duration/renewBefore = %v/%v", spec["duration"], spec["renewBefore"])
	}
	ca := (*get[*map[string]any](t, r, "Certificate", "graceguard-ca"))["spec"].(map[string]any)
	if ca["isCA"] != true || ca["secretName"] != "graceguard-ca" {
		t.Errorf("CA certificate spec = %v", ca)
	}
	if pk := ca["privateKey"].(map[string]any); pk["rotationPolicy"] != "Never" {
		t.Errorf("CA privateKey = %v: a new CA key on renewal would untrust the serving certificate until it is reissued", pk)
	}

	want := namespace + "/graceguard-serving"
	if a := r.mutating(t).Annotations["cert-manager.io/inject-ca-from"]; a != want {
		t.Errorf("mutating inject-ca-from = %q, want %q", a, want)
	}
	if a := r.validating(t).Annotations["cert-manager.io/inject-ca-from"]; a != want {
		t.Errorf("validating inject-ca-from = %q, want %q", a, want)
	}
	if r.has("Secret", "graceguard-cert") || r.has("Role", fullname) || r.has("RoleBinding", fullname) {
		t.Errorf("cert-manager mode renders the self-managed Secret or its Role: %v", r.keys())
	}
	for _, rule := range get[*rbacv1.ClusterRole](t, r, "ClusterRole", fullname).Rules {
		if slices.Contains(rule.APIGroups, "admissionregistration.k8s.io") {
			t.Errorf("cert-manager mode lets graceguard change webhook configurations: %+v", rule)
		}
	}
}

func TestCertManagerWithAGivenIssuer(t *testing.T) {
	r := render(t, "certificates: {mode: cert-manager, certManager: {issuerRef: {name: corp-ca, kind: ClusterIssuer}}}")
	if names := r.kinds("Issuer"); len(names) != 0 {
		t.Errorf("Issuers %v rendered although one was given", names)
	}
	if names := r.kinds("Certificate"); !slices.Equal(names, []string{"graceguard-serving"}) {
		t.Errorf("Certificates = %v, want only the serving one", names)
	}
	spec := (*get[*map[string]any](t, r, "Certificate", "graceguard-serving"))["spec"].(map[string]any)
	if i := spec["issuerRef"].(map[string]any); i["name"] != "corp-ca" || i["kind"] != "ClusterIssuer" || i["group"] != "cert-manager.io" {
		t.Errorf("issuerRef = %v, want the given ClusterIssuer corp-ca", i)
	}
}

// caPEM is a CA certificate (any will do: the chart only checks the form).
const caPEM = `-----BEGIN CERTIFICATE-----
MIIBdzCCAR2gAwIBAgIBADAKBggqhkjOPQQDAjAYMRYwFAYDVQQDEw1ncmFjZWd1
YXJkLWNhMB4XDTI2MDEwMTAwMDAwMFoXDTM2MDEwMTAwMDAwMFowGDEWMBQGA1UE
-----END CERTIFICATE-----
`

func TestUserProvidedSecret(t *testing.T) {
	bundle := base64.StdEncoding.EncodeToString([]byte(caPEM))
	r := render(t, "certificates: {mode: secret, secret: {name: my-tls, caBundle: "+bundle+"}}")
	f := flags(t, r.container(t))
	if f["cert-mode"] != "files" {
		t.Errorf("--cert-mode=%s, want files", f["cert-mode"])
	}
	assertCertsMounted(t, r, "my-tls")
	hooks := []admissionv1.WebhookClientConfig{r.mutating(t).Webhooks[0].ClientConfig}
	for _, h := range r.validating(t).Webhooks {
		hooks = append(hooks, h.ClientConfig)
	}
	for i, cc := range hooks {
		if string(cc.CABundle) != caPEM {
			t.Errorf("webhook %d caBundle = %q, want the given CA", i, cc.CABundle)
		}
	}
	for _, k := range r.keys() {
		if strings.HasPrefix(k, "Secret/") || (strings.HasPrefix(k, "Role/") && k != "Role/"+fullname+"-observer") || strings.HasPrefix(k, "Certificate/") || strings.HasPrefix(k, "Issuer/") {
			t.Errorf("secret mode renders %s", k)
		}
	}
	if a := r.mutating(t).Annotations; len(a) != 0 {
		t.Errorf("secret mode annotates the webhook configuration: %v", a)
	}
}

func TestUserProvidedSecretNeedsItsParts(t *testing.T) {
	bundle := base64.StdEncoding.EncodeToString([]byte(caPEM))
	for _, c := range []struct{ name, values, want string }{
		{"no Secret name", "certificates: {mode: secret, secret: {caBundle: " + bundle + "}}", "certificates.secret.name is required when certificates.mode is secret"},
		{"no CA", "certificates: {mode: secret, secret: {name: my-tls}}", "certificates.secret.caBundle is required when certificates.mode is secret"},
		{"PEM text instead of base64", "certificates: {mode: secret, secret: {name: my-tls, caBundle: " + base64.StdEncoding.EncodeToString([]byte("hello")) + "}}", "certificates.secret.caBundle: does not decode to a PEM certificate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mustContain(t, "the error", renderErr(t, c.values), c.want)
		})
	}
}

func TestHighAvailabilityValues(t *testing.T) {
	r := render(t, `
replicaCount: 3
podDisruptionBudget: {minAvailable: 2}
topologySpread: {topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}
priorityClassName: platform-critical
resources: {requests: {cpu: 200m, memory: 128Mi}, limits: {memory: 256Mi}}
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
        - matchExpressions: [{key: node-role.kubernetes.io/infra, operator: Exists}]
tolerations: [{key: dedicated, operator: Equal, value: infra, effect: NoSchedule}]
`)
	d := r.deployment(t)
	spec := d.Spec.Template.Spec
	if *d.Spec.Replicas != 3 {
		t.Errorf("replicas = %d", *d.Spec.Replicas)
	}
	if pdb := get[*policyv1.PodDisruptionBudget](t, r, "PodDisruptionBudget", fullname); pdb.Spec.MinAvailable.IntValue() != 2 {
		t.Errorf("minAvailable = %v", pdb.Spec.MinAvailable)
	}
	if c := spec.TopologySpreadConstraints[0]; c.TopologyKey != "topology.kubernetes.io/zone" || c.WhenUnsatisfiable != corev1.DoNotSchedule {
		t.Errorf("spread = %+v", c)
	}
	if spec.PriorityClassName != "platform-critical" {
		t.Errorf("priorityClassName = %q", spec.PriorityClassName)
	}
	if q := r.container(t).Resources.Requests[corev1.ResourceCPU]; q.String() != "200m" {
		t.Errorf("cpu request = %s", q.String())
	}
	if spec.Affinity == nil || spec.Affinity.NodeAffinity == nil || len(spec.Tolerations) != 1 || spec.Tolerations[0].Key != "dedicated" {
		t.Errorf("affinity %+v tolerations %+v not rendered", spec.Affinity, spec.Tolerations)
	}
}

func TestOptionalPartsCanBeTurnedOff(t *testing.T) {
	r := render(t, `
replicaCount: 1
podDisruptionBudget: {enabled: false}
topologySpread: {enabled: false}
shutdown: {preStopSleepSeconds: 0, terminationGracePeriodSeconds: 30}
serviceAccount: {create: false, name: existing}
rbac: {create: false}
podSecurityContext: {runAsNonRoot: true, runAsUser: null, runAsGroup: null, fsGroup: null, seccompProfile: {type: RuntimeDefault}}
`)
	for _, k := range []string{"PodDisruptionBudget/" + fullname, "ServiceAccount/" + fullname, "ClusterRole/" + fullname, "Role/" + fullname} {
		if _, ok := r.objects[k]; ok {
			t.Errorf("%s rendered although turned off", k)
		}
	}
	spec := r.deployment(t).Spec.Template.Spec
	if spec.ServiceAccountName != "existing" {
		t.Errorf("serviceAccountName = %q, want the existing one", spec.ServiceAccountName)
	}
	if len(spec.TopologySpreadConstraints) != 0 {
		t.Errorf("spread constraints rendered: %+v", spec.TopologySpreadConstraints)
	}
	if c := r.container(t); c.Lifecycle != nil {
		t.Errorf("preStop rendered with preStopSleepSeconds 0: %+v", c.Lifecycle)
	}
	// OpenShift-style: no fixed UID, no fsGroup; the certificates must
	// then be readable by whatever UID the platform assigns.
	if spec.SecurityContext.RunAsUser != nil || spec.SecurityContext.FSGroup != nil {
		t.Errorf("null runAsUser/fsGroup rendered: %+v", spec.SecurityContext)
	}
	for _, v := range spec.Volumes {
		if v.Secret != nil && (v.Secret.DefaultMode == nil || *v.Secret.DefaultMode != 0o444) {
			t.Errorf("certificates mode %v without fsGroup: the process could not read them", v.Secret.DefaultMode)
		}
	}
	mustContain(t, "the error", renderErr(t, "serviceAccount: {create: false}"), "serviceAccount.name is required when serviceAccount.create is false")
}

func TestImageDigestPins(t *testing.T) {
	d := "sha256:" + strings.Repeat("ab", 32)
	r := render(t, "image: {tag: v1.2.3, digest: "+d+"}")
	if got := r.container(t).Image; got != "registry.local/graceguard:v1.2.3@"+d {
		t.Errorf("image = %q", got)
	}
}

func TestNotesTellHowToOptInAndCheck(t *testing.T) {
	r := render(t, "")
	mustContain(t, "NOTES", r.notes,
		"kubectl label namespace NAMESPACE graceguard.io/inject=enabled",
		"kubectl -n graceguard-system rollout status deployment/graceguard",
		"--dry-run=server",
		`{.metadata.annotations.graceguard\.io/budget}`,
		"kubectl graceguard explain",
		"kubectl graceguard audit -n NAMESPACE",
		"helm test graceguard -n graceguard-system --logs",
		"a dry-run Pod in a throwaway opted-in namespace (graceguard-selftest) comes back mutated",
	)
	cm := render(t, "certificates: {mode: cert-manager}")
	mustContain(t, "cert-manager NOTES", cm.notes, "kubectl -n graceguard-system get certificate graceguard-serving")
}

func TestReleaseNamesFollowTheFullname(t *testing.T) {
	r := render(t, "fullnameOverride: gg")
	f := flags(t, r.container(t))
	if f["service-name"] != "gg" || f["cert-secret-name"] != "gg-cert" || r.mutating(t).Name != "gg" {
		t.Errorf("flags %v / webhook %s do not follow fullnameOverride gg", f, r.mutating(t).Name)
	}
	if !r.has("Deployment", "gg") || !r.has("Service", "gg") {
		t.Errorf("objects %v", r.keys())
	}
}

// The hardening options: strict anti-affinity, no priority class, a
// NetworkPolicy that only the named API server sources and scraper pass,
// and the webhook timeout taken from the longest webhook timeoutSeconds.
func TestHardeningOptions(t *testing.T) {
	t.Run("antiAffinity hard requires different nodes; none adds nothing; a user's podAntiAffinity wins", func(t *testing.T) {
		hard := render(t, "antiAffinity: hard").deployment(t).Spec.Template.Spec.Affinity
		if hard == nil || hard.PodAntiAffinity == nil || len(hard.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 ||
			hard.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != "kubernetes.io/hostname" {
			t.Errorf("hard: affinity %+v, want a required anti-affinity term on kubernetes.io/hostname", hard)
		}
		if none := render(t, "antiAffinity: none").deployment(t).Spec.Template.Spec.Affinity; none != nil {
			t.Errorf("none: affinity %+v, want none", none)
		}
		own := render(t, "affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, podAffinityTerm: {topologyKey: topology.kubernetes.io/zone}}]}}").
			deployment(t).Spec.Template.Spec.Affinity
		if own == nil || own.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey != "topology.kubernetes.io/zone" {
			t.Errorf("user affinity replaced: %+v", own)
		}
	})
	t.Run("no priority class, no quota", func(t *testing.T) {
		r := render(t, `priorityClassName: ""`)
		if pc := r.deployment(t).Spec.Template.Spec.PriorityClassName; pc != "" {
			t.Errorf("priorityClassName = %q", pc)
		}
		if r.has("ResourceQuota", fullname+"-critical-pods") {
			t.Error("the critical-pods quota is rendered without a critical priority class")
		}
	})
	t.Run("a NetworkPolicy without the API server's sources fails the install, saying why", func(t *testing.T) {
		msg := renderErr(t, "networkPolicy: {enabled: true}")
		if !strings.Contains(msg, "networkPolicy.webhookFrom: empty, so the API server could not reach the webhook") {
			t.Errorf("error %q", msg)
		}
	})
	t.Run("a NetworkPolicy admits the named sources to the webhook port and the scraper to metrics", func(t *testing.T) {
		r := render(t, `networkPolicy:
  enabled: true
  webhookFrom: [{ipBlock: {cidr: 10.0.0.0/24}}]
  metricsFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]`)
		np := get[*networkingv1.NetworkPolicy](t, r, "NetworkPolicy", fullname)
		pod := r.deployment(t).Spec.Template
		if s, _ := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector); !s.Matches(labels.Set(pod.Labels)) {
			t.Errorf("the policy does not select the webhook's Pods")
		}
		if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) || len(np.Spec.Ingress) != 2 {
			t.Fatalf("policy %+v, want two ingress rules only", np.Spec)
		}
		web, metrics := np.Spec.Ingress[0], np.Spec.Ingress[1]
		if web.Ports[0].Port.StrVal != "webhook" || web.From[0].IPBlock == nil || web.From[0].IPBlock.CIDR != "10.0.0.0/24" {
			t.Errorf("webhook rule %+v", web)
		}
		if metrics.Ports[0].Port.StrVal != "metrics" || metrics.From[0].NamespaceSelector == nil {
			t.Errorf("metrics rule %+v", metrics)
		}
		names := map[string]bool{}
		for _, p := range r.container(t).Ports {
			names[p.Name] = true
		}
		if !names["webhook"] || !names["metrics"] {
			t.Errorf("the policy names ports the container does not declare: %v", names)
		}
	})
	t.Run("--webhook-timeout is the longest timeoutSeconds", func(t *testing.T) {
		f := flags(t, render(t, "webhooks: {validateWorkloads: {timeoutSeconds: 12}}").container(t))
		if f["webhook-timeout"] != "12s" {
			t.Errorf("--webhook-timeout=%s, want 12s", f["webhook-timeout"])
		}
	})
	t.Run("the memory limit reaches the webhook", func(t *testing.T) {
		c := render(t, "").container(t)
		for _, e := range c.Env {
			if e.Name == "GRACEGUARD_MEMORY_LIMIT" && e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil && e.ValueFrom.ResourceFieldRef.Resource == "limits.memory" {
				return
			}
		}
		t.Errorf("env %+v has no GRACEGUARD_MEMORY_LIMIT from limits.memory", c.Env)
	})
	// The Go runtime takes GOMAXPROCS from a CPU limit only, and the chart
	// sets none: without this it would schedule on the node's CPUs and the
	// webhook would work on that many reviews at once while it is given
	// its request.
	t.Run("GOMAXPROCS is the CPU request, rounded up", func(t *testing.T) {
		gomaxprocs := func(c corev1.Container) *corev1.EnvVar {
			for _, e := range c.Env {
				if e.Name == "GOMAXPROCS" {
					return &e
				}
			}
			return nil
		}
		e := gomaxprocs(render(t, "").container(t))
		if e == nil || e.ValueFrom == nil || e.ValueFrom.ResourceFieldRef == nil || e.ValueFrom.ResourceFieldRef.Resource != "requests.cpu" ||
			e.ValueFrom.ResourceFieldRef.Divisor.String() != "1" {
			t.Errorf("GOMAXPROCS = %+v, want requests.cpu with divisor 1 (the kubelet rounds up)", e)
		}
		if e := gomaxprocs(render(t, "resources: {requests: {cpu: null, memory: 64Mi}, limits: {memory: 128Mi}}").container(t)); e != nil {
			t.Errorf("without a CPU request GOMAXPROCS = %+v, want it unset (the runtime's own default)", e)
		}
	})
}

// The native floor: a ValidatingAdmissionPolicy on Pods and on every
// workload graceguard reviews, bound where the webhooks enforce, with the
// CEL pkg/cel builds; with it the webhooks fail open, and the validating
// webhook admits what the mutating webhook missed. Off: no policy, and
// fail-closed webhooks keep refusing it.
func TestNativeFloor(t *testing.T) {
	r := render(t, "")
	p := get[*admissionv1.ValidatingAdmissionPolicy](t, r, "ValidatingAdmissionPolicy", fullname+"-floor")
	b := get[*admissionv1.ValidatingAdmissionPolicyBinding](t, r, "ValidatingAdmissionPolicyBinding", fullname+"-floor")
	if b.Spec.PolicyName != p.Name || !slices.Equal(b.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) {
		t.Errorf("binding %s: policy %q, actions %v; want %q, [Deny]", b.Name, b.Spec.PolicyName, b.Spec.ValidationActions, p.Name)
	}
	if f := p.Spec.FailurePolicy; f == nil || *f != admissionv1.Ignore {
		t.Errorf("failurePolicy = %v, want Ignore (the default of nativeFloor.failurePolicy)", f)
	}

	// The rules: Pods CREATE, then the workloads graceguard's table marks
	// as reviewed, as the workload webhook has them.
	var got, want []string
	for _, x := range p.Spec.MatchConstraints.ResourceRules {
		for _, res := range x.Resources {
			got = append(got, fmt.Sprintf("%s/%s/%s %v", strings.Join(x.APIGroups, ","), strings.Join(x.APIVersions, ","), res, x.Operations))
		}
	}
	want = append(want, "/v1/pods [CREATE]")
	for _, w := range mutate.Workloads {
		if w.Reviewed && !w.Optional {
			want = append(want, fmt.Sprintf("%s/%s/%s [CREATE UPDATE]", w.Group, w.Version, w.Resource))
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("floor rules = %v, want %v", got, want)
	}

	// Bound to opted-in namespaces in enforce mode only: warn mode warns
	// through its own webhook, and graceguard never judges its own.
	sel := nsSelector(t, b.Spec.MatchResources.NamespaceSelector)
	for _, c := range []struct {
		labels labels.Set
		want   bool
	}{
		{labels.Set{"kubernetes.io/metadata.name": "shop", "graceguard.io/inject": "enabled"}, true},
		{labels.Set{"kubernetes.io/metadata.name": "shop", "graceguard.io/inject": "enabled", "graceguard.io/mode": "enforce"}, true},
		{labels.Set{"kubernetes.io/metadata.name": "shop", "graceguard.io/inject": "enabled", "graceguard.io/mode": "warn"}, false},
		{labels.Set{"kubernetes.io/metadata.name": "shop"}, false},
		{labels.Set{"kubernetes.io/metadata.name": "kube-system", "graceguard.io/inject": "enabled"}, false},
		{labels.Set{"kubernetes.io/metadata.name": namespace, "graceguard.io/inject": "enabled"}, false},
	} {
		if sel.Matches(c.labels) != c.want {
			t.Errorf("floor binding matches %v = %v, want %v", c.labels, !c.want, c.want)
		}
	}
	// Its CEL is pkg/cel's, as generated into the chart.
	vars := map[string]string{}
	for _, v := range p.Spec.Variables {
		vars[v.Name] = v.Expression
	}
	for _, v := range cel.FloorVariables() {
		if vars[v.Name] != v.Expression {
			t.Errorf("variable %s is not pkg/cel's (make generate)", v.Name)
		}
	}
	if len(p.Spec.Validations) != 1 || p.Spec.Validations[0].MessageExpression != cel.FloorMessage() || p.Spec.Validations[0].Reason == nil || *p.Spec.Validations[0].Reason != metav1.StatusReasonInvalid {
		t.Errorf("validations = %+v, want one with pkg/cel's message and reason Invalid", p.Spec.Validations)
	}
	if f := flags(t, r.container(t)); f["untreated-pods"] != "admit" {
		t.Errorf("--untreated-pods=%q, want admit while validate-pods fails open", f["untreated-pods"])
	}

	// The mutating floor, opt-in (nativeFloor.mutate) and from Kubernetes
	// 1.36 (MutatingAdmissionPolicy v1), bound where the validating one is,
	// with the cluster's defaults as CEL values (pkg/cel's chart variables).
	at := func(y, kv string) *rendered {
		t.Helper()
		rel, err := renderChart(values(t, y), renderOpts{kubeVersion: kv})
		if err != nil {
			t.Fatalf("rendering %q for %s: %v", y, kv, err)
		}
		return decode(t, rel)
	}
	for _, k := range r.keys() {
		if strings.HasPrefix(k, "MutatingAdmissionPolicy") {
			t.Errorf("Kubernetes 1.35 rendered %s", k)
		}
	}
	r37 := at("nativeFloor: {mutate: true}\n", "v1.37.2")
	mp := get[*admissionv1.MutatingAdmissionPolicy](t, r37, "MutatingAdmissionPolicy", fullname+"-floor")
	mb := get[*admissionv1.MutatingAdmissionPolicyBinding](t, r37, "MutatingAdmissionPolicyBinding", fullname+"-floor")
	if mb.Spec.PolicyName != mp.Name || !reflect.DeepEqual(mb.Spec.MatchResources.NamespaceSelector, b.Spec.MatchResources.NamespaceSelector) {
		t.Errorf("mutating floor binding %+v: want policy %s and the validating floor's namespaces", mb.Spec, mp.Name)
	}
	if p := mp.Spec.ReinvocationPolicy; p != admissionv1.IfNeededReinvocationPolicy {
		t.Errorf("mutating floor reinvocationPolicy = %v, want IfNeeded (it leaves a Pod graceguard treated alone)", p)
	}
	var names, wantNames []string
	for _, v := range mp.Spec.Variables {
		names = append(names, v.Name)
	}
	for _, v := range append(slices.Clone(cel.MutationChartVariables), cel.MutationVariables()...) {
		wantNames = append(wantNames, v.Name)
	}
	if !slices.Equal(names, wantNames) {
		t.Errorf("mutating floor variables %v, want %v", names, wantNames)
	}
	if got := mp.Spec.Variables[0].Expression; got != "{'graceguard.io/cleanup': 2, 'graceguard.io/max-work': 20, 'graceguard.io/routing-delay': 5, 'graceguard.io/safety-margin': 3}" {
		t.Errorf("clusterTerms = %s, want the chart's defaults in seconds", got)
	}
	for _, c := range []struct{ values, want string }{
		{"", "the default (nativeFloor.mutate=false)"},
		{"config: {defaultCleanup: 1500ms}\n", "the default with a fractional cleanup"},
		{"nativeFloor: {mutate: true}\nconfig: {defaultCleanup: 1500ms}\n", ""},
	} {
		if c.want != "" {
			for _, k := range at(c.values, "v1.37.2").keys() {
				if strings.HasPrefix(k, "MutatingAdmissionPolicy") {
					t.Errorf("%s rendered %s", c.want, k)
				}
			}
			continue
		}
		_, err := renderChart(values(t, c.values), renderOpts{kubeVersion: "v1.37.2"})
		if err == nil || !strings.Contains(err.Error(), "config.defaultCleanup: 1500ms is not whole seconds, which nativeFloor.mutate needs") {
			t.Errorf("values %q: error %v, want one naming config.defaultCleanup and nativeFloor.mutate", c.values, err)
		}
	}

	off := render(t, "nativeFloor: {enabled: false}\nwebhooks: {validatePods: {failurePolicy: Fail}}\n")
	for _, k := range off.keys() {
		if strings.HasSuffix(k, "AdmissionPolicy") || strings.Contains(k, "AdmissionPolicy/") {
			t.Errorf("nativeFloor.enabled=false rendered %s", k)
		}
	}
	if f := flags(t, off.container(t)); f["untreated-pods"] != "deny" {
		t.Errorf("--untreated-pods=%q, want deny while validate-pods fails closed", f["untreated-pods"])
	}
}

// Argo Rollouts' Rollouts are registered with the workload webhook and the
// native floor, and the observer may get them (to verify a ReplicaSet's
// owner) and list them for its reports, only where
// the API server serves the CRD (helm's .Capabilities; `helm template
// --api-versions argoproj.io/v1alpha1/Rollout`), unless
// webhooks.validateWorkloads.argoRollouts forces it on or off.
func TestArgoRolloutsRule(t *testing.T) {
	const served = "argoproj.io/v1alpha1/Rollout"
	for _, c := range []struct {
		value       string // webhooks.validateWorkloads.argoRollouts, "" for the default
		apiVersions []string
		reports     bool
		want        bool
	}{
		{"", nil, true, false},
		{"", []string{served}, true, true},
		{"", []string{served}, false, true},
		{"auto", []string{"argoproj.io/v1alpha1"}, true, false}, // another kind of the group
		{"always", nil, true, true},
		{"never", []string{served}, true, false},
	} {
		name := fmt.Sprintf("%s %v reports=%v", cmp.Or(c.value, "default"), c.apiVersions, c.reports)
		t.Run(name, func(t *testing.T) {
			y := fmt.Sprintf("reports: {enabled: %v}\n", c.reports)
			if c.value != "" {
				y += "webhooks: {validateWorkloads: {argoRollouts: " + c.value + "}}\n"
			}
			rel, err := renderChart(values(t, y), renderOpts{apiVersions: c.apiVersions})
			if err != nil {
				t.Fatal(err)
			}
			r := decode(t, rel)
			has := func(groups []string, resources []string) bool {
				return slices.Equal(groups, []string{"argoproj.io"}) && slices.Equal(resources, []string{"rollouts"})
			}
			var hook, floor, rbac bool
			for _, x := range r.validatingHook(t, "validate-workloads.graceguard.io").Rules {
				if has(x.APIGroups, x.Resources) {
					hook = true
					if !slices.Equal(x.APIVersions, []string{"v1alpha1"}) || len(x.Operations) != 2 {
						t.Errorf("webhook rule %+v, want v1alpha1 CREATE and UPDATE", x)
					}
				}
			}
			p := get[*admissionv1.ValidatingAdmissionPolicy](t, r, "ValidatingAdmissionPolicy", fullname+"-floor")
			for _, x := range p.Spec.MatchConstraints.ResourceRules {
				if has(x.APIGroups, x.Resources) {
					floor = true
				}
			}
			role := get[*rbacv1.ClusterRole](t, r, "ClusterRole", fullname+"-observer")
			var verbs []string
			for _, x := range role.Rules {
				if has(x.APIGroups, x.Resources) {
					rbac = true
					verbs = append(verbs, x.Verbs...)
				}
			}
			slices.Sort(verbs)
			wantVerbs := []string{"get"}
			if c.reports {
				wantVerbs = []string{"get", "list"}
			}
			if rbac && !slices.Equal(verbs, wantVerbs) {
				t.Errorf("observer may %v rollouts, want %v", verbs, wantVerbs)
			}
			if hook != c.want || floor != c.want || rbac != c.want {
				t.Errorf("Rollouts in the webhook's rules %v, the floor's %v, the observer's ClusterRole %v; want %v", hook, floor, rbac, c.want)
			}
		})
	}
	if msg := renderErr(t, "webhooks: {validateWorkloads: {argoRollouts: yes}}"); !strings.Contains(msg, "argoRollouts") {
		t.Errorf("argoRollouts: yes rendered with %q, want a schema error naming it", msg)
	}
}
