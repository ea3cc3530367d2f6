package cli

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/mutate"
)

func newExplainCmd() *cobra.Command {
	var in *inputFlags
	cmd := &cobra.Command{
		Use:   "explain -f FILE",
		Short: "Show each Pod's shutdown budget, where it came from, and its deletion timeline",
		Long: `Show each Pod's (or Pod template's) shutdown budget and its deletion timeline.

For each Pod or workload: every budget term, its value and where it came from
(Pod annotation, namespace annotation, routing profile with its source, or
cluster default), what a mesh proxy sidecar adds, a routing profile's grace
floor, the platform ceilings (--karpenter-termination-grace-period,
--node-shutdown-grace-period), the grace period before and after, what
graceguard changes, and a chart of what the kubelet does when the Pod is
deleted: endpoints withdrawn and preStop from t=0, SIGTERM, drain of admitted
work, cleanup, the mesh proxy, the safety margin, the SIGKILL deadline and
each ceiling's.
In warn mode the chart shows the Pod as enforce mode would leave it.`,
		Example: `  kubectl graceguard explain -f deploy.yaml
  kubectl graceguard explain -f pod.yaml --namespace-annotations graceguard.io/max-work=1m`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			loaded, err := in.load(cmd.Context(), cmd.InOrStdin(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer loaded.close()
			p := &printer{w: cmd.OutOrStdout()}
			n, errs := 0, 0
			err = loaded.each(func(o object) error {
				if n > 0 {
					p.line("")
				}
				n++
				explain(p, o)
				if verdictOf(o) == verdictError {
					errs++
				}
				return p.err
			})
			if err != nil {
				return err
			}
			if errs > 0 {
				return notEvaluatedError{errs}
			}
			return nil
		},
	}
	in = bindInputFlags(cmd)
	return cmd
}

// proseWidth keeps explain's sentences, indented, within 100 columns.
const proseWidth = 96

func explain(p *printer, o object) {
	switch verdictOf(o) {
	case verdictError:
		p.line("%s: error: %v", o.ref(), o.err)
		return
	case verdictSkipped:
		// An opted-out Pod is not skipped: its hooks are still checked.
		_, why := skipOf(o)
		p.line("%s: skipped: %s", o.ref(), why)
		for _, f := range findings(o) {
			for _, l := range wrap(f.Level+": "+f.Message, proseWidth) {
				p.line("  %s", l)
			}
		}
		return
	}
	m, v := o.res.Mutation, o.res.Validation
	what := o.ref()
	if o.template() {
		what += ", Pod template"
	}
	grace := fmt.Sprintf("grace %ds", m.GraceBefore)
	if m.Grace != m.GraceBefore {
		grace += fmt.Sprintf(" -> %ds", m.Grace)
		if !m.Applied {
			grace += " (enforce would set it; warn mode changes nothing)"
		}
	} else {
		grace += " (unchanged)"
	}
	p.line("%s [%s]: %s", what, m.Mode, grace)
	if o.nsState == nsAssumed {
		p.line("  namespace %s is evaluated as if opted in (--assume-opted-in)", o.ns)
	}
	if n := legacyNote(o); n != "" {
		for _, l := range wrap("note: "+n, proseWidth) {
			p.line("  %s", l)
		}
	}

	switch {
	case m.OptedOut:
		for _, l := range wrap(fmt.Sprintf("opted out with %s: %q: no budget and nothing changed; its preStop hooks are still checked against grace %ds.",
			mutate.AnnotationInject, "false", m.GraceBefore), proseWidth) {
			p.line("  %s", l)
		}
	case m.Sources == nil:
		p.line("  no budget: graceguard's settings for it do not parse (see below)")
	default:
		writeBudget(p, o)
		writeChanges(p, m)
		groups := stopGroups(m)
		for _, g := range groups {
			title := "  timeline of deletion"
			if m.Mode == mutate.ModeWarn {
				title += ", as enforce mode would leave it"
			}
			if len(groups) > 1 {
				title += ": " + g.title(m)
			}
			p.line("%s", title)
			tl := budget.NewTimeline(m.Budget, g.charted(m), m.Grace)
			tl.Sidecars = timelineSidecars(m)
			tl.ProxyIsSidecar = m.Mesh == nil && len(tl.Sidecars) > 0
			for _, l := range chart(tl, m.Ceilings) {
				p.line("    %s", l)
			}
			for _, l := range events(tl, g.sigterm(len(groups) > 1 || len(tl.Sidecars) > 0)) {
				p.line("    %s", l)
			}
			v := verdict(tl)
			if !mutate.StopSignalDrains(g.stop.Signal) {
				v = noDrain(tl, g.stop.Signal)
			}
			if a := assumptions(o, g); a != "" {
				v += " " + a
			}
			for _, l := range wrap(v, proseWidth) {
				p.line("  %s", l)
			}
		}
	}

	// The advice, and what validation adds, in full; in warn mode the
	// changes enforce would make are listed above already.
	var ws []string
	seen := map[string]bool{}
	for _, n := range v.Notices() {
		if !seen[n.Text] {
			seen[n.Text] = true
			ws = append(ws, n.Text)
		}
	}
	var advice []string
	for _, f := range m.Warnings {
		if t := f.Err.Field + ": " + f.Err.Detail; !seen[t] {
			seen[t] = true
			advice = append(advice, t)
		}
	}
	if ws = append(advice, ws...); len(ws) > 0 {
		p.line("  warnings")
		for _, w := range ws {
			p.line("    %s", w)
		}
	}
	if v.Err() != nil {
		p.line("  denied")
		for _, f := range v.Violations {
			p.line("    %s", f.Err.Error())
		}
		if v.Unlisted > 0 {
			p.line("    %d more violations, not recorded (graceguard keeps the first %d)", v.Unlisted, mutate.MaxRecordedViolations)
		}
	}
}

// noDrain is the verdict for a stop signal no process can catch: the
// budget's arithmetic holds, and the app still never drains.
func noDrain(tl budget.Timeline, signal string) string {
	at := budget.Format
	if signal == "SIGSTOP" {
		return fmt.Sprintf("DOES NOT DRAIN: %s at %s (its stopSignal) freezes the process, requests in flight, until SIGKILL at %s; admitted work is cut.",
			signal, at(tl.SIGTERM), at(tl.Deadline))
	}
	return fmt.Sprintf("DOES NOT DRAIN: %s at %s (its stopSignal) ends the process at once; admitted work is cut.", signal, at(tl.SIGTERM))
}

// writeBudget prints each term, its value and where it came from.
func writeBudget(p *printer, o object) {
	m := o.res.Mutation
	type line struct{ name, value, note string }
	var lines []line
	for _, t := range budget.Terms {
		lines = append(lines, line{string(t), budget.Format(m.Budget.Get(t)), source(o, t)})
		if _, ok := m.Sources[t].ProfileName(); ok && m.Profile != nil {
			lines = append(lines, line{"", "", basisWord(m.Profile.Basis) + ": " + m.Profile.Source})
		}
	}
	need := m.Budget.Grace()
	fit := budget.Check(m.Budget, m.Grace, 0)
	needs := fmt.Sprintf("%ds", need)
	note := fmt.Sprintf("of grace %ds: fits", m.Grace)
	switch {
	case m.Budget.Routing == budget.Infinity:
		needs, note = "infinity", fmt.Sprintf("of grace %ds: DOES NOT FIT: no grace period fits a preStop hook that never ends", m.Grace)
	case !fit.Fits():
		note = fmt.Sprintf("of grace %ds: DOES NOT FIT, %ds short", m.Grace, need-m.Grace)
	case m.Grace > need:
		note += fmt.Sprintf(", %ds to spare", m.Grace-need)
	}
	if m.Budget.Proxy > 0 || m.Mesh != nil {
		// The Proxy term sits between cleanup and margin, as it is spent.
		last := lines[len(lines)-1]
		notes := proxyNote(m)
		lines = append(lines[:len(lines)-1], line{"proxy", budget.Format(m.Budget.Proxy), notes[0]})
		for _, n := range notes[1:] {
			lines = append(lines, line{"", "", n})
		}
		lines = append(lines, last)
	}
	if m.GraceFloor > 0 {
		lines = append(lines, line{"floor", fmt.Sprintf("%ds", m.GraceFloor),
			fmt.Sprintf("grace floor of routing profile %s (%s)", m.Profile.Name, m.Profile.Source)})
		if m.GraceFloor > need && m.Budget.Routing != budget.Infinity {
			need = m.GraceFloor
			fit.Need = need
			needs = fmt.Sprintf("%ds", need)
			note = fmt.Sprintf("of grace %ds: fits", m.Grace)
			switch {
			case !fit.Fits():
				note = fmt.Sprintf("of grace %ds: DOES NOT FIT, %ds short", m.Grace, need-m.Grace)
			case m.Grace > need:
				note += fmt.Sprintf(", %ds to spare", m.Grace-need)
			}
		}
	}
	lines = append(lines, line{"needs", needs, note})
	groups := stopGroups(m)
	for _, g := range groups {
		note := g.note(m, o.res.Validation.Err() != nil)
		if len(groups) > 1 {
			note = strings.Join(g.names, ", ") + ": " + note
		}
		lines = append(lines, line{"preStop", g.value(), note})
	}
	if len(groups) == 0 {
		why := "no container to treat"
		if m.Mesh != nil && m.Mesh.ProxyOnly {
			why = "no app container; the proxy's wait is above"
		}
		lines = append(lines, line{"preStop", "none", why})
	}
	for _, sc := range m.Sidecars {
		lines = append(lines, line{"sidecar", sidecarValue(sc), sidecarNote(sc, m.Applied)})
	}
	for _, c := range m.Ceilings {
		verdict := "holds the budget"
		if c.Exceeded(need) {
			verdict = "CUTS THE BUDGET SHORT"
			if c.Deny {
				verdict += " (denied)"
			}
		}
		lines = append(lines, line{"ceiling", budget.Format(c.Limit), fmt.Sprintf("%s (%s): %s", c.Event, c.Flag, verdict)})
	}

	nameW, valW := 0, 0
	for _, l := range lines {
		nameW, valW = max(nameW, len(l.name)), max(valW, len(l.value))
	}
	p.line("  budget")
	for _, l := range lines {
		p.line("    %-*s %*s  %s", nameW, l.name, valW, l.value, l.note)
	}
}

// source says where a budget term came from, with the key or flag that
// sets it, so a person knows what to change.
func source(o object, t budget.Term) string {
	key := mutate.KeyFor(t)
	switch o.res.Mutation.Sources[t] {
	case mutate.FromPod:
		if o.template() {
			return "Pod template annotation " + key
		}
		return "Pod annotation " + key
	case mutate.FromNamespace:
		return "namespace " + o.ns + " annotation " + key
	case mutate.FromCluster:
		return "cluster default " + flags.DefaultFlag(t)
	case mutate.FromHook:
		return "the preStop hook, longer than the routing delay"
	case mutate.FromAuto:
		return key + ": auto (the workload's shutdown report, within its floor and ceiling)"
	case mutate.FromProxyOnly:
		return "none: the Pod runs only its mesh proxy (a gateway or waypoint), no app; set " + key + " on the Pod to count some"
	}
	if name, ok := o.res.Mutation.Sources[t].ProfileName(); ok && o.res.Mutation.Profile != nil {
		pr := o.res.Mutation.Profile
		where := "Pod annotation " + mutate.AnnotationRoutingProfile
		switch pr.From {
		case mutate.FromNamespace:
			where = "namespace " + o.ns + " annotation " + mutate.AnnotationRoutingProfile
		case mutate.FromCluster:
			where = "cluster default " + flags.DefaultProfileFlag
		case mutate.FromPod:
			if o.template() {
				where = "Pod template annotation " + mutate.AnnotationRoutingProfile
			}
		case mutate.FromPodLabel:
			where = "Pod label " + pr.Label
			if o.template() {
				where = "Pod template label " + pr.Label
			}
		case mutate.FromNamespaceLabel:
			where = "namespace " + o.ns + " label " + pr.Label
		}
		return fmt.Sprintf("routing profile %s (%s)", name, where)
	}
	return ""
}

// stopGroup is the treated containers that stop the same way: the same
// preStop hook length, known or not, written by the user or by graceguard.
type stopGroup struct {
	names []string
	stop  mutate.ContainerStop
}

// stopGroups groups the treated containers by how they stop, in order. The
// kubelet runs each container's own hook before its SIGTERM, so each group
// has its own timeline.
func stopGroups(m *mutate.Report) []stopGroup {
	var out []stopGroup
	for _, s := range m.Stops {
		i := slices.IndexFunc(out, func(g stopGroup) bool {
			return g.stop.Hook == s.Hook && g.stop.Known == s.Known && g.stop.Added == s.Added && g.stop.Signal == s.Signal
		})
		if i < 0 {
			out = append(out, stopGroup{stop: s})
			i = len(out) - 1
		}
		out[i].names = append(out[i].names, s.Name)
	}
	return out
}

// charted is the hook length the chart draws: what the budget counts for
// it (the routing term for a hook of unknown length).
func (g stopGroup) charted(m *mutate.Report) time.Duration {
	if !g.stop.Known {
		return m.Budget.Routing
	}
	return g.stop.Hook
}

func (g stopGroup) value() string {
	switch {
	case !g.stop.Known:
		return "?"
	case g.stop.Hook == 0:
		return "none"
	}
	return budget.Format(g.stop.Hook)
}

// sigterm names who gets SIGTERM: "SIGTERM" alone for a single group, or
// the signal a lifecycle.stopSignal sends instead ("SIGQUIT (stopSignal,
// instead of SIGTERM)"): the budget and the timeline are the same, the
// app must drain on that signal.
func (g stopGroup) sigterm(multi bool) string {
	sig, why := "SIGTERM", ""
	if g.stop.Signal != "" && g.stop.Signal != "SIGTERM" {
		sig, why = g.stop.Signal, " (stopSignal, instead of SIGTERM)"
	}
	if !multi {
		return sig + why
	}
	return sig + " to " + strings.Join(g.names, ", ") + why
}

// note says where a group's preStop hook comes from. denied is set when
// the validating webhook refuses the Pod: then graceguard added nothing.
func (g stopGroup) note(m *mutate.Report, denied bool) string {
	multi := len(stopGroups(m)) > 1
	switch {
	case !g.stop.Known:
		return "unknown length (see warnings); budget and chart count " + budget.Format(m.Budget.Routing) + " for it"
	case g.stop.Hook == 0 && denied && len(m.Changes) == 0:
		return "graceguard adds none to a Pod it denies (see denied)"
	case g.stop.Hook == 0:
		return "the app must keep serving for the routing time after SIGTERM"
	case !g.stop.Added:
		return "already in the spec; " + g.sigterm(multi) + " waits for it"
	case m.Applied:
		return "graceguard adds " + g.stop.Desc + "; " + g.sigterm(multi) + " waits for it"
	}
	return "enforce would add " + g.stop.Desc + "; " + g.sigterm(multi) + " waits for it"
}

// title names a group's timeline: its containers and their hook.
func (g stopGroup) title(m *mutate.Report) string {
	what := plural(len(g.names), "container")
	what = strings.TrimPrefix(strings.TrimPrefix(what, "1 "), fmt.Sprint(len(g.names))+" ")
	hook := "no preStop hook"
	switch {
	case !g.stop.Known:
		hook = "preStop " + g.stop.Desc + ", unknown length"
	case g.stop.Hook > 0 && g.stop.Added && m.Applied:
		hook = "preStop " + g.stop.Desc + ", added by graceguard"
	case g.stop.Hook > 0 && g.stop.Added:
		hook = "preStop " + g.stop.Desc + ", enforce would add it"
	case g.stop.Hook > 0:
		hook = "preStop " + g.stop.Desc + ", in the spec"
	}
	return what + " " + strings.Join(g.names, ", ") + " (" + hook + ")"
}

func writeChanges(p *printer, m *mutate.Report) {
	if len(m.Changes) == 0 {
		p.line("  changes: none")
		return
	}
	if m.Applied {
		p.line("  changes")
	} else {
		p.line("  changes enforce would make (warn mode changes nothing)")
	}
	for _, c := range m.Changes {
		p.line("    %s", c.String())
	}
}

// basisWord says what kind of number a profile's is, for people.
func basisWord(b string) string {
	switch b {
	case budget.BasisMeasurement:
		return "measured"
	case budget.BasisRecommendation:
		return "recommended, not measured"
	case budget.BasisDerived:
		return "derived from defaults, not measured"
	}
	return "set by the cluster's operators"
}

// proxyNote says what the mesh proxy adds to the budget and why, in lines.
// Before injection, when the proxy's form is not known yet, it says what
// each form gets once injected (graceguard decides then).
func proxyNote(m *mutate.Report) []string {
	mr := m.Mesh
	if mr == nil {
		if len(m.Sidecars) > 0 {
			return []string{"what a sidecar's own preStop runs past the app (see sidecar below)"}
		}
		return []string{""}
	}
	who := string(mr.Mesh) + " proxy (to be injected)"
	if mr.Proxy != "" {
		who = mr.Proxy
		if mr.Native {
			who += ", native sidecar"
		}
	}
	if len(mr.Forms) > 0 {
		return append([]string{who + ": " + mr.ExitWhy}, mr.Forms...)
	}
	if mr.Native {
		return []string{who + ":", mr.ExitWhy}
	}
	wait := "waits " + budget.Format(mr.Wait)
	if !mr.WaitKnown {
		wait = "waits at least " + budget.Format(mr.Wait)
	}
	if mr.ProxyOnly {
		return []string{fmt.Sprintf("%s %s before its SIGTERM (the routing window; the Pod has no app),", who, wait), "then " + mr.ExitWhy}
	}
	return []string{fmt.Sprintf("%s %s before its SIGTERM (the app is done at %ds),", who, wait, mr.NeedWait), "then " + mr.ExitWhy}
}

// assumptions says what a verdict takes on trust, when that is what the
// times rest on: a hook of unknown length, or the cluster's default work
// term where the spec's own grace period says the work may be longer.
func assumptions(o object, g stopGroup) string {
	m := o.res.Mutation
	var out []string
	if !g.stop.Known {
		out = append(out, fmt.Sprintf("These times hold only if the preStop hook (%s, unknown length) ends within %s, as the budget assumes.",
			g.stop.Desc, budget.Format(m.Budget.Routing)))
	}
	need := m.Budget.Grace()
	if m.Sources[budget.Work] == mutate.FromCluster && m.Budget.Routing != budget.Infinity && need > 0 && m.GraceBefore >= 2*need && m.Grace == m.GraceBefore {
		out = append(out, fmt.Sprintf("The work term (%s) is the cluster default (%s), an assumption: the spec's grace of %ds suggests longer work; if so, set %s.",
			budget.Format(m.Budget.Work), flags.DefaultFlag(budget.Work), m.GraceBefore, mutate.KeyFor(budget.Work)))
	}
	return strings.Join(out, " ")
}

// timelineSidecars are the sidecars the chart draws: the regular
// containers graceguard.io/sidecars names, each waiting from deletion (a
// native sidecar is stopped after the app, with no wait of its own).
func timelineSidecars(m *mutate.Report) []budget.Sidecar {
	var out []budget.Sidecar
	for _, sc := range m.Sidecars {
		if !sc.Native && sc.Wait > 0 {
			out = append(out, budget.Sidecar{Name: sc.Name, Wait: sc.Wait})
		}
	}
	return out
}

func sidecarValue(sc mutate.SidecarReport) string {
	switch {
	case sc.Native || sc.Wait == 0:
		return "-"
	case !sc.WaitKnown:
		return "?"
	}
	return budget.Format(sc.Wait)
}

// sidecarNote says how a sidecar stops and who wrote its wait.
func sidecarNote(sc mutate.SidecarReport, applied bool) string {
	who := sc.Name + " (" + sc.Key + "): "
	switch {
	case sc.Native || sc.Wait == 0:
		return who + sc.Why
	case sc.Added && applied:
		return who + fmt.Sprintf("graceguard adds %s; SIGTERM after the app is done at %ds", sc.Desc, sc.NeedWait)
	case sc.Added:
		return who + fmt.Sprintf("enforce would add %s; SIGTERM after the app is done at %ds", sc.Desc, sc.NeedWait)
	case !sc.WaitKnown:
		return who + fmt.Sprintf("its own preStop (%s), unknown length; it must outlast the app's %ds", sc.Desc, sc.NeedWait)
	case sc.Wait < time.Duration(sc.NeedWait)*time.Second:
		return who + fmt.Sprintf("its own preStop (%s) ends before the app is done at %ds (see denied)", sc.Desc, sc.NeedWait)
	}
	return who + fmt.Sprintf("its own preStop (%s), already in the spec; SIGTERM after the app is done at %ds", sc.Desc, sc.NeedWait)
}
