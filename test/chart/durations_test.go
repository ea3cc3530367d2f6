package chart_test

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/release/v1"

	"github.com/graceguard/graceguard/pkg/budget"
)

// durationInputs are the texts both the chart and the webhook read as
// durations: the forms people write, and the edges of Go's grammar.
var durationInputs = []string{
	"0", "30", "3600", "3601", "30s", "1m30s", "1500ms", "1.5h", "2h", "1h0m0s", " 30s ", "0s", "-0", "-0s",
	"+5s", ".5s", "5.s", "1.5s", "100us", "100µs", "100μs", "10ns", "3599.999s",
	"-5s", "-5", "5", "1e9", "NaN", "30 s", "30S", "", "s", "1h1m1s1ms1us1ns", "٣٠s",
	"9223372036854775807s", "99999999999999999999", "1d", "5m0s", "0.0001s",
}

// The chart reads durations (values checked at install, before the webhook
// ever starts) as budget.ParseDuration does: the same texts accepted, with
// the same number of seconds. A template cannot call Go, so the chart
// parses them itself (graceguard.seconds); this holds it to the webhook's
// parser on one table of inputs.
func TestChartReadsDurationsAsTheWebhookDoes(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range durationInputs {
		t.Run(strconv.Quote(in), func(t *testing.T) {
			want, werr := budget.ParseDuration(in)
			got, gerr := chartSeconds(ch, in)
			switch {
			case werr != nil && gerr == nil:
				t.Errorf("the webhook refuses it (%v), the chart reads %gs", werr, got)
			case werr == nil && gerr != nil:
				t.Errorf("the webhook reads %s, the chart refuses it: %v", want, gerr)
			case werr == nil && math.Abs(got-want.Seconds()) > 1e-6:
				t.Errorf("the chart reads %gs, the webhook %s", got, want)
			}
			// Accepted values also pass the schema and the range check the
			// chart applies to the budget defaults.
			_, rerr := renderChart(map[string]any{"config": map[string]any{"defaultMaxWork": in,
				"defaultRoutingDelay": 0, "defaultCleanup": 0, "defaultSafetyMargin": 0, "maxGracePeriod": "1h"}}, renderOpts{})
			if (werr == nil) != (rerr == nil) {
				t.Errorf("config.defaultMaxWork=%q: the webhook's reading %v, the chart's install %v", in, werr, rerr)
			}
		})
	}
}

// chartSeconds is what the chart's graceguard.seconds makes of in, through
// a template added to the chart for this test.
func chartSeconds(ch *chartv2.Chart, in string) (float64, error) {
	c := *ch
	c.Templates = append(append([]*common.File{}, ch.Templates...), &common.File{
		Name: "templates/zz-seconds-test.yaml",
		Data: []byte(`{{- if .Values.secondsTest }}# seconds={{ include "graceguard.checkRange" (list "t" .Values.secondsTest.in 0 3600 "0 to 1h") }}{{ include "graceguard.seconds" (list "t" .Values.secondsTest.in) }}{{ end }}`),
	})
	inst := action.NewInstall(action.NewConfiguration())
	inst.DryRunStrategy = action.DryRunClient
	inst.Replace = true
	inst.ReleaseName, inst.Namespace = releaseName, namespace
	inst.KubeVersion, _ = common.ParseKubeVersion("v1.35.0")
	// The schema is the chart's first reader; the test template reads the
	// value where no schema applies, so check it through defaultMaxWork.
	vals := map[string]any{"secondsTest": map[string]any{"in": in}}
	c.Schema = nil
	r, err := inst.Run(&c, vals)
	if err != nil {
		return 0, err
	}
	rel := r.(*v1.Release)
	i := strings.Index(rel.Manifest, "# seconds=")
	if i < 0 {
		return 0, fmt.Errorf("no seconds in the manifest")
	}
	line := strings.SplitN(rel.Manifest[i+len("# seconds="):], "\n", 2)[0]
	return strconv.ParseFloat(strings.TrimSpace(line), 64)
}
