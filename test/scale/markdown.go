package scale

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"

	"github.com/graceguard/graceguard/test/harness/mdtable"
	"github.com/graceguard/graceguard/test/harness/proc"
)

//go:embed scale.md.tmpl
var pageText string

// pageTemplate renders docs/scale.md from a page; its functions only
// format figures.
var pageTemplate = template.Must(template.New(docMarkdown).Funcs(template.FuncMap{
	"num": num, "count": count,
	"int":     func(v int) string { return count(float64(v)) },
	"percent": func(f float64) float64 { return 100 * f },
}).Parse(pageText))

// page is the template's input: the run's tables and the figures its
// sentences quote, formatted; nil where a section does not apply.
type page struct {
	Scenario, Started, Seconds, JSON string
	ClusterSeconds                   string
	Options                          Options
	Machine, Load, Phases, CPU       *table
	Lists                            []pageList
	Admission                        *admissionPage
	Memory                           *memoryPage
	Shutdowns                        *shutdownPage
	Failovers                        *failoverPage
	Extrapolation                    *extrapolationPage
	Kwok                             string
	// MaxConnections is the webhook's --max-connections as the chart
	// sets it.
	MaxConnections string
	// Replicas is the chart's replicaCount of the webhook.
	Replicas int
}

type pageList struct {
	Title string
	Items []string
}

type admissionPage struct {
	Webhooks, Client, Decisions              *table
	Bursts                                   *burstPage
	Failures                                 *table
	Connections                              string
	Shed, FailOpen, Rejected, Reviews        string
	PodsCreated, CPUPerReview, ReviewsPerPod string
	PodReviews                               string
	MaxConcurrentReviews                     string
}

// burstPage is the creation bursts: every arm's figures, graceguard's
// webhook latencies, and its connections per replica.
type burstPage struct {
	Table, Webhooks, Connections *table
	Native                       string
}

type memoryPage struct {
	Steps, Slopes *table
}

type shutdownPage struct {
	S                                         *Shutdowns
	Table, Outcomes                           *table
	Once                                      bool
	Churn, Lag, WritesPerShutdown, CPUPerShut string
	Flush, WritesBound                        string
}

type failoverPage struct {
	Table        *table
	After, Flush string
}

type extrapolationPage struct {
	E     Envelope
	Table *table
}

// Markdown renders docs/scale.md.
func (r *Results) Markdown() string {
	var b strings.Builder
	if err := pageTemplate.Execute(&b, r.page()); err != nil {
		// The template is fixed and its input a plain struct: an error is a
		// bug in the template, which the golden test renders.
		panic(fmt.Sprintf("%s: %v", docMarkdown, err))
	}
	return b.String()
}

func (r *Results) page() page {
	p := page{Scenario: r.Options.Scenario, Started: r.Started.Format("2006-01-02 15:04 MST"), Seconds: fmt.Sprintf("%.0f", r.Seconds), ClusterSeconds: fmt.Sprintf("%.0f", r.ClusterSeconds),
		JSON: docJSON, Options: r.Options, Machine: r.machineTable(), Load: r.loadTable(), Phases: r.phaseTable(), CPU: r.cpuTable(),
		Admission: r.admissionPage(), Memory: r.memoryPage(), Shutdowns: r.shutdownPage(), Failovers: r.failoverPage(), Extrapolation: r.extrapolationPage(Kubernetes),
		Kwok: r.Machine.Kwok, MaxConnections: chartArg(r.Chart.WebhookArgs, "max-connections"),
		Replicas: r.Chart.WebhookReplicas}
	for _, l := range []pageList{{"Problems in this run", r.Problems}, {"Caveats", r.Caveats}} {
		if len(l.Items) > 0 {
			p.Lists = append(p.Lists, l)
		}
	}
	return p
}

func (r *Results) machineTable() *table {
	m := r.Machine
	rows := append(m.Rows(), [2]string{"kube-apiserver, kube-controller-manager, kube-scheduler", m.KubeAPIServer},
		[2]string{"kwok (sigs.k8s.io/kwok)", m.Kwok})
	t := &table{Head: []string{"", ""}}
	for _, r := range append(rows, proc.LoadRows(m.LoadAvgStart, m.LoadAvgEnd)...) {
		t.Add(r[0], r[1])
	}
	return t
}

