package bench

import (
	_ "embed"
	"fmt"
	"math"
	"strings"
	"text/template"

	"github.com/graceguard/graceguard/test/harness/proc"
)

//go:embed benchmarks.md.tmpl
var pageText string

// pageTemplate renders docs/benchmarks.md from a page; its functions only
// format figures.
var pageTemplate = template.Must(template.New(docMarkdown).Funcs(template.FuncMap{
	"num":      num,
	"bytesize": func(b int) string { return bytesize(float64(b)) },
}).Parse(pageText))

// page is the template's whole input: the run's tables and the figures
// its sentences quote, formatted, and nil where a sentence or a section
// does not apply to this run.
type page struct {
	Started, Seconds, JSON string
	Machine, Targets       *table
	Lists                  []pageList
	Missed                 []Target
	Load                   loadPage
	GoBench                goBenchPage
	Creation               *creationPage
	Scaling                scalingPage
	Observer               *observerPage
	Held                   *heldPage
	Settings               Settings
}

// pageList is a titled list of remarks (problems, caveats).
type pageList struct {
	Title string
	Items []string
}

type loadPage struct {
	Typical              string
	InFlight, MaxWorkers int
	// Runs and Ratios are nil when no load was measured.
	Runs, Ratios *table
	Errors       []loadError
	SVG          string
}

type loadError struct{ Server, Rate, Sample string }

type goBenchPage struct {
	Pods          *table
	ManagedFields *ManagedFieldsCheck
	// Bench is nil when no Go benchmark ran.
	Bench *table
}

type creationPage struct {
	Typical, KubeAPIServer        string
	Clients, Rounds, PodsPerRound int
	Arms                          []ArmRun
	Table, CPU                    *table
	Ratios, Webhooks, Serial      *table
	Spread                        *creationSpread
	NativePolicy, SVG             string
	SerialPods                    int
	// Floors states what the chart's native floors cost: graceguard as
	// its chart installs it beside its webhooks alone.
	Floors string
	// OneMutationPolicy compares the one-mutation policy's Pods with
	// graceguard's; VsPolicies states graceguard's ratio to each native
	// policy with the Pods it was measured on. Both are "" in a run
	// without the one-mutation pair.
	OneMutationPolicy, VsPolicies string
}

// creationSpread is how far the rounds stray: the worst arm's spread and
// graceguard's ratio to the one-call no-op, in percent of the median.
type creationSpread struct{ Worst, WorstArm, Graceguard, Range string }

type scalingPage struct {
	// Size and Namespaces are nil when not measured.
	Size, Namespaces *table
	Rate             int
	Growth           *namespaceGrowth
}

// namespaceGrowth is what one more namespace costs, in the bench
// process's heap and in the webhook's RSS.
type namespaceGrowth struct{ Heap, RSS string }

type observerPage struct {
	Run      *ObserverRun
	Steps    *table
	PerPod   *observerPerPod
	Churn    *Churn
	ChurnCPU *table
	// Interval is the time between two due deletions, in ms; Due is how
	// many were due in the window.
	Interval string
	Due      int
}

// observerPerPod is both caches' heap per treated Pod.
type observerPerPod struct{ Observer, AllPods string }

// Markdown renders docs/benchmarks.md.
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
	p := page{
		Started: r.Started.Format("2006-01-02 15:04 MST"), Seconds: fmt.Sprintf("%.0f", r.Seconds), JSON: docJSON,
		Machine: r.machineTable(), Targets: r.targetTable(),
		Load: r.loadPage(), GoBench: r.goBenchPage(), Creation: r.creationPage(), Scaling: r.scalingPage(), Observer: r.observerPage(),
		Held: r.heldPage(), Settings: r.Settings,
	}
	for _, l := range []pageList{{"Problems in this run", r.Problems}, {"Caveats", r.Caveats}} {
		if len(l.Items) > 0 {
			p.Lists = append(p.Lists, l)
		}
	}
	for _, t := range r.Targets {
		if t.Why != "" {
			p.Missed = append(p.Missed, t)
		}
	}
	return p
}

