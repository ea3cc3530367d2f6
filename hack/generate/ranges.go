package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/flags"
)

// chartRange is a chart value that the chart passes to a flag whose values
// are a range: the chart refuses a value out of it at render time, with
// the flag's own bounds, rather than render a Pod that exits 2 in a crash
// loop. The value's path is the chart's business, so it lives here and
// not in pkg/flags.
type chartRange struct {
	// value is the path under .Values: "shutdown.delay".
	value string
	r     flags.DurationRange
}

// chartRanges is each flag-backed duration value of the chart and its
// flag's range. Routing profiles' durations, keyed by profile name, have
// profileRangesTemplate.
func chartRanges() []chartRange {
	ceiling := func(name string) flags.DurationRange { return flags.DurationRange{Name: name, Max: flags.MaxCeiling} }
	return []chartRange{
		{"shutdown.delay", flags.ShutdownDelay},
		{"shutdown.drainTimeout", flags.DrainTimeout},
		{"config.defaultRoutingDelay", flags.TermDefaultRange(budget.Routing)},
		{"config.defaultMaxWork", flags.TermDefaultRange(budget.Work)},
		{"config.defaultCleanup", flags.TermDefaultRange(budget.Cleanup)},
		{"config.defaultSafetyMargin", flags.TermDefaultRange(budget.Margin)},
		{"config.maxGracePeriod", flags.MaxGrace},
		{"config.karpenterTerminationGracePeriod", ceiling(flags.KarpenterTerminationGracePeriod)},
		{"config.nodeShutdownGracePeriod", ceiling(flags.NodeShutdownGracePeriod)},
		{"config.nodeShutdownGracePeriodCriticalPods", ceiling(flags.NodeShutdownGracePeriodCriticalPods)},
		{"observer.flushInterval", flags.FlushInterval},
		{"reports.interval", flags.ReportsInterval},
		{"tests.timeout", flags.HookTimeout},
	}
}

// rangesTemplate is the define of _generated.tpl that checks each of
// chartRanges: bounds in seconds, and the range as the flag's error
// writes it ("want 0s to 5m"), followed by the flag.
func rangesTemplate() string {
	var b strings.Builder
	b.WriteString(`{{/*
graceguard.generatedRanges: fails unless each flag-backed duration value is
in its flag's range (pkg/flags). Usage: include "graceguard.generatedRanges" .
*/}}
{{- define "graceguard.generatedRanges" -}}
{{- $v := .Values -}}
`)
	for _, c := range chartRanges() {
		fmt.Fprintf(&b, "{{- include \"graceguard.checkRange\" (list %q $v.%s %s %s %q) -}}\n",
			c.value, c.value, seconds(c.r.Min.Seconds()), seconds(c.r.Max.Seconds()), rangeText(c.r))
	}
	b.WriteString("{{- end -}}\n")
	return b.String()
}

// rangeText is what follows "want" in the chart's error: the range as
// DurationRange.Check writes it, and the flag.
func rangeText(r flags.DurationRange) string {
	return fmt.Sprintf("%s to %s%s (--%s)", budget.Format(r.Min), budget.Format(r.Max), r.Why, r.Name)
}

func seconds(s float64) string { return strconv.FormatFloat(s, 'f', -1, 64) }

// profileRangesTemplate is the define of _generated.tpl that checks one
// routing profile of config.routingProfiles: both durations within
// budget.Profile.Validate's bounds.
func profileRangesTemplate() string {
	r := flags.DurationRange{Name: flags.RoutingProfile, Max: budget.MaxTerm}
	var b strings.Builder
	b.WriteString(`{{/*
graceguard.profileRanges: fails unless both durations of the routing profile
p named name are in budget.Profile.Validate's range. Usage:
include "graceguard.profileRanges" (list name p)
*/}}
{{- define "graceguard.profileRanges" -}}
{{- $name := index . 0 -}}
{{- $p := index . 1 -}}
`)
	for _, f := range []struct{ key, value string }{{"routingDelay", "$p.routingDelay"}, {"graceFloor", "(default 0 $p.graceFloor)"}} {
		fmt.Fprintf(&b, "{{- include \"graceguard.checkRange\" (list (printf \"config.routingProfiles.%%s.%s\" $name) %s %s %s %q) -}}\n",
			f.key, f.value, seconds(r.Min.Seconds()), seconds(r.Max.Seconds()), rangeText(r))
	}
	b.WriteString("{{- end -}}\n")
	return b.String()
}

// chartRelation is a rule between two flags (flags.Relations) on the chart
// values that feed them.
type chartRelation struct {
	rule            flags.Below
	lesser, greater string
	// durations: both values are durations ("30s"), not counts.
	durations bool
}

func chartRelations() []chartRelation {
	return []chartRelation{
		{flags.PendingBelowConnections, "config.maxPendingConnections", "config.maxConnections", false},
		{flags.CriticalBelowShutdown, "config.nodeShutdownGracePeriodCriticalPods", "config.nodeShutdownGracePeriod", true},
	}
}

// relationsTemplate is the define of _generated.tpl that checks each of
// flags.Relations on the chart's values. A rule without chart values stops
// make generate (a panic naming it: a programming error of this table).
func relationsTemplate() string {
	byRule := map[flags.Below]chartRelation{}
	for _, c := range chartRelations() {
		byRule[c.rule] = c
	}
	var b strings.Builder
	b.WriteString(`{{/*
graceguard.generatedRelations: fails unless each rule between flags
(flags.Relations) holds on the values that feed them. Usage:
include "graceguard.generatedRelations" .
*/}}
{{- define "graceguard.generatedRelations" -}}
{{- $v := .Values -}}
`)
	for i, r := range flags.Relations {
		c, ok := byRule[r]
		if !ok {
			panic(fmt.Sprintf("the rule --%s below --%s has no chart values in chartRelations (hack/generate/ranges.go)", r.Lesser, r.Greater))
		}
		tail := fmt.Sprintf("%s (--%s, --%s); lower it or raise %s", r.Why, r.Lesser, r.Greater, c.greater)
		if !c.durations {
			fmt.Fprintf(&b, "{{- if ge (int $v.%[1]s) (int $v.%[2]s) -}}\n"+
				"{{- fail (printf \"%[1]s: %%d must be fewer than %[2]s %%d%[3]s\" (int $v.%[1]s) (int $v.%[2]s)) -}}\n{{- end -}}\n",
				c.lesser, c.greater, tail)
			continue
		}
		cond := fmt.Sprintf("(ge $lesser%d $greater%d)", i, i)
		if r.Optional {
			cond = fmt.Sprintf("(and (gt $greater%d 0.0) %s)", i, cond)
		}
		fmt.Fprintf(&b, "{{- $lesser%[4]d := include \"graceguard.seconds\" (list %[1]q $v.%[1]s) | float64 -}}\n"+
			"{{- $greater%[4]d := include \"graceguard.seconds\" (list %[2]q $v.%[2]s) | float64 -}}\n"+
			"{{- if %[5]s -}}\n"+
			"{{- fail (printf \"%[1]s: %%v must be shorter than %[2]s %%v%[3]s\" $v.%[1]s $v.%[2]s) -}}\n{{- end -}}\n",
			c.lesser, c.greater, tail, i, cond)
	}
	b.WriteString("{{- end -}}\n")
	return b.String()
}