func (r *Results) loadTable() *table {
	o := r.Options
	t := &table{Head: []string{"", ""}}
	t.Add("simulated nodes (kwok)", fmt.Sprintf("%s, room for %d Pods each", count(float64(o.Nodes)), o.PodsPerNode))
	t.Add("opted-in namespaces with workloads", fmt.Sprintf("%s, %d Deployments of %d typical Pods each: %s Pods",
		count(float64(o.Namespaces)), o.DeploymentsPerNamespace, o.Replicas, count(float64(o.DeploymentPods()))))
	t.Add("of them draining past the grace (killed)", fmt.Sprintf("%d per namespace (%d s drain), the others %d s", o.SlowDeployments, o.SlowDrainSeconds, o.DrainSeconds))
	t.Add("empty opted-in namespaces", count(float64(o.EmptyNamespaces)))
	t.Add("burst arms", fmt.Sprintf("no policy, native policy, graceguard with %s webhook replicas (between the bursts, the chart's %d)", joinInts(o.BurstReplicas, " and "), r.Chart.WebhookReplicas))
	t.Add("Job fan-out, per arm", fmt.Sprintf("%s Pods at once (parallelism = completions), each running %d s", count(float64(o.JobParallelism)), o.JobRunSeconds))
	t.Add("Deployment scale-out, per arm", fmt.Sprintf("0 to %s typical Pods", count(float64(o.ScaleOut))))
	t.Add("bare Pods, per arm", fmt.Sprintf("%s by %d concurrent clients", count(float64(o.ClientPods)), o.Clients))
	t.Add("churn", fmt.Sprintf("%d of %d Deployments restarted (%.0f%%; %d of them drain past the grace), %d Pods of the others deleted",
		o.Restarted(), o.Deployments(), 100*o.RestartFraction, slowRestarted(o), o.Deletions))
	t.Add("`graceguard.io/max-work` of the workloads", o.MaxWork)
	return t
}

func (r *Results) phaseTable() *table {
	t := &table{Head: []string{"Phase", "Wall time (s)", "Pods", "Pods/s"}, Right: []int{1, 2, 3}}
	for _, p := range r.Phases {
		pods, rate := "", ""
		if p.Pods > 0 {
			pods, rate = count(float64(p.Pods)), num(p.Rate())
		}
		t.Add(p.Name, num(p.Seconds), pods, rate)
	}
	return t
}

func (r *Results) cpuTable() *table {
	if len(r.CPU) == 0 {
		return nil
	}
	t := &table{Head: []string{"Process", "CPU time (s)", "Average cores", "Peak RSS (MiB)"}, Right: []int{1, 2, 3}}
	for _, c := range r.CPU {
		cores := ""
		if r.ClusterSeconds > 0 {
			cores = num(c.CPUSeconds / r.ClusterSeconds)
		}
		t.Add(c.Name, num(c.CPUSeconds), cores, num(c.PeakRSSMiB))
	}
	return t
}

// latencyTable shows the API server's histograms of graceguard's webhooks.
func latencyTable(ls []WebhookLatency) *table {
	if len(ls) == 0 {
		return nil
	}
	t := &table{Head: []string{"Webhook", "Type", "Calls", "p50 (ms)", "p99 (ms)", "Mean (ms)"}, Right: []int{2, 3, 4, 5}}
	for _, l := range ls {
		t.Add("`"+l.Name+"`", l.Type, count(l.Histogram.Count), quantileMs(l.Histogram, 0.5), quantileMs(l.Histogram, 0.99), num(1000*l.Histogram.Mean()))
	}
	return t
}

func quantileMs(h Histogram, q float64) string {
	v, above := h.Quantile(q)
	if above {
		return "> " + num(1000*v)
	}
	return num(1000 * v)
}

