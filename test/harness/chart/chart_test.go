package chart

import (
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// config/install.yaml is generated from the chart; a stale copy would
// install something the chart no longer ships.
func TestInstallManifestIsCurrent(t *testing.T) {
	const path = "../../../config/install.yaml"
	want, err := installManifest()
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run `make manifests`", err)
	}
	if string(got) != want {
		t.Fatalf("%s is stale: run `make manifests`", path)
	}
}

func TestWebhooksAreParsedFromTheChart(t *testing.T) {
	w, err := RenderWebhooks("graceguard", "graceguard-system", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Mutating) != 1 || len(w.Validating) != 1 || len(w.Validating[0].Webhooks) != 3 {
		t.Fatalf("want 1 mutating and 1 validating configuration with 3 webhooks, got %d, %d", len(w.Mutating), len(w.Validating))
	}
	w.PointAt("https://127.0.0.1:9443")
	if u := w.Mutating[0].Webhooks[0].ClientConfig.URL; u == nil || *u != "https://127.0.0.1:9443/mutate-v1-pod" {
		t.Fatalf("PointAt gave %v", u)
	}
}

// config/kustomization.yaml must keep pointing at the generated manifest.
func TestKustomizationUsesTheGeneratedManifest(t *testing.T) {
	k, err := os.ReadFile("../../../config/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var kz struct {
		Kind      string   `json:"kind"`
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(k, &kz); err != nil {
		t.Fatal(err)
	}
	if kz.Kind != "Kustomization" || len(kz.Resources) != 1 || kz.Resources[0] != "install.yaml" {
		t.Fatalf("config/kustomization.yaml = %+v, want a Kustomization of install.yaml", kz)
	}
}

// installManifest is config/install.yaml: the chart with its default
// values in namespace graceguard-system (the CRD among them), preceded by
// the Namespace, for people who install with `kubectl apply` instead of
// Helm. Helm's hooks (`helm test`, the pre-delete Job) are not in it: they
// run at Helm's events only.
func installManifest() (string, error) {
	const ns = "graceguard-system"
	m, err := Render("graceguard", ns, nil)
	if err != nil {
		return "", err
	}
	return "# Generated from charts/graceguard with its default values by `make manifests`; do not edit.\n" +
		"# kubectl apply -k config/  (or kubectl apply -f config/install.yaml)\n" +
		"---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + ns + "\n" + m, nil
}

// Container finds the chart's containers by name, the observer's among
// them, and names the one it cannot find.
func TestContainerFindsTheChartsContainersByName(t *testing.T) {
	c, err := Container("graceguard", "graceguard-system", nil, "observer")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Args) == 0 || c.Args[0] != "observe" || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("observer container: args %v, memory limit %v; want `observe ...` and a limit", c.Args, c.Resources.Limits.Memory())
	}
	if _, err := Container("graceguard", "graceguard-system", nil, "sidecar"); err == nil || !strings.Contains(err.Error(), "sidecar") {
		t.Errorf("Container(sidecar) = %v, want an error naming it", err)
	}
}
