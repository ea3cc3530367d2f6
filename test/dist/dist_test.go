//go:build dist

// Package dist_test checks a `make dist` output directory as a user (and
// krew) would use it: checksums, archives, binaries for the right platform
// with the release's version linked in, the krew manifest through krew's
// own validation and install, and the image reproduced by `make image-oci`.
//
//	make dist dist-check      (GG_DIST=dir selects another directory)
package dist_test

import (
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/graceguard/graceguard/test/harness/release"
)

// krewVersion is sigs.k8s.io/krew's latest version on the Go module proxy.
const krewVersion = "v0.4.3"

var repoRoot = filepath.Join("..", "..")

func distDir(t *testing.T) string {
	t.Helper()
	d := os.Getenv("GG_DIST")
	if d == "" {
		d = filepath.Join(repoRoot, "dist")
	}
	if _, err := os.Stat(filepath.Join(d, release.KrewManifestName)); err != nil {
		t.Fatalf("no release in %s (%v): run `make dist` first", d, err)
	}
	return d
}

// manifest reads the krew manifest; its version is the release's.
func manifest(t *testing.T, dir string) *release.KrewPlugin {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, release.KrewManifestName))
	if err != nil {
		t.Fatal(err)
	}
	var m release.KrewPlugin
	if err := yaml.UnmarshalStrict(data, &m); err != nil {
		t.Fatalf("%s: %v", release.KrewManifestName, err)
	}
	return &m
}

func TestChecksumsCoverEveryArtifact(t *testing.T) {
	dir := distDir(t)
	ver := manifest(t, dir).Spec.Version
	data, err := os.ReadFile(filepath.Join(dir, release.ChecksumsName(ver)))
	if err != nil {
		t.Fatal(err)
	}
	sums, err := release.ParseChecksums(data)
	if err != nil {
		t.Fatal(err)
	}
	chart := release.ChartArchiveName(ver)
	want := []string{release.KrewManifestName, release.ImageArchiveName(ver), release.SBOMName(release.ImageArchiveName(ver)), chart, chart + ".prov"}
	for _, b := range release.Binaries {
		for _, p := range release.Platforms {
			want = append(want, release.ArchiveName(b.Name, ver, p), release.SBOMName(release.ArchiveName(b.Name, ver, p)))
		}
	}
	if len(sums) != len(want) {
		t.Errorf("checksums list %d files, want %d: %v", len(sums), len(want), sums)
	}
	for _, n := range want {
		got, err := release.SHA256File(filepath.Join(dir, n))
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		if sums[n] != got {
			t.Errorf("%s: checksum file says %q, file is %s", n, sums[n], got)
		}
	}
}