func (r *Results) admissionPage() *admissionPage {
	a := r.Admission
	if len(a.Webhooks) == 0 && len(a.Bursts) == 0 && len(a.Client) == 0 {
		return nil
	}
	ap := &admissionPage{Webhooks: latencyTable(a.Webhooks), Bursts: burstsPage(a.Bursts),
		Shed: count(a.Shed), FailOpen: count(total(a.FailOpen)), Rejected: count(total(a.Rejected)), Reviews: count(a.Reviews()),
		PodsCreated: count(a.PodsCreated), CPUPerReview: num(a.CPUMsPerReview())}
	if a.PodReviews() > 0 {
		ap.ReviewsPerPod = num(a.ReviewsPerPod())
	}
	ap.PodReviews = count(a.PodReviews())
	ap.MaxConcurrentReviews = chartArg(r.Chart.WebhookArgs, "max-concurrent-reviews")
	if len(a.Client) > 0 {
		ap.Client = &table{Head: []string{"Arm", "Pods", "Errors", "p50 (ms)", "p90 (ms)", "p99 (ms)", "max (ms)", "mean (ms)"}, Right: []int{1, 2, 3, 4, 5, 6, 7}}
		for _, c := range a.Client {
			l := c.LatencyMs
			ap.Client.Add(c.Arm, count(float64(c.Pods)), count(float64(c.Errors)), num(l.P50), num(l.P90), num(l.P99), num(l.Max), num(l.Mean))
		}
	}
	if len(a.Decisions) > 0 {
		ap.Decisions = &table{Head: []string{"graceguard webhook", "Decision", "Reason", "Reviews"}, Right: []int{3}}
		for _, k := range sortedKeys(a.Decisions) {
			f := strings.SplitN(k, "/", 3)
			for len(f) < 3 {
				f = append(f, "")
			}
			ap.Decisions.Add(f[0], f[1], f[2], count(a.Decisions[k]))
		}
	}
	if len(a.FailOpen)+len(a.Rejected) > 0 {
		ap.Failures = &table{Head: []string{"Webhook (API server's name)", "What the API server did", "Calls"}, Right: []int{2}}
		for _, k := range sortedKeys(a.FailOpen) {
			ap.Failures.Add("`"+k+"`", "failed, let through (failurePolicy Ignore)", count(a.FailOpen[k]))
		}
		for _, k := range sortedKeys(a.Rejected) {
			name, kind, _ := strings.Cut(k, "/")
			ap.Failures.Add("`"+name+"`", "rejected: "+kind, count(a.Rejected[k]))
		}
	}
	if len(a.Connections) > 0 {
		var parts []string
		for _, k := range sortedKeys(a.Connections) {
			parts = append(parts, fmt.Sprintf("%s %s", k, count(a.Connections[k])))
		}
		ap.Connections = strings.Join(parts, ", ")
	}
	return ap
}

// chartArg is the value of a flag among the chart's arguments ("" when
// the chart does not set it).
func chartArg(args []string, name string) string {
	v := ""
	for _, arg := range args {
		if x, ok := strings.CutPrefix(arg, "--"+name+"="); ok {
			v = x
		}
	}
	return v
}

// burstsPage renders the creation bursts; nil without any.
func burstsPage(arms []BurstArm) *burstPage {
	if len(arms) == 0 {
		return nil
	}
	bp := &burstPage{
		Table: &table{Head: []string{"Arm", "Burst", "Pods", "All created (s)", "Created/s", "All running (s)", "Create p50 (ms)", "Create p99 (ms)",
			"Not created", "Shed (429)", "Failed open", "Rejected", "API server CPU per Pod (ms)", "graceguard CPU per Pod (ms)"},
			Right: []int{2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13}},
		Webhooks:    &table{Head: []string{"Arm", "Burst", "Webhook", "Calls", "p50 (ms)", "p99 (ms)", "Mean (ms)"}, Right: []int{3, 4, 5, 6}},
		Connections: &table{Head: []string{"Arm", "Replica", "Connections opened", "Share", "Most open at once"}, Right: []int{2, 3, 4}},
	}
	for _, a := range arms {
		arm := burstArm{name: a.Arm, replicas: a.Replicas}.label()
		for _, w := range a.Workloads {
			gg := "–"
			if a.Arm == ArmGraceguard {
				gg = num(w.WebhookCPUMsPerPod())
			}
			bp.Table.Add(arm, w.Kind, count(float64(w.Pods)), num(w.CreatedSeconds), num(w.Rate()), num(w.RunningSeconds),
				quantileMs(w.Create, 0.5), quantileMs(w.Create, 0.99), notCreated(w.Codes), count(w.Shed), count(w.FailOpen), count(w.Rejected),
				num(w.APIServerCPUMsPerPod()), gg)
			for _, l := range w.Webhooks {
				h := l.Histogram
				bp.Webhooks.Add(arm, w.Kind, "`"+l.Name+"`", count(h.Count), quantileMs(h, 0.5), quantileMs(h, 0.99), num(1000*h.Mean()))
			}
		}
		opened := 0
		for _, b := range a.Backends {
			opened += b.Connections
		}
		for i, b := range a.Backends {
			share := "–"
			if opened > 0 {
				share = num(100*float64(b.Connections)/float64(opened)) + "%"
			}
			bp.Connections.Add(arm, fmt.Sprint(i+1), count(float64(b.Connections)), share, count(float64(b.PeakOpen)))
		}
		if a.BalancerFailed > 0 {
			bp.Connections.Add(arm, "none (dropped by the balancer)", count(float64(a.BalancerFailed)), "", "")
		}
	}
	if len(bp.Webhooks.Rows) == 0 {
		bp.Webhooks = nil
	}
	if len(bp.Connections.Rows) == 0 {
		bp.Connections = nil
	}
	return bp
}

