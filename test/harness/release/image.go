package release

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/graceguard/graceguard/test/harness/ocipack"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The webhook image: what the Dockerfile declares (USER, ENTRYPOINT, the
// COPY destination) on gcr.io/distroless/static-debian12:nonroot, built
// here without Docker. TestImageMatchesTheDockerfile holds the two together.
const (
	ImageRepository = "registry.local/graceguard"
	ImageBinary     = "/webhook"
	ImageUser       = "65532:65532"
	ImageWorkingDir = "/home/nonroot"
	// ImageBase is the Dockerfile's final FROM, whose contents
	// BaseFiles reproduces.
	ImageBase = "gcr.io/distroless/static-debian12:nonroot"
	// CABundlePath is where distroless keeps the CA certificates (and
	// SSL_CERT_FILE points).
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"
)

// ImageEntrypoint is the Dockerfile's ENTRYPOINT.
var ImageEntrypoint = []string{ImageBinary}

// ImageEnv is distroless static's environment.
var ImageEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"SSL_CERT_FILE=" + CABundlePath,
}

// ImageTag is the image tag of a version: tags cannot hold '+', so build
// metadata is joined with '_' (as Kubernetes' own images do).
func ImageTag(ver string) string { return strings.ReplaceAll(ver, "+", "_") }

// ImageArchiveName is the OCI image layout tarball of a release.
func ImageArchiveName(ver string) string { return "graceguard-webhook_" + ver + "_image.oci.tar" }

// Annotations ctr reads from index.json to name an imported image.
const (
	AnnotationImageName = "io.containerd.image.name"
	AnnotationRefName   = "org.opencontainers.image.ref.name"
)

// BaseFile is one entry of the base layer.
type BaseFile struct {
	Path     string // absolute
	Dir      bool
	Mode     int64
	UID, GID int
	Data     []byte
}

// BaseFiles are the base layer, distroless static (nonroot)'s contents that
// a static Go server uses: users and groups (nonroot is 65532 with home
// /home/nonroot), name resolution from files then DNS, the Mozilla CA
// bundle (from golang.org/x/crypto/x509roots, pinned in test/go.mod), and /tmp.
// No shell and no other binary.
func BaseFiles() []BaseFile {
	dir := func(p string, mode int64, id int) BaseFile {
		return BaseFile{Path: p, Dir: true, Mode: mode, UID: id, GID: id}
	}
	file := func(p, data string) BaseFile { return BaseFile{Path: p, Mode: 0o644, Data: []byte(data)} }
	return []BaseFile{
		dir("/etc", 0o755, 0),
		file("/etc/passwd", "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"),
		file("/etc/group", "root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n"),
		file("/etc/nsswitch.conf", "hosts: files dns\n"),
		dir("/etc/ssl", 0o755, 0),
		dir("/etc/ssl/certs", 0o755, 0),
		{Path: CABundlePath, Mode: 0o644, Data: caBundle()},
		dir("/home", 0o755, 0),
		dir("/home/nonroot", 0o700, 65532),
		dir("/root", 0o700, 0),
		dir("/tmp", 0o1777, 0),
	}
}

// caBundle is the PEM of the NSS roots without extra constraints (PEM
// cannot carry them, and distros leave them out too).
func caBundle() []byte {
	var b bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
	}
	return b.Bytes()
}

// ImageSpec describes the webhook image of a release.
type ImageSpec struct {
	Version string
	// Binaries are the static linux webhook binaries, per ImagePlatforms.
	Binaries map[Platform]string
}

// Image is what WriteImage produced.
type Image struct {
	Archive string `json:"archive"`
	// Name is the reference recorded in index.json (ctr names the image so).
	Name string `json:"name"`
	// Digest is the image index's digest: the repo digest a registry and
	// the kubelet (imageID) report for a Pod running it.
	Digest string `json:"digest"`
	// Manifests are the per-platform image manifest digests.
	Manifests map[string]string `json:"manifests"`
	// Configs are the per-platform config digests: the image ID that
	// containerd reports when it knows no repo digest.
	Configs map[string]string `json:"configs"`
}