func TestArchivesHoldABinaryForTheirPlatformWithTheVersion(t *testing.T) {
	dir := distDir(t)
	ver := manifest(t, dir).Spec.Version
	for _, b := range release.Binaries {
		for _, p := range release.Platforms {
			name := release.ArchiveName(b.Name, ver, p)
			files, err := release.ReadArchive(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			exe := p.Exe(b.Name)
			for _, f := range []string{exe, "LICENSE", "README.md"} {
				if _, ok := files[f]; !ok {
					t.Errorf("%s lacks %s", name, f)
				}
			}
			bin := files[exe]
			if bin.Mode&0o111 == 0 {
				t.Errorf("%s: %s is not executable (mode %o)", name, exe, bin.Mode)
			}
			if got := binaryPlatform(t, bin.Data); got != p {
				t.Errorf("%s: %s is a %s binary", name, exe, got)
			}
			if !strings.Contains(string(bin.Data), ver) {
				t.Errorf("%s: %s does not hold the version %s", name, exe, ver)
			}
			if p.OS == runtime.GOOS && p.Arch == runtime.GOARCH {
				path := filepath.Join(t.TempDir(), exe)
				if err := os.WriteFile(path, bin.Data, 0o755); err != nil {
					t.Fatal(err)
				}
				args := []string{"--version"}
				if b.Name == "kubectl-graceguard" {
					args = []string{"version"}
				}
				out, err := exec.Command(path, args...).CombinedOutput()
				if err != nil || !strings.HasPrefix(string(out), b.Name+" "+ver+" (") {
					t.Errorf("%s %v: %v %q, want %q", exe, args, err, out, b.Name+" "+ver)
				}
			}
		}
	}
}

// binaryPlatform reads the OS and architecture from an executable's header.
func binaryPlatform(t *testing.T, data []byte) release.Platform {
	t.Helper()
	r := strings.NewReader(string(data))
	if f, err := elf.NewFile(r); err == nil {
		switch f.Machine {
		case elf.EM_X86_64:
			return release.Platform{OS: "linux", Arch: "amd64"}
		case elf.EM_AARCH64:
			return release.Platform{OS: "linux", Arch: "arm64"}
		}
		return release.Platform{OS: "linux", Arch: f.Machine.String()}
	}
	if f, err := macho.NewFile(r); err == nil {
		switch f.Cpu {
		case macho.CpuAmd64:
			return release.Platform{OS: "darwin", Arch: "amd64"}
		case macho.CpuArm64:
			return release.Platform{OS: "darwin", Arch: "arm64"}
		}
		return release.Platform{OS: "darwin", Arch: f.Cpu.String()}
	}
	if f, err := pe.NewFile(r); err == nil {
		if f.Machine == pe.IMAGE_FILE_MACHINE_AMD64 {
			return release.Platform{OS: "windows", Arch: "amd64"}
		}
		return release.Platform{OS: "windows", Arch: "unknown"}
	}
	return release.Platform{OS: "unknown", Arch: "unknown"}
}

// krewTools builds krew and its manifest validator from the Go module proxy
// (cached under bin/tools).
func krewTools(t *testing.T) (krew, validate string) {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join(repoRoot, "bin", "tools", "krew-"+krewVersion))
	if err != nil {
		t.Fatal(err)
	}
	krew, validate = filepath.Join(bin, "krew"), filepath.Join(bin, "validate-krew-manifest")
	cmd := exec.Command("go", "install", "sigs.k8s.io/krew/cmd/krew@"+krewVersion, "sigs.k8s.io/krew/cmd/validate-krew-manifest@"+krewVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+bin, "GOFLAGS=", "GOWORK=off", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building krew %s: %v\n%s", krewVersion, err, out)
	}
	return krew, validate
}