func (r *Results) machineTable() *table {
	m := r.Machine
	rows := m.Rows()
	if m.KubeAPIServer != "" {
		rows = append(rows, [2]string{"kube-apiserver (envtest)", m.KubeAPIServer})
	}
	mt := &table{Head: []string{"", ""}}
	for _, r := range append(rows, proc.LoadRows(m.LoadAvgStart, m.LoadAvgEnd)...) {
		mt.Add(r[0], r[1])
	}
	if m.WaitedForLoadSeconds > 0 {
		mt.Add("waited for the load to drop", fmt.Sprintf("%.0f s", m.WaitedForLoadSeconds))
	}
	return mt
}

func (r *Results) targetTable() *table {
	tt := &table{Head: []string{"Goal", "Measured", "Result"}}
	for _, t := range r.Targets {
		res := "**missed**"
		switch {
		case !t.Known:
			res = "not measured"
		case t.Met:
			res = "met"
		}
		tt.Add(t.Goal, t.Measured, res)
	}
	return tt
}

func (r *Results) loadPage() loadPage {
	lp := loadPage{Typical: r.podDesc("typical"), InFlight: r.Settings.InFlight, MaxWorkers: r.Settings.MaxWorkers, SVG: docSVG}
	if len(r.Load) == 0 {
		return lp
	}
	lp.Runs = &table{Head: []string{"Offered", "Server", "Throughput (req/s)", "p50 (ms)", "p99 (ms)", "p99.9 (ms)", "max (ms)", "Errors", "CPU (cores)", "CPU / req (µs)", "Peak RSS (MiB)"}, Right: seq(2, 10)}
	lp.Ratios = &table{Head: []string{"Offered", "Throughput", "p50", "p99", "p99.9", "CPU / req", "Peak RSS"}, Right: seq(1, 6)}
	for _, l := range r.Load {
		lp.Runs.Add(rateName(l.Rate, l.Workers), l.Server, num(l.Throughput), num(l.Latency.P50), num(l.Latency.P99), num(l.Latency.P999),
			num(l.Latency.Max), fmt.Sprintf("%d / %d", l.Errors, l.Requests), num(l.Cores), num(l.CPUPerRequestUs), num(l.PeakRSSMiB))
		for _, e := range l.ErrorSamples {
			lp.Errors = append(lp.Errors, loadError{l.Server, rateName(l.Rate, l.Workers), e})
		}
		if b, ok := r.loadRun(ServerBaseline, l.Rate); ok && l.Server == ServerGraceguard {
			lp.Ratios.Add(rateName(l.Rate, l.Workers), ratio(l.Throughput, b.Throughput), ratio(l.Latency.P50, b.Latency.P50), ratio(l.Latency.P99, b.Latency.P99),
				ratio(l.Latency.P999, b.Latency.P999), ratio(l.CPUPerRequestUs, b.CPUPerRequestUs), ratio(l.PeakRSSMiB, b.PeakRSSMiB))
		}
	}
	return lp
}

// goBenchRows are the rows of the Go benchmark table for one Pod: the
// benchmark's name after its Pod, and what it measures.
var goBenchRows = []struct{ bench, handler, what string }{
	{"BenchmarkMutate", "", "engine: Mutate + Patch"},
	{"BenchmarkValidate", "", "engine: Validate"},
	{"BenchmarkServe", "noop", "handler: noop (baseline, controller-runtime)"},
	{"BenchmarkServe", "noop-lean", "handler: noop behind webhook.Serve"},
	{"BenchmarkServe", "mutate-pod", "handler: mutate-pod"},
	{"BenchmarkServe", crEnvelopeHandler, "handler: mutate-pod before the lean review decode"},
	{"BenchmarkServe", fullDecodeHandler, "handler: mutate-pod before both lean decodes"},
	{"BenchmarkServe", "validate-pod", "handler: validate-pod"},
}

