// Package release makes graceguard's release artifacts (`make dist`): the
// kubectl plugin and the webhook cross-built per platform and packed into
// archives, a SHA-256 checksums file, a krew plugin manifest, and the
// webhook's multi-arch OCI image.
//
// Invariant: every artifact is reproducible from the same binaries and
// version (fixed timestamps, sorted entries, no host user names), and the
// krew manifest's sha256 of each platform is that of the archive written
// beside it.
package release

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/graceguard/graceguard/internal/version"
)

// Platform is a GOOS/GOARCH pair.
type Platform struct{ OS, Arch string }

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// Exe is the executable name of bin on p.
func (p Platform) Exe(bin string) string {
	if p.OS == "windows" {
		return bin + ".exe"
	}
	return bin
}

// ArchiveExt is .zip on Windows (what krew and users there expect) and
// .tar.gz elsewhere.
func (p Platform) ArchiveExt() string {
	if p.OS == "windows" {
		return ".zip"
	}
	return ".tar.gz"
}

// Platforms are the binaries' release platforms.
var Platforms = []Platform{
	{"linux", "amd64"}, {"linux", "arm64"},
	{"darwin", "amd64"}, {"darwin", "arm64"},
	{"windows", "amd64"},
}

// ImagePlatforms are the container image's platforms.
var ImagePlatforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}}

// Binaries released: the command's package and its executable name.
var Binaries = []struct{ Package, Name string }{
	{"./cmd/kubectl-graceguard", "kubectl-graceguard"},
	{"./cmd/webhook", "graceguard-webhook"},
}

// PluginName is the krew plugin name: `kubectl krew install graceguard`
// installs kubectl-graceguard, run as `kubectl graceguard`.
const PluginName = "graceguard"

// epoch is every timestamp in the archives.
var epoch = time.Unix(0, 0).UTC()

// ArchiveName is e.g. kubectl-graceguard_v0.3.1_linux_amd64.tar.gz.
func ArchiveName(bin, ver string, p Platform) string {
	return fmt.Sprintf("%s_%s_%s_%s%s", bin, ver, p.OS, p.Arch, p.ArchiveExt())
}

// File is one entry of an archive.
type File struct {
	Name string // path inside the archive
	Mode int64
	Data []byte
}

// WriteArchive writes files into path as a .tar.gz or .zip (by p), sorted
// by name, with fixed timestamps and no owner names.
func WriteArchive(path string, p Platform, files []File) error {
	files = append([]File(nil), files...)
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	var buf bytes.Buffer
	if p.OS == "windows" {
		zw := zip.NewWriter(&buf)
		for _, f := range files {
			h := &zip.FileHeader{Name: f.Name, Method: zip.Deflate, Modified: epoch}
			h.SetMode(os.FileMode(f.Mode))
			w, err := zw.CreateHeader(h)
			if err != nil {
				return err
			}
			if _, err := w.Write(f.Data); err != nil {
				return err
			}
		}
		if err := zw.Close(); err != nil {
			return err
		}
	} else {
		gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		gz.ModTime = epoch
		tw := tar.NewWriter(gz)
		for _, f := range files {
			h := &tar.Header{Typeflag: tar.TypeReg, Name: f.Name, Mode: f.Mode, Size: int64(len(f.Data)), ModTime: epoch, Format: tar.FormatPAX}
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if _, err := tw.Write(f.Data); err != nil {
				return err
			}
		}
		if err := tw.Close(); err != nil {
			return err
		}
		if err := gz.Close(); err != nil {
			return err
		}
	}
	return writeAtomic(path, buf.Bytes())
}

// ReadArchive returns the regular files of a .tar.gz or .zip archive.
func ReadArchive(path string) (map[string]File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]File{}
	if strings.HasSuffix(path, ".zip") {
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, f := range zr.File {
			rc, err := f.Open()
			if err != nil {
				return nil, err
			}
			b, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				return nil, err
			}
			out[f.Name] = File{Name: f.Name, Mode: int64(f.Mode().Perm()), Data: b}
		}
		return out, nil
	}
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		out[h.Name] = File{Name: h.Name, Mode: h.Mode, Data: b}
	}
}

