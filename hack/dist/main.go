// Command dist makes graceguard's release artifacts into a directory (make
// dist): the kubectl plugin and the webhook for every release platform as
// archives (tar.gz; zip on Windows) holding the binary, LICENSE and
// README.md; the webhook's multi-arch OCI image; a krew plugin manifest
// whose sha256 are the plugin archives'; and a checksums file over all of
// them; the chart packaged with its Helm provenance, a CycloneDX SBOM per
// archive and for the image, and the checksums and image.json signed by a
// throwaway OpenPGP key whose public half is shipped. With -image-only it makes just the image (make image-oci, make e2e).
//
//	go -C hack run ./dist -version v0.3.1 [-out dist] [-base-url URL] [-cyclonedx-gomod PATH | -image-only]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/graceguard/graceguard/internal/version"
	"github.com/graceguard/graceguard/test/harness/release"
	"github.com/graceguard/graceguard/test/harness/repo"
)

func main() {
	if err := repo.Chdir(); err != nil {
		fmt.Fprintln(os.Stderr, "dist:", err)
		os.Exit(2)
	}
	ver := flag.String("version", "", "release version, vX.Y.Z[-PRE][+BUILD] (make passes hack/version.sh's)")
	out := flag.String("out", "dist", "output directory (emptied first)")
	baseURL := flag.String("base-url", "", "where the archives will be downloaded from, for the krew manifest (default "+release.DefaultBaseURL("<version>")+")")
	imageOnly := flag.Bool("image-only", false, "make only the webhook image")
	sbomTool := flag.String("cyclonedx-gomod", "", "the cyclonedx-gomod binary that writes the SBOMs (make dist builds the pinned one); required without -image-only")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *ver, *out, *baseURL, *sbomTool, *imageOnly); err != nil {
		fmt.Fprintf(os.Stderr, "dist: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, ver, out, baseURL, sbomTool string, imageOnly bool) error {
	if !version.Valid(ver) {
		return fmt.Errorf("-version %q: want a semantic version with a leading v, e.g. v0.3.1 or v0.0.0-dev+0123abcd", ver)
	}
	if !imageOnly {
		if fi, err := os.Stat(sbomTool); err != nil || fi.IsDir() {
			return fmt.Errorf("-cyclonedx-gomod %q: want the cyclonedx-gomod executable (make dist builds it into bin/tools/)", sbomTool)
		}
	}
	if baseURL == "" {
		baseURL = release.DefaultBaseURL(ver)
	}
	if _, err := os.Stat("go.mod"); err != nil {
		return errors.New("run from the repository root (make dist does)")
	}
	start := time.Now()
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	build, err := os.MkdirTemp("", "graceguard-dist-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(build)

	platforms, binaries := release.Platforms, release.Binaries
	if imageOnly {
		platforms, binaries = release.ImagePlatforms, nil
		for _, b := range release.Binaries {
			if b.Name == "graceguard-webhook" {
				binaries = append(binaries, b)
			}
		}
	}
	bins := map[string]string{} // "<name> <platform>" -> path
	for _, p := range platforms {
		for _, b := range binaries {
			path := filepath.Join(build, p.OS+"_"+p.Arch, p.Exe(b.Name))
			t := time.Now()
			if err := goBuild(ctx, ver, p, b.Package, path); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "dist: built %s for %s in %s\n", b.Name, p, time.Since(t).Round(100*time.Millisecond))
			bins[b.Name+" "+p.String()] = path
		}
	}

	var names []string
	if !imageOnly {
		license, err := os.ReadFile("LICENSE")
		if err != nil {
			return err
		}
		readme, err := os.ReadFile("README.md")
		if err != nil {
			return err
		}
		for _, b := range binaries {
			for _, p := range platforms {
				data, err := os.ReadFile(bins[b.Name+" "+p.String()])
				if err != nil {
					return err
				}
				name := release.ArchiveName(b.Name, ver, p)
				err = release.WriteArchive(filepath.Join(out, name), p, []release.File{
					{Name: p.Exe(b.Name), Mode: 0o755, Data: data},
					{Name: "LICENSE", Mode: 0o644, Data: license},
					{Name: "README.md", Mode: 0o644, Data: readme},
				})
				if err != nil {
					return err
				}
				names = append(names, name)
				sbom := release.SBOMName(name)
				if err := writeSBOM(ctx, sbomTool, ver, bins[b.Name+" "+p.String()], filepath.Join(out, sbom)); err != nil {
					return err
				}
				names = append(names, sbom)
			}
		}
		m, err := release.KrewManifest(ver, baseURL, out)
		if err != nil {
			return err
		}
		if err := release.WriteKrewManifest(filepath.Join(out, release.KrewManifestName), m); err != nil {
			return err
		}
		names = append(names, release.KrewManifestName)
	}

	images := map[release.Platform]string{}
	for _, p := range release.ImagePlatforms {
		images[p] = bins["graceguard-webhook "+p.String()]
	}
	img, err := release.WriteImage(filepath.Join(out, release.ImageArchiveName(ver)), release.ImageSpec{Version: ver, Binaries: images})
	if err != nil {
		return err
	}
	img.Archive = filepath.Base(img.Archive)
	j, err := json.MarshalIndent(img, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, release.ImageInfoName), append(j, '\n'), 0o644); err != nil {
		return err
	}
	names = append(names, img.Archive)
	if imageOnly {
		return release.WriteChecksums(filepath.Join(out, release.ChecksumsName(ver)), out, names)
	}
	// The image's SBOM is its linux/amd64 webhook's: the linux/arm64 one is
	// built from the same modules.
	if err := writeSBOM(ctx, sbomTool, ver, images[release.ImagePlatforms[0]], filepath.Join(out, release.SBOMName(img.Archive))); err != nil {
		return err
	}
	names = append(names, release.SBOMName(img.Archive))

	key, err := release.NewSigningKey(ver)
	if err != nil {
		return err
	}
	if err := release.WritePublicKey(filepath.Join(out, release.PublicKeyName(ver)), key); err != nil {
		return err
	}
	chart, err := release.PackageChart(filepath.Join("charts", "graceguard"), ver, out, key)
	if err != nil {
		return err
	}
	names = append(names, filepath.Base(chart), filepath.Base(chart)+".prov")
	sums := filepath.Join(out, release.ChecksumsName(ver))
	if err := release.WriteChecksums(sums, out, names); err != nil {
		return err
	}
	for _, f := range []string{sums, filepath.Join(out, release.ImageInfoName)} {
		if err := release.SignFile(f, key); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "dist: %s in %s: %d artifacts in %s; image %s@%s\n", ver, time.Since(start).Round(time.Second), len(names), out, img.Name, img.Digest)
	return nil
}

// writeSBOM writes the CycloneDX SBOM of the Go binary bin (its embedded
// build information: module, version, dependencies) to out.
func writeSBOM(ctx context.Context, tool, ver, bin, out string) error {
	cmd := exec.CommandContext(ctx, tool, "bin", "-json", "-version", ver, "-output", out, bin)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("cyclonedx-gomod bin %s: %w\n%s", bin, err, b)
	}
	return nil
}

// goBuild builds pkg for p, statically, with the version linked in.
func goBuild(ctx context.Context, ver string, p release.Platform, pkg, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath",
		"-ldflags", "-s -w -X github.com/graceguard/graceguard/internal/version.Version="+ver, "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s for %s: %w", pkg, p, err)
	}
	return nil
}
