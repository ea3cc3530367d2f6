package evidence

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/template"
)

// Files written by RenderFiles next to the Markdown, under its assets
// directory.
const (
	JSONName = "evidence.json"
	SVGName  = "timeline.svg"
	MDName   = "e2e.md"
)

// RenderFiles writes dir/e2e.md and, under dir/assets, evidence.json and
// timeline.svg ("." puts them next to the Markdown).
func RenderFiles(r *Run, dir, assets string) error {
	adir := filepath.Join(dir, assets)
	if err := os.MkdirAll(adir, 0o755); err != nil {
		return err
	}
	if err := r.Write(filepath.Join(adir, JSONName)); err != nil {
		return err
	}
	svg := TimelineSVG(r)
	if svg != "" {
		if err := os.WriteFile(filepath.Join(adir, SVGName), []byte(svg), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, MDName), []byte(Markdown(r, assets)), 0o644)
}

func yes(ok bool) string {
	if ok {
		return "passed"
	}
	return "**FAILED**"
}

func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	s = strings.ReplaceAll(s, "\n", " ")
	return s
}

func at(a At) string {
	if a == nil {
		return "not observed"
	}
	return fmt.Sprintf("%.2f s", float64(*a))
}

func secs(s Secs) string { return fmt.Sprintf("%.1f s", float64(s)) }

func checksTable(b *strings.Builder, c Checks) {
	if len(c) == 0 {
		b.WriteString("No checks recorded (the scenario stopped before its assertions).\n\n")
		return
	}
	b.WriteString("| check | want | observed | result |\n|---|---|---|---|\n")
	for _, x := range c {
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", cell(x.Name), cell(x.Want), cell(x.Got), yes(x.Passed))
	}
	b.WriteString("\n")
}

//go:embed e2e.md.tmpl
var pageText string

// page is the template's whole input: the run, and what the page derives
// from it before any prose.
type page struct {
	*Run
	// JSONRef and SVGRef are the links from the page to its assets.
	JSONRef, SVGRef string
	// Suite is how long the suite ran.
	Suite   Secs
	Summary []summaryRow
}

// summaryRow is one scenario's line of the summary table.
type summaryRow struct{ Title, Result, Measured string }

// pageTemplate renders a page; its functions format figures, and the
// sections that still compose their own prose write themselves.
var pageTemplate = template.Must(template.New(MDName).Funcs(template.FuncMap{
	"yes": yes, "secs": secs, "at": at, "cell": cell, "orNone": OrNone, "join": strings.Join, "onOff": onOff,
	"kinds":    KindList[int],
	"value":    func(a At) Secs { return *a },
	"trimExec": func(s string) string { return strings.TrimPrefix(s, "exec ") },
	"ms":       func(s Secs) string { return fmt.Sprintf("%.0f", 1000*float64(s)) },
	"window":   func(e EndpointFailures) float64 { return float64(e.Last - e.First) },
	"shutdown": rolloutShutdown,
	"checks":   func(c Checks) string { return written(func(b *strings.Builder) { checksTable(b, c) }) },
	"deletion": func(d *Deletion, withChecks bool) string {
		return written(func(b *strings.Builder) { deletionTables(b, d, withChecks) })
	},
	"hostile": func(h *Hostile) string { return written(func(b *strings.Builder) { hostileSection(b, h) }) },
}).Parse(pageText))

func written(f func(*strings.Builder)) string {
	var b strings.Builder
	f(&b)
	return b.String()
}

func rolloutShutdown(a *Arm) string {
	s := fmt.Sprintf("preStop %s, grace %d", a.PreStop, a.Grace)
	if a.Budget != "" {
		s += "; `" + a.Budget + "`"
	}
	return s
}

// Markdown renders a Run as docs/e2e.md; assets is the path from the
// Markdown to evidence.json and timeline.svg.
func Markdown(r *Run, assets string) string {
	ref := func(name string) string {
		if assets == "" || assets == "." {
			return name
		}
		return assets + "/" + name
	}
	p := page{Run: r, JSONRef: ref(JSONName), SVGRef: ref(SVGName), Suite: Secs(r.Finished.Sub(r.Started).Seconds())}
	for _, s := range r.scenarios() {
		res := "not run"
		if s.ran {
			res = yes(s.passed())
		}
		p.Summary = append(p.Summary, summaryRow{Title: s.title, Result: res, Measured: summary(r, s.name)})
	}
	var b strings.Builder
	if err := pageTemplate.Execute(&b, p); err != nil {
		// The template is fixed and its input a plain struct: an error is a
		// bug in the template, which every test of this package renders.
		panic(fmt.Sprintf("%s: %v", MDName, err))
	}
	return b.String()
}