func (r *Results) goBenchPage() goBenchPage {
	gp := goBenchPage{ManagedFields: r.ManagedFields}
	gp.Pods = &table{Head: []string{"Pod", "Containers", "Env vars", "Pod JSON", "with managedFields", "AdmissionReview JSON"}, Right: seq(1, 5)}
	for _, ps := range r.Pods {
		gp.Pods.Add(ps.Name, fmt.Sprint(ps.Containers), fmt.Sprint(ps.EnvVars), bytesize(float64(ps.SpecBytes)), bytesize(float64(ps.PodBytes)), bytesize(float64(ps.ReviewBytes)))
	}
	if len(r.GoBench) == 0 {
		return gp
	}
	gp.Bench = &table{Head: []string{"Pod", "What", "Time / op", "vs noop", "B / op", "allocs / op"}, Right: seq(2, 5)}
	for _, ps := range r.Pods {
		noop, hasNoop := findBench(r.GoBench, "BenchmarkServe/pod="+ps.Name+"/handler=noop")
		for _, row := range goBenchRows {
			name := row.bench + "/pod=" + ps.Name
			if row.handler != "" {
				name += "/handler=" + row.handler
			}
			gb, ok := findBench(r.GoBench, name)
			if !ok {
				continue
			}
			vs := ""
			if hasNoop && strings.HasPrefix(row.what, "handler") && !strings.Contains(row.what, "noop") {
				vs = ratio(gb.NsPerOp, noop.NsPerOp)
			}
			gp.Bench.Add(ps.Name, row.what, duration(gb.NsPerOp), vs, bytesize(gb.BytesPerOp), count(gb.AllocsPerOp))
		}
	}
	return gp
}

func (r *Results) creationPage() *creationPage {
	c := r.Creation
	if c == nil || len(c.Arms) == 0 {
		return nil
	}
	cp := &creationPage{
		Typical: r.podDesc("typical"), KubeAPIServer: r.Machine.KubeAPIServer, Clients: c.Clients, Rounds: c.Rounds, PodsPerRound: c.PodsPerRound,
		Arms: c.Arms, Table: creationTable(c), CPU: creationCPUTable(c), NativePolicy: c.NativePolicy, SVG: docArmsSVG,
		Webhooks: webhookTable(c), Serial: serialTable(c), SerialPods: c.SerialPods,
		OneMutationPolicy: c.OneMutationPolicy, VsPolicies: vsPolicies(c), Floors: floorsCost(c),
	}
	none, okNone := c.arm(ArmNone)
	noop, okNoop := c.arm(ArmNoopOneCall)
	if !okNone || !okNoop {
		return cp
	}
	cp.Ratios = &table{Head: []string{"Arm", "Pods/s ÷ none", "p50 ÷ none", "p99 ÷ none", "Pods/s ÷ no-op one call", "p50 ÷ no-op one call", "rounds: Pods/s ÷ none"}, Right: seq(1, 6)}
	var worst ArmRun
	worstRel := -1.0
	for _, a := range c.Arms {
		cp.Ratios.Add(a.Arm, ratio(a.PodsPerSec, none.PodsPerSec), ratio(a.Latency.P50, none.Latency.P50), ratio(a.Latency.P99, none.Latency.P99),
			ratio(a.PodsPerSec, noop.PodsPerSec), ratio(a.Latency.P50, noop.Latency.P50), roundsRange(a, none))
		if rel, _, _ := spread(a.RoundPodsPerSec); rel > worstRel {
			worst, worstRel = a, rel
		}
	}
	if g, ok := c.arm(ArmGraceguard); ok {
		gr, _, _ := spread(roundRatios(g, noop))
		cp.Spread = &creationSpread{Worst: fmt.Sprintf("%.0f", 100*worstRel), WorstArm: worst.Arm, Graceguard: fmt.Sprintf("%.0f", 100*gr), Range: roundsRange(g, noop)}
	}
	return cp
}

