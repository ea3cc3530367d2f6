package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/graceguard/graceguard/internal/version"
	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/routingprobe"
)

func TestRun(t *testing.T) {
	t.Setenv("POD_NAME", "")
	t.Setenv("POD_NAMESPACE", "")
	missing := filepath.Join(t.TempDir(), "no-kubeconfig")
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		// wantOut are substrings of what is printed.
		wantOut []string
	}{
		{
			name:     "a port out of range exits 2 naming the flag and the accepted values",
			args:     []string{"--port=0"},
			wantCode: exitUsage,
			wantOut:  []string{"invalid flags:", "--port=0: want 1 to 65535"},
		},
		{
			name:     "every invalid flag is reported at once",
			args:     []string{"--port=70000", "--drain-timeout=0s", "--shutdown-delay=6m"},
			wantCode: exitUsage,
			wantOut:  []string{"--port=70000: want 1 to 65535", "--drain-timeout=0s: want 1s to 5m", "--shutdown-delay=6m: want 0s to 5m"},
		},
		{
			name:     "a value outside a flag's choices exits 2 naming the choices",
			args:     []string{"--default-mode=strict"},
			wantCode: exitUsage,
			wantOut:  []string{`invalid argument "strict" for "--default-mode" flag: "strict" is not one of enforce, warn`},
		},
		{
			name:     "a routing profile that does not parse exits 2 naming the value and the accepted form",
			args:     []string{"--routing-profile=corp-lb=45sec"},
			wantCode: exitUsage,
			wantOut:  []string{`invalid argument "corp-lb=45sec" for "--routing-profile" flag: "corp-lb=45sec": routing delay "45sec" is not a duration; want a Go duration`},
		},
		{
			name:     "a routing profile given twice exits 2",
			args:     []string{"--routing-profile=corp-lb=45s", "--routing-profile=corp-lb=50s"},
			wantCode: exitUsage,
			wantOut:  []string{`routing profile "corp-lb" is given twice`},
		},
		{
			name:     "an unknown default routing profile exits 2 naming the profiles there are",
			args:     []string{"--routing-profile=corp-lb=45s", "--default-routing-profile=corp"},
			wantCode: exitUsage,
			wantOut:  []string{"--default-routing-profile=corp: no such profile; want one of " + strings.Join(budget.ProfileNames(budget.BuiltinProfiles()), ", ") + ", corp-lb"},
		},
		{
			name:     "a graceful node shutdown that leaves regular Pods nothing exits 2",
			args:     []string{"--node-shutdown-grace-period-critical-pods=30s", "--node-shutdown-grace-period=20s"},
			wantCode: exitUsage,
			wantOut:  []string{"--node-shutdown-grace-period-critical-pods=30s must be shorter than --node-shutdown-grace-period=20s"},
		},
		{
			name:     "a ceiling action other than warn or deny exits 2",
			args:     []string{"--karpenter-ceiling-action=block"},
			wantCode: exitUsage,
			wantOut:  []string{`invalid argument "block" for "--karpenter-ceiling-action" flag: "block" is not one of warn, deny`},
		},
		{
			name:     "review limits out of range exit 2 naming each flag",
			args:     []string{"--webhook-timeout=31s", "--max-concurrent-reviews=10001"},
			wantCode: exitUsage,
			wantOut:  []string{"--webhook-timeout=31s: want 1s to 30s", "--max-concurrent-reviews=10001: want 0 to 10000"},
		},
		{
			name:     "an in-flight budget smaller than the largest review exits 2",
			args:     []string{"--max-inflight-review-bytes=1Mi"},
			wantCode: exitUsage,
			wantOut:  []string{"--max-inflight-review-bytes=1Mi: want at least 7340032 (7Mi), the largest review"},
		},
		{
			name:     "a byte count that is not one exits 2 saying what is accepted",
			args:     []string{"--max-inflight-review-bytes=lots"},
			wantCode: exitUsage,
			wantOut:  []string{`"lots" is not a byte count: want a quantity like 16Mi or 16777216`},
		},
		{
			name:     "self-managed certificates with names the API server refuses exit 2 at validation, not 1 once running",
			args:     []string{"--cert-mode=self-managed", "--namespace=graceguard-system", "--service-name=Bad_Name", "--cert-dir=relative/dir"},
			wantCode: exitUsage,
			wantOut:  []string{"invalid flags:", "--service-name=Bad_Name: a DNS-1035 label", "--cert-dir=relative/dir: must be an absolute path"},
		},
		{
			name:     "observe: an invalid flag exits 2 naming it",
			args:     []string{"observe", "--namespace=x", "--min-samples=0"},
			wantCode: exitUsage,
			wantOut:  []string{"invalid flags:", "--min-samples=0: want 1 to 50"},
		},
		{
			name:     "observe: an unknown flag exits 2 pointing at observe's help",
			args:     []string{"observe", "--port=1"},
			wantCode: exitUsage,
			wantOut:  []string{"unknown flag: --port", "run graceguard-webhook observe --help"},
		},
		{
			name:     "observe: valid flags without a reachable API server exit 1 with the reason logged",
			args:     []string{"observe", "--namespace=x", "--kubeconfig=" + missing},
			wantCode: exitError,
			wantOut:  []string{`"starting graceguard observer"`, "observer stopped", "connecting to the API server"},
		},
		{
			name:     "selftest: an unknown check exits 2 naming the checks",
			args:     []string{"selftest", "--check=dns"},
			wantCode: exitUsage,
			wantOut:  []string{`invalid argument "dns" for "--check" flag: "dns" is not one of service, mutation`},
		},
		{
			name:     "selftest: the mutation check without its namespace or image exits 2 naming both",
			args:     []string{"selftest", "--check=mutation"},
			wantCode: exitUsage,
			wantOut:  []string{"invalid flags:", "--test-namespace: required", "--image: required"},
		},
		{
			name:     "selftest: valid flags without a reachable API server exit 1 with the reason as a sentence",
			args:     []string{"selftest", "--check=mutation", "--test-namespace=gg-test", "--image=registry.local/graceguard:v1", "--kubeconfig=" + missing},
			wantCode: exitError,
			wantOut:  []string{"graceguard-webhook selftest failed: connecting to the API server"},
		},
		{
			name:     "unregister: without the release exits 2",
			args:     []string{"unregister", "--namespace=gg", "--mutating-webhook-configuration=gg", "--validating-webhook-configuration=gg"},
			wantCode: exitUsage,
			wantOut:  []string{"invalid flags:", "--release: required: the Helm release that owns the webhook configurations"},
		},
		{
			name:     "unregister: --help lists its flags and exits 0",
			args:     []string{"unregister", "--help"},
			wantCode: exitOK,
			wantOut:  []string{"--release", "--mutating-webhook-configuration", "--validating-webhook-configuration", "--timeout", "--kubeconfig"},
		},
		{
			name:     "probe: a listen address without a port exits 2 naming the flag and the accepted form",
			args:     []string{"probe", "--listen=8080"},
			wantCode: exitUsage,
			wantOut:  []string{"invalid flags:", "--listen=8080: address 8080: missing port in address; want host:port or :port"},
		},
		{
			name:     "probe: without $POD_NAME exits 1 saying where to set it",
			args:     []string{"probe", "--listen=127.0.0.1:0"},
			wantCode: exitError,
			wantOut:  []string{"routing probe stopped", "no Pod name: set POD_NAME"},
		},
		{
			name:     "measure: without a namespace and with a rate out of range exits 2 naming both",
			args:     []string{"measure", "--url=http://probe/", "--rate=0"},
			wantCode: exitUsage,
			wantOut:  []string{"invalid flags:", "--namespace: required: the probe's namespace (or set $POD_NAMESPACE)", "--rate=0: want 1 to 1000 requests per second"},
		},
		{
			name:     "measure: without --url exits 2",
			args:     []string{"measure", "--namespace=gm"},
			wantCode: exitUsage,
			wantOut:  []string{"--url: required: the probe's Service URL"},
		},
		{
			name:     "measure: valid flags without a reachable API server exit 1 with the reason as a sentence",
			args:     []string{"measure", "--url=http://probe/", "--namespace=gm", "--kubeconfig=" + missing},
			wantCode: exitError,
			wantOut:  []string{"graceguard-webhook measure failed: connecting to the API server"},
		},
		{
			name:     "an unknown flag exits 2",
			args:     []string{"--no-such-flag"},
			wantCode: exitUsage,
			wantOut:  []string{"unknown flag: --no-such-flag"},
		},
		{
			name:     "a stray argument exits 2",
			args:     []string{"serve"},
			wantCode: exitUsage,
			wantOut:  []string{"unexpected arguments: [serve]"},
		},
		{
			name:     "--help lists the server flags, the logging flags and --kubeconfig, and exits 0",
			args:     []string{"--help"},
			wantCode: exitOK,
			wantOut: []string{"--shutdown-delay", "--drain-timeout", "--cert-dir", "--zap-log-level", "--zap-devel", "--kubeconfig",
				"--routing-profile", "--default-routing-profile", "--karpenter-termination-grace-period", "--node-shutdown-grace-period"},
		},
		{
			name:     "--version prints the version, the Go toolchain and the platform, and exits 0",
			args:     []string{"--version"},
			wantCode: exitOK,
			wantOut:  []string{"graceguard-webhook " + version.Get() + " (go1.", runtime.GOOS + "/" + runtime.GOARCH},
		},
		{
			name:     "valid flags without a reachable API server exit 1 with the reason logged",
			args:     []string{"--kubeconfig=" + missing, "--zap-devel=false"},
			wantCode: exitError,
			wantOut:  []string{`"starting graceguard webhook"`, `"version":"` + version.Get() + `"`, "webhook stopped", "connecting to the API server"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			code := run(context.Background(), tc.args, &out, &out)
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d; output:\n%s", code, tc.wantCode, out.String())
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// The probe answers as its Pod, calls no API server, and stops when its
// context ends (SIGTERM, at the end of its preStop sleep).
func TestProbeServesItsPodName(t *testing.T) {
	t.Setenv("POD_NAME", "probe-7d9f-x2")
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "no-kubeconfig"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(t.Context())
	var out bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"probe", "--listen=" + addr}, io.Discard, &out) }()
	var body string
	for i := 0; ; i++ {
		resp, err := http.Get("http://" + addr + "/any/path")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			break
		}
		if i == 100 {
			t.Fatalf("the probe never answered: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if pod, ok := routingprobe.ParsePod([]byte(body)); !ok || pod != "probe-7d9f-x2" {
		t.Errorf("answered %q, want its Pod's name", body)
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("exit %d after its context ended, want 0:\n%s", code, out.String())
		}
	case <-time.After(probeDrain + time.Second):
		t.Fatal("the probe did not stop when its context ended")
	}
}

func TestMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		env       map[string]string
		want      int64
		wantLimit bool
	}{
		{"90% of the container's limit", map[string]string{"GRACEGUARD_MEMORY_LIMIT": "134217728"}, 120795948, true},
		{"GOMEMLIMIT wins", map[string]string{"GRACEGUARD_MEMORY_LIMIT": "134217728", "GOMEMLIMIT": "100MiB"}, 0, false},
		{"no limit", map[string]string{}, 0, false},
		{"not a number", map[string]string{"GRACEGUARD_MEMORY_LIMIT": "128Mi"}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := memoryLimit(func(k string) string { return tc.env[k] })
			if got != tc.want || ok != tc.wantLimit {
				t.Errorf("memoryLimit = %d, %v; want %d, %v", got, ok, tc.want, tc.wantLimit)
			}
		})
	}
}
