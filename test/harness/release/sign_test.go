package release

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/provenance"
)

func TestSignedFileVerifiesWithThePublicKeyOnly(t *testing.T) {
	dir := t.TempDir()
	key, err := NewSigningKey("v0.3.1")
	if err != nil {
		t.Fatal(err)
	}
	path, pub := filepath.Join(dir, "sums.txt"), filepath.Join(dir, PublicKeyName("v0.3.1"))
	if err := os.WriteFile(path, []byte("abc  file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := SignFile(path, key); err != nil {
		t.Fatal(err)
	}
	if err := WritePublicKey(pub, key); err != nil {
		t.Fatal(err)
	}
	ring, err := ReadPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	if ring[0].PrivateKey != nil {
		t.Error("the public key file holds the private key")
	}
	sig, _ := os.ReadFile(SignatureName(path))
	if err := VerifyFile(ring, []byte("abc  file\n"), sig); err != nil {
		t.Errorf("signature does not verify: %v", err)
	}
	if err := VerifyFile(ring, []byte("abd  file\n"), sig); err == nil {
		t.Error("a changed file verifies")
	}
}

func TestPackageChartMarksAReleaseCandidateAPrerelease(t *testing.T) {
	key, err := NewSigningKey("v0.4.0-rc.1")
	if err != nil {
		t.Fatal(err)
	}
	path, err := PackageChart(filepath.Join("..", "..", "..", "charts", "graceguard"), "v0.4.0-rc.1", t.TempDir(), key)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := loader.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := ch.Metadata.Annotations["artifacthub.io/prerelease"]; got != "true" {
		t.Errorf("artifacthub.io/prerelease of v0.4.0-rc.1 = %q, want true", got)
	}
}

func TestPackageChartSetsTheReleaseVersionAndSigns(t *testing.T) {
	dir := t.TempDir()
	key, err := NewSigningKey("v0.3.1")
	if err != nil {
		t.Fatal(err)
	}
	path, err := PackageChart(filepath.Join("..", "..", "..", "charts", "graceguard"), "v0.3.1", dir, key)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := loader.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != "0.3.1" || ch.Metadata.AppVersion != "v0.3.1" || filepath.Base(path) != "graceguard-0.3.1.tgz" {
		t.Errorf("%s: version %q appVersion %q, want 0.3.1 and v0.3.1", path, ch.Metadata.Version, ch.Metadata.AppVersion)
	}
	if got, want := ch.Metadata.Annotations["artifacthub.io/images"], "- image: registry.local/graceguard:v0.3.1\n  name: graceguard\n"; got != want {
		t.Errorf("artifacthub.io/images = %q, want %q", got, want)
	}
	if got := ch.Metadata.Annotations["artifacthub.io/prerelease"]; got != "false" {
		t.Errorf("artifacthub.io/prerelease of v0.3.1 = %q, want false", got)
	}
	data, _ := os.ReadFile(path)
	prov, _ := os.ReadFile(path + ".prov")
	if _, err := (&provenance.Signatory{KeyRing: openpgp.EntityList{key}}).Verify(data, prov, filepath.Base(path)); err != nil {
		t.Errorf("provenance does not verify: %v", err)
	}
}
