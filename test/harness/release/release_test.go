package release

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestArchivesAreReproducibleAndHoldTheirFiles(t *testing.T) {
	dir := t.TempDir()
	files := []File{
		{Name: "README.md", Mode: 0o644, Data: []byte("readme")},
		{Name: "kubectl-graceguard", Mode: 0o755, Data: []byte("binary")},
		{Name: "LICENSE", Mode: 0o644, Data: []byte("license")},
	}
	for _, p := range []Platform{{"linux", "amd64"}, {"windows", "amd64"}} {
		a := filepath.Join(dir, "a"+p.ArchiveExt())
		b := filepath.Join(dir, "b"+p.ArchiveExt())
		if err := WriteArchive(a, p, files); err != nil {
			t.Fatal(err)
		}
		if err := WriteArchive(b, p, []File{files[2], files[0], files[1]}); err != nil {
			t.Fatal(err)
		}
		da, _ := os.ReadFile(a)
		db, _ := os.ReadFile(b)
		if !bytes.Equal(da, db) {
			t.Errorf("%s: two archives of the same files differ", p)
		}
		got, err := ReadArchive(a)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(files) {
			t.Errorf("%s: %d files, want %d", p, len(got), len(files))
		}
		for _, f := range files {
			g, ok := got[f.Name]
			if !ok || !bytes.Equal(g.Data, f.Data) || g.Mode != f.Mode {
				t.Errorf("%s: %s = %+v, want mode %o and its data", p, f.Name, g, f.Mode)
			}
		}
	}
	if n := ArchiveName("kubectl-graceguard", "v0.3.1", Platform{"windows", "amd64"}); n != "kubectl-graceguard_v0.3.1_windows_amd64.zip" {
		t.Errorf("windows archive name %q", n)
	}
}

func TestChecksumsAreSha256sumsFormat(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"b.tar.gz", "a.zip"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "sums.txt")
	if err := WriteChecksums(path, dir, []string{"b.tar.gz", "a.zip"}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	want := sum("a.zip") + "  a.zip\n" + sum("b.tar.gz") + "  b.tar.gz\n"
	if string(data) != want {
		t.Errorf("checksums:\n%s\nwant:\n%s", data, want)
	}
	parsed, err := ParseChecksums(data)
	if err != nil || parsed["a.zip"] != sum("a.zip") {
		t.Errorf("ParseChecksums = %v, %v", parsed, err)
	}
	if _, err := ParseChecksums([]byte("abc a.zip\n")); err == nil || !strings.Contains(err.Error(), `line 1: "abc a.zip"`) {
		t.Errorf("a malformed line: %v", err)
	}
}

func TestKrewManifestPinsEveryPlatformsArchive(t *testing.T) {
	dir := t.TempDir()
	const ver = "v0.3.1"
	for _, p := range Platforms {
		if err := os.WriteFile(filepath.Join(dir, ArchiveName("kubectl-graceguard", ver, p)), []byte(p.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := KrewManifest(ver, DefaultBaseURL(ver), dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, KrewManifestName)
	if err := WriteKrewManifest(path, m); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	var back KrewPlugin
	if err := yaml.UnmarshalStrict(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.Metadata.Name != "graceguard" || back.Spec.Version != ver || len(back.Spec.Platforms) != len(Platforms) {
		t.Fatalf("manifest:\n%s", data)
	}
	for i, p := range Platforms {
		got := back.Spec.Platforms[i]
		h := sha256.Sum256([]byte(p.String()))
		if got.Sha256 != hex.EncodeToString(h[:]) {
			t.Errorf("%s: sha256 %s is not its archive's", p, got.Sha256)
		}
		if got.Selector.MatchLabels["os"] != p.OS || got.Selector.MatchLabels["arch"] != p.Arch {
			t.Errorf("%s: selector %v", p, got.Selector)
		}
		wantURI := "https://github.com/graceguard/graceguard/releases/download/v0.3.1/" + ArchiveName("kubectl-graceguard", ver, p)
		if got.URI != wantURI || got.Bin != p.Exe("kubectl-graceguard") {
			t.Errorf("%s: uri %s bin %s", p, got.URI, got.Bin)
		}
	}
	if _, err := KrewManifest("0.3.1", "", dir); err == nil || !strings.Contains(err.Error(), `version "0.3.1"`) {
		t.Errorf("a version without v: %v", err)
	}
}
