package alerts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// targetLabels are the labels a PodMonitor's scrape adds to every series.
var targetLabels = []string{"namespace", "pod", "container", "job", "instance", "endpoint", "service"}

// external are the metrics the alerts read from other exporters, with the
// labels those exporters give them (docs/alerts.md says which scrape):
// read off k8s.io/apiserver v0.37.2 (pkg/admission/metrics), cert-manager
// v1.21.2 (internal/collectors) and kube-state-metrics' docs. A table, not
// their code: an exporter renaming a label is not caught here.
var external = map[string][]string{
	// kube-state-metrics.
	"kube_deployment_status_replicas_available": {"namespace", "deployment"},
	// kube-apiserver.
	"apiserver_admission_webhook_rejection_count":            {"name", "operation", "type", "error_type", "rejection_code"},
	"apiserver_admission_webhook_fail_open_count":            {"name", "type"},
	"apiserver_admission_webhook_admission_duration_seconds": {"name", "operation", "type", "rejected"},
	// cert-manager.
	"certmanager_certificate_expiration_timestamp_seconds": {"name", "namespace", "issuer_name", "issuer_kind", "issuer_group"},
	// Prometheus itself.
	"up": nil,
}

// metric is one entry of metrics.json, which make generate writes from
// graceguard's own registrations.
type metric struct {
	Name     string   `json:"name"`
	Type     string   `json:"type"`
	Labels   []string `json:"labels"`
	Optional []string `json:"optionalLabels"`
	Const    []string `json:"constLabels"`
}

// known returns the labels a series of name can carry, and whether
// anything exports it: graceguard's metrics (a histogram's _bucket, _sum
// and _count series) and the external ones.
func known(t *testing.T) func(name string) ([]string, bool) {
	b, err := os.ReadFile("metrics.json")
	if err != nil {
		t.Fatal(err)
	}
	var ms []metric
	if err := json.Unmarshal(b, &ms); err != nil {
		t.Fatal(err)
	}
	series := map[string][]string{}
	for _, m := range ms {
		labels := slices.Concat(m.Labels, m.Optional, m.Const, targetLabels)
		if m.Type == "histogram" {
			series[m.Name+"_bucket"] = append(slices.Clone(labels), "le")
			series[m.Name+"_sum"] = labels
			series[m.Name+"_count"] = labels
			continue
		}
		series[m.Name] = labels
	}
	for name, labels := range external {
		l := slices.Concat(labels, targetLabels)
		series[name] = l
		series[name+"_bucket"] = append(slices.Clone(l), "le")
		series[name+"_sum"], series[name+"_count"] = l, l
	}
	return func(name string) ([]string, bool) {
		l, ok := series[name]
		return append(l, "__name__"), ok
	}
}

// queries are every PromQL expression of the chart: the alerts (the
// rendered PrometheusRule, which test/chart keeps equal to the chart) and
// the dashboard's panels, by where they are.
func queries(t *testing.T) map[string]string {
	out := map[string]string{}
	b, err := os.ReadFile("rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Record, Expr string }
		}
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out["alert "+r.Alert+r.Record] = r.Expr
		}
	}
	b, err = os.ReadFile(filepath.Join("..", "..", "charts", "graceguard", "dashboards", "graceguard.json"))
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string
		Targets []struct{ Expr string }
		Panels  []panel
	}
	var dash struct {
		Panels     []panel
		Templating struct {
			List []struct{ Name, Query string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for i, tg := range p.Targets {
				if tg.Expr != "" {
					// Grafana's variables stand for a label value.
					out["panel "+p.Title+" #"+string(rune('0'+i))] = strings.ReplaceAll(tg.Expr, "$namespace", "graceguard-system")
				}
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	labelValues := regexp.MustCompile(`^label_values\((\w+), *(\w+)\)$`)
	for _, v := range dash.Templating.List {
		if m := labelValues.FindStringSubmatch(v.Query); m != nil {
			// label_values(metric, label) needs metric to carry label.
			out["variable "+v.Name] = "group by (" + m[2] + ") (" + m[1] + ")"
		}
	}
	if len(out) < 10 {
		t.Fatalf("found only %d queries; the rules or the dashboard moved", len(out))
	}
	return out
}

// Every metric an alert or panel queries is one graceguard or a named
// exporter serves, with the labels it matches and groups by: a renamed
// metric or label would otherwise leave an alert that never fires.
func TestQueriesUseExportedMetrics(t *testing.T) {
	labelsOf := known(t)
	p := parser.NewParser(parser.Options{})
	for where, q := range queries(t) {
		expr, err := p.ParseExpr(q)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			switch n := n.(type) {
			case *parser.VectorSelector:
				labels, ok := labelsOf(n.Name)
				if !ok {
					t.Errorf("%s: %s is exported by neither graceguard (metrics.json) nor a listed exporter", where, n.Name)
					return nil
				}
				for _, m := range n.LabelMatchers {
					if !slices.Contains(labels, m.Name) {
						t.Errorf("%s: %s has no label %q (it has %s)", where, n.Name, m.Name, strings.Join(labels, ", "))
					}
				}
			case *parser.AggregateExpr:
				if n.Without {
					return nil
				}
				var avail []string
				parser.Inspect(n.Expr, func(m parser.Node, _ []parser.Node) error {
					if vs, ok := m.(*parser.VectorSelector); ok {
						l, _ := labelsOf(vs.Name)
						avail = append(avail, l...)
					}
					return nil
				})
				for _, g := range n.Grouping {
					if !slices.Contains(avail, g) {
						t.Errorf("%s: groups by %q, a label none of its series has", where, g)
					}
				}
			}
			return nil
		})
	}
}
