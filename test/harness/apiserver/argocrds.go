package apiserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// Argo Rollouts' CRDs, from a pinned version of its module the Go module
// proxy serves: only their YAML is read (manifests/crds), so envtest and the
// e2e suite install Argo's real schemas; nothing imports Argo. v1.10.1 is the
// newest release whose go.mod this toolchain (Go 1.26.8, GOTOOLCHAIN=local)
// accepts. hack/argo-rollouts.sh builds the controller of the same pin.
const (
	// ArgoRolloutsVersion and argoRolloutsSum pin the module: its hash as
	// go.sum would hold it, checked after the download.
	ArgoRolloutsVersion = "v1.10.1"
	argoRolloutsModule  = "github.com/argoproj/argo-rollouts"
	argoRolloutsSum     = "h1:6oyVPGiHHxu3ixkT6mngemh88HLPDoTX1IwO6KNR1Y4="
)

// FindRolloutCRD returns the path of Argo Rollouts' rollout-crd.yaml in the
// module cache, downloading the pinned module through the proxy the first
// time.
func FindRolloutCRD(ctx context.Context) (string, error) {
	dir, err := FindArgoCRDs(ctx)
	if err != nil {
		return "", err
	}
	crd := filepath.Join(dir, "rollout-crd.yaml")
	if _, err := os.Stat(crd); err != nil {
		return "", fmt.Errorf("no Rollout CRD where the pinned module keeps it: %w", err)
	}
	return crd, nil
}

// FindArgoCRDs returns the directory of every CRD Argo Rollouts' controller
// watches (Rollouts, AnalysisRuns, AnalysisTemplates,
// ClusterAnalysisTemplates, Experiments) in the pinned module, downloading
// it the first time. It also holds a kustomization.yaml, which envtest's
// CRD installer skips.
func FindArgoCRDs(ctx context.Context) (string, error) {
	m, err := download(ctx, os.TempDir(), argoRolloutsModule+"@"+ArgoRolloutsVersion)
	if err != nil {
		return "", err
	}
	if m.Sum != argoRolloutsSum {
		return "", fmt.Errorf("%s@%s has hash %s, want %s (pinned)", argoRolloutsModule, ArgoRolloutsVersion, m.Sum, argoRolloutsSum)
	}
	dir := filepath.Join(m.Dir, "manifests", "crds")
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("no CRDs where the pinned module keeps them: %w", err)
	}
	return dir, nil
}
