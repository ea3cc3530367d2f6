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
		// The chart's native floor refuses it inside the API server, in
		// graceguard's words.
		`Error from server (Invalid): deployments.apps "legacy-gateway" is forbidden: ValidatingAdmissionPolicy 'graceguard-floor' with binding 'graceguard-floor' denied request: ` +
			`spec.template.spec.containers[0].lifecycle.preStop: Invalid value: "exec sh -c sleep 40": must be shorter than terminationGracePeriodSeconds (30s)`,
		"== cleaning up",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("demo output lacks %q\n--- output:\n%s", want, got)
		}
	}
}
