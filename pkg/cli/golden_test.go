package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Golden files hold what a person sees for one invocation: the command,
// the exit code, stdout and stderr. Regenerate them with
//
//	UPDATE_GOLDEN=1 go test ./pkg/cli/...
//
// and read the diff: it is the user-visible change.
func TestGolden(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		stdin string // a file in testdata fed to -f -
	}{
		{"mutate-multi-doc", []string{"mutate", "-f", "testdata/mutate-multi.yaml"}, ""},
		{"mutate-rollouts", []string{"mutate", "-f", "testdata/rollouts.yaml"}, ""},
		{"check-rollouts", []string{"check", "-f", "testdata/rollouts.yaml"}, ""},
		{"mutate-list-json-stdin", []string{"mutate", "-f", "-", "-o", "json"}, "mutate-list.json"},
		{"mutate-two-files-warn", []string{"mutate", "-f", "testdata/check.yaml", "-f", "testdata/unknown-kind.yaml", "--mode", "warn"}, ""},
		{"check-denied", []string{"check", "-f", "testdata/check.yaml", "-f", "testdata/unknown-kind.yaml"}, ""},
		{"check-warn", []string{"check", "-f", "testdata/check.yaml", "--mode", "warn"}, ""},
		{"explain-default-budget", []string{"explain", "-f", "testdata/explain-default.yaml"}, ""},
		{"explain-raises-grace", []string{"explain", "-f", "testdata/explain-raise.yaml", "--namespace-annotations", "graceguard.io/safety-margin=5s"}, ""},
		{"explain-hook-cut", []string{"explain", "-f", "testdata/explain-cut.yaml", "--max-grace-period=1m"}, ""},
		{"explain-no-hook", []string{"explain", "-f", "testdata/explain-nohook.yaml"}, ""},
		{"explain-namespace-in-input", []string{"explain", "-f", "testdata/explain-namespace-in-input.yaml"}, ""},
		{"check-namespace-in-input", []string{"check", "-f", "testdata/explain-namespace-in-input.yaml"}, ""},
		{"check-namespace-defined-twice", []string{"check", "-f", "testdata/namespace-twice.yaml"}, ""},
		{"mutate-namespace-defined-twice", []string{"mutate", "-f", "testdata/namespace-twice.yaml"}, ""},
		{"check-namespace-defined-twice-json", []string{"check", "-f", "testdata/namespace-twice.yaml", "-o", "json", "--fail-on", "warning"}, ""},
		{"explain-opted-out-and-skipped", []string{"explain", "-f", "testdata/check.yaml", "--mode", "warn"}, ""},
		// Manifests shaped like real ones (pkg/manifest/testdata).
		{"check-ingress-nginx", []string{"check", "-f", "../manifest/testdata/ingress-nginx.yaml"}, ""},
		{"check-ingress-nginx-assume-opted-in", []string{"check", "-f", "../manifest/testdata/ingress-nginx.yaml", "--assume-opted-in", "--mode", "warn",
			"--namespace-annotations", "graceguard.io/max-work=5m"}, ""},
		{"explain-ingress-nginx-long-grace", []string{"explain", "-f", "../manifest/testdata/ingress-nginx.yaml", "--assume-opted-in"}, ""},
		{"explain-injected-sidecar", []string{"explain", "-f", "../manifest/testdata/istio-injected.yaml"}, ""},
		{"explain-sleep-infinity", []string{"explain", "-f", "../mutate/testdata/pod-sleep-infinity.yaml"}, ""},
		{"explain-stop-signal", []string{"explain", "-f", "testdata/explain-stop-signal.yaml"}, ""},
		{"check-patches-skipped", []string{"check", "-f", "../manifest/testdata/kustomize-patch.yaml", "-f", "../manifest/testdata/cronjob-patch.yaml"}, ""},
		{"check-legacy-versions-and-list", []string{"check", "-f", "../manifest/testdata/legacy-versions.yaml", "-f", "../manifest/testdata/list.yaml"}, ""},
		{"check-every-problem-at-once", []string{"check", "-f", "../mutate/testdata/pod-every-problem-at-once.yaml", "-f", "../mutate/testdata/pod-probe-port-undeclared.yaml"}, ""},
		{"mutate-json-stays-json", []string{"mutate", "-f", "testdata/json-pod.json"}, ""},
		{"mutate-header-and-end-marker", []string{"mutate", "-f", "testdata/header-and-end-marker.yaml"}, ""},
		{"check-header-is-not-a-document", []string{"check", "-f", "testdata/header-and-end-marker.yaml", "-o", "json"}, ""},
		{"check-helm-template", []string{"check", "-f", "testdata/bad-helm.yaml"}, ""},
		{"mutate-empty-flow-mappings", []string{"mutate", "-f", "testdata/empty-flow-mappings.yaml"}, ""},
		{"mutate-bookinfo", []string{"mutate", "-f", "../manifest/testdata/bookinfo.yaml"}, ""},
		{"mutate-comments-keep-their-block", []string{"mutate", "-f", "../manifest/testdata/trailing-comments.yaml"}, ""},
		{"check-json", []string{"check", "-f", "testdata/check.yaml", "-f", "../manifest/testdata/kustomize-patch.yaml", "-o", "json"}, ""},
		{"check-sarif", []string{"check", "-f", "testdata/check.yaml", "-f", "../mutate/testdata/pod-every-problem-at-once.yaml", "-o", "sarif", "--fail-on", "warning"}, ""},
		{"explain-routing-profiles", []string{"explain", "-f", "testdata/explain-profile.yaml"}, ""},
		{"explain-operator-profile", []string{"explain", "-f", "testdata/explain-default.yaml", "--routing-profile", "corp-lb=45s,grace-floor=90s", "--default-routing-profile", "corp-lb"}, ""},
		{"explain-istio-classic", []string{"explain", "-f", "../mutate/testdata/pod-istio-drain-30s-injected.yaml"}, ""},
		{"explain-linkerd-before-injection", []string{"explain", "-f", "testdata/explain-linkerd.yaml"}, ""},
		{"explain-istio-before-injection", []string{"explain", "-f", "testdata/explain-istio.yaml"}, ""},
		{"explain-istio-native", []string{"explain", "-f", "../mutate/testdata/pod-istio-native-injected.yaml"}, ""},
		{"explain-linkerd-injected", []string{"explain", "-f", "../mutate/testdata/pod-linkerd-longer-wait-injected.yaml"}, ""},
		{"explain-linkerd-native-default-injected", []string{"explain", "-f", "../mutate/testdata/pod-linkerd-native-default-injected.yaml"}, ""},
		{"explain-platform-ceilings", []string{"explain", "-f", "testdata/explain-raise.yaml", "--karpenter-termination-grace-period=40s",
			"--node-shutdown-grace-period=30s", "--node-shutdown-grace-period-critical-pods=15s"}, ""},
		{"check-distroless-exec-hook", []string{"check", "-f", "testdata/check-distroless-hook.yaml"}, ""},
		{"check-grace-zero-raised", []string{"check", "-f", "testdata/grace-zero.yaml"}, ""},
		{"explain-grace-zero-raised", []string{"explain", "-f", "testdata/grace-zero.yaml"}, ""},
		{"check-windows-prestop-exec", []string{"check", "-f", "testdata/windows-prestop-exec.yaml", "--prestop-handler", "exec"}, ""},
		{"mutate-windows-prestop-exec", []string{"mutate", "-f", "testdata/windows-prestop-exec.yaml", "--prestop-handler", "exec"}, ""},
		{"explain-assumptions", []string{"explain", "-f", "testdata/explain-assumptions.yaml", "--max-grace-period=10m"}, ""},
		{"explain-waypoint-and-ambient-app", []string{"explain", "-f", "testdata/explain-waypoint.yaml"}, ""},
		{"explain-sidecars", []string{"explain", "-f", "testdata/explain-sidecars.yaml"}, ""},
		{"explain-knative", []string{"explain", "-f", "../mutate/testdata/pod-knative-revision.yaml"}, ""},
		{"explain-sidecar-own-hook-longer", []string{"explain", "-f", "../mutate/testdata/pod-sidecar-own-hook-longer.yaml"}, ""},
		{"explain-sidecar-own-hook-short", []string{"explain", "-f", "../mutate/testdata/pod-sidecar-own-hook-short.yaml"}, ""},
		{"measure-routing-dry-run", []string{"measure-routing", "--image", "registry.example/graceguard:v1.4.0", "--url", "http://probe.shop.example/", "--dry-run", "--hold=2m", "--replicas=4"}, ""},
		{"measure-routing-dry-run-address", []string{"measure-routing", "--image", "registry.example/graceguard:v1.4.0", "--url", "http://203.0.113.7/", "--dry-run"}, ""},
		{"measure-routing-dry-run-ingress", []string{"measure-routing", "--image", "registry.example/graceguard:v1.4.0", "--url", "http://203.0.113.7/", "--host", "probe.shop.example", "--ingress-class", "nginx", "--dry-run"}, ""},
		{"measure-routing-dry-run-in-cluster", []string{"measure-routing", "--image", "registry.example/graceguard:v1.4.0", "--in-cluster", "--dry-run", "--deletions=20", "--timeout=30m"}, ""},
		{"measure-routing-bad-flags", []string{"measure-routing", "--url", "probe.shop.example", "--rate=5000", "--deletions=0", "--hold=90.5s", "--quiet=1m"}, ""},
		{"check-ceiling-deny", []string{"check", "-f", "testdata/explain-raise.yaml", "--karpenter-termination-grace-period=40s", "--karpenter-ceiling-action=deny"}, ""},
	}
	update := os.Getenv("UPDATE_GOLDEN") != ""
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdin := ""
			if tt.stdin != "" {
				b, err := os.ReadFile(filepath.Join("testdata", tt.stdin))
				if err != nil {
					t.Fatal(err)
				}
				stdin = string(b)
			}
			code, stdout, stderr := run(t, stdin, tt.args...)
			cmd := "kubectl graceguard " + strings.Join(tt.args, " ")
			if tt.stdin != "" {
				cmd += " < testdata/" + tt.stdin
			}
			got := fmt.Sprintf("$ %s\nexit %d\n--- stdout\n%s--- stderr\n%s", cmd, code, stdout, stderr)

			path := filepath.Join("testdata", "golden", tt.name+".golden")
			if update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with UPDATE_GOLDEN=1 to create it)", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s (UPDATE_GOLDEN=1 regenerates it):\n%s", path, diff(string(want), got))
			}
		})
	}
}

// diff shows the first differing line with some context.
func diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, wl, gl)
		}
	}
	return "(no line differs)"
}
