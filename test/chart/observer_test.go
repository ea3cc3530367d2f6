package chart_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

const observerName = fullname + "-observer"

func TestObserverRunsApartFromTheWebhook(t *testing.T) {
	r := render(t, "")
	o := r.observer(t)
	if o.Name != observerName || o.Spec.Replicas == nil || *o.Spec.Replicas != 1 {
		t.Fatalf("observer Deployment %s with %v replicas, want %s with 1", o.Name, o.Spec.Replicas, observerName)
	}
	pod := o.Spec.Template
	webhookPod := r.deployment(t).Spec.Template
	svc := get[*corev1.Service](t, r, "Service", fullname)
	pdb := get[*policyv1.PodDisruptionBudget](t, r, "PodDisruptionBudget", fullname)
	webhookSel, _ := metav1.LabelSelectorAsSelector(r.deployment(t).Spec.Selector)
	pdbSel, _ := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	for what, sel := range map[string]labels.Selector{
		"the webhook Service":      labels.SelectorFromSet(svc.Spec.Selector),
		"the webhook's PDB":        pdbSel,
		"the webhook's Deployment": webhookSel,
	} {
		if sel.Matches(labels.Set(pod.Labels)) {
			t.Errorf("%s selects the observer's Pods %v: admission traffic or budgets would count them", what, pod.Labels)
		}
	}
	if own, _ := metav1.LabelSelectorAsSelector(o.Spec.Selector); own.Matches(labels.Set(webhookPod.Labels)) || !own.Matches(labels.Set(pod.Labels)) {
		t.Errorf("observer selector %v must select its own Pods and not the webhook's", o.Spec.Selector)
	}
	if pod.Spec.PriorityClassName != "" {
		t.Errorf("observer priorityClassName %q: it is off the critical path and must not take the webhook's class or quota", pod.Spec.PriorityClassName)
	}
	if pod.Annotations["graceguard.io/inject"] != "false" {
		t.Errorf("observer Pod annotations %v lack graceguard.io/inject: \"false\"", pod.Annotations)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "observe" {
		t.Fatalf("args %q: want the webhook binary's observe command first", c.Args)
	}
	c.Args = c.Args[1:]
	f := flags(t, c)
	for k, want := range map[string]string{"flush-interval": "10s", "min-samples": "5", "leader-elect": "true", "metrics-namespace-label": "false",
		"metrics-bind-address": ":8080", "health-probe-bind-address": ":8081", "excluded-namespaces": "kube-system"} {
		if f[k] != want {
			t.Errorf("--%s=%q, want %q", k, f[k], want)
		}
	}
	if c.Image != r.container(t).Image {
		t.Errorf("observer image %q, want the webhook's %q (one image)", c.Image, r.container(t).Image)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("observer securityContext %+v is not restricted", sc)
	}
	if m := c.Resources.Limits.Memory(); m.String() != "256Mi" {
		t.Errorf("observer memory limit %s, want 256Mi", m)
	}
	if c.Resources.Limits.Cpu().Value() != 0 {
		t.Errorf("observer has a CPU limit")
	}
	if pod.Spec.ServiceAccountName != observerName || !r.has("ServiceAccount", observerName) {
		t.Errorf("observer runs as %q; want its own ServiceAccount %s, rendered", pod.Spec.ServiceAccountName, observerName)
	}

	r = render(t, "observer: {flushInterval: 1m, minSamples: 20, metricsNamespaceLabel: true, replicaCount: 2}\nconfig: {excludedNamespaces: [monitoring]}")
	f = flags(t, corev1.Container{Args: r.observer(t).Spec.Template.Spec.Containers[0].Args[1:]})
	if f["flush-interval"] != "1m" || f["min-samples"] != "20" || f["metrics-namespace-label"] != "true" || *r.observer(t).Spec.Replicas != 2 ||
		f["excluded-namespaces"] != "kube-system,monitoring" || f["excluded-namespaces"] != flags(t, r.container(t))["excluded-namespaces"] {
		t.Errorf("values do not reach the observer: %v", f)
	}
	mustContain(t, "the error", renderErr(t, "observer: {flushInterval: 20m}"), "observer.flushInterval: 20m is out of range; want 10ms to 10m (--flush-interval)")
	mustContain(t, "the error", renderErr(t, "observer: {minSamples: 0}"), "minSamples")
}

func TestObserverCanBeTurnedOff(t *testing.T) {
	r := render(t, "observer: {enabled: false}")
	for _, k := range []string{"Deployment/" + observerName, "ServiceAccount/" + observerName, "ClusterRole/" + observerName,
		"ClusterRoleBinding/" + observerName, "Role/" + observerName, "RoleBinding/" + observerName} {
		if kind, name, _ := strings.Cut(k, "/"); r.has(kind, name) {
			t.Errorf("%s rendered with observer.enabled=false", k)
		}
	}
	if !r.has("ClusterRole", fullname+"-shutdownreports-view") {
		t.Error("reading reports is granted whether or not the observer runs (the CRD is installed either way)")
	}
}

func TestObserverRBACIsLeastPrivilege(t *testing.T) {
	r := render(t, "")
	cr := get[*rbacv1.ClusterRole](t, r, "ClusterRole", observerName)
	role := get[*rbacv1.Role](t, r, "Role", observerName)
	view := get[*rbacv1.ClusterRole](t, r, "ClusterRole", fullname+"-shutdownreports-view")
	can := func(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
		for _, rule := range rules {
			if slices.Contains(rule.APIGroups, group) && slices.Contains(rule.Resources, resource) && slices.Contains(rule.Verbs, verb) {
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		rules                 []rbacv1.PolicyRule
		group, resource, verb string
		want                  bool
	}{
		{cr.Rules, "", "pods", "watch", true},
		{cr.Rules, "", "pods", "get", false},
		{cr.Rules, "", "pods", "update", false},
		{cr.Rules, "", "pods", "delete", false},
		{cr.Rules, "", "events", "watch", true},
		{cr.Rules, "", "namespaces", "watch", true},
		{cr.Rules, "", "namespaces", "update", false},
		{cr.Rules, "discovery.k8s.io", "endpointslices", "watch", true},
		{cr.Rules, "discovery.k8s.io", "endpointslices", "list", true},
		{cr.Rules, "discovery.k8s.io", "endpointslices", "get", false},
		{cr.Rules, "discovery.k8s.io", "endpointslices", "update", false},
		{cr.Rules, "", "replicationcontrollers", "get", true},
		{cr.Rules, "", "secrets", "get", false},
		{cr.Rules, "apps", "replicasets", "get", true},
		{cr.Rules, "apps", "replicasets", "list", false},
		{cr.Rules, "apps", "statefulsets", "get", true},
		{cr.Rules, "apps", "daemonsets", "get", true},
		{cr.Rules, "apps", "statefulsets", "list", false},
		{cr.Rules, "apps", "deployments", "update", false},
		{cr.Rules, "apps", "deployments", "patch", false},
		{cr.Rules, "batch", "jobs", "get", true},
		{cr.Rules, "batch", "cronjobs", "get", true},
		{cr.Rules, "graceguard.io", "shutdownreports", "create", true},
		{cr.Rules, "graceguard.io", "shutdownreports", "update", false},
		{cr.Rules, "graceguard.io", "shutdownreports", "delete", false},
		{cr.Rules, "graceguard.io", "shutdownreports", "list", false},
		{cr.Rules, "graceguard.io", "shutdownreports/status", "update", true},
		{cr.Rules, "events.k8s.io", "events", "create", true},
		{cr.Rules, "coordination.k8s.io", "leases", "update", false},
		{role.Rules, "coordination.k8s.io", "leases", "update", true},
		{role.Rules, "coordination.k8s.io", "leases", "delete", false},
		{view.Rules, "graceguard.io", "shutdownreports", "list", true},
		{view.Rules, "graceguard.io", "shutdownreports/status", "update", false},
		{view.Rules, "graceguard.io", "shutdownreports", "update", false},
	} {
		if got := can(c.rules, c.group, c.resource, c.verb); got != c.want {
			t.Errorf("can %s %s/%s = %v, want %v", c.verb, c.group, c.resource, got, c.want)
		}
	}
	for _, rules := range [][]rbacv1.PolicyRule{cr.Rules, role.Rules, view.Rules} {
		for _, rule := range rules {
			if slices.Contains(rule.Resources, "*") || slices.Contains(rule.APIGroups, "*") || slices.Contains(rule.Verbs, "*") {
				t.Errorf("wildcard rule %+v", rule)
			}
		}
	}
	for _, l := range []string{"rbac.authorization.k8s.io/aggregate-to-view", "rbac.authorization.k8s.io/aggregate-to-edit", "rbac.authorization.k8s.io/aggregate-to-admin"} {
		if view.Labels[l] != "true" {
			t.Errorf("the view role lacks %s: namespace viewers could not read their reports", l)
		}
	}
	webhookRole := get[*rbacv1.ClusterRole](t, r, "ClusterRole", fullname)
	for verb, want := range map[string]bool{"get": true, "list": false, "watch": false, "create": false, "update": false} {
		if got := can(webhookRole.Rules, "graceguard.io", "shutdownreports", verb); got != want {
			t.Errorf("the webhook can %s shutdownreports = %v, want %v (max-work auto reads one report by name)", verb, got, want)
		}
	}
	if off := get[*rbacv1.ClusterRole](t, render(t, "observer: {enabled: false}"), "ClusterRole", fullname); can(off.Rules, "graceguard.io", "shutdownreports", "get") {
		t.Error("without the observer there are no reports to read")
	}
	b := get[*rbacv1.ClusterRoleBinding](t, r, "ClusterRoleBinding", observerName)
	if len(b.Subjects) != 1 || b.Subjects[0].Name != observerName || b.RoleRef.Name != observerName {
		t.Errorf("binding %+v", b)
	}
}
