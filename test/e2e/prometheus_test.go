//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/graceguard/graceguard/test/e2e/evidence"
	"github.com/graceguard/graceguard/test/harness/chart"
)

// A real Prometheus beside the node (issue 21): the server of the module
// test/alerts pins and kube-state-metrics (make e2e-tools builds both; make
// e2e names them in GG_E2E_PROMETHEUS and GG_E2E_KUBE_STATE_METRICS), host
// processes on the loopback, children of the suite, started before the
// install and stopped after the last spec. Prometheus finds graceguard's
// Pods as the chart's PodMonitors make the Prometheus Operator find them
// (Kubernetes service discovery through the API server, the same
// relabelling), scrapes their Pod IPs over the node's bridge, and
// evaluates the chart's own PrometheusRule groups, rendered for this
// install's values and loaded unchanged.
const (
	promScrape = 5 * time.Second
	// promSettle is how long a value takes to reach an alert's state: a
	// scrape, then an evaluation, with room for both to be late.
	promSettle = 3 * promScrape
	ksmJob     = "kube-state-metrics"
)

// monitor is the running Prometheus and what the specs marked on its
// clock.
type monitor struct {
	hostProcs
	url     string
	started time.Time

	prometheus, kubeStateMetrics string
	rules                        []string

	mu    sync.Mutex
	marks []evidence.AlertMark
}

var mon *monitor

