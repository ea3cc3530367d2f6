// Package ocipack turns one static binary into a single-layer OCI image
// archive that `ctr images import` (and so the test cluster's containerd)
// accepts and names without a registry.
//
// Invariant: an archive written here is an OCI image layout tarball whose
// index.json holds exactly one manifest, annotated with
// io.containerd.image.name (the full reference, which ctr uses as the image
// name) and org.opencontainers.image.ref.name (the tag); the image has one
// layer holding the binary and an empty /tmp, and a config for linux on the
// host's architecture. Archives are reproducible: timestamps are fixed, so
// the same binary and Image give the same manifest digest.
package ocipack

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotations ctr reads from index.json to name an imported image.
const (
	AnnotationImageName = "io.containerd.image.name"
	AnnotationRefName   = "org.opencontainers.image.ref.name"
)

// epoch is every timestamp in the archive, for reproducible digests.
var epoch = time.Unix(0, 0).UTC()

// Image describes the image around one binary.
type Image struct {
	// Name is the full reference containerd will list, with an explicit
	// registry host and a tag, e.g. registry.local/pause:3.10. A short name
	// like "pause:3.10" is refused: the kubelet would look it up as
	// docker.io/library/pause:3.10 and never find it.
	Name string
	// Binary is the host path of the (static) executable to pack.
	Binary string
	// Path is where the binary lands in the image; default "/" + base name
	// of Binary.
	Path string
	// Symlinks are more absolute paths in the image that link to Path, for
	// binaries that act on the name they are run as (a static image
	// without a shell can carry its own /bin/sleep this way).
	Symlinks []string
	// Files are more host files to pack, each executable (0755) with
	// symlinks of its own: a static busybox gives an image a real shell
	// and sleep.
	Files []File
	// Entrypoint defaults to []string{Path}.
	Entrypoint []string
	Cmd        []string
	Env        []string
	// User is a numeric "UID[:GID]" (there is no /etc/passwd); empty means
	// root, which the Pod spec may still override.
	User       string
	WorkingDir string
	// ExposedPorts like "8080/tcp"; documentation only.
	ExposedPorts []string
	Labels       map[string]string
}

// File is one more executable of an image: Source on the host, Path in
// the image, and Symlinks (absolute paths in the image) to it.
type File struct {
	Source   string
	Path     string
	Symlinks []string
}

// Result tells what Write produced.
type Result struct {
	Archive string
	// Name is the reference recorded in index.json.
	Name string
	// Digest is the manifest digest ("sha256:..."), which is also the digest
	// `ctr images ls` shows.
	Digest string
}

// Write packs img into an OCI image layout tarball at archive, atomically
// (a temporary file renamed into place).
func Write(archive string, img Image) (*Result, error) {
	if err := validate(&img); err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(img.Binary)
	if err != nil {
		return nil, fmt.Errorf("ocipack: read binary: %w", err)
	}
	files := []layerFile{{img.Path, img.Symlinks, bin}}
	for _, f := range img.Files {
		b, err := os.ReadFile(f.Source)
		if err != nil {
			return nil, fmt.Errorf("ocipack: read Image.Files %s: %w", f.Path, err)
		}
		files = append(files, layerFile{f.Path, f.Symlinks, b})
	}
	layerTar, err := layerTarball(files)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("ocipack: layer: %w", err)
	}

	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	image, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "ocipack " + img.Path},
	})
	if err != nil {
		return nil, fmt.Errorf("ocipack: append layer: %w", err)
	}
	cf, err := image.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("ocipack: config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = runtime.GOARCH
	cf.Created = v1.Time{Time: epoch}
	cf.Config = v1.Config{
		Entrypoint: img.Entrypoint,
		Cmd:        img.Cmd,
		Env:        img.Env,
		User:       img.User,
		WorkingDir: img.WorkingDir,
		Labels:     img.Labels,
	}
	if len(img.ExposedPorts) > 0 {
		cf.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range img.ExposedPorts {
			cf.Config.ExposedPorts[p] = struct{}{}
		}
	}
	if image, err = mutate.ConfigFile(image, cf); err != nil {
		return nil, fmt.Errorf("ocipack: set config: %w", err)
	}
	digest, err := image.Digest()
	if err != nil {
		return nil, fmt.Errorf("ocipack: digest: %w", err)
	}

	dir, err := os.MkdirTemp(filepath.Dir(archive), ".ocipack-*")
	if err != nil {
		return nil, fmt.Errorf("ocipack: %w", err)
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(filepath.Join(dir, "layout"), empty.Index)
	if err != nil {
		return nil, fmt.Errorf("ocipack: layout: %w", err)
	}
	ref, _ := name.NewTag(img.Name, name.StrictValidation)
	err = lp.AppendImage(image,
		layout.WithAnnotations(map[string]string{
			AnnotationImageName: img.Name,
			AnnotationRefName:   ref.TagStr(),
		}),
		layout.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}),
	)
	if err != nil {
		return nil, fmt.Errorf("ocipack: write layout: %w", err)
	}
	tmp := filepath.Join(dir, "archive.tar")
	if err := TarDir(filepath.Join(dir, "layout"), tmp); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, archive); err != nil {
		return nil, fmt.Errorf("ocipack: %w", err)
	}
	return &Result{Archive: archive, Name: img.Name, Digest: digest.String()}, nil
}

