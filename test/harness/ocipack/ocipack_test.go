package ocipack_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/graceguard/graceguard/test/harness/ocipack"
)

// readArchive returns every regular file of an archive by name.
func readArchive(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = b
		}
	}
}

func blob(t *testing.T, files map[string][]byte, digest string) []byte {
	t.Helper()
	b, ok := files["blobs/"+strings.Replace(digest, ":", "/", 1)]
	if !ok {
		t.Fatalf("blob %s missing from the archive", digest)
	}
	return b
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

func TestWriteIsAnImportableSingleLayerOCIArchive(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "app")
	payload := []byte("#!not really an ELF, the packer does not care\n")
	if err := os.WriteFile(bin, payload, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "app.tar")
	res, err := ocipack.Write(archive, ocipack.Image{
		Name: "registry.local/app:v1", Binary: bin, User: "65532:65532", ExposedPorts: []string{"8080/tcp"},
	})
	if err != nil {
		t.Fatal(err)
	}
	files := readArchive(t, archive)
	if string(files["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` && !strings.Contains(string(files["oci-layout"]), "1.0.0") {
		t.Errorf("oci-layout = %q", files["oci-layout"])
	}

	var index struct{ Manifests []descriptor }
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	if len(index.Manifests) != 1 {
		t.Fatalf("index.json has %d manifests, want 1", len(index.Manifests))
	}
	m := index.Manifests[0]
	if got := m.Annotations[ocipack.AnnotationImageName]; got != "registry.local/app:v1" {
		t.Errorf("ctr would name the image %q, want registry.local/app:v1", got)
	}
	if got := m.Annotations[ocipack.AnnotationRefName]; got != "v1" {
		t.Errorf("ref.name = %q, want v1", got)
	}
	if m.Digest != res.Digest || m.MediaType != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("manifest descriptor = %+v, result digest %s", m, res.Digest)
	}
	if m.Platform == nil || m.Platform.OS != "linux" || m.Platform.Architecture != runtime.GOARCH {
		t.Errorf("platform = %+v", m.Platform)
	}

	var manifest struct {
		Config descriptor
		Layers []descriptor
	}
	if err := json.Unmarshal(blob(t, files, m.Digest), &manifest); err != nil {
		t.Fatal(err)
	}
	if manifest.Config.MediaType != "application/vnd.oci.image.config.v1+json" || len(manifest.Layers) != 1 ||
		manifest.Layers[0].MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" {
		t.Fatalf("manifest = %+v, want an OCI config and one gzip layer", manifest)
	}
	var config struct {
		OS, Architecture string
		Config           struct {
			Entrypoint   []string
			User         string
			ExposedPorts map[string]struct{}
		}
	}
	if err := json.Unmarshal(blob(t, files, manifest.Config.Digest), &config); err != nil {
		t.Fatal(err)
	}
	if config.OS != "linux" || len(config.Config.Entrypoint) != 1 || config.Config.Entrypoint[0] != "/app" ||
		config.Config.User != "65532:65532" || len(config.Config.ExposedPorts) != 1 {
		t.Errorf("config = %+v", config)
	}

	zr, err := gzip.NewReader(bytes.NewReader(blob(t, files, manifest.Layers[0].Digest)))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	entries := map[string]*tar.Header{}
	var content []byte
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries[h.Name] = h
		if h.Name == "app" {
			content, _ = io.ReadAll(tr)
		}
	}
	if h := entries["app"]; h == nil || h.Mode != 0o755 || !bytes.Equal(content, payload) {
		t.Errorf("layer lacks the executable binary at /app: %+v", h)
	}
	if h := entries["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("layer lacks a sticky world-writable /tmp: %+v", h)
	}
}

func TestWriteIsReproducible(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "pause")
	if err := os.WriteFile(bin, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	img := ocipack.Image{Name: "registry.local/pause:3.10", Binary: bin, Path: "/usr/local/bin/pause"}
	a, err := ocipack.Write(filepath.Join(dir, "a.tar"), img)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ocipack.Write(filepath.Join(dir, "b.tar"), img)
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest != b.Digest {
		t.Errorf("two packs of the same binary differ: %s vs %s", a.Digest, b.Digest)
	}
	fa, _ := os.ReadFile(a.Archive)
	fb, _ := os.ReadFile(b.Archive)
	if !bytes.Equal(fa, fb) {
		t.Error("two packs of the same binary are not byte-identical archives")
	}
}

func TestNamesWithoutRegistryOrTagAreRefused(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"pause:3.10", "registry"},
		{"team/app:v1", "registry"},
		{"registry.local/pause", "registry.local/app:v1"},
		{"Registry.local/UPPER:1", "image name"},
		{"localhost/pause:1", ""},
		{"registry.local:5000/team/app:v2", ""},
	} {
		err := ocipack.ValidateName(tc.name)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: unexpected error %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
}