// WriteImage writes the multi-arch webhook image as an OCI image layout
// tarball at archive: an index of one image per ImagePlatforms, each the
// base layer and a layer with the binary at ImageBinary.
func WriteImage(archive string, spec ImageSpec) (*Image, error) {
	ref := ImageRepository + ":" + ImageTag(spec.Version)
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return nil, fmt.Errorf("image name %q: %w", ref, err)
	}
	baseTar, err := baseLayerTar()
	if err != nil {
		return nil, err
	}
	base, err := layerOf(baseTar)
	if err != nil {
		return nil, err
	}
	out := &Image{Archive: archive, Name: ref, Manifests: map[string]string{}, Configs: map[string]string{}}
	var adds []mutate.IndexAddendum
	for _, p := range ImagePlatforms {
		binPath, ok := spec.Binaries[p]
		if !ok {
			return nil, fmt.Errorf("no webhook binary for %s", p)
		}
		bin, err := os.ReadFile(binPath)
		if err != nil {
			return nil, err
		}
		appTar, err := tarOf([]tarEntry{{hdr: &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(ImageBinary, "/"), Mode: 0o755}, data: bin}})
		if err != nil {
			return nil, err
		}
		app, err := layerOf(appTar)
		if err != nil {
			return nil, err
		}
		img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		img, err = mutate.Append(img,
			mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "graceguard base: " + ImageBase + " contents"}},
			mutate.Addendum{Layer: app, MediaType: types.OCILayer, History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "COPY webhook " + ImageBinary}},
		)
		if err != nil {
			return nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture, cf.Created = p.OS, p.Arch, v1.Time{Time: epoch}
		cf.Config = v1.Config{
			Entrypoint: ImageEntrypoint,
			Env:        ImageEnv,
			User:       ImageUser,
			WorkingDir: ImageWorkingDir,
			Labels: map[string]string{
				"org.opencontainers.image.source":  Homepage,
				"org.opencontainers.image.version": spec.Version,
				"org.opencontainers.image.title":   "graceguard webhook",
			},
		}
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return nil, err
		}
		d, err := img.Digest()
		if err != nil {
			return nil, err
		}
		out.Manifests[p.String()] = d.String()
		cd, err := img.ConfigName()
		if err != nil {
			return nil, err
		}
		out.Configs[p.String()] = cd.String()
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Arch}}})
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	d, err := idx.Digest()
	if err != nil {
		return nil, err
	}
	out.Digest = d.String()

	tmp, err := os.MkdirTemp(filepath.Dir(archive), ".image-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	lp, err := layout.Write(filepath.Join(tmp, "layout"), empty.Index)
	if err != nil {
		return nil, err
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{AnnotationImageName: ref, AnnotationRefName: tag.TagStr()})); err != nil {
		return nil, err
	}
	if err := ocipack.TarDir(filepath.Join(tmp, "layout"), filepath.Join(tmp, "image.tar")); err != nil {
		return nil, err
	}
	if err := os.Rename(filepath.Join(tmp, "image.tar"), archive); err != nil {
		return nil, err
	}
	return out, nil
}

func layerOf(tarData []byte) (v1.Layer, error) {
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tarData)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

type tarEntry struct {
	hdr  *tar.Header
	data []byte
}

func tarOf(entries []tarEntry) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := *e.hdr
		h.ModTime, h.Format, h.Size = epoch, tar.FormatPAX, int64(len(e.data))
		if err := tw.WriteHeader(&h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func baseLayerTar() ([]byte, error) {
	var entries []tarEntry
	for _, f := range BaseFiles() {
		h := &tar.Header{Name: strings.TrimPrefix(f.Path, "/"), Mode: f.Mode, Uid: f.UID, Gid: f.GID}
		if f.Dir {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		} else {
			h.Typeflag = tar.TypeReg
		}
		entries = append(entries, tarEntry{hdr: h, data: f.Data})
	}
	return tarOf(entries)
}

// ImageInfoName is the JSON file (an Image) beside the image archive, which
// make e2e reads to import the image and check what runs.
const ImageInfoName = "image.json"

// ReadImage unpacks an image archive written by WriteImage into dir and
// returns the index its index.json names, with that entry's annotations.
func ReadImage(archive, dir string) (v1.ImageIndex, map[string]string, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(os.PathSeparator)) {
			return nil, nil, fmt.Errorf("%s: entry %q leaves the archive", archive, h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return nil, nil, err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return nil, nil, err
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				return nil, nil, err
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				return nil, nil, err
			}
		}
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, nil, err
	}
	top, err := lp.ImageIndex()
	if err != nil {
		return nil, nil, err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, nil, err
	}
	if len(m.Manifests) != 1 || m.Manifests[0].MediaType != types.OCIImageIndex {
		return nil, nil, fmt.Errorf("%s: index.json holds %d entries, want one image index", archive, len(m.Manifests))
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	return idx, m.Manifests[0].Annotations, err
}

// Files lists an image's flattened filesystem: path -> tar header, and the
// content of regular files.
func Files(img v1.Image) (map[string]*tar.Header, map[string][]byte, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	hdrs, data := map[string]*tar.Header{}, map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return hdrs, data, nil
		}
		if err != nil {
			return nil, nil, err
		}
		p := "/" + strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		hdrs[p] = h
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, nil, err
			}
			data[p] = b
		}
	}
}
