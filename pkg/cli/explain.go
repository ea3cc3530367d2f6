package cli

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/graceguard/graceguard/pkg/budget"
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
			objs, err := in.load(cmd.InOrStdin(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			p := &printer{w: cmd.OutOrStdout()}
			for i, o := range objs {
				if i > 0 {
					p.line("")
				}
				explain(p, o)
			}
			return p.err
		},
	}
	in = bindInputFlags(cmd)
	return cmd
}

// proseWidth keeps explain's sentences, indented, within 100 columns.
const proseWidth = 96

func explain(p *printer, o object) {
	if o.res == nil {
		p.line("%s: skipped: %s", o.ref(), unsupported(o))
		return
	}
	m, v := o.res.Mutation, o.res.Validation
	if m.Skip != "" && !m.OptedOut {
		p.line("%s: skipped: %s", o.ref(), skipReason(m.Skip, o.ns))
		return
	}
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
		tl := budget.NewTimeline(m.Budget, chartedHook(m), m.Grace)
		if m.Mode == mutate.ModeWarn {
			p.line("  timeline of deletion, as enforce mode would leave it")
		} else {
			p.line("  timeline of deletion")
		}
		for _, l := range chart(tl, m.Ceilings) {
			p.line("    %s", l)
		}
		for _, l := range events(tl) {
			p.line("    %s", l)
		}
		for _, l := range wrap(verdict(tl), proseWidth) {
			p.line("  %s", l)
		}
	}

	// The advice, and what validation adds; in warn mode the changes
	// enforce would make are listed above already.
	advice := make([]string, len(m.Warnings))
	for i, f := range m.Warnings {
		advice[i] = f.Message()
	}
	if ws := once(advice, v.AdmissionWarnings()); len(ws) > 0 {
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
	}
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
	note := fmt.Sprintf("of grace %ds: fits", m.Grace)
	switch {
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
		need = max(need, m.GraceFloor)
		fit.Need = need
		note = fmt.Sprintf("of grace %ds: fits", m.Grace)
		switch {
		case !fit.Fits():
			note = fmt.Sprintf("of grace %ds: DOES NOT FIT, %ds short", m.Grace, need-m.Grace)
		case m.Grace > need:
			note += fmt.Sprintf(", %ds to spare", m.Grace-need)
		}
	}
	lines = append(lines, line{"needs", fmt.Sprintf("%ds", need), note})
	lines = append(lines, line{"preStop", hookValue(m), hookNote(m)})
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
		// The flags are named after the annotation keys (config.BindOptions).
		return "cluster default --default-" + strings.TrimPrefix(key, "graceguard.io/")
	case mutate.FromHook:
		return "the preStop hook, longer than the routing delay"
	}
	if name, ok := o.res.Mutation.Sources[t].ProfileName(); ok && o.res.Mutation.Profile != nil {
		pr := o.res.Mutation.Profile
		where := "Pod annotation " + mutate.AnnotationRoutingProfile
		switch pr.From {
		case mutate.FromNamespace:
			where = "namespace " + o.ns + " annotation " + mutate.AnnotationRoutingProfile
		case mutate.FromCluster:
			where = "cluster default --default-routing-profile"
		case mutate.FromPod:
			if o.template() {
				where = "Pod template annotation " + mutate.AnnotationRoutingProfile
			}
		}
		return fmt.Sprintf("routing profile %s (%s)", name, where)
	}
	return ""
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
func proxyNote(m *mutate.Report) []string {
	mr := m.Mesh
	if mr == nil {
		return []string{""}
	}
	who := string(mr.Mesh) + " proxy (to be injected)"
	if mr.Proxy != "" {
		who = mr.Proxy
		if mr.Native {
			who += ", native sidecar"
		}
	}
	if mr.Native || (mr.Proxy == "" && mr.Mesh == mutate.MeshIstio) {
		return []string{who + ":", mr.ExitWhy}
	}
	wait := "waits " + budget.Format(mr.Wait)
	if !mr.WaitKnown {
		wait = "waits at least " + budget.Format(mr.Wait)
	}
	return []string{fmt.Sprintf("%s %s before its SIGTERM (the app is done at %ds),", who, wait, mr.NeedWait), "then " + mr.ExitWhy}
}

// unknownHook reports whether a treated container has a preStop hook whose
// length graceguard cannot tell (an HTTP call, a script); Report.Hook then
// holds only its lower bound and the budget counts the routing term for it.
func unknownHook(m *mutate.Report) bool {
	return slices.ContainsFunc(m.Warnings, func(f mutate.Finding) bool { return f.Reason == mutate.WarnHookUnknownLength })
}

// chartedHook is the hook length the chart draws: what the budget counts.
func chartedHook(m *mutate.Report) time.Duration {
	if unknownHook(m) {
		return m.Budget.Routing
	}
	return m.Hook
}

func hookValue(m *mutate.Report) string {
	switch {
	case unknownHook(m):
		return "?"
	case m.Hook == 0:
		return "none"
	}
	return budget.Format(m.Hook)
}

func hookNote(m *mutate.Report) string {
	if unknownHook(m) {
		return "unknown length (see warnings); budget and chart count " + budget.Format(m.Budget.Routing) + " for it"
	}
	if m.Hook == 0 {
		return "the app must keep serving for the routing time after SIGTERM"
	}
	i := slices.IndexFunc(m.Changes, func(c mutate.Change) bool { return c.Reason == mutate.ChangePreStop })
	switch {
	case i < 0:
		return "already in the spec; SIGTERM waits for it"
	case m.Applied:
		return "graceguard adds " + m.Changes[i].Summary + "; SIGTERM waits for it"
	}
	return "enforce would add " + m.Changes[i].Summary + "; SIGTERM waits for it"
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