func hostileSection(b *strings.Builder, h *Hostile) {
	b.WriteString("## 8. A hostile tenant against the fail-closed webhook\n\n")
	a := h.Attack
	if a == nil {
		a = &Attack{}
	}
	fmt.Fprintf(b, "A tenant whose ServiceAccount (`%s`) may change Pods, Deployments and CronJobs in `%s` (opted in) and `%s`\n"+
		"(not opted in), and nothing else, runs `test/images/hostile` in a Pod of its namespace: for %s it sends every class\n"+
		"below at once, through the API server and straight at the webhook replicas' Pod IPs on the bridge. Its Pods carry a\n"+
		"scheduling gate and its workloads are paused or suspended: admission, not the node, is under attack. graceguard runs as\n"+
		"scenario 0 installed it, with the chart's limits and no NetworkPolicy. Meanwhile the namespace admin (the test process)\n"+
		"sets `graceguard.io/max-work: auto` on the tenant's namespace and gives it, every 2 s, the next of %s a value of %s\n"+
		"(the most the namespace can store beside it; %d updates), and the test process creates ordinary Pods in `%s`,\n"+
		"%g a second, open loop.\n\n",
		h.Tenant, h.Namespace, h.Outside, secs(a.Duration), codeList(h.NamespaceKeys), ByteSize(int64(h.NamespaceValueBytes)), h.NamespaceUpdates,
		steadyNS(h.Steady), steadyRate(h.Steady))
	if len(h.Access) > 0 {
		fmt.Fprintf(b, "What the tenant may do, as the API server answers SubjectAccessReviews for it: %s.\n\n", strings.Join(h.Access, "; "))
	}

	b.WriteString("What the tenant sent through the API server, and the answers it got:\n\n" +
		"| class | streams | bodies (cycled) | sent | largest body | answer time p50 / max | answers |\n|---|---|---|---|---|---|---|\n")
	for _, c := range a.Classes {
		fmt.Fprintf(b, "| %s | %d | %s | %d | %s | %.1f / %.1f s | %s |\n", cell(c.Name), c.Streams, cell(strings.Join(c.Shapes, "; ")), c.Sent, ByteSize(int64(c.Largest)),
			float64(c.P50), float64(c.Max), cell(KindList(c.Outcomes)))
	}
	b.WriteString("\n")
	var samples []string
	for _, c := range a.Classes {
		keys := make([]string, 0, len(c.Samples))
		for k := range c.Samples {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			samples = append(samples, fmt.Sprintf("| %s | %s | %s |\n", cell(c.Name), cell(k), cell(c.Samples[k])))
		}
	}
	if len(samples) > 0 {
		b.WriteString("<details><summary>One answer of each kind</summary>\n\n| class | answer | message |\n|---|---|---|\n" + strings.Join(samples, "") + "\n</details>\n\n")
	}

	fmt.Fprintf(b, "Connections to the webhook port of each replica, as the attacker counted them: it reopens each one graceguard\n"+
		"closes, holding up to %d at once in all and opening at most %d a second in all (open files: %s).\n\n"+
		"| kind | replica | opened | failed to open | closed by graceguard | held at most |\n|---|---|---|---|---|---|\n",
		a.Connections, a.ConnRate, OrNone(a.NoFile))
	for _, f := range a.Floods {
		fmt.Fprintf(b, "| %s | %s | %d | %d | %d | %d |\n", floodName(f.Kind), f.Target, f.Opened, f.Failed, f.Closed, f.HeldPeak)
	}
	b.WriteString("\n")
	var fails []string
	for _, f := range a.Floods {
		if f.FailSample != "" {
			fails = append(fails, fmt.Sprintf("%s at %s: %s", f.Kind, f.Target, f.FailSample))
		}
	}
	if len(fails) > 0 {
		b.WriteString("A failed attempt of each: " + cell(strings.Join(fails, "; ")) + ".\n\n")
	}
	if len(a.Errors) > 0 {
		b.WriteString("The attacker reported: " + cell(strings.Join(a.Errors, "; ")) + ".\n\n")
	}

	if h.Steady != nil || h.After != nil {
		b.WriteString("Ordinary creates in `" + steadyNS(h.Steady) + "` during the attack (open loop) and after it (one at a time). A scheduling gate\n" +
			"keeps them from running. Every tenth is a Pod whose preStop hook outlasts its grace: graceguard's normal answer to it is a refusal.\n" +
			"All must be answered as usual (asserted); the latency is measured, not asserted (the goal is a p99 under 2 s).\n\n" +
			"| when | rate | ordinary sent | admitted and mutated | failed | admitted unmutated | latency p50 / p99 / max | hook longer than grace: refused |\n|---|---|---|---|---|---|---|---|\n")
		for _, row := range []struct {
			when string
			s    *Steady
		}{{"during", h.Steady}, {"after", h.After}} {
			s := row.s
			if s == nil {
				continue
			}
			rate := "one at a time"
			if s.Rate > 0 {
				rate = fmt.Sprintf("%g/s", s.Rate)
			}
			fmt.Fprintf(b, "| %s | %s | %d | %d | %d | %d | %.0f / %.0f / %.0f ms | %d of %d |\n", row.when, rate, s.Sent, s.Created, s.Failed, s.Unmutated,
				1000*float64(s.P50), 1000*float64(s.P99), 1000*float64(s.Max), s.HookRefused, s.HookSent)
		}
		b.WriteString("\n")
		for _, row := range []struct {
			when string
			s    *Steady
		}{{"during", h.Steady}, {"after", h.After}} {
			s := row.s
			if s == nil {
				continue
			}
			if len(s.Causes) > 0 {
				fmt.Fprintf(b, "Failed or unmutated %s the attack, by cause: %s.\n\n", row.when, cell(KindList(s.Causes)))
			}
			if errs := append(slices.Clone(s.Errors), s.HookWrong...); len(errs) > 0 {
				fmt.Fprintf(b, "Errors %s the attack (seconds after the creates started):\n\n", row.when)
				for _, e := range errs {
					fmt.Fprintf(b, "- %s\n", cell(e))
				}
				b.WriteString("\n")
			}
		}
		fmt.Fprintf(b, "Load average (1, 5, 15 min) before the attack %s, after it %s; the attacker's container used %s of CPU during it.\n\n",
			h.LoadBefore, h.LoadAfter, cpuTime(h.AttackerCPU))
	}
	if len(h.Endpoints) > 0 {
		fmt.Fprintf(b, "Ready endpoints of the webhook Service (its EndpointSlices; seconds after the attack started): %s. None ready for %.1f s.\n\n",
			strings.Join(h.Endpoints, ", "), float64(h.NoEndpoint))
	}

	b.WriteString("graceguard's Pods through the attack. Peak is the container cgroup's `memory.max_usage_in_bytes` (reset when the\n" +
		"attack started; page cache included), RSS and heap the most `process_resident_memory_bytes` and\n" +
		"`go_memstats_heap_inuse_bytes` of its own /metrics, scraped every second; limit hits are `memory.failcnt` (reclaim at\n" +
		"the limit), OOM kills the cgroup's `oom_kill`.\n\n" +
		"| Pod | role | limit | peak | RSS | heap | limit hits | OOM kills | CPU used | restarts | last state |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range h.Replicas {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %s |\n", r.Pod, r.Role, ByteSize(r.Limit), ByteSize(r.CgroupPeak), ByteSize(r.RSSPeak), ByteSize(r.HeapPeak),
			count(r.CgroupFailcnt), count(r.OOMKills), cpuTime(r.CPU), r.Restarts, cell(OrNone(r.LastState)))
	}
	b.WriteString("\n| webhook replica | connections open at most (scraped) | evicted | refused | TLS handshakes aborted | /readyz failed (checked every second, 1 s timeout) |\n|---|---|---|---|---|---|\n")
	for _, r := range h.Replicas {
		if r.Role == "webhook" {
			fmt.Fprintf(b, "| %s | %g | %s | %g | %g | %d of %d%s |\n", r.Pod, r.ConnsPeak, cell(KindList(r.Evicted)), r.Refused, r.HandshakesAborted,
				r.ReadyzFailed, r.ReadyzChecks, cell(quoteList(r.ReadyzSamples)))
		}
	}
	b.WriteString("\n")
	if len(h.Decisions) > 0 {
		b.WriteString("graceguard's answers over the attack (`graceguard_admission_decisions_total`, both replicas, the ordinary creates included):\n\n" +
			"| webhook | decision | reason | reviews |\n|---|---|---|---|\n")
		for _, d := range h.Decisions {
			fmt.Fprintf(b, "| %s | %s | %s | %g |\n", d.Webhook, d.Decision, d.Reason, d.Count)
		}
		b.WriteString("\n")
	}
	if len(h.APIServer) > 0 {
		b.WriteString("The API server's counters over the attack:\n\n" +
			"| webhook | `apiserver_admission_webhook_request_total` Δ | `..._fail_open_count` Δ | `..._rejection_count` Δ | skipped by a matchCondition Δ |\n|---|---|---|---|---|\n")
		for _, m := range h.APIServer {
			fmt.Fprintf(b, "| %s | %g | %g | %g | %g |\n", m.Name, m.Requests, m.FailOpen, m.Rejection, m.Skipped)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(b, "The observer: deleted treated Pods it skipped over the attack, by reason: %s; ShutdownReports in `%s`: %d.\n\n",
		KindList(h.ObserverSkipped), h.Outside, h.OutsideReports)
	if len(h.Events) > 0 {
		b.WriteString("Warning events of graceguard's namespace, and the node's SystemOOM events, during the attack:\n\n")
		for _, e := range h.Events {
			fmt.Fprintf(b, "- %s\n", cell(e))
		}
		b.WriteString("\n")
	} else {
		b.WriteString("No Warning event in graceguard's namespace and no SystemOOM event on the node during the attack.\n\n")
	}
	checksTable(b, h.Checks)
}

func hostileSummary(h *Hostile) string {
	var parts []string
	if a := h.Attack; a != nil {
		var sent []string
		for _, c := range a.Classes {
			sent = append(sent, fmt.Sprintf("%d %s", c.Sent, c.Name))
		}
		opened := 0
		for _, f := range a.Floods {
			opened += f.Opened
		}
		parts = append(parts, fmt.Sprintf("%s of %s and %d connections opened", secs(a.Duration), strings.Join(sent, ", "), opened))
	}
	if s := h.Steady; s != nil {
		parts = append(parts, fmt.Sprintf("ordinary creates: %d of %d admitted and mutated, p50 / p99 %.0f / %.0f ms", s.Created, s.Sent, 1000*float64(s.P50), 1000*float64(s.P99)))
	}
	var mem []string
	restarts := int32(0)
	for _, r := range h.Replicas {
		mem = append(mem, fmt.Sprintf("%s %s of %s", r.Role, ByteSize(r.CgroupPeak), ByteSize(r.Limit)))
		restarts += max(r.Restarts, 0)
	}
	if len(mem) > 0 {
		parts = append(parts, "peak memory "+strings.Join(mem, ", ")+fmt.Sprintf("; %d restarts", restarts))
	}
	return strings.Join(parts, "; ")
}

func cpuTime(s Secs) string {
	if s < 0 {
		return "not measured"
	}
	return fmt.Sprintf("%.1f s", float64(s))
}

// quoteList is ": "a", "b"" for a non-empty list.
func quoteList(l []string) string {
	if len(l) == 0 {
		return ""
	}
	var q []string
	for _, s := range l {
		q = append(q, fmt.Sprintf("%q", s))
	}
	return ": " + strings.Join(q, ", ")
}

func steadyNS(s *Steady) string {
	if s == nil {
		return "none"
	}
	return s.Namespace
}

func steadyRate(s *Steady) float64 {
	if s == nil {
		return 0
	}
	return s.Rate
}

func codeList(keys []string) string {
	var out []string
	for _, k := range keys {
		out = append(out, "`"+k+"`")
	}
	return strings.Join(out, ", ")
}

// ByteSize is a size in MiB (KiB under one); negative: not measured.
func ByteSize(n int64) string {
	switch {
	case n < 0:
		return "not measured"
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n == 0:
		return "0"
	}
	return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
}

func count(n int64) string {
	if n < 0 {
		return "not measured"
	}
	return fmt.Sprint(n)
}

// floodName says what a kind of hostile connection does.
func floodName(kind string) string {
	switch kind {
	case "tcp":
		return "tcp: connected, nothing sent"
	case "hello":
		return "hello: a partial TLS ClientHello"
	case "idle":
		return "idle: kept alive after one review"
	case "headers":
		return "headers: a request whose headers never end"
	}
	return kind
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// OrNone is s, or "none" when it is empty.
func OrNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// KindList is "kind count, ..." sorted, or "none".
func KindList[V int | float64](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s %v", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func deletionTables(b *strings.Builder, d *Deletion, withChecks bool) {
	opt := "not opted in"
	if d.OptedIn {
		opt = "opted in"
	}
	fmt.Fprintf(b, "Pod `%s/%s` (%s, IP %s): preStop `%s`, `terminationGracePeriodSeconds: %d`, readiness %s, liveness %s",
		d.Namespace, d.Pod, opt, d.PodIP, d.PreStop, d.Grace, d.Readiness, d.Liveness)
	if d.Budget != "" {
		fmt.Fprintf(b, ", `graceguard.io/budget: %s`", d.Budget)
	}
	var anns []string
	for k, v := range d.Annotations {
		if strings.HasPrefix(k, "graceguard.io/") && k != "graceguard.io/budget" {
			anns = append(anns, fmt.Sprintf("`%s: %s`", k, v))
		}
	}
	sort.Strings(anns)
	if len(anns) > 0 {
		fmt.Fprintf(b, "; annotations %s", strings.Join(anns, ", "))
	}
	fmt.Fprintf(b, ". Request: %gs of work.\n\n", float64(d.Request))

	b.WriteString("| moment (seconds after the delete call) | predicted by `pkg/budget` (worst case: max-work starts at SIGTERM) | measured |\n|---|---|---|\n")
	e := d.Expected
	pred := func(f func(*Timeline) Secs) string {
		if e == nil {
			return ""
		}
		return fmt.Sprintf("%.2f s", float64(f(e)))
	}
	adm := "not observed"
	if d.Admitted != nil {
		adm = fmt.Sprintf("%.3f s", float64(*d.Admitted))
	}
	fmt.Fprintf(b, "| the app admitted the request (work_started) | | %s |\n", adm)
	fmt.Fprintf(b, "| EndpointSlice shows ready=false, terminating=true | 0 | %s (%s) |\n", at(d.EndpointNotReady), OrNone(d.EndpointConditions))
	fmt.Fprintf(b, "| app logs sigterm | %s | %s |\n", pred(func(t *Timeline) Secs { return t.SIGTERM }), at(d.SIGTERM))
	if e != nil && d.SIGTERM != nil {
		fmt.Fprintf(b, "| sigterm later than predicted (the kubelet notices the delete late) | | %.2f s |\n", float64(*d.SIGTERM)-float64(e.SIGTERM))
	}
	fmt.Fprintf(b, "| admitted work done (work_completed) | %s | %s |\n", pred(func(t *Timeline) Secs { return t.Drained }), at(d.WorkCompleted))
	fmt.Fprintf(b, "| app exits (shutdown_complete) | %s | %s |\n", pred(func(t *Timeline) Secs { return t.Exited }), at(d.ShutdownComplete))
	fmt.Fprintf(b, "| client's request ends | | %s: %s |\n", at(d.ClientDone), cell(d.Client))
	if d.LateRequest != "" {
		fmt.Fprintf(b, "| a new request after sigterm | rejected | %s: %s |\n", at(d.LateRequestAt), cell(d.LateRequest))
	}
	fmt.Fprintf(b, "| Pod object gone | | %s |\n", at(d.PodGone))
	fmt.Fprintf(b, "| SIGKILL deadline | %s | grace %d s |\n\n", pred(func(t *Timeline) Secs { return t.Deadline }), d.Grace)
	exit := "not observed (the Pod object was gone before its status showed the termination)"
	if d.ExitCode != nil {
		exit = fmt.Sprint(*d.ExitCode)
	}
	fmt.Fprintf(b, "Container exit code: %s. App log order: %s.\n\n", exit, OrNone(strings.Join(d.LogOrder, " → ")))
	if withChecks {
		checksTable(b, d.Checks)
	}
}

// summary is a scenario's key numbers in one line.
func summary(r *Run, name string) string {
	switch name {
	case "install":
		if in := r.Install; in != nil {
			return fmt.Sprintf("helm install %s; caBundle injected %s, %d replicas Ready %s, dry-run Pod mutated %s after install start",
				secs(in.HelmInstall), secs(in.CABundle), in.Replicas, secs(in.ReplicasUp), secs(in.DryRunMutate))
		}
	case "lab":
		if d := r.Lab; d != nil {
			return fmt.Sprintf("client: %s at %s; endpoint not ready %s; sigterm %s (preStop %s); work_completed %s; shutdown_complete %s; late request: %s",
				d.Client, at(d.ClientDone), at(d.EndpointNotReady), at(d.SIGTERM), d.PreStop, at(d.WorkCompleted), at(d.ShutdownComplete), OrNone(d.LateRequest))
		}
	case "control":
		if d := r.Control; d != nil {
			return fmt.Sprintf("grace %d s: sigterm %s, request cut at %s (%s); work_completed %s",
				d.Grace, at(d.SIGTERM), at(d.ClientDone), d.Client, at(d.WorkCompleted))
		}
	case "rollout":
		if ro := r.Rollout; ro != nil {
			var parts []string
			for _, a := range ro.Arms {
				parts = append(parts, fmt.Sprintf("%s: %d of %d failed (%d connection errors, %d rejected 503)", a.Name, a.Failed, a.Sent, a.ConnErrors, a.Rejected))
			}
			return fmt.Sprintf("router lag %s, %d req/s: %s", secs(ro.RouterLag), ro.Rate, strings.Join(parts, "; "))
		}
	case "hook":
		if h := r.Hook; h != nil {
			s := "refused: " + firstLine(h.Denied)
			if d := h.Unguarded; d != nil {
				s += fmt.Sprintf("; without graceguard: sigterm %s, request cut at %s, %d FailedPreStopHook events, exit code %s",
					at(d.SIGTERM), at(d.ClientDone), h.HookCutEvents, exitOf(d.ExitCode))
			}
			return s
		}
	case "tune":
		if t := r.Tune; t != nil {
			var parts []string
			for _, rd := range t.Rounds {
				parts = append(parts, fmt.Sprintf("%s: %d of %d requests failed, %d of %d shutdowns SIGKILLed", rd.Name, rd.Failed, rd.Sent, rd.Kills, rd.Observed))
			}
			return strings.Join(parts, "; ")
		}
	case "hostile":
		if h := r.Hostile; h != nil {
			return hostileSummary(h)
		}
	case "native":
		if n := r.Native; n != nil {
			var parts []string
			for _, a := range n.Arms {
				parts = append(parts, fmt.Sprintf("%s: %d of %d requests lost during withdrawal, drain at %s, router dropped the Pod at %s",
					a.Name, a.Lost, a.During, at(a.Drain), at(a.RouterDropped)))
			}
			return strings.Join(parts, "; ")
		}
	case "broken-hook":
		if h := r.BrokenHook; h != nil {
			var parts []string
			for _, a := range h.Arms {
				p := a.Name + ":"
				if d := a.Deletion; d != nil {
					p += fmt.Sprintf(" sigterm %s (grace %d s), request %s at %s, exit code %s;", at(d.SIGTERM), d.Grace, d.Client, at(d.ClientDone), exitOf(d.ExitCode))
				}
				p += fmt.Sprintf(" %d FailedPreStopHook events; observer: %s", a.HookEvents, OrNone(a.Observed))
				parts = append(parts, p)
			}
			return strings.Join(parts, "; ")
		}
	case "mesh":
		if m := r.MeshProxy; m != nil {
			var parts []string
			for _, a := range m.Arms {
				parts = append(parts, fmt.Sprintf("%s: %d of %d requests completed, proxy SIGTERM %s, app done %s", a.Name, a.Completed, a.Completed+a.Cut, at(a.ProxySIGTERM), at(a.AppShutdown)))
			}
			return strings.Join(parts, "; ")
		}
	case "self":
		if s := r.SelfRollout; s != nil {
			var fo, rej float64
			for _, m := range s.Metrics {
				fo += m.FailOpen
				rej += m.Rejection
			}
			return fmt.Sprintf("%d Pods created by %d clients during a %s rollout: %d failed, %d unmutated; fail-open Δ %g, rejection Δ %g",
				s.Created, s.Clients, secs(s.Rollout), s.Failed, s.Unmutated, fo, rej)
		}
	}
	return ""
}

func exitOf(c *int32) string {
	if c == nil {
		return "not observed"
	}
	return fmt.Sprint(*c)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 220 {
		s = s[:220] + "..."
	}
	return s
}
