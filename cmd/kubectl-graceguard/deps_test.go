package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The plugin decides offline what the webhook decides (pkg/mutate); it
// runs no server. It must not link the webhook server, its certificates,
// the observer's controller or the webhook binary's flags, which is what a
// package importing "just a type" from one of them would bring in.
func TestPluginLinksNoServer(t *testing.T) {
	forbidden := []string{
		"github.com/graceguard/graceguard/pkg/server",
		"github.com/graceguard/graceguard/pkg/certs",
		"github.com/graceguard/graceguard/pkg/observer",
		"github.com/graceguard/graceguard/pkg/webhook",
		"github.com/graceguard/graceguard/pkg/config",
		"sigs.k8s.io/controller-runtime/pkg/webhook",
		"github.com/open-policy-agent/cert-controller",
	}
	// go test puts its own toolchain's bin first on PATH.
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 || deps[len(deps)-1] != "github.com/graceguard/graceguard/cmd/kubectl-graceguard" {
		t.Fatalf("go list -deps printed %d packages ending in %q: not the plugin's graph", len(deps), deps[len(deps)-1])
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("the plugin links %s (of %s)", dep, f)
			}
		}
	}
	t.Logf("the plugin links %d packages", len(deps))
}
