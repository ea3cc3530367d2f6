package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// The demo is the README's first command: it must show the injection, the
// timeline and the denial, and stop everything it started.
func TestDemoShowsInjectionTimelineAndDenial(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out, "../../examples", false); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"metadata.annotations[graceguard.io/budget]: routing=8s work=30s cleanup=2s margin=5s grace=45s",
		"spec.terminationGracePeriodSeconds: 30 (default) -> 45",
		`spec.containers[api].lifecycle.preStop: {"sleep":{"seconds":8}}`,
		"t=45s  SIGKILL deadline",
		"deployment.apps/queue-consumer created",
		`Error from server (Invalid): admission webhook "validate-workloads.graceguard.io" denied the request: Deployment.apps "legacy-gateway" is invalid`,
		"== cleaning up",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("demo output lacks %q\n--- output:\n%s", want, got)
		}
	}
}