func validate(img *Image) error {
	if img.Binary == "" {
		return errors.New("ocipack: Image.Binary is empty")
	}
	if err := ValidateName(img.Name); err != nil {
		return err
	}
	if img.Path == "" {
		img.Path = "/" + filepath.Base(img.Binary)
	}
	if !path.IsAbs(img.Path) || path.Clean(img.Path) != img.Path || img.Path == "/" || path.Dir(img.Path) == "/tmp" {
		return fmt.Errorf("ocipack: Image.Path %q must be a clean absolute file path outside /tmp", img.Path)
	}
	seen := map[string]bool{img.Path: true}
	for _, l := range img.Symlinks {
		if !path.IsAbs(l) || path.Clean(l) != l || l == "/" || path.Dir(l) == "/tmp" || l == "/tmp" || seen[l] {
			return fmt.Errorf("ocipack: Image.Symlinks: %q must be a clean absolute file path outside /tmp, other than Path and unique", l)
		}
		seen[l] = true
	}
	for _, f := range img.Files {
		if f.Source == "" {
			return fmt.Errorf("ocipack: Image.Files %q: Source (the host file) is empty", f.Path)
		}
		for _, p := range append([]string{f.Path}, f.Symlinks...) {
			if !path.IsAbs(p) || path.Clean(p) != p || p == "/" || path.Dir(p) == "/tmp" || p == "/tmp" || seen[p] {
				return fmt.Errorf("ocipack: Image.Files: %q must be a clean absolute file path outside /tmp, unique in the image", p)
			}
			seen[p] = true
		}
	}
	if len(img.Entrypoint) == 0 {
		img.Entrypoint = []string{img.Path}
	}
	return nil
}

// ValidateName accepts a reference with an explicit registry host and a tag,
// the form the kubelet and containerd agree on without normalization (a short
// "pause:3.10" would be looked up as docker.io/library/pause:3.10).
func ValidateName(ref string) error {
	if _, err := name.NewTag(ref, name.StrictValidation); err != nil {
		return fmt.Errorf("ocipack: image name %q: %w (want e.g. registry.local/app:v1)", ref, err)
	}
	return nil
}

// layerFile is one executable of the layer and the symlinks to it.
type layerFile struct {
	path     string
	symlinks []string
	data     []byte
}

// layerTarball is the layer: each file (0755), symlinks to it, and /tmp
// (1777).
func layerTarball(files []layerFile) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdrs := []*tar.Header{{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777}}
	dirs := map[string]bool{}
	for _, f := range files {
		for _, p := range append([]string{f.path}, f.symlinks...) {
			for d := path.Dir(p); d != "/" && !dirs[d]; d = path.Dir(d) {
				dirs[d] = true
				hdrs = append(hdrs, &tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755})
			}
		}
	}
	sort.Slice(hdrs, func(i, j int) bool { return hdrs[i].Name < hdrs[j].Name })
	for _, h := range hdrs {
		h.ModTime, h.Format = epoch, tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("ocipack: layer: %w", err)
		}
	}
	for _, f := range files {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.path, "/"), Mode: 0o755, Size: int64(len(f.data)), ModTime: epoch, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("ocipack: layer: %w", err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("ocipack: layer: %w", err)
		}
		links := append([]string(nil), f.symlinks...)
		sort.Strings(links)
		for _, l := range links {
			h := &tar.Header{Typeflag: tar.TypeSymlink, Name: strings.TrimPrefix(l, "/"), Linkname: f.path, Mode: 0o777, ModTime: epoch, Format: tar.FormatPAX}
			if err := tw.WriteHeader(h); err != nil {
				return nil, fmt.Errorf("ocipack: layer: %w", err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("ocipack: layer: %w", err)
	}
	return buf.Bytes(), nil
}

// TarDir writes the files under root into a tarball at out, sorted (WalkDir
// order) and with fixed timestamps: an OCI image layout as one archive,
// the same bytes for the same files. The release image (test/harness/release)
// is written with it too.
func TarDir(root, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("ocipack: %w", err)
	}
	tw := tar.NewWriter(f)
	werr := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			hdr.Name += "/"
		}
		hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = epoch, time.Time{}, time.Time{}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if werr == nil {
		werr = tw.Close()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("ocipack: write %s: %w", out, werr)
	}
	return nil
}

