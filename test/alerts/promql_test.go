package alerts

import (
	"encoding/json"
	"maps"
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

// external reads exporters.json: the metrics the alerts read from other
// exporters, by exporter, with the labels each gives them (docs/alerts.md
// says which scrape). test/envtest holds the kube-apiserver's rows to a
// real kube-apiserver's /metrics; the others were read off cert-manager
// v1.21.2 (internal/collectors) and kube-state-metrics' docs, and are
// checked only by name and label here.
func external(t *testing.T) map[string][]string {
	b, err := os.ReadFile("exporters.json")
	if err != nil {
		t.Fatal(err)
	}
	var byExporter map[string]map[string][]string
	if err := json.Unmarshal(b, &byExporter); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, ms := range byExporter {
		maps.Copy(out, ms)
	}
	return out
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
	for name, labels := range external(t) {
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
