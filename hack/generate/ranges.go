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