// GoBuild describes a static build of one main package.
type GoBuild struct {
	// Dir is the directory a relative Package is relative to (the
	// repository root for ./test/images/...), or, for an import path, a
	// directory of the module that builds it.
	Dir string
	// Package is the main package, e.g. ./test/images/pause. A relative
	// one is built in its own module (the nearest go.mod above it), as `cd
	// test && go build ./images/pause` would: the lab's packages live in
	// the test module, the product's in the root one.
	Package string
	// Output is the binary to write.
	Output string
	// Stderr receives the compiler's output; nil discards it (it is still
	// quoted in the error).
	Stderr io.Writer
}

// BuildGo compiles a static (CGO_ENABLED=0) linux binary for the host's
// architecture with -trimpath -ldflags "-s -w", the way release images are
// built.
func BuildGo(ctx context.Context, b GoBuild) error {
	if b.Package == "" || b.Output == "" {
		return errors.New("ocipack: GoBuild needs Package and Output")
	}
	dir, pkg, err := moduleOf(b.Dir, b.Package)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", b.Output, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if b.Stderr != nil {
		cmd.Stdout = io.MultiWriter(&out, b.Stderr)
		cmd.Stderr = cmd.Stdout
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ocipack: go build %s: %w\n%s", b.Package, err, out.String())
	}
	return nil
}

// moduleOf returns where to run `go build` for pkg and the package as that
// directory sees it: for a relative pkg, the nearest directory at or above
// dir/pkg that holds a go.mod, and pkg relative to it.
func moduleOf(dir, pkg string) (string, string, error) {
	if !strings.HasPrefix(pkg, "./") && !strings.HasPrefix(pkg, "../") {
		return dir, pkg, nil
	}
	abs, err := filepath.Abs(filepath.Join(dir, pkg))
	if err != nil {
		return "", "", err
	}
	for m := abs; ; m = filepath.Dir(m) {
		if _, err := os.Stat(filepath.Join(m, "go.mod")); err == nil {
			rel, err := filepath.Rel(m, abs)
			if err != nil {
				return "", "", err
			}
			return m, "./" + filepath.ToSlash(rel), nil
		}
		if filepath.Dir(m) == m {
			return "", "", fmt.Errorf("ocipack: no go.mod at or above %s (package %s)", abs, pkg)
		}
	}
}

// GoImage is BuildGo then Write: Package becomes the image's only binary.
type GoImage struct {
	GoBuild
	Image
}

// BuildGoImage builds g.Package into a temporary binary (unless g.Output is
// set) and packs it into archive.
func BuildGoImage(ctx context.Context, archive string, g GoImage) (*Result, error) {
	if err := ValidateName(g.Name); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(archive), 0o755); err != nil {
		return nil, fmt.Errorf("ocipack: %w", err)
	}
	if g.Output == "" {
		dir, err := os.MkdirTemp(filepath.Dir(archive), ".ocipack-bin-*")
		if err != nil {
			return nil, fmt.Errorf("ocipack: %w", err)
		}
		defer os.RemoveAll(dir)
		g.Output = filepath.Join(dir, path.Base(strings.TrimSuffix(g.Package, "/")))
	}
	if err := BuildGo(ctx, g.GoBuild); err != nil {
		return nil, err
	}
	if g.Binary == "" {
		g.Binary = g.Output
	}
	return Write(archive, g.Image)
}
