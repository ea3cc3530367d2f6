package release

import (
	"archive/tar"
	"bufio"
	"crypto/x509"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/graceguard/graceguard/internal/version"
)

// fakeImage writes an image of stand-in binaries (content names the arch).
func fakeImage(t *testing.T, dir, ver string) *Image {
	t.Helper()
	bins := map[Platform]string{}
	for _, p := range ImagePlatforms {
		path := filepath.Join(dir, "webhook-"+p.Arch)
		if err := os.WriteFile(path, []byte("webhook for "+p.String()), 0o755); err != nil {
			t.Fatal(err)
		}
		bins[p] = path
	}
	img, err := WriteImage(filepath.Join(dir, ImageArchiveName(ver)), ImageSpec{Version: ver, Binaries: bins})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestImageIsAMultiArchDistrolessLikeIndex(t *testing.T) {
	dir := t.TempDir()
	img := fakeImage(t, dir, "v0.0.0-dev+0123abcd")
	if img.Name != "registry.local/graceguard:v0.0.0-dev_0123abcd" {
		t.Errorf("name %q: a tag cannot hold '+'", img.Name)
	}
	again := fakeImage(t, t.TempDir(), "v0.0.0-dev+0123abcd")
	if again.Digest != img.Digest {
		t.Errorf("not reproducible: %s then %s", img.Digest, again.Digest)
	}

	idx, ann, err := ReadImage(img.Archive, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if ann[AnnotationImageName] != img.Name || ann[AnnotationRefName] != "v0.0.0-dev_0123abcd" {
		t.Errorf("index.json annotations %v: ctr would not name the image %s", ann, img.Name)
	}
	d, _ := idx.Digest()
	if d.String() != img.Digest {
		t.Errorf("index digest %s, reported %s", d, img.Digest)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != len(ImagePlatforms) {
		t.Fatalf("%d manifests, want %d", len(im.Manifests), len(ImagePlatforms))
	}
	for i, p := range ImagePlatforms {
		desc := im.Manifests[i]
		if desc.Platform == nil || desc.Platform.OS != p.OS || desc.Platform.Architecture != p.Arch || img.Manifests[p.String()] != desc.Digest.String() {
			t.Errorf("manifest %d: %+v, want %s (%s)", i, desc.Platform, p, img.Manifests[p.String()])
		}
		image, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := image.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != p.OS || cf.Architecture != p.Arch {
			t.Errorf("%s: config says %s/%s", p, cf.OS, cf.Architecture)
		}
		hdrs, data, err := Files(image)
		if err != nil {
			t.Fatal(err)
		}
		if string(data[ImageBinary]) != "webhook for "+p.String() || hdrs[ImageBinary].Mode != 0o755 {
			t.Errorf("%s: %s is not its binary", p, ImageBinary)
		}
		checkDistrolessStatic(t, p.String(), cf, hdrs, data)
	}
}

// checkDistrolessStatic checks what a Pod relies on from distroless
// static:nonroot.
func checkDistrolessStatic(t *testing.T, what string, cf *v1.ConfigFile, hdrs map[string]*tar.Header, data map[string][]byte) {
	t.Helper()
	if cf.Config.User != ImageUser || !reflect.DeepEqual(cf.Config.Entrypoint, ImageEntrypoint) || cf.Config.WorkingDir != ImageWorkingDir {
		t.Errorf("%s: config %+v", what, cf.Config)
	}
	if !strings.Contains(string(data["/etc/passwd"]), "nonroot:x:65532:65532:nonroot:/home/nonroot:") {
		t.Errorf("%s: /etc/passwd has no nonroot 65532:\n%s", what, data["/etc/passwd"])
	}
	if h := hdrs["/home/nonroot"]; h == nil || h.Uid != 65532 {
		t.Errorf("%s: /home/nonroot is not 65532's: %+v", what, h)
	}
	if h := hdrs["/tmp"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("%s: /tmp is not sticky world-writable: %+v", what, h)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data[CABundlePath]) || len(data[CABundlePath]) < 100_000 {
		t.Errorf("%s: %s holds no CA bundle (%d bytes)", what, CABundlePath, len(data[CABundlePath]))
	}
	for p, h := range hdrs {
		if h.Typeflag == tar.TypeReg && h.Mode&0o111 != 0 && p != ImageBinary {
			t.Errorf("%s: %s is executable: the image holds no binary but the webhook (no shell)", what, p)
		}
		if h.Typeflag == tar.TypeSymlink {
			t.Errorf("%s: symlink %s", what, p)
		}
	}
	if _, ok := hdrs["/bin/sh"]; ok {
		t.Errorf("%s: /bin/sh exists", what)
	}
}

// TestImageMatchesTheDockerfile holds `make image` (Docker) and the image
// built here together: the Dockerfile's base, user, entrypoint, binary path
// and build flags are the ones WriteImage and hack/dist use.
func TestImageMatchesTheDockerfile(t *testing.T) {
	df := parseDockerfile(t, filepath.Join("..", "..", "..", "Dockerfile"))
	stages := df.stages
	if len(stages) != 2 {
		t.Fatalf("Dockerfile has %d stages, want build + final", len(stages))
	}
	build, final := stages[0], stages[1]
	if final.from != ImageBase {
		t.Errorf("final FROM %q; WriteImage reproduces %q (BaseFiles): update both together", final.from, ImageBase)
	}
	if got := final.last("USER"); got != ImageUser {
		t.Errorf("USER %q, image %q", got, ImageUser)
	}
	if got := final.last("ENTRYPOINT"); got != `["`+strings.Join(ImageEntrypoint, `", "`)+`"]` {
		t.Errorf("ENTRYPOINT %s, image %q", got, ImageEntrypoint)
	}
	if got := final.last("COPY"); got != "--from=build /out/webhook "+ImageBinary {
		t.Errorf("COPY %q: the binary must land at %s", got, ImageBinary)
	}
	run := build.last("RUN")
	for _, want := range []string{"CGO_ENABLED=0", "go build -trimpath", "-s -w -X github.com/graceguard/graceguard/internal/version.Version=${VERSION}", "./cmd/webhook"} {
		if !strings.Contains(run, want) {
			t.Errorf("build RUN %q lacks %q (hack/dist builds so)", run, want)
		}
	}
	gomod, err := os.ReadFile(filepath.Join("..", "..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVer := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if goVer == nil || build.from != "golang:"+string(goVer[1]) {
		t.Errorf("build FROM %q, go.mod's Go is %s", build.from, goVer)
	}
}

type dockerStage struct {
	from string
	ins  [][2]string // instruction, arguments
}

func (s dockerStage) last(ins string) string {
	for i := len(s.ins) - 1; i >= 0; i-- {
		if s.ins[i][0] == ins {
			return s.ins[i][1]
		}
	}
	return ""
}

type dockerfile struct{ stages []dockerStage }

// parseDockerfile reads instructions (joining continuation lines, skipping
// comments); a stage starts at each FROM ("FROM image [AS name]").
func parseDockerfile(t *testing.T, path string) dockerfile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var df dockerfile
	var cur string
	sc := bufio.NewScanner(f)
	flush := func() {
		line := strings.Join(strings.Fields(cur), " ")
		cur = ""
		if line == "" {
			return
		}
		ins, args, _ := strings.Cut(line, " ")
		ins = strings.ToUpper(ins)
		if ins == "FROM" {
			df.stages = append(df.stages, dockerStage{from: strings.Fields(args)[0]})
			return
		}
		if len(df.stages) == 0 {
			t.Fatalf("%s: %s before FROM", path, ins)
		}
		s := &df.stages[len(df.stages)-1]
		s.ins = append(s.ins, [2]string{ins, args})
	}
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") && cur == "" {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur += " " + strings.TrimSuffix(line, "\\")
			continue
		}
		cur += " " + line
		flush()
	}
	return df
}

// TestChartInstallsAReleaseImageTag: the chart's default image tag is its
// appVersion, so it must be a release version in the form make dist tags
// the image with.
func TestChartInstallsAReleaseImageTag(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "charts", "graceguard", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^appVersion: "?([^"\n]+)"?$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("Chart.yaml has no appVersion")
	}
	app := string(m[1])
	if !version.Valid(app) || ImageTag(app) != app {
		t.Errorf("appVersion %q is not a release version (vX.Y.Z): the default image %s:%s would not be a release image", app, ImageRepository, app)
	}
	values, err := os.ReadFile(filepath.Join("..", "..", "..", "charts", "graceguard", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(values), "repository: "+ImageRepository+"\n") {
		t.Errorf("values.yaml's image.repository is not %s, the release image's", ImageRepository)
	}
}
