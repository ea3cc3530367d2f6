package chart_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/graceguard/graceguard/pkg/config"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/observer"
	"github.com/graceguard/graceguard/pkg/optionflags"
)

func can(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, rule := range rules {
		if slices.Contains(rule.APIGroups, group) && slices.Contains(rule.Resources, resource) && slices.Contains(rule.Verbs, verb) {
			return true
		}
	}
	return false
}

// The observer writes policy reports only when asked, with the webhook's
// own cluster defaults (so a report says what admission decides), and
// may then read the workloads and write both report kinds, nothing more.
func TestPolicyReportsAreTheObserversWhenEnabled(t *testing.T) {
	off := render(t, "")
	oc := off.observer(t).Spec.Template.Spec.Containers[0]
	if f := flags(t, corev1.Container{Args: oc.Args[1:]}); f["reports"] != "" || f["default-max-work"] != "" {
		t.Errorf("reports off by default, yet the observer has --reports=%q --default-max-work=%q", f["reports"], f["default-max-work"])
	}
	cr := get[*rbacv1.ClusterRole](t, off, "ClusterRole", observerName)
	for _, c := range [][3]string{{"apps", "deployments", "list"}, {"openreports.io", "reports", "create"}, {"wgpolicyk8s.io", "policyreports", "patch"}, {"", "namespaces", "get"}} {
		if can(cr.Rules, c[0], c[1], c[2]) {
			t.Errorf("reports off, yet the observer can %s %s/%s", c[2], c[0], c[1])
		}
	}

	on := render(t, "reports: {enabled: true, kind: policyreport, interval: 1m, writesPerSecond: 2, maxResults: 10, maxMessageLength: 100}\n"+
		"config: {defaultMaxWork: 45s, maxGracePeriod: 5m, excludedNamespaces: [monitoring], routingProfiles: {corp: {routingDelay: 20s}}}")
	args := on.observer(t).Spec.Template.Spec.Containers[0].Args[1:]
	cfg := observer.Default()
	cfg.Namespace = namespace
	parseArgs(t, "observer", config.ObserverFlags(&cfg), args)
	if r := cfg.Reports; r.Kind != "policyreport" || r.Interval.String() != "1m0s" || r.WritesPerSecond != 2 || r.Bounds.MaxResults != 10 || r.Bounds.MaxMessageLength != 100 {
		t.Errorf("values do not reach the observer: %+v", r)
	}
	of, wf := flags(t, corev1.Container{Args: args}), flags(t, on.container(t))
	opts := mutate.DefaultOptions()
	for _, fl := range optionflags.List(&opts) {
		if of[fl.Name] != wf[fl.Name] {
			t.Errorf("--%s: the observer's %q, the webhook's %q: the reports would not say what admission decides", fl.Name, of[fl.Name], wf[fl.Name])
		}
	}
	cr = get[*rbacv1.ClusterRole](t, on, "ClusterRole", observerName)
	for _, c := range []struct {
		group, resource, verb string
		want                  bool
	}{
		{"apps", "deployments", "list", true},
		{"apps", "statefulsets", "list", true},
		{"apps", "daemonsets", "list", true},
		{"apps", "replicasets", "list", true},
		{"batch", "jobs", "list", true},
		{"batch", "cronjobs", "list", true},
		{"", "replicationcontrollers", "list", true},
		{"", "namespaces", "get", true},
		{"graceguard.io", "shutdownreports", "list", true},
		{"openreports.io", "reports", "create", true},
		{"openreports.io", "reports", "patch", true},
		{"openreports.io", "reports", "delete", true},
		{"openreports.io", "reports", "list", true},
		{"wgpolicyk8s.io", "policyreports", "create", true},
		{"wgpolicyk8s.io", "policyreports", "patch", true},
		{"wgpolicyk8s.io", "policyreports", "delete", true},
		{"openreports.io", "clusterreports", "create", false},
		{"apps", "deployments", "update", false},
		{"apps", "deployments", "watch", false},
		{"", "pods", "get", false},
		{"", "secrets", "list", false},
		{"graceguard.io", "shutdownreports", "update", false},
	} {
		if got := can(cr.Rules, c.group, c.resource, c.verb); got != c.want {
			t.Errorf("reports on: can %s %s/%s = %v, want %v", c.verb, c.group, c.resource, got, c.want)
		}
	}
	if wr := get[*rbacv1.ClusterRole](t, on, "ClusterRole", fullname); can(wr.Rules, "openreports.io", "reports", "create") || can(wr.Rules, "wgpolicyk8s.io", "policyreports", "create") {
		t.Error("the webhook may write reports: admission must never wait for them")
	}

	mustContain(t, "the error", renderErr(t, "reports: {enabled: true}\nobserver: {enabled: false}"),
		"reports.enabled: the observer writes the policy reports, and observer.enabled is false; set observer.enabled=true or reports.enabled=false")
	mustContain(t, "the error", renderErr(t, "reports: {enabled: true, interval: 25h}"), "reports.interval: 25h is out of range; want 1s to 24h (--reports-interval)")
	// Whole seconds, as every duration value takes them; the flag reads
	// Go durations only.
	secs := render(t, "reports: {enabled: true, interval: 300}")
	if args := secs.observer(t).Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--reports-interval=300s") {
		t.Errorf("reports.interval=300: observer args %q, want --reports-interval=300s", args)
	}
	mustContain(t, "the error", renderErr(t, "reports: {kind: kyverno}"), "/reports/kind", "auto", "openreports", "policyreport")
	mustContain(t, "the error", renderErr(t, "reports: {maxResults: 201}"), "maxResults")
}