// layerOf reads the first layer of the first image of an archive: each
// entry's header and content, by name.
func layerOf(t *testing.T, archive string) (map[string]*tar.Header, map[string]string) {
	t.Helper()
	files := readArchive(t, archive)
	var index struct{ Manifests []descriptor }
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	var manifest struct{ Layers []descriptor }
	if err := json.Unmarshal(blob(t, files, index.Manifests[0].Digest), &manifest); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(blob(t, files, manifest.Layers[0].Digest)))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	entries, data := map[string]*tar.Header{}, map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries[h.Name] = h
		b, _ := io.ReadAll(tr)
		data[h.Name] = string(b)
	}
	return entries, data
}

func TestSymlinksPointAtTheBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "app")
	if err := os.WriteFile(bin, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := ocipack.Write(filepath.Join(dir, "app.tar"), ocipack.Image{
		Name: "registry.local/app:v1", Binary: bin, Symlinks: []string{"/usr/bin/sleep", "/bin/sleep"},
	})
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := layerOf(t, res.Archive)
	for _, l := range []string{"bin/sleep", "usr/bin/sleep"} {
		if h := entries[l]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "/app" {
			t.Errorf("%s = %+v, want a symlink to /app", l, h)
		}
	}
	for _, d := range []string{"bin/", "usr/", "usr/bin/"} {
		if h := entries[d]; h == nil || h.Typeflag != tar.TypeDir {
			t.Errorf("layer lacks the directory %s", d)
		}
	}
	for _, bad := range [][]string{{"relative"}, {"/app"}, {"/tmp/x"}, {"/bin/x", "/bin/x"}} {
		if _, err := ocipack.Write(filepath.Join(dir, "bad.tar"), ocipack.Image{Name: "registry.local/app:v1", Binary: bin, Symlinks: bad}); err == nil {
			t.Errorf("Symlinks %q accepted", bad)
		}
	}
}

func TestFilesLandBesideTheBinary(t *testing.T) {
	dir := t.TempDir()
	bin, tool := filepath.Join(dir, "app"), filepath.Join(dir, "busybox")
	for _, f := range []string{bin, tool} {
		if err := os.WriteFile(f, []byte(filepath.Base(f)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	res, err := ocipack.Write(filepath.Join(dir, "app.tar"), ocipack.Image{
		Name: "registry.local/app:v1", Binary: bin, Path: "/usr/local/bin/app",
		Files: []ocipack.File{{Source: tool, Path: "/bin/busybox", Symlinks: []string{"/bin/sh", "/bin/sleep"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	entries, data := layerOf(t, res.Archive)
	if h := entries["bin/busybox"]; h == nil || h.Typeflag != tar.TypeReg || h.Mode != 0o755 || data["bin/busybox"] != "busybox" {
		t.Errorf("bin/busybox = %+v (%q), want the host file, 0755", h, data["bin/busybox"])
	}
	if data["usr/local/bin/app"] != "app" {
		t.Errorf("usr/local/bin/app holds %q, want the binary", data["usr/local/bin/app"])
	}
	for _, l := range []string{"bin/sh", "bin/sleep"} {
		if h := entries[l]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "/bin/busybox" {
			t.Errorf("%s = %+v, want a symlink to /bin/busybox", l, h)
		}
	}
	for _, bad := range []ocipack.File{
		{Source: tool, Path: "/usr/local/bin/app"},
		{Source: tool, Path: "bin/busybox"},
		{Source: tool, Path: "/bin/busybox", Symlinks: []string{"/tmp/sh"}},
		{Path: "/bin/busybox"},
		{Source: filepath.Join(dir, "missing"), Path: "/bin/busybox"},
	} {
		if _, err := ocipack.Write(filepath.Join(dir, "bad.tar"), ocipack.Image{Name: "registry.local/app:v1", Binary: bin, Path: "/usr/local/bin/app", Files: []ocipack.File{bad}}); err == nil {
			t.Errorf("Files %+v accepted", bad)
		}
	}
}

// A relative package is built in the module that holds it: the lab's test
// images in test/go.mod's module, the product's commands in the root one.
func TestRelativePackagesBuildInTheirOwnModule(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"cmd/webhook", "test/images/pause"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []string{"go.mod", "test/go.mod"} {
		if err := os.WriteFile(filepath.Join(root, m), []byte("module x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ pkg, dir, rel string }{
		{"./test/images/pause", filepath.Join(root, "test"), "./images/pause"},
		{"./cmd/webhook", root, "./cmd/webhook"},
		{"github.com/graceguard/graceguard/cmd/webhook", root, "github.com/graceguard/graceguard/cmd/webhook"},
	} {
		dir, rel, err := ocipack.ModuleOf(root, c.pkg)
		if err != nil || dir != c.dir || rel != c.rel {
			t.Errorf("moduleOf(%q) = %q, %q, %v; want %q, %q", c.pkg, dir, rel, err, c.dir, c.rel)
		}
	}
	if _, _, err := ocipack.ModuleOf(filepath.Join(root, "..", filepath.Base(root)+"-none"), "./x"); err == nil {
		t.Error("no go.mod above: want an error")
	}
}