// TestKrewAcceptsTheManifest runs krew's own validation
// (cmd/validate-krew-manifest): on the shipped manifest as it is, then on
// one that differs only in downloading the archives from this directory,
// which makes it install every platform with `kubectl krew install
// --manifest` (download, sha256 check, unpack, bin and LICENSE present).
// Finally the host's plugin is installed with krew and run.
func TestKrewAcceptsTheManifest(t *testing.T) {
	dir := distDir(t)
	m := manifest(t, dir)
	krew, validate := krewTools(t)

	shipped := filepath.Join(dir, release.KrewManifestName)
	if out, err := exec.Command(validate, "-manifest", shipped, "-skip-install").CombinedOutput(); err != nil {
		t.Fatalf("krew rejects %s: %v\n%s", shipped, err, out)
	}

	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()
	local := *m
	local.Spec.Platforms = nil
	for _, p := range m.Spec.Platforms {
		name := p.URI[strings.LastIndex(p.URI, "/")+1:]
		if p.URI != release.DefaultBaseURL(m.Spec.Version)+"/"+name {
			t.Errorf("%v: uri %s is not under the release's download URL", p.Selector, p.URI)
		}
		p.URI = srv.URL + "/" + name
		local.Spec.Platforms = append(local.Spec.Platforms, p)
	}
	work := t.TempDir()
	localManifest := filepath.Join(work, release.KrewManifestName)
	if err := release.WriteKrewManifest(localManifest, &local); err != nil {
		t.Fatal(err)
	}
	// validate-krew-manifest installs with `kubectl krew install`: kubectl
	// finds plugins as kubectl-<name> on PATH and runs them with the rest
	// of the arguments, which is all this kubectl does.
	path := filepath.Join(work, "path")
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(krew, filepath.Join(path, "kubectl-krew")); err != nil {
		t.Fatal(err)
	}
	shim := "#!/bin/sh\n# kubectl's plugin dispatch: kubectl NAME ARGS... runs kubectl-NAME ARGS...\nname=$1; shift; exec \"kubectl-$name\" \"$@\"\n"
	if err := os.WriteFile(filepath.Join(path, "kubectl"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+path+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd := exec.Command(validate, "-manifest", localManifest)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("krew could not install every platform: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "all 5 spec.platforms installed fine") {
		t.Errorf("validate-krew-manifest did not install every platform:\n%s", out)
	}

	root := filepath.Join(work, "krew")
	cmd = exec.Command(filepath.Join(path, "kubectl"), "krew", "install", "--manifest="+localManifest)
	cmd.Env = append(env, "KREW_ROOT="+root)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl krew install: %v\n%s", err, out)
	}
	out, err = exec.Command(filepath.Join(root, "bin", "kubectl-graceguard"), "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "kubectl-graceguard "+m.Spec.Version+" (") {
		t.Errorf("the plugin krew installed says %q (%v), want version %s", out, err, m.Spec.Version)
	}
}

// TestImageOCIReproducesTheReleaseImage: `make image-oci` (what make e2e
// installs) builds the very image of the release, digest for digest.
func TestImageOCIReproducesTheReleaseImage(t *testing.T) {
	dir := distDir(t)
	ver := manifest(t, dir).Spec.Version
	var rel release.Image
	data, err := os.ReadFile(filepath.Join(dir, release.ImageInfoName))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rel); err != nil {
		t.Fatal(err)
	}
	idx, ann, err := release.ReadImage(filepath.Join(dir, rel.Archive), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := idx.Digest(); d.String() != rel.Digest || ann[release.AnnotationImageName] != rel.Name {
		t.Errorf("%s is %s named %q; image.json says %s %s", rel.Archive, d, ann[release.AnnotationImageName], rel.Digest, rel.Name)
	}

	out := filepath.Join(t.TempDir(), "image")
	cmd := exec.Command("go", "run", "./dist", "-version", ver, "-image-only", "-out", out)
	cmd.Dir = filepath.Join(repoRoot, "hack") // hack/dist's own module; it works from the repository root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/dist -image-only: %v\n%s", err, b)
	}
	var again release.Image
	data, err = os.ReadFile(filepath.Join(out, release.ImageInfoName))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &again); err != nil {
		t.Fatal(err)
	}
	if again.Digest != rel.Digest || again.Name != rel.Name {
		t.Errorf("make image-oci built %s %s; the release has %s %s", again.Name, again.Digest, rel.Name, rel.Digest)
	}

	// The webhook in the image for this machine runs and has the version.
	for _, p := range release.ImagePlatforms {
		if p.OS != runtime.GOOS || p.Arch != runtime.GOARCH {
			continue
		}
		im, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		for _, desc := range im.Manifests {
			if desc.Platform.Architecture != p.Arch {
				continue
			}
			img, err := idx.Image(desc.Digest)
			if err != nil {
				t.Fatal(err)
			}
			_, files, err := release.Files(img)
			if err != nil {
				t.Fatal(err)
			}
			bin := filepath.Join(t.TempDir(), "webhook")
			if err := os.WriteFile(bin, files[release.ImageBinary], 0o755); err != nil {
				t.Fatal(err)
			}
			b, err := exec.Command(bin, "--version").CombinedOutput()
			if err != nil || !strings.HasPrefix(string(b), "graceguard-webhook "+ver+" (") {
				t.Errorf("the image's webhook says %q (%v), want %s", b, err, ver)
			}
		}
	}
}
