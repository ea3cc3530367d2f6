package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// The CRDs of the policy report kinds graceguard writes, from pinned
// sources the Go module proxy serves: OpenReports' own module, at the
// version the product builds its types with (the root go.mod), and
// Kyverno's, which ships wgpolicyk8s.io/v1alpha2 PolicyReport. Only their
// YAML is read; nothing imports Kyverno.
const (
	openReportsModule = "github.com/openreports/reports-api"
	// KyvernoVersion and kyvernoSum pin the PolicyReport CRD: the module's
	// hash as go.sum would hold it, checked after the download.
	KyvernoVersion = "v1.19.1"
	kyvernoModule  = "github.com/kyverno/kyverno"
	kyvernoSum     = "h1:/MkgFii3/VlQfKR1JpC9tVwNNVNQTt2S4U6qCsafsTU="
)

// ReportCRDs are the directories holding each kind's CRDs (the namespaced
// kind and its cluster-scoped twin), for envtest.InstallCRDs.
type ReportCRDs struct {
	// OpenReports holds openreports.io_reports.yaml and _clusterreports.
	OpenReports string
	// PolicyReport holds wgpolicyk8s.io_policyreports.yaml and
	// _clusterpolicyreports.
	PolicyReport string
}

// FindReportCRDs finds the CRDs in the module cache, downloading the
// modules through the proxy the first time.
func FindReportCRDs(ctx context.Context) (ReportCRDs, error) {
	_, file, _, _ := runtime.Caller(0)
	labModule := filepath.Join(filepath.Dir(file), "..", "..")
	// The version the lab's go.mod (and the product's) requires.
	or, err := download(ctx, labModule, openReportsModule)
	if err != nil {
		return ReportCRDs{}, err
	}
	// Outside any module, at the pinned version.
	ky, err := download(ctx, os.TempDir(), kyvernoModule+"@"+KyvernoVersion)
	if err != nil {
		return ReportCRDs{}, err
	}
	if ky.Sum != kyvernoSum {
		return ReportCRDs{}, fmt.Errorf("%s@%s has hash %s, want %s (pinned)", kyvernoModule, KyvernoVersion, ky.Sum, kyvernoSum)
	}
	crds := ReportCRDs{
		OpenReports:  filepath.Join(or.Dir, "config", "crd"),
		PolicyReport: filepath.Join(ky.Dir, "config", "crds", "policyreport"),
	}
	for _, d := range []string{crds.OpenReports, crds.PolicyReport} {
		if _, err := os.Stat(d); err != nil {
			return ReportCRDs{}, fmt.Errorf("no CRDs where the pinned module keeps them: %w", err)
		}
	}
	return crds, nil
}

type module struct{ Dir, Sum, Error string }

// download runs `go mod download -json` in dir.
func download(ctx context.Context, dir, what string) (module, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", what)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var m module
	if jerr := json.Unmarshal(out, &m); jerr != nil || err != nil || m.Error != "" || m.Dir == "" {
		return m, fmt.Errorf("go mod download %s: %v %s %s", what, err, m.Error, stderr.String())
	}
	return m, nil
}
