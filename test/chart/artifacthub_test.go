package chart_test

import (
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"sigs.k8s.io/yaml"
)

// TestArtifactHubAnnotations holds Chart.yaml's artifacthub.io annotations
// to the shapes Artifact Hub reads (artifacthub.io/docs/topics/annotations/helm):
// YAML lists in strings, a changes kind it knows, a boolean prerelease, and
// the image the chart installs by default at its appVersion.
func TestArtifactHubAnnotations(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	ann := ch.Metadata.Annotations
	list := func(key string) []map[string]string {
		t.Helper()
		var out []map[string]string
		if err := yaml.UnmarshalStrict([]byte(ann[key]), &out); err != nil || len(out) == 0 {
			t.Fatalf("%s is not a non-empty YAML list of maps: %v\n%s", key, err, ann[key])
		}
		return out
	}

	license, err := os.ReadFile("../../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if ann["artifacthub.io/license"] != "Apache-2.0" || !strings.Contains(string(license), "Apache License\n                           Version 2.0") {
		t.Errorf("artifacthub.io/license = %q, LICENSE is not Apache 2.0 or they disagree", ann["artifacthub.io/license"])
	}
	if _, err := strconv.ParseBool(ann["artifacthub.io/prerelease"]); err != nil {
		t.Errorf("artifacthub.io/prerelease = %q, want true or false", ann["artifacthub.io/prerelease"])
	}
	for _, l := range list("artifacthub.io/links") {
		if u, err := url.Parse(l["url"]); l["name"] == "" || err != nil || u.Scheme != "https" {
			t.Errorf("artifacthub.io/links entry %v needs a name and an https url", l)
		}
	}
	img, _ := ch.Values["image"].(map[string]any)
	want := img["repository"].(string) + ":" + ch.Metadata.AppVersion
	if images := list("artifacthub.io/images"); len(images) != 1 || images[0]["image"] != want {
		t.Errorf("artifacthub.io/images = %v, want the one image the chart installs, %s", images, want)
	}
	kinds := []string{"added", "changed", "deprecated", "removed", "fixed", "security"}
	for _, c := range list("artifacthub.io/changes") {
		if !slices.Contains(kinds, c["kind"]) || c["description"] == "" {
			t.Errorf("artifacthub.io/changes entry %v needs a kind of %v and a description", c, kinds)
		}
	}
}