// startMonitor starts kube-state-metrics and Prometheus, and waits for
// Prometheus to be ready with the chart's rules loaded.
func startMonitor(ctx context.Context) *monitor {
	GinkgoHelper()
	promBin, ksmBin := os.Getenv("GG_E2E_PROMETHEUS"), os.Getenv("GG_E2E_KUBE_STATE_METRICS")
	Expect(promBin).NotTo(BeEmpty(), "GG_E2E_PROMETHEUS must name the Prometheus server (make e2e-tools builds it; make e2e sets it)")
	Expect(ksmBin).NotTo(BeEmpty(), "GG_E2E_KUBE_STATE_METRICS must name kube-state-metrics (make e2e-tools builds it; make e2e sets it)")
	dir := filepath.Join(outDir, "prometheus")
	Expect(os.MkdirAll(filepath.Join(dir, "data"), 0o755)).To(Succeed())
	m := &monitor{}
	m.prometheus = versionLine(ctx, promBin, "--version")
	m.kubeStateMetrics = versionLine(ctx, ksmBin, "version")

	By("rendering the chart's PrometheusRule for this install's values")
	values := installValues()
	values["monitoring"] = map[string]any{"force": true, "prometheusRule": map[string]any{"enabled": true}}
	manifest, err := chart.Render(releaseName, releaseNS, values)
	Expect(err).NotTo(HaveOccurred())
	spec := prometheusRuleSpec(manifest)
	Expect(spec).NotTo(BeNil(), "the chart rendered no PrometheusRule")
	rules := must(yaml.Marshal(spec))
	Expect(os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644)).To(Succeed())

	ksmPort, ksmTelemetry, promPort := freePort(), freePort(), freePort()
	ksmAddr := fmt.Sprintf("127.0.0.1:%d", ksmPort)
	cfg := map[string]any{
		"global":     map[string]any{"scrape_interval": promScrape.String(), "evaluation_interval": promScrape.String()},
		"rule_files": []string{filepath.Join(dir, "rules.yaml")},
		"scrape_configs": []any{
			podMonitorJob(releaseNS+"/"+fullname, false, map[string]string{
				"app.kubernetes.io/name": "graceguard", "app.kubernetes.io/instance": releaseName}),
			// The observer's PodMonitor keeps its own namespace label
			// (honorLabels), the treated Pods' namespace.
			podMonitorJob(releaseNS+"/"+fullname+"-observer", true, map[string]string{
				"app.kubernetes.io/name": "graceguard-observer", "app.kubernetes.io/instance": releaseName}),
			// As kube-prometheus-stack scrapes it: its namespace and
			// deployment labels are the objects'.
			map[string]any{"job_name": ksmJob, "honor_labels": true,
				"static_configs": []any{map[string]any{"targets": []string{ksmAddr}}}},
		},
	}
	Expect(os.WriteFile(filepath.Join(dir, "prometheus.yml"), must(yaml.Marshal(cfg)), 0o644)).To(Succeed())

	By("starting kube-state-metrics and Prometheus on the node's loopback")
	m.start(ctx, filepath.Join(dir, "kube-state-metrics.log"), ksmBin,
		"--kubeconfig", cl.Kubeconfig, "--host", "127.0.0.1", "--port", strconv.Itoa(ksmPort),
		"--telemetry-host", "127.0.0.1", "--telemetry-port", strconv.Itoa(ksmTelemetry),
		"--resources", "deployments", "--namespaces", releaseNS)
	m.started = time.Now()
	m.start(ctx, filepath.Join(dir, "prometheus.log"), promBin,
		"--config.file", filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path", filepath.Join(dir, "data"),
		"--web.listen-address", fmt.Sprintf("127.0.0.1:%d", promPort), "--storage.tsdb.retention.time", "1d")
	m.url = fmt.Sprintf("http://127.0.0.1:%d", promPort)
	Eventually(func() error {
		resp, err := http.Get(m.url + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/-/ready: %s", resp.Status)
		}
		return nil
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(500*time.Millisecond).Should(Succeed(), "Prometheus ready (%s)", filepath.Join(dir, "prometheus.log"))
	m.rules = m.loadedRules(ctx)
	Expect(m.rules).NotTo(BeEmpty(), "Prometheus loaded no alerting rule from %s", filepath.Join(dir, "rules.yaml"))
	GinkgoWriter.Printf("prometheus: %s at %s, rules %s\n", m.prometheus, m.url, strings.Join(m.rules, ", "))
	return m
}

// podMonitorJob is the scrape job the Prometheus Operator writes for one of
// the chart's PodMonitors (port metrics, matchLabels), job <ns>/<name>.
func podMonitorJob(job string, honorLabels bool, match map[string]string) map[string]any {
	var relabel []any
	keys := make([]string, 0, len(match))
	for k := range match {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		relabel = append(relabel, map[string]any{"action": "keep", "regex": match[k],
			"source_labels": []string{"__meta_kubernetes_pod_label_" + sanitize(k)}})
	}
	relabel = append(relabel,
		map[string]any{"action": "keep", "regex": "metrics", "source_labels": []string{"__meta_kubernetes_pod_container_port_name"}},
		map[string]any{"action": "drop", "regex": "(Failed|Succeeded)", "source_labels": []string{"__meta_kubernetes_pod_phase"}},
		map[string]any{"source_labels": []string{"__meta_kubernetes_namespace"}, "target_label": "namespace"},
		map[string]any{"source_labels": []string{"__meta_kubernetes_pod_name"}, "target_label": "pod"},
		map[string]any{"source_labels": []string{"__meta_kubernetes_pod_container_name"}, "target_label": "container"},
		map[string]any{"target_label": "endpoint", "replacement": "metrics"},
		map[string]any{"target_label": "job", "replacement": job},
	)
	return map[string]any{
		"job_name":     job,
		"honor_labels": honorLabels,
		"kubernetes_sd_configs": []any{map[string]any{"role": "pod", "kubeconfig_file": cl.Kubeconfig,
			"namespaces": map[string]any{"names": []string{releaseNS}}}},
		"relabel_configs": relabel,
	}
}

// sanitize is Prometheus' label name of a Kubernetes label key.
func sanitize(k string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, k)
}

func prometheusRuleSpec(manifest string) map[string]any {
	GinkgoHelper()
	rd := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	for {
		doc, err := rd.Read()
		if err == io.EOF {
			return nil
		}
		Expect(err).NotTo(HaveOccurred())
		var obj struct {
			Kind string         `json:"kind"`
			Spec map[string]any `json:"spec"`
		}
		Expect(yaml.Unmarshal(doc, &obj)).To(Succeed())
		if obj.Kind == "PrometheusRule" {
			return obj.Spec
		}
	}
}