// SHA256File is the hex SHA-256 of a file.
func SHA256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ChecksumsName is the checksums file of a release, in `sha256sum` format
// (`sha256sum -c` checks it).
func ChecksumsName(ver string) string { return "graceguard_" + ver + "_checksums.txt" }

// WriteChecksums writes "<sha256>  <name>" for each file of dir named in
// names, sorted by name.
func WriteChecksums(path, dir string, names []string) error {
	names = append([]string(nil), names...)
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		sum, err := SHA256File(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, n)
	}
	return writeAtomic(path, []byte(b.String()))
}

// ParseChecksums reads a checksums file into name -> sha256.
func ParseChecksums(data []byte) (map[string]string, error) {
	out := map[string]string{}
	for i, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != 64 || name == "" {
			return nil, fmt.Errorf("checksums line %d: %q is not \"<sha256>  <name>\"", i+1, line)
		}
		out[name] = sum
	}
	return out, nil
}

// Krew manifest (krew.googlecontainertools.github.com/v1alpha2 Plugin), the
// fields krew's validation reads.
type (
	KrewPlugin struct {
		APIVersion string       `json:"apiVersion"`
		Kind       string       `json:"kind"`
		Metadata   KrewMetadata `json:"metadata"`
		Spec       KrewSpec     `json:"spec"`
	}
	KrewMetadata struct {
		Name string `json:"name"`
	}
	KrewSpec struct {
		Version          string         `json:"version"`
		Homepage         string         `json:"homepage"`
		ShortDescription string         `json:"shortDescription"`
		Description      string         `json:"description"`
		Platforms        []KrewPlatform `json:"platforms"`
	}
	KrewPlatform struct {
		Selector KrewSelector `json:"selector"`
		URI      string       `json:"uri"`
		Sha256   string       `json:"sha256"`
		Bin      string       `json:"bin"`
	}
	KrewSelector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	}
)

// Homepage is the project's page, and the root of the release downloads.
const Homepage = "https://github.com/graceguard/graceguard"

// DefaultBaseURL is where a release's archives are downloaded from.
func DefaultBaseURL(ver string) string { return Homepage + "/releases/download/" + ver }

// KrewManifestName is the manifest's file name: krew requires
// <plugin name>.yaml.
const KrewManifestName = PluginName + ".yaml"

// KrewManifest is the plugin manifest for the kubectl-graceguard archives
// in dir (named by ArchiveName), downloaded from baseURL.
func KrewManifest(ver, baseURL, dir string) (*KrewPlugin, error) {
	if !version.Valid(ver) {
		return nil, fmt.Errorf("version %q: krew wants a semantic version with a leading v, e.g. v0.3.1", ver)
	}
	m := &KrewPlugin{
		APIVersion: "krew.googlecontainertools.github.com/v1alpha2",
		Kind:       "Plugin",
		Metadata:   KrewMetadata{Name: PluginName},
		Spec: KrewSpec{
			Version:          ver,
			Homepage:         Homepage,
			ShortDescription: "Check Pods and workloads against a graceful-shutdown budget",
			Description: `Runs graceguard's admission decisions offline on manifests: the preStop
sleep, probes and terminationGracePeriodSeconds the graceguard webhook would
set, and the specs it would deny because their hooks cannot fit in the grace
period (terminationGracePeriodSeconds >= routing withdrawal + max admitted
work + cleanup + safety margin).

  kubectl graceguard check -f deploy.yaml     # denials and warnings
  kubectl graceguard mutate -f deploy.yaml    # the objects as admitted
  kubectl graceguard explain -f deploy.yaml   # the budget and a deletion timeline
`,
		},
	}
	for _, p := range Platforms {
		name := ArchiveName("kubectl-graceguard", ver, p)
		sum, err := SHA256File(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		m.Spec.Platforms = append(m.Spec.Platforms, KrewPlatform{
			Selector: KrewSelector{MatchLabels: map[string]string{"os": p.OS, "arch": p.Arch}},
			URI:      strings.TrimSuffix(baseURL, "/") + "/" + name,
			Sha256:   sum,
			Bin:      p.Exe("kubectl-graceguard"),
		})
	}
	return m, nil
}

// WriteKrewManifest writes m as YAML.
func WriteKrewManifest(path string, m *KrewPlugin) error {
	b, err := yaml.Marshal(m)
	if err != nil {
		return err
	}
	return writeAtomic(path, b)
}

func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
