package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/graceguard/graceguard/pkg/observer"
	"github.com/graceguard/graceguard/pkg/server"
)

// MetricsFile is the list of graceguard's metrics that test/alerts reads
// to hold every alert and dashboard query to what graceguard exports.
const MetricsFile = "test/alerts/metrics.json"

// Metric is one metric graceguard exports, as its registration describes it.
type Metric struct {
	Name string `json:"name"`
	// Type is counter, gauge or histogram.
	Type string `json:"type"`
	Help string `json:"help"`
	// Labels are its variable labels; Optional those only with
	// --metrics-namespace-label; Const its constant labels.
	Labels   []string `json:"labels"`
	Optional []string `json:"optionalLabels,omitempty"`
	Const    []string `json:"constLabels,omitempty"`
	// Exporter is the process that serves it: webhook or observer.
	Exporter string `json:"exporter"`
}

// exported lists the metrics the webhook server and the observer register,
// by registering them on a recorder rather than reading a copy of their
// names.
func exported() []Metric {
	var out []Metric
	web := &recorder{}
	if _, err := server.RegisterMetrics(web); err != nil {
		fatal(err)
	}
	out = append(out, web.metrics("webhook", nil)...)
	plain, labelled := &recorder{}, &recorder{}
	if _, err := observer.NewMetrics(plain, false); err != nil {
		fatal(err)
	}
	if _, err := observer.NewMetrics(labelled, true); err != nil {
		fatal(err)
	}
	out = append(out, labelled.metrics("observer", plain)...)
	slices.SortFunc(out, func(a, b Metric) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// recorder is a prometheus.Registerer that keeps what is registered.
type recorder struct{ cs []prometheus.Collector }

func (r *recorder) Register(c prometheus.Collector) error   { r.cs = append(r.cs, c); return nil }
func (r *recorder) MustRegister(cs ...prometheus.Collector) { r.cs = append(r.cs, cs...) }
func (r *recorder) Unregister(prometheus.Collector) bool    { return false }

// descRE reads a prometheus.Desc's String, the only view of its labels
// client_golang gives.
var descRE = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"),(?: unit: "[^"]*",)? constLabels: \{(.*)\}, variableLabels: \{(.*)\}\}$`)

var constNameRE = regexp.MustCompile(`(\w+)="`)

// metrics describes what was registered; a label present here and absent
// from base (the same registration without an option) is optional.
func (r *recorder) metrics(exporter string, base *recorder) []Metric {
	baseLabels := map[string][]string{}
	if base != nil {
		for _, m := range base.metrics(exporter, nil) {
			baseLabels[m.Name] = m.Labels
		}
	}
	var out []Metric
	for _, c := range r.cs {
		ch := make(chan *prometheus.Desc, 8)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := descRE.FindStringSubmatch(d.String())
			if m == nil {
				fatal(fmt.Errorf("cannot read the metric description %s", d))
			}
			var name, help string
			if err := json.Unmarshal([]byte(m[1]), &name); err != nil {
				fatal(err)
			}
			if err := json.Unmarshal([]byte(m[2]), &help); err != nil {
				fatal(err)
			}
			mt := Metric{Name: name, Type: typeOf(c), Help: help, Labels: []string{}, Exporter: exporter}
			for _, l := range constNameRE.FindAllStringSubmatch(m[3], -1) {
				mt.Const = append(mt.Const, l[1])
			}
			for l := range strings.SplitSeq(m[4], ",") {
				if l == "" {
					continue
				}
				if bl, ok := baseLabels[name]; base != nil && ok && !slices.Contains(bl, l) {
					mt.Optional = append(mt.Optional, l)
					continue
				}
				mt.Labels = append(mt.Labels, l)
			}
			out = append(out, mt)
		}
	}
	return out
}

func typeOf(c prometheus.Collector) string {
	switch c.(type) {
	case *prometheus.HistogramVec, prometheus.Histogram:
		return "histogram"
	case *prometheus.GaugeVec, prometheus.Gauge:
		return "gauge"
	case *prometheus.CounterVec, prometheus.Counter:
		return "counter"
	}
	fatal(fmt.Errorf("metric collector of unknown type %T", c))
	return ""
}

// metricsJSON is MetricsFile.
func metricsJSON() string {
	b, err := json.MarshalIndent(exported(), "", "  ")
	if err != nil {
		fatal(err)
	}
	return string(b) + "\n"
}

// metricsTable is the metrics reference of docs/alerts.md.
func metricsTable() string {
	var b strings.Builder
	b.WriteString("| metric | type | labels | served by | meaning |\n|---|---|---|---|---|\n")
	for _, m := range exported() {
		labels := slices.Clone(m.Labels)
		if m.Type == "histogram" {
			labels = append(labels, "le")
		}
		for _, l := range m.Optional {
			labels = append(labels, l+" (with `--metrics-namespace-label`)")
		}
		for _, l := range m.Const {
			labels = append(labels, l+" (constant)")
		}
		ls := "none"
		if len(labels) > 0 {
			ls = strings.Join(labels, ", ")
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", m.Name, m.Type, ls, m.Exporter, strings.ReplaceAll(m.Help, "|", "\\|"))
	}
	return b.String()
}