func freePort() int {
	GinkgoHelper()
	l := must(net.Listen("tcp", "127.0.0.1:0"))
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func versionLine(ctx context.Context, bin, arg string) string {
	out, err := exec.CommandContext(ctx, bin, arg).CombinedOutput()
	if err != nil {
		return filepath.Base(bin)
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(line)
}

// hostProcs are programs the suite runs on the node as host processes, its
// children: Prometheus, kube-state-metrics, Argo Rollouts' controller.
type hostProcs struct {
	cmds  []*exec.Cmd
	waits []chan struct{}
}

// start runs bin as a child of the suite: it dies with it (SIGKILL when the
// suite's process goes, however it goes) and stop ends it.
func (p *hostProcs) start(ctx context.Context, logPath, bin string, args ...string) {
	GinkgoHelper()
	logf := must(os.Create(logPath))
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	Expect(cmd.Start()).To(Succeed())
	logf.Close()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.cmds, p.waits = append(p.cmds, cmd), append(p.waits, done)
	select {
	case <-done:
		Fail(fmt.Sprintf("%s exited at once; see %s", filepath.Base(bin), logPath))
	case <-time.After(time.Second):
	case <-ctx.Done():
	}
}

// stop ends Prometheus, then kube-state-metrics.
func (m *monitor) stop() {
	if m == nil {
		return
	}
	m.hostProcs.stop()
}

// stop ends the processes, the last started first: SIGTERM, SIGKILL after
// 10 s.
func (p *hostProcs) stop() {
	for i := len(p.cmds) - 1; i >= 0; i-- {
		_ = p.cmds[i].Process.Signal(syscall.SIGTERM)
		select {
		case <-p.waits[i]:
		case <-time.After(10 * time.Second):
			_ = p.cmds[i].Process.Kill()
			<-p.waits[i]
		}
	}
	p.cmds, p.waits = nil, nil
}

// since is t in seconds on Prometheus' clock.
func (m *monitor) since(t time.Time) evidence.Secs { return evidence.S(t.Sub(m.started)) }

// mark names a moment of the run for the evidence.
func (m *monitor) mark(name string) time.Time {
	now := time.Now()
	if m == nil {
		return now
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.marks = append(m.marks, evidence.AlertMark{Name: name, At: m.since(now)})
	return now
}

func (m *monitor) get(ctx context.Context, path string, q url.Values, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url+path+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("%s: %s: %w", path, resp.Status, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("%s: %s: %s", path, resp.Status, body.Error)
	}
	return json.Unmarshal(body.Data, into)
}

// loadedRules are the alerting rules Prometheus evaluates ("name for 1m").
func (m *monitor) loadedRules(ctx context.Context) []string {
	GinkgoHelper()
	var data struct {
		Groups []struct {
			Rules []struct {
				Name     string  `json:"name"`
				Type     string  `json:"type"`
				Duration float64 `json:"duration"`
				Health   string  `json:"health"`
			} `json:"rules"`
		} `json:"groups"`
	}
	Expect(m.get(ctx, "/api/v1/rules", url.Values{"type": {"alert"}}, &data)).To(Succeed())
	var out []string
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			s := r.Name
			if r.Duration > 0 {
				s += " for " + time.Duration(r.Duration*float64(time.Second)).String()
			}
			out = append(out, s)
		}
	}
	return out
}

// alert is one entry of /api/v1/alerts.
type alert struct {
	Labels   map[string]string `json:"labels"`
	State    string            `json:"state"`
	ActiveAt time.Time         `json:"activeAt"`
	Value    string            `json:"value"`
}

func (m *monitor) alerts(ctx context.Context) ([]alert, error) {
	var data struct {
		Alerts []alert `json:"alerts"`
	}
	err := m.get(ctx, "/api/v1/alerts", nil, &data)
	return data.Alerts, err
}

// alertState is the state of the alert name whose labels include match:
// "" when it is neither pending nor firing.
func (m *monitor) alertState(ctx context.Context, name string, match map[string]string) (alert, error) {
	as, err := m.alerts(ctx)
	if err != nil {
		return alert{}, err
	}
	for _, a := range as {
		if a.Labels["alertname"] != name {
			continue
		}
		ok := true
		for k, v := range match {
			if a.Labels[k] != v {
				ok = false
			}
		}
		if ok {
			return a, nil
		}
	}
	return alert{}, nil
}

// sample is one series of an instant vector.
type sample struct {
	Metric map[string]string
	Value  float64
}

func (m *monitor) query(ctx context.Context, q string) ([]sample, error) {
	var data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if err := m.get(ctx, "/api/v1/query", url.Values{"query": {q}}, &data); err != nil {
		return nil, err
	}
	var out []sample
	for _, r := range data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: value %v", q, r.Value[1])
		}
		out = append(out, sample{Metric: r.Metric, Value: v})
	}
	return out, nil
}

