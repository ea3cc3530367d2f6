package chart_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const monitoringOn = `
monitoring:
  podMonitor: {enabled: true}
  prometheusRule: {enabled: true}
  dashboard: {enabled: true, grafanaOperator: true, instanceSelector: {dashboards: grafana}}
`

// The Prometheus Operator objects need the operator's API: asked for on a
// cluster without it, nothing renders; with it (or forced), they do.
func TestMonitoringNeedsTheOperatorAPI(t *testing.T) {
	rel, err := renderChart(values(t, monitoringOn), renderOpts{})
	if err != nil {
		t.Fatal(err)
	}
	r := decode(t, rel)
	for _, k := range []string{"PodMonitor/graceguard", "PodMonitor/graceguard-observer", "PrometheusRule/graceguard"} {
		if r.has(strings.Split(k, "/")[0], strings.Split(k, "/")[1]) {
			t.Errorf("%s rendered on a cluster without monitoring.coreos.com/v1", k)
		}
	}
	if !r.has("ConfigMap", "graceguard-dashboard") {
		t.Errorf("the dashboard ConfigMap needs no operator, yet is missing; have %v", r.keys())
	}
	for _, o := range []struct {
		name string
		vals string
		opts renderOpts
	}{
		{"capability", monitoringOn, renderOpts{apiVersions: []string{"monitoring.coreos.com/v1"}}},
		{"forced", monitoringOn + "  force: true\n", renderOpts{}},
	} {
		rel, err := renderChart(values(t, o.vals), o.opts)
		if err != nil {
			t.Fatalf("%s: %v", o.name, err)
		}
		r := decode(t, rel)
		for _, k := range []string{"PodMonitor/graceguard", "PodMonitor/graceguard-observer", "PrometheusRule/graceguard"} {
			if !r.has(strings.Split(k, "/")[0], strings.Split(k, "/")[1]) {
				t.Errorf("%s: %s missing; have %v", o.name, k, r.keys())
			}
		}
	}
}

// Every alert names its runbook, and docs/alerts.md has that section.
func TestAlertsHaveRunbooks(t *testing.T) {
	r := render(t, monitoringOn+"  force: true\ncertificates: {mode: cert-manager}\n")
	rule := get[*map[string]any](t, r, "PrometheusRule", "graceguard")
	b, err := json.Marshal(*rule)
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert       string            `json:"alert"`
					Expr        string            `json:"expr"`
					Annotations map[string]string `json:"annotations"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(b, &pr); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(chartDir, "..", "..", "docs", "alerts.md"))
	if err != nil {
		t.Fatal(err)
	}
	// test/alerts/rules.yaml, which promtool's unit tests read, is this spec.
	var want, got any
	pinned, err := os.ReadFile(filepath.Join(chartDir, "..", "..", "test", "alerts", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(pinned, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(want, got.(map[string]any)["spec"]) {
		if os.Getenv("UPDATE_GOLDEN") != "" {
			out, err := yaml.Marshal(got.(map[string]any)["spec"])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(chartDir, "..", "..", "test", "alerts", "rules.yaml"), out, 0o644); err != nil {
				t.Fatal(err)
			}
		} else {
			t.Errorf("test/alerts/rules.yaml is not the rendered PrometheusRule spec; re-render it with UPDATE_GOLDEN=1 (certificates.mode=cert-manager, monitoring.force)")
		}
	}
	n := 0
	for _, g := range pr.Spec.Groups {
		for _, a := range g.Rules {
			n++
			want := "https://github.com/graceguard/graceguard/blob/main/docs/alerts.md#" + strings.ToLower(a.Alert)
			if a.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", a.Alert, a.Annotations["runbook_url"], want)
			}
			if !strings.Contains(string(doc), "\n## "+a.Alert+"\n") {
				t.Errorf("%s: docs/alerts.md has no section \"## %s\"", a.Alert, a.Alert)
			}
		}
	}
	// NoReadyWebhook, CallErrors, FailOpen, AdmissionErrors, Shedding,
	// UntreatedPods, CertificateExpiry, ObservedKills, PreStopFailures,
	// ObserverDown, ObserverLagging.
	if n != 11 {
		t.Errorf("%d alerts rendered, want 11", n)
	}
}

// The dashboard ConfigMap carries the one dashboard source, unchanged.
func TestDashboardConfigMap(t *testing.T) {
	r := render(t, monitoringOn)
	cm := get[*corev1.ConfigMap](t, r, "ConfigMap", "graceguard-dashboard")
	src, err := os.ReadFile(filepath.Join(chartDir, "dashboards", "graceguard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Data["graceguard.json"]; got != strings.TrimRight(string(src), "\n") {
		t.Errorf("the ConfigMap's graceguard.json differs from dashboards/graceguard.json")
	}
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("labels %v lack the Grafana sidecar's grafana_dashboard=1", cm.Labels)
	}
	var d map[string]any
	if err := json.Unmarshal(src, &d); err != nil {
		t.Errorf("dashboards/graceguard.json: %v", err)
	}
	if !r.has("GrafanaDashboard", "graceguard") {
		t.Errorf("monitoring.dashboard.grafanaOperator set, no GrafanaDashboard; have %v", r.keys())
	}
}
