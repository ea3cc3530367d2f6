package release

import (
	"bytes"
	"crypto"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/provenance"
	"sigs.k8s.io/yaml"
)

// PublicKeyName is the OpenPGP public key, ASCII-armoured, that verifies a
// release's signatures: the chart's provenance (helm verify --keyring),
// and the detached signatures (.asc) of the checksums and of image.json.
func PublicKeyName(ver string) string { return "graceguard_" + ver + "_signing-key.asc" }

// SignatureName is the detached, armoured signature of name.
func SignatureName(name string) string { return name + ".asc" }

// ChartArchiveName is what helm package names the chart of a release.
func ChartArchiveName(ver string) string { return "graceguard-" + ChartVersion(ver) + ".tgz" }

// ChartVersion is the chart's version for a release: the release version
// without its leading v (Helm's own convention); appVersion keeps the v.
func ChartVersion(ver string) string { return strings.TrimPrefix(ver, "v") }

// SBOMName is the CycloneDX SBOM of the file (archive or image) name.
func SBOMName(name string) string { return name + ".cdx.json" }

var pgpConfig = &packet.Config{DefaultHash: crypto.SHA512}

// NewSigningKey is a throwaway OpenPGP key for one release run: its
// private half never leaves the process.
func NewSigningKey(ver string) (*openpgp.Entity, error) {
	return openpgp.NewEntity("graceguard release "+ver, "throwaway key of one make dist run", "", pgpConfig)
}

// WritePublicKey writes e's public key, armoured.
func WritePublicKey(path string, e *openpgp.Entity) error {
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PublicKeyType, nil)
	if err != nil {
		return err
	}
	if err := e.Serialize(w); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return writeAtomic(path, buf.Bytes())
}

// ReadPublicKey reads an armoured public key file into a key ring.
func ReadPublicKey(path string) (openpgp.EntityList, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ring, err := openpgp.ReadArmoredKeyRing(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ring, nil
}

// SignFile writes the detached armoured signature of path to
// SignatureName(path) (gpg --verify checks it).
func SignFile(path string, e *openpgp.Entity) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := openpgp.ArmoredDetachSign(&buf, e, bytes.NewReader(data), pgpConfig); err != nil {
		return err
	}
	return writeAtomic(SignatureName(path), buf.Bytes())
}

// VerifyFile checks data against its detached armoured signature sig.
func VerifyFile(ring openpgp.EntityList, data, sig []byte) error {
	_, err := openpgp.CheckArmoredDetachedSignature(ring, bytes.NewReader(data), bytes.NewReader(sig), nil)
	return err
}

// artifactHub points the chart's Artifact Hub annotations at the release:
// the image the chart installs by default (values image.repository at the
// release's tag) and whether the version is a prerelease (v0.2.0-rc.1).
func artifactHub(ann map[string]string, values map[string]any, ver string) error {
	img, _ := values["image"].(map[string]any)
	repo, _ := img["repository"].(string)
	if repo == "" || ann == nil {
		return fmt.Errorf("needs values image.repository and the artifacthub.io annotations in Chart.yaml")
	}
	b, err := yaml.Marshal([]map[string]string{{"name": "graceguard", "image": repo + ":" + ver}})
	if err != nil {
		return err
	}
	ann["artifacthub.io/images"] = string(b)
	ann["artifacthub.io/prerelease"] = fmt.Sprint(strings.Contains(ChartVersion(ver), "-"))
	return nil
}

// PackageChart packages the chart in dir for the release ver into out, as
// `helm package --version <ver without v> --app-version <ver>` does, and
// writes its Helm provenance file (.prov, what helm verify and
// helm install --verify check) signed by e. It returns the archive's path.
func PackageChart(dir, ver, out string, e *openpgp.Entity) (string, error) {
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return "", fmt.Errorf("loading the chart %s: %w", dir, err)
	}
	ch.Metadata.Version = ChartVersion(ver)
	ch.Metadata.AppVersion = ver
	if err := artifactHub(ch.Metadata.Annotations, ch.Values, ver); err != nil {
		return "", fmt.Errorf("chart %s: %w", dir, err)
	}
	if err := ch.Validate(); err != nil {
		return "", fmt.Errorf("chart %s at version %s: %w", dir, ver, err)
	}
	path, err := chartutil.Save(ch, out)
	if err != nil {
		return "", err
	}
	if filepath.Base(path) != ChartArchiveName(ver) {
		return "", fmt.Errorf("helm saved the chart as %s, want %s", filepath.Base(path), ChartArchiveName(ver))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	meta, err := yaml.Marshal(ch.Metadata)
	if err != nil {
		return "", err
	}
	prov, err := (&provenance.Signatory{Entity: e}).ClearSign(data, filepath.Base(path), meta)
	if err != nil {
		return "", fmt.Errorf("signing the chart: %w", err)
	}
	return path, writeAtomic(path+".prov", []byte(prov))
}