// value is the single series q returns; ok is false when it returns none.
func (m *monitor) value(ctx context.Context, q string) (v float64, ok bool, err error) {
	s, err := m.query(ctx, q)
	if err != nil || len(s) == 0 {
		return 0, false, err
	}
	if len(s) > 1 {
		return 0, false, fmt.Errorf("%s: %d series, want one", q, len(s))
	}
	return s[0].Value, true, nil
}

// targets are the scrape targets: "job instance: health".
func (m *monitor) targets(ctx context.Context) []string {
	var data struct {
		ActiveTargets []struct {
			Labels    map[string]string `json:"labels"`
			Health    string            `json:"health"`
			LastError string            `json:"lastError"`
		} `json:"activeTargets"`
	}
	if err := m.get(ctx, "/api/v1/targets", url.Values{"state": {"active"}}, &data); err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, t := range data.ActiveTargets {
		s := fmt.Sprintf("%s %s", t.Labels["job"], t.Labels["instance"])
		if p := t.Labels["pod"]; p != "" {
			s += " (" + p + ")"
		}
		s += ": " + t.Health
		if t.LastError != "" {
			s += " (" + t.LastError + ")"
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// episodes reads Prometheus' ALERTS series from its start to now: for
// every alert (name and labels), when it was first pending, first firing,
// and when it stopped being either (a gap of more than two evaluations
// ends an episode).
func (m *monitor) episodes(ctx context.Context) ([]evidence.AlertEpisode, error) {
	end := time.Now()
	var data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	}
	q := url.Values{"query": {"ALERTS"}, "start": {strconv.FormatInt(m.started.Unix(), 10)},
		"end": {strconv.FormatInt(end.Unix()+1, 10)}, "step": {strconv.Itoa(int(promScrape / time.Second))}}
	if err := m.get(ctx, "/api/v1/query_range", q, &data); err != nil {
		return nil, err
	}
	type point struct {
		t     float64
		state string
	}
	byKey := map[string][]point{}
	names := map[string][2]string{}
	for _, r := range data.Result {
		var labels []string
		for k, v := range r.Metric {
			if k != "__name__" && k != "alertname" && k != "alertstate" && k != "severity" {
				labels = append(labels, k+"="+v)
			}
		}
		sort.Strings(labels)
		key := r.Metric["alertname"] + "{" + strings.Join(labels, ",") + "}"
		names[key] = [2]string{r.Metric["alertname"], strings.Join(labels, ", ")}
		for _, v := range r.Values {
			t, _ := v[0].(float64)
			byKey[key] = append(byKey[key], point{t, r.Metric["alertstate"]})
		}
	}
	step := promScrape.Seconds()
	at := func(t float64) evidence.At {
		s := evidence.Secs(t - float64(m.started.UnixNano())/1e9)
		return &s
	}
	var out []evidence.AlertEpisode
	for key, pts := range byKey {
		sort.Slice(pts, func(i, j int) bool { return pts[i].t < pts[j].t })
		var cur *evidence.AlertEpisode
		last := 0.0
		closeAt := func() {
			if cur == nil {
				return
			}
			if float64(end.Unix())-last > 2*step {
				cur.Resolved = at(last + step)
			}
			out = append(out, *cur)
			cur = nil
		}
		for _, p := range pts {
			if cur != nil && p.t-last > 2*step {
				closeAt()
			}
			if cur == nil {
				cur = &evidence.AlertEpisode{Alert: names[key][0], Labels: names[key][1]}
			}
			if p.state == "pending" && cur.Pending == nil {
				cur.Pending = at(p.t)
			}
			if p.state == "firing" && cur.Firing == nil {
				cur.Firing = at(p.t)
			}
			last = p.t
		}
		closeAt()
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return first(a) < first(b) || first(a) == first(b) && a.Alert+a.Labels < b.Alert+b.Labels
	})
	return out, nil
}

func first(e evidence.AlertEpisode) evidence.Secs {
	for _, a := range []evidence.At{e.Pending, e.Firing} {
		if a != nil {
			return *a
		}
	}
	return 0
}

// fired are the episodes of name that reached firing.
func fired(eps []evidence.AlertEpisode, name string) []evidence.AlertEpisode {
	return slices.DeleteFunc(slices.Clone(eps), func(e evidence.AlertEpisode) bool { return e.Alert != name || e.Firing == nil })
}

// stateOr says an alert's state: "none" when it is neither pending nor
// firing, the error when Prometheus could not say.
func stateOr(state string, err error) string {
	switch {
	case err != nil:
		return err.Error()
	case state == "":
		return "none"
	}
	return state
}
