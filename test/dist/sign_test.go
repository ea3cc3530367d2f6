//go:build dist

package dist_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v4/pkg/provenance"
	helmregistry "helm.sh/helm/v4/pkg/registry"

	"github.com/graceguard/graceguard/test/harness/release"
)

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// flip is data with one byte changed.
func flip(data []byte, at int) []byte {
	out := bytes.Clone(data)
	out[at%len(out)] ^= 0x01
	return out
}

// TestSignaturesVerifyWithTheShippedKeyAndFailOnAFlippedByte: the chart's
// provenance (Helm's own verifier, as helm verify), the checksums' and
// image.json's detached signatures, each with the public key in dist/, and
// none survives one changed byte.
func TestSignaturesVerifyWithTheShippedKeyAndFailOnAFlippedByte(t *testing.T) {
	dir := distDir(t)
	ver := manifest(t, dir).Spec.Version
	ring, err := release.ReadPublicKey(filepath.Join(dir, release.PublicKeyName(ver)))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{release.ChecksumsName(ver), release.ImageInfoName} {
		data, sig := readFile(t, filepath.Join(dir, n)), readFile(t, filepath.Join(dir, release.SignatureName(n)))
		if err := release.VerifyFile(ring, data, sig); err != nil {
			t.Errorf("%s: signature does not verify: %v", n, err)
		}
		if err := release.VerifyFile(ring, flip(data, len(data)/2), sig); err == nil {
			t.Errorf("%s with a flipped byte still verifies", n)
		}
	}
	chart := release.ChartArchiveName(ver)
	data, prov := readFile(t, filepath.Join(dir, chart)), readFile(t, filepath.Join(dir, chart+".prov"))
	s := &provenance.Signatory{KeyRing: ring}
	if _, err := s.Verify(data, prov, chart); err != nil {
		t.Errorf("%s: provenance does not verify: %v", chart, err)
	}
	if _, err := s.Verify(flip(data, len(data)/2), prov, chart); err == nil {
		t.Errorf("%s with a flipped byte still verifies", chart)
	}
	// A byte of the signed text (inside the clear-signed block) changed.
	i := bytes.Index(prov, []byte("sha256:"))
	if i < 0 {
		t.Fatalf("%s.prov names no sha256", chart)
	}
	if _, err := s.Verify(data, flip(prov, i+10), chart); err == nil {
		t.Errorf("%s.prov with a flipped byte still verifies", chart)
	}
}

// TestSBOMsAreCycloneDXOfTheModule: one per archive and one for the image,
// each CycloneDX JSON naming graceguard's module at the release version.
func TestSBOMsAreCycloneDXOfTheModule(t *testing.T) {
	dir := distDir(t)
	ver := manifest(t, dir).Spec.Version
	names := []string{release.ImageArchiveName(ver)}
	for _, b := range release.Binaries {
		for _, p := range release.Platforms {
			names = append(names, release.ArchiveName(b.Name, ver, p))
		}
	}
	for _, n := range names {
		var bom struct {
			BOMFormat   string `json:"bomFormat"`
			SpecVersion string `json:"specVersion"`
			Metadata    struct {
				Component struct{ Name, Version string }
			}
			Components []struct{ Name, Version string }
		}
		if err := json.Unmarshal(readFile(t, filepath.Join(dir, release.SBOMName(n))), &bom); err != nil {
			t.Errorf("%s: %v", release.SBOMName(n), err)
			continue
		}
		c := bom.Metadata.Component
		if bom.BOMFormat != "CycloneDX" || !strings.HasPrefix(bom.SpecVersion, "1.") || c.Name != "github.com/graceguard/graceguard" || c.Version != ver {
			t.Errorf("%s: %s %s of %s %s, want CycloneDX 1.x of github.com/graceguard/graceguard %s", release.SBOMName(n), bom.BOMFormat, bom.SpecVersion, c.Name, c.Version, ver)
		}
		found := false
		for _, d := range bom.Components {
			found = found || d.Name == "k8s.io/api"
		}
		if !found {
			t.Errorf("%s: %d components, none is k8s.io/api", release.SBOMName(n), len(bom.Components))
		}
	}
}

// TestChartAndImagePushToARegistryAndPullBack: a real OCI registry
// (go-containerregistry's) on loopback; the chart with its provenance
// pushed with Helm's registry client (what helm push does) and pulled back
// byte for byte, the image index pushed and resolved to the same digest.
func TestChartAndImagePushToARegistryAndPullBack(t *testing.T) {
	dir := distDir(t)
	ver := manifest(t, dir).Spec.Version
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	c, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP())
	if err != nil {
		t.Fatal(err)
	}
	chart := release.ChartArchiveName(ver)
	data, prov := readFile(t, filepath.Join(dir, chart)), readFile(t, filepath.Join(dir, chart+".prov"))
	// As helm push: the tag is the chart version; Helm stores a '+' as '_'.
	ref := host + "/charts/graceguard:" + release.ChartVersion(ver)
	pushed, err := c.Push(data, ref, helmregistry.PushOptProvData(prov))
	if err != nil {
		t.Fatalf("helm push %s: %v", ref, err)
	}
	pulled, err := c.Pull(ref, helmregistry.PullOptWithProv(true))
	if err != nil {
		t.Fatalf("helm pull %s: %v", ref, err)
	}
	if pulled.Manifest.Digest != pushed.Manifest.Digest || !bytes.Equal(pulled.Chart.Data, data) || !bytes.Equal(pulled.Prov.Data, prov) {
		t.Errorf("pulled %s (manifest %s) differs from what was pushed (manifest %s)", ref, pulled.Manifest.Digest, pushed.Manifest.Digest)
	}

	var rel release.Image
	if err := json.Unmarshal(readFile(t, filepath.Join(dir, release.ImageInfoName)), &rel); err != nil {
		t.Fatal(err)
	}
	idx, _, err := release.ReadImage(filepath.Join(dir, rel.Archive), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(host+"/graceguard:"+strings.ReplaceAll(ver, "+", "_"), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(tag, idx); err != nil {
		t.Fatalf("pushing the image to %s: %v", tag, err)
	}
	desc, err := remote.Get(tag)
	if err != nil {
		t.Fatal(err)
	}
	if desc.Digest.String() != rel.Digest {
		t.Errorf("%s resolves to %s, the release image is %s", tag, desc.Digest, rel.Digest)
	}
}
