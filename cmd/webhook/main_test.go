package main

import (
	"bytes"
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/graceguard/graceguard/internal/version"
)

func TestRun(t *testing.T) {
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
			wantOut:  []string{"invalid flags:", "--port=0: want 1-65535"},
		},
		{
			name:     "every invalid flag is reported at once",
			args:     []string{"--port=70000", "--drain-timeout=0s", "--shutdown-delay=6m"},
			wantCode: exitUsage,
			wantOut:  []string{"--port=70000: want 1-65535", "--drain-timeout=0s: want 1s to 5m", "--shutdown-delay=6m0s: want 0 to 5m"},
		},
		{
			name:     "a value outside a flag's choices exits 2 naming the choices",
			args:     []string{"--default-mode=strict"},
			wantCode: exitUsage,
			wantOut:  []string{`invalid argument "strict" for "--default-mode" flag: "strict" is not one of enforce, warn`},
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
			wantOut:  []string{"--shutdown-delay", "--drain-timeout", "--cert-dir", "--zap-log-level", "--zap-devel", "--kubeconfig"},
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