// floorsCost states graceguard's creation rate and p99 as its chart
// installs it (webhooks and the validating floor) over its webhooks' alone,
// whether that meets issue 41's goal (at least 0.9× the rate, p99 no
// worse), and the same for the opt-in mutating floor, which the chart leaves
// off because it does not; "" when the run lacks the webhook-only arm.
func floorsCost(c *Creation) string {
	w, ok := c.arm(ArmWebhookOnly)
	if !ok {
		return ""
	}
	var parts []string
	for _, v := range []struct{ arm, what string }{
		{ArmGraceguard, "with its native floor (the chart's default)"},
		{ArmMutatingFloor, "With the mutating floor too (`nativeFloor.mutate=true`)"},
	} {
		g, ok := c.arm(v.arm)
		if !ok {
			continue
		}
		rate, p99 := g.PodsPerSec/w.PodsPerSec, g.Latency.P99/w.Latency.P99
		judged := ""
		if rr, pr := roundRatios(g, w), roundP99Ratios(g, w); len(rr) >= 3 && len(pr) == len(rr) {
			// The arms of a round run minutes apart, those of different
			// rounds further: the goal is judged on the rounds' paired
			// ratios, as section 6's goodput.
			rate, p99 = median(rr), median(pr)
			judged = fmt.Sprintf("; judged on the rounds' paired ratios, medians: rate %s, p99 %s (each round's p99: %s)", num(rate)+"×", num(p99)+"×", joinRatios(pr))
		}
		verdict := "within"
		if rate < 0.9 || p99 > 1 {
			verdict = "not within"
		}
		parts = append(parts, fmt.Sprintf("%s graceguard creates Pods at %s its webhooks' rate alone (%s vs %s Pods/s), p99 %s vs %s ms (%s); rounds %s%s: %s the goal of at least 0.9× the rate and a p99 no worse.",
			v.what, ratio(g.PodsPerSec, w.PodsPerSec), num(g.PodsPerSec), num(w.PodsPerSec), num(g.Latency.P99), num(w.Latency.P99), ratio(g.Latency.P99, w.Latency.P99), roundsRange(g, w), judged, verdict))
	}
	return strings.Join(parts, " ")
}

// vsPolicies is graceguard's creation rate over each native policy's, each
// stated with the policy and the Pods both arms of the pair created: the
// two-mutation policy beside graceguard on the typical Pod (which carries
// graceguard.io/readiness-path), the one-mutation policy beside graceguard
// on the typical Pod without it. A pair whose arms did not admit every Pod
// as they should, or made different Pods of it, says so. "" when the
// one-mutation pair was not run (a run before it, or -arms leaving it out).
func vsPolicies(c *Creation) string {
	if _, ok := c.arm(ArmNativeOneMutation); !ok {
		return ""
	}
	var clauses []string
	for _, pr := range []struct{ g, p, policy, pods, compared string }{
		{ArmGraceguard, ArmNativePolicy, "the two-mutation policy's", "with a readiness annotation", c.NativePolicy},
		{ArmGraceguardNoProbe, ArmNativeOneMutation, "the one-mutation policy's", "without one", c.OneMutationPolicy},
	} {
		g, okG := c.arm(pr.g)
		p, okP := c.arm(pr.p)
		if !okG || !okP {
			continue
		}
		s := fmt.Sprintf("%s %s rate on Pods %s (%s %s vs %s %s Pods/s, p99 %s vs %s ms; rounds %s)", ratio(g.PodsPerSec, p.PodsPerSec), pr.policy, pr.pods,
			g.Arm, num(g.PodsPerSec), p.Arm, num(p.PodsPerSec), num(g.Latency.P99), num(p.Latency.P99), roundsRange(g, p))
		var flaws []string
		for _, a := range []ArmRun{g, p} {
			if a.Errors > 0 || a.Mutated != a.Pods {
				flaws = append(flaws, fmt.Sprintf("%s had %d errors and %d of %d Pods with the record", a.Arm, a.Errors, a.Mutated, a.Pods))
			}
		}
		if !strings.HasPrefix(pr.compared, samePodsPrefix) {
			flaws = append(flaws, "the two arms did not make the same Pod of it (below), so the ratio does not compare the same work")
		}
		if len(flaws) > 0 {
			s += ", but " + strings.Join(flaws, "; ")
		}
		clauses = append(clauses, s)
	}
	if len(clauses) == 0 {
		return ""
	}
	return "as its chart installs it, graceguard creates Pods at " + strings.Join(clauses, "; and ") + "."
}

