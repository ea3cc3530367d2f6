package chart_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/graceguard/graceguard/pkg/budget"
	ggflags "github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/webhook"
)

// The schema's bounds of a value the chart passes to a flag are the flag's
// own (pkg/flags), so that `helm install` refuses exactly what the webhook
// would refuse at start. A test holds them rather than make generate
// writing them: the schema is hand-formatted JSON, and some bounds are the
// chart's own on purpose (ports from 1024, for a non-root container).
func TestSchemaBoundsAreTheFlags(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema any
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	secs := func(d time.Duration) *int64 { n := int64(d / time.Second); return &n }
	n := func(i int64) *int64 { return &i }
	for _, c := range []struct {
		pointer, flag string
		// min and max are the flag's; nil where the schema's is the
		// chart's own.
		min, max *int64
	}{
		{"/properties/config/properties/maxConcurrentReviews", ggflags.MaxConcurrentReviews.Name, n(ggflags.MaxConcurrentReviews.Min), n(ggflags.MaxConcurrentReviews.Max)},
		{"/properties/config/properties/maxConnections", ggflags.MaxConnections.Name, n(ggflags.MaxConnections.Min), n(ggflags.MaxConnections.Max)},
		{"/properties/config/properties/maxPendingConnections", ggflags.MaxPendingConnections.Name, n(ggflags.MaxPendingConnections.Min), n(ggflags.MaxPendingConnections.Max)},
		{"/properties/config/properties/maxInflightReviewBytes", ggflags.MaxInflightReviewBytes, n(webhook.MaxReviewBytes), nil},
		{"/properties/observer/properties/minSamples", ggflags.MinSamples.Name, n(ggflags.MinSamples.Min), n(ggflags.MinSamples.Max)},
		{"/properties/observer/properties/flushWritesPerSecond", ggflags.FlushWritesPerSecond.Name, n(ggflags.FlushWritesPerSecond.Min), n(ggflags.FlushWritesPerSecond.Max)},
		{"/properties/reports/properties/writesPerSecond", ggflags.ReportsWritesPerSecond.Name, n(ggflags.ReportsWritesPerSecond.Min), n(ggflags.ReportsWritesPerSecond.Max)},
		{"/properties/reports/properties/maxResults", ggflags.ReportsMaxResults.Name, n(ggflags.ReportsMaxResults.Min), n(ggflags.ReportsMaxResults.Max)},
		{"/properties/reports/properties/maxMessageLength", ggflags.ReportsMaxMessageLength.Name, n(ggflags.ReportsMaxMessageLength.Min), n(ggflags.ReportsMaxMessageLength.Max)},
		{"/definitions/webhook/properties/timeoutSeconds", ggflags.WebhookTimeout.Name, secs(ggflags.WebhookTimeout.Min), secs(ggflags.WebhookTimeout.Max)},
		{"/properties/ports/properties/webhook", ggflags.Port.Name, nil, n(ggflags.Port.Max)},
		// Whole seconds: the widest a duration flag reads; each value's
		// own range is checked at render time (graceguard.generatedRanges).
		{"/definitions/duration/anyOf/0", "a duration flag", n(0), secs(budget.MaxTerm)},
		{"/definitions/ceilingDuration/anyOf/0", "a ceiling flag", n(0), secs(ggflags.MaxCeiling)},
	} {
		node, ok := at(schema, c.pointer).(map[string]any)
		if !ok {
			t.Errorf("values.schema.json has no %s (the bounds of --%s)", c.pointer, c.flag)
			continue
		}
		for _, bound := range []struct {
			key  string
			want *int64
		}{{"minimum", c.min}, {"maximum", c.max}} {
			if bound.want == nil {
				continue
			}
			if got, ok := node[bound.key].(float64); !ok || got != float64(*bound.want) {
				t.Errorf("values.schema.json %s: %s is %v, want %d as --%s accepts", c.pointer, bound.key, node[bound.key], *bound.want, c.flag)
			}
		}
	}
}

// at is the node a JSON pointer (without #) names in a decoded document,
// or nil.
func at(doc any, pointer string) any {
	for _, key := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		switch v := doc.(type) {
		case map[string]any:
			doc = v[key]
		case []any:
			i, err := strconv.Atoi(key)
			if err != nil || i < 0 || i >= len(v) {
				return nil
			}
			doc = v[i]
		default:
			return nil
		}
	}
	return doc
}