// notCreated is a burst's Pod creates the API server did not answer with
// 201, by code ("0" without any).
func notCreated(codes map[string]float64) string {
	var parts []string
	for _, k := range sortedKeys(codes) {
		if k != "201" && codes[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s × %s", count(codes[k]), k))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ", ")
}

func (r *Results) memoryPage() *memoryPage {
	if len(r.Memory) == 0 {
		return nil
	}
	mp := &memoryPage{Steps: &table{Head: []string{"Step", "Opted-in namespaces", "Treated Pods", "Webhook RSS (MiB)", "Webhook live heap (MiB)",
		"Observer RSS (MiB)", "Observer live heap (MiB)"}, Right: []int{1, 2, 3, 4, 5, 6}}}
	for _, s := range r.Memory {
		mp.Steps.Add(s.Name, count(float64(s.Namespaces)), count(float64(s.TreatedPods)), num(s.Webhook.RSSMiB), num(s.Webhook.HeapLiveMiB),
			num(s.Observer.RSSMiB), num(s.Observer.HeapLiveMiB))
	}
	x := r.Extrapolate(Kubernetes)
	st := &table{Head: []string{"Cost", "Between", "Units", "Live heap per unit", "RSS per unit"}, Right: []int{2, 3, 4}}
	for _, s := range []struct {
		what string
		sl   *Slope
	}{{"webhook, per namespace", x.WebhookPerNamespace}, {"observer, per namespace", x.ObserverPerNamespace},
		{"webhook, per treated Pod", x.WebhookPerPod}, {"observer, per treated Pod", x.ObserverPerPod}} {
		if s.sl != nil {
			st.Add(s.what, "“"+s.sl.From+"” → “"+s.sl.To+"”", count(s.sl.Units), kib(s.sl.HeapKiB), kib(s.sl.RSSKiB))
		}
	}
	if len(st.Rows) > 0 {
		mp.Slopes = st
	}
	return mp
}

func kib(v float64) string { return num(v) + " KiB" }

func (r *Results) shutdownPage() *shutdownPage {
	s := r.Shutdowns
	if s == nil {
		return nil
	}
	sp := &shutdownPage{S: s, Once: s.ObservedOnce(), Churn: num(s.ChurnSeconds), Lag: num(s.LagSeconds), Flush: r.flushFlag(),
		WritesBound: chartArg(r.Chart.ObserverArgs, "flush-writes-per-second")}
	if s.Shutdowns > 0 {
		sp.WritesPerShutdown = num(s.ReportWrites / float64(s.Shutdowns))
		sp.CPUPerShut = num(1000 * s.ObserverCPUSeconds / float64(s.Shutdowns))
	}
	t := &table{Head: []string{"", "Shut down (seen by the harness)", "Recorded in the reports"}, Right: []int{1, 2}}
	t.Add("shutdowns", count(float64(s.Shutdowns)), count(float64(s.Recorded)))
	t.Add("of them SIGKILLed at the grace (exit 137)", count(float64(s.Kills)), count(float64(s.RecordedKills)))
	sp.Table = t
	o := &table{Head: []string{"Observer metric", "Value", "Count"}, Right: []int{2}}
	for _, k := range sortedKeys(s.Samples) {
		o.Add("`graceguard_observed_drain_seconds` outcome", k, count(s.Samples[k]))
	}
	for _, k := range sortedKeys(s.Skipped) {
		o.Add("`graceguard_observer_skipped_total` reason", k, count(s.Skipped[k]))
	}
	if len(o.Rows) > 0 {
		sp.Outcomes = o
	}
	return sp
}

func (r *Results) failoverPage() *failoverPage {
	if len(r.Failovers) == 0 {
		return nil
	}
	fp := &failoverPage{After: num(failoverAfter.Seconds()), Flush: r.flushFlag()}
	t := &table{Head: []string{"Leader stopped by", "Stopped after (s)", "Lease taken after (s)", "Observing after (s)", "Shutdowns",
		"Gone while none observed", "Recorded", "Lost", "Lost %", "Killed (seen / recorded)"}, Right: []int{1, 2, 3, 4, 5, 6, 7, 8, 9}}
	for _, f := range r.Failovers {
		t.Add(f.Signal, num(f.StoppedAfterSeconds), num(f.LeaderlessSeconds), num(f.UnobservedSeconds), count(float64(f.Shutdowns)),
			count(float64(f.GoneUnobserved)), count(float64(f.Recorded)), count(float64(f.Lost())), num(f.LostPercent()),
			count(float64(f.Kills))+" / "+count(float64(f.RecordedKills)))
	}
	fp.Table = t
	return fp
}

// flushFlag is the observer's --flush-interval as the chart sets it.
func (r *Results) flushFlag() string {
	for _, a := range r.Chart.ObserverArgs {
		if v, ok := strings.CutPrefix(a, "--flush-interval="); ok {
			return v
		}
	}
	return ""
}

func (r *Results) extrapolationPage(e Envelope) *extrapolationPage {
	x := r.Extrapolate(e)
	t := &table{Head: []string{"Figure", "At the envelope", "How"}, Right: []int{1}}
	mem := func(what string, base ProcMem, p *ProcMem, how string, limit float64) {
		if p == nil {
			return
		}
		// What the process needs: the live heap at the envelope plus what it
		// held beyond its live heap at the start (runtime, stacks, binary).
		need := p.HeapLiveMiB + base.RSSMiB - base.HeapLiveMiB
		fits := ""
		if limit > 0 {
			verdict := "within"
			if need > limit {
				verdict = "**over**"
			}
			fits = fmt.Sprintf(": %s the chart's limit of %s MiB (%.0f%%)", verdict, num(limit), 100*need/limit)
		}
		t.Add(what, fmt.Sprintf("live heap %s MiB, needs about %s MiB%s; RSS grown linearly %s MiB", num(p.HeapLiveMiB), num(need), fits, num(p.RSSMiB)),
			fmt.Sprintf("at the start (live heap %s MiB, RSS %s MiB) %s; needs: the live heap + the %s MiB the process held beyond it at the start",
				num(base.HeapLiveMiB), num(base.RSSMiB), how, num(base.RSSMiB-base.HeapLiveMiB)))
	}
	perNs := func(s *Slope) string {
		if s == nil {
			return ""
		}
		return fmt.Sprintf("+ %s KiB heap, %s KiB RSS per namespace × %s", num(s.HeapKiB), num(s.RSSKiB), count(float64(e.Namespaces)))
	}
	mem("webhook memory (one replica)", x.WebhookBase, x.Webhook, perNs(x.WebhookPerNamespace)+" (it caches namespaces, not Pods)", r.Chart.WebhookMemoryLimitMiB)
	if x.Observer != nil && x.ObserverPerPod != nil {
		mem("observer memory (the leader)", x.ObserverBase, x.Observer, perNs(x.ObserverPerNamespace)+fmt.Sprintf(" + %s KiB heap, %s KiB RSS per treated Pod × %s",
			num(x.ObserverPerPod.HeapKiB), num(x.ObserverPerPod.RSSKiB), count(float64(e.Pods))), r.Chart.ObserverMemoryLimitMiB)
	}
	if x.AdmitCPUSeconds > 0 {
		t.Add(fmt.Sprintf("webhook CPU to admit %s Pods once", count(float64(e.Pods))), fmt.Sprintf("%s CPU-seconds", num(x.AdmitCPUSeconds)),
			fmt.Sprintf("%s reviews per Pod × %s ms of webhook CPU per review, both measured over the run", num(x.ReviewsPerPod), num(r.Admission.CPUMsPerReview())))
	}
	if x.RestartObserverCPUSeconds > 0 || x.RestartReportWrites > 0 {
		t.Add(fmt.Sprintf("a rolling restart of %.0f%%: %s shutdowns", 100*e.RestartFraction, count(float64(x.RestartShutdowns))),
			fmt.Sprintf("observer %s CPU-seconds; at most %s report writes", num(x.RestartObserverCPUSeconds), count(math.Round(x.RestartReportWrites))),
			"the churn's observer CPU and report writes per shutdown × the shutdowns; writes are per workload and flush interval, so the ratio per shutdown is an upper bound")
	}
	if len(t.Rows) == 0 {
		return nil
	}
	return &extrapolationPage{E: e, Table: t}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// write writes scale.json and scale.md into dir.
func (r *Results) write(dir string) error {
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, docJSON), append(j, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, docMarkdown), []byte(r.Markdown()), 0o644)
}

// Render rewrites the documents from recorded results (a scale.json)
// without measuring anything: for changes to how results are presented.
func Render(results, outDir string) error {
	b, err := os.ReadFile(results)
	if err != nil {
		return err
	}
	r := &Results{}
	if err := json.Unmarshal(b, r); err != nil {
		return fmt.Errorf("%s: %w", results, err)
	}
	return r.write(outDir)
}

// table is the lab pages' Markdown table; num and count print its
// figures.
type table = mdtable.Table

var num, count = mdtable.Num, mdtable.Thousands