func creationTable(c *Creation) *table {
	ct := &table{Head: []string{"Arm", "Pods/s", "rounds (Pods/s)", "p50 (ms)", "p99 (ms)", "Errors", "With the record", "Webhook calls / Pod"}, Right: seq(1, 7)}
	for _, a := range c.Arms {
		ct.Add(a.Arm, num(a.PodsPerSec), rangeOf(a.RoundPodsPerSec, num), num(a.Latency.P50), num(a.Latency.P99),
			fmt.Sprint(a.Errors), fmt.Sprintf("%d of %d", a.Mutated, a.Pods), num(a.CallsPerPod))
	}
	return ct
}

func creationCPUTable(c *Creation) *table {
	cpt := &table{Head: append(append([]string{"Arm"}, procOrder...), "total"), Right: seq(1, len(procOrder)+1)}
	for _, a := range c.Arms {
		cells := []string{a.Arm}
		for _, pr := range procOrder {
			if v, ok := a.CPUMsPerPod[pr]; ok {
				cells = append(cells, num(v))
			} else {
				cells = append(cells, "–")
			}
		}
		cpt.Add(append(cells, num(a.cpuTotal()))...)
	}
	return cpt
}

// webhookTable is the API server's own counts of the webhooks it called
// or skipped; nil when none was recorded.
func webhookTable(c *Creation) *table {
	if len(c.Webhooks) == 0 {
		return nil
	}
	wt := &table{Head: []string{"Webhook", "Calls", "Skipped by a matchCondition", "Mean (ms)", "p50 ≤ (s)", "p99 ≤ (s)"}, Right: seq(1, 5)}
	for _, w := range c.Webhooks {
		if w.Count == 0 && w.Skipped == 0 {
			continue
		}
		mean, p50, p99 := "–", "–", "–"
		if w.Count > 0 {
			mean, p50, p99 = num(w.MeanMs), num(w.P50Le), num(w.P99Le)
		}
		wt.Add(w.Name, fmt.Sprint(w.Count), fmt.Sprint(w.Skipped), mean, p50, p99)
	}
	return wt
}

// serialTable is the arms with one client; nil when not measured.
func serialTable(c *Creation) *table {
	if len(c.Serial) == 0 {
		return nil
	}
	st := &table{Head: []string{"one client", "Pods/s", "p50 (ms)", "p99 (ms)", "Errors", "With the record"}, Right: seq(1, 5)}
	for _, a := range c.Serial {
		st.Add(a.Arm, num(a.PodsPerSec), num(a.Latency.P50), num(a.Latency.P99), fmt.Sprint(a.Errors), fmt.Sprintf("%d of %d", a.Mutated, a.Pods))
	}
	return st
}

func (r *Results) scalingPage() scalingPage {
	sp := scalingPage{Size: r.sizeTable(), Namespaces: r.namespaceTable(), Rate: r.Settings.NamespaceRate}
	if len(r.Namespaces) >= 2 {
		first, last := r.Namespaces[0], r.Namespaces[len(r.Namespaces)-1]
		if dn := last.Namespaces - first.Namespaces; dn > 0 && first.Load != nil && last.Load != nil {
			sp.Growth = &namespaceGrowth{
				Heap: bytesize((last.HeapMiB - first.HeapMiB) * (1 << 20) / float64(dn)),
				RSS:  bytesize((last.Load.RSSMiB - first.Load.RSSMiB) * (1 << 20) / float64(dn)),
			}
		}
	}
	return sp
}

// sizeTable is the engine and the handler against the Pod's size; nil
// when not measured.
func (r *Results) sizeTable() *table {
	st := &table{Head: []string{"Pod", "Pod JSON", "Engine time", "Engine allocs", "Handler time", "Handler allocs", "Handler B / op"}, Right: seq(1, 6)}
	for _, dim := range []string{"containers", "env"} {
		hnd := sweep(r.GoBench, "BenchmarkServeScaling", dim)
		for _, e := range sweep(r.GoBench, "BenchmarkMutateScaling", dim) {
			row := []string{sizeName(dim, e.n), bytesize(e.b.Extra["pod-bytes"]), duration(e.b.NsPerOp), count(e.b.AllocsPerOp), "", "", ""}
			for _, h := range hnd {
				if h.n == e.n {
					row[4], row[5], row[6] = duration(h.b.NsPerOp), count(h.b.AllocsPerOp), bytesize(h.b.BytesPerOp)
				}
			}
			st.Add(row...)
		}
	}
	if len(st.Rows) == 0 {
		return nil
	}
	return st
}

// sizeName names the Pod of a step of the size sweep.
func sizeName(dim string, n int) string {
	switch {
	case dim == "env":
		return fmt.Sprintf("1 container, %d env vars", n)
	case n == 1:
		return "1 container"
	}
	return fmt.Sprintf("%d containers", n)
}

// namespaceTable is the lookup and the webhook against the number of
// namespaces; nil when not measured.
func (r *Results) namespaceTable() *table {
	if len(r.Namespaces) == 0 {
		return nil
	}
	nt := &table{Head: []string{"Namespaces", "Lookup time", "Lookup allocs", "Lookup B / op", "Bench heap (MiB)", "Webhook p50 (ms)", "p99 (ms)", "CPU / req (µs)", "RSS (MiB)", "Peak RSS (MiB)"}, Right: seq(0, 9)}
	for _, n := range r.Namespaces {
		row := []string{fmt.Sprint(n.Namespaces), duration(n.LookupNsPerOp), fmt.Sprint(n.LookupAllocsPerOp), bytesize(float64(n.LookupBytesPerOp)), num(n.HeapMiB), "", "", "", "", ""}
		if l := n.Load; l != nil {
			row[5], row[6], row[7], row[8], row[9] = num(l.Latency.P50), num(l.Latency.P99), num(l.CPUPerRequestUs), num(l.RSSMiB), num(l.PeakRSSMiB)
		}
		nt.Add(row...)
	}
	return nt
}

func (r *Results) observerPage() *observerPage {
	ob := r.Observer
	if ob == nil || len(ob.Steps) == 0 {
		return nil
	}
	op := &observerPage{Run: ob, Churn: ob.Churn}
	op.Steps = &table{Head: []string{"", "observer: Pods cached", "RSS (MiB)", "heap (MiB)", "all-Pods cache: Pods cached", "RSS (MiB)", "heap (MiB)"}, Right: seq(1, 6)}
	for _, s := range ob.Steps {
		op.Steps.Add(s.Name, fmt.Sprint(s.Observer.CachedPods), num(s.Observer.RSSMiB), num(s.Observer.HeapInuseMiB),
			fmt.Sprint(s.AllPods.CachedPods), num(s.AllPods.RSSMiB), num(s.AllPods.HeapInuseMiB))
	}
	if len(ob.Steps) >= 2 && ob.TreatedPods > 0 {
		a, b := ob.Steps[0], ob.Steps[1]
		op.PerPod = &observerPerPod{
			Observer: bytesize((b.Observer.HeapInuseMiB - a.Observer.HeapInuseMiB) * (1 << 20) / float64(ob.TreatedPods)),
			AllPods:  bytesize((b.AllPods.HeapInuseMiB - a.AllPods.HeapInuseMiB) * (1 << 20) / float64(ob.TreatedPods)),
		}
	}
	if c := ob.Churn; c != nil {
		op.ChurnCPU = &table{Head: []string{"over the deletions", "CPU (cores)", "CPU per deletion (ms)", "peak RSS (MiB)"}, Right: seq(1, 3)}
		op.ChurnCPU.Add("observer", num(c.Observer.Cores), num(c.Observer.CPUMsPerDeletion), num(c.Observer.PeakRSSMiB))
		op.ChurnCPU.Add("all-Pods cache", num(c.AllPods.Cores), num(c.AllPods.CPUMsPerDeletion), num(c.AllPods.PeakRSSMiB))
		op.Interval = num(1000 / float64(c.TargetRate))
		op.Due = c.TargetRate * int(math.Round(c.Seconds))
	}
	return op
}
