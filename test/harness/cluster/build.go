package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/graceguard/graceguard/test/harness/logs"
	"github.com/graceguard/graceguard/test/harness/ocipack"
)

// containerdBuildTags leave out the snapshotters this machine has no use for
// and tracing, so containerd builds without cgo.
const containerdBuildTags = "no_btrfs no_devmapper no_zfs no_tracing"

var containerdCommands = []string{"containerd", "containerd-shim-runc-v2", "ctr"}

// cniPluginDirs are where Debian (/usr/lib/cni) and upstream (/opt/cni/bin)
// install the CNI plugins.
var cniPluginDirs = []string{"/usr/lib/cni", "/opt/cni/bin"}

// ensureBinaries makes every executable available, building or installing
// what is missing. Builds are cached under RepoRoot/bin.
func ensureBinaries(ctx context.Context, o Options) (binaries, error) {
	var b binaries
	var err error
	if b.runc, b.cniBinDir, err = ensureHostPackages(ctx, o); err != nil {
		return b, err
	}
	if b.k8sDir, err = ensureKubernetes(ctx, o); err != nil {
		return b, err
	}
	b.k8sVersion = k8sVersionOf(b.k8sDir)
	if b.containerdDir, err = ensureContainerd(ctx, o); err != nil {
		return b, err
	}
	return b, nil
}

// findHostPackages locates runc, a CNI plugin directory with the plugins the
// cluster uses, iptables and busybox.
func findHostPackages() (runc, cniDir string, missing []string) {
	runc = "/usr/sbin/runc"
	if _, err := os.Stat(runc); err != nil {
		if p, err := exec.LookPath("runc"); err == nil {
			runc = p
		} else {
			runc = ""
			missing = append(missing, "runc")
		}
	}
	for _, d := range cniPluginDirs {
		ok := true
		for _, p := range []string{"bridge", "host-local", "loopback"} {
			if _, err := os.Stat(filepath.Join(d, p)); err != nil {
				ok = false
			}
		}
		if ok {
			cniDir = d
			break
		}
	}
	if cniDir == "" {
		missing = append(missing, "containernetworking-plugins")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		missing = append(missing, "iptables")
	}
	// The e2e suite packs a static busybox (sh, sleep) into the image of
	// its Envoy-shaped proxy, whose hook graceguard wraps in sh -c.
	if _, err := exec.LookPath("busybox"); err != nil {
		missing = append(missing, "busybox-static")
	}
	return runc, cniDir, missing
}

// ensureHostPackages installs runc, the CNI plugins, iptables and a static
// busybox from Debian
// when one is missing (apt-get update only if the first attempt fails).
func ensureHostPackages(ctx context.Context, o Options) (runc, cniDir string, err error) {
	runc, cniDir, missing := findHostPackages()
	if len(missing) == 0 {
		return runc, cniDir, nil
	}
	pkgs := []string{"runc", "containernetworking-plugins", "iptables", "busybox-static"}
	if o.SkipInstall {
		return "", "", fmt.Errorf("cluster: missing %s; install with: apt-get install -y %s", strings.Join(missing, ", "), strings.Join(pkgs, " "))
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return "", "", fmt.Errorf("cluster: missing %s and no apt-get to install %s", strings.Join(missing, ", "), strings.Join(pkgs, " "))
	}
	o.Logf("installing %s (missing: %s)", strings.Join(pkgs, " "), strings.Join(missing, ", "))
	install := func() error {
		cmd := exec.CommandContext(ctx, "apt-get", append([]string{"install", "-y", "--no-install-recommends"}, pkgs...)...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("apt-get install: %w\n%s", err, logs.LastLines(string(out), 15))
		}
		return nil
	}
	if err := install(); err != nil {
		o.Logf("apt-get install failed; running apt-get update and retrying")
		if out, uerr := exec.CommandContext(ctx, "apt-get", "update").CombinedOutput(); uerr != nil {
			return "", "", fmt.Errorf("cluster: %v; apt-get update: %v\n%s", err, uerr, logs.LastLines(string(out), 15))
		}
		if err := install(); err != nil {
			return "", "", fmt.Errorf("cluster: %w", err)
		}
	}
	runc, cniDir, missing = findHostPackages()
	if len(missing) > 0 {
		return "", "", fmt.Errorf("cluster: still missing after apt-get install: %s", strings.Join(missing, ", "))
	}
	return runc, cniDir, nil
}

// ensureKubernetes runs hack/envtest-assets.sh, which prints the directory
// holding kube-apiserver, etcd, kubelet, kube-controller-manager, kube-proxy
// and kubectl (built from the Go module proxy on first use, ~25 min on 2
// cores), and kube-scheduler when the script supports it.
func ensureKubernetes(ctx context.Context, o Options) (string, error) {
	script := filepath.Join(o.RepoRoot, "hack", "envtest-assets.sh")
	components := []string{"kubelet", "kube-controller-manager", "kube-proxy", "kubectl"}
	// Ask for kube-scheduler once the script can build it; until then Pods
	// need spec.nodeName.
	if text, err := os.ReadFile(script); err == nil && strings.Contains(string(text), "kube-scheduler") {
		components = append(components, "kube-scheduler")
	}
	cmd := exec.CommandContext(ctx, script, components...)
	cmd.Dir = o.RepoRoot
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = logWriter(o.Logf, "envtest-assets: ")
	setProcessGroup(cmd)
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("cluster: %s: %w", script, err)
	}
	dir := strings.TrimSpace(logs.LastLines(stdout.String(), 1))
	for _, bin := range []string{"kube-apiserver", "etcd", "kubelet", "kube-controller-manager", "kube-proxy", "kubectl"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return "", fmt.Errorf("cluster: %s printed %q, which lacks %s", script, dir, bin)
		}
	}
	return dir, nil
}

// ensureContainerd builds containerd, its runc shim and ctr at
// ContainerdVersion into bin/containerd/VERSION/ (once; ~3 min cold), in a
// throw-away tools module so graceguard's go.mod never sees containerd.
func ensureContainerd(ctx context.Context, o Options) (string, error) {
	out := filepath.Join(o.RepoRoot, "bin", "containerd", ContainerdVersion)
	stamp := filepath.Join(out, ".stamp")
	want := containerdStamp()
	cached := func() bool {
		b, err := os.ReadFile(stamp)
		if err != nil || string(b) != want {
			return false
		}
		for _, c := range containerdCommands {
			if fi, err := os.Stat(filepath.Join(out, c)); err != nil || fi.Mode()&0o111 == 0 {
				return false
			}
		}
		return true
	}
	if cached() {
		return out, nil
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	unlock, err := flock(ctx, filepath.Join(out, ".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if cached() { // built by a concurrent Up while we waited
		return out, nil
	}

	o.Logf("building containerd %s from the Go module proxy into %s (~3 min on 2 idle cores)", ContainerdVersion, out)
	mod := filepath.Join(out, ".build")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		return "", err
	}
	gomod := "// Code generated by test/harness/cluster. DO NOT EDIT.\nmodule containerd-tools.local\n\ngo 1.24\n"
	if _, err := os.Stat(filepath.Join(mod, "go.mod")); err != nil {
		if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte(gomod), 0o644); err != nil {
			return "", err
		}
	}
	var pkgs, gets []string
	for _, c := range containerdCommands {
		p := "github.com/containerd/containerd/v2/cmd/" + c
		pkgs = append(pkgs, p)
		gets = append(gets, p+"@"+ContainerdVersion)
	}
	tools := "//go:build tools\n\n// Code generated by test/harness/cluster. DO NOT EDIT.\n\npackage tools\n\nimport (\n"
	for _, p := range pkgs {
		tools += "\t_ \"" + p + "\"\n"
	}
	tools += ")\n"
	if err := os.WriteFile(filepath.Join(mod, "tools.go"), []byte(tools), 0o644); err != nil {
		return "", err
	}
	goCmd := func(args ...string) error {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = mod
		cmd.Env = mergeEnv(os.Environ(), []string{"GOWORK=off", "GOFLAGS=-mod=mod -buildvcs=false", "CGO_ENABLED=0"})
		// go get names every module it adds: a hundred lines of noise.
		quiet := func(format string, args ...any) {
			if line := fmt.Sprintf(format, args...); !strings.Contains(line, "go: added ") && !strings.Contains(line, "go: downloading ") {
				o.Logf("%s", line)
			}
		}
		w := logWriter(quiet, "containerd build: ")
		cmd.Stdout, cmd.Stderr = w, w
		setProcessGroup(cmd)
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("cluster: go %s (in %s): %w", strings.Join(args, " "), mod, err)
		}
		return nil
	}
	if err := goCmd(append([]string{"get"}, gets...)...); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(out, ".tmp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	ldflags := "-s -w -X github.com/containerd/containerd/v2/version.Version=" + ContainerdVersion
	if err := goCmd(append([]string{"build", "-trimpath", "-tags", containerdBuildTags, "-ldflags", ldflags, "-o", tmp + "/"}, pkgs...)...); err != nil {
		return "", err
	}
	v, err := exec.CommandContext(ctx, filepath.Join(tmp, "containerd"), "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(v), ContainerdVersion) {
		return "", fmt.Errorf("cluster: built containerd reports %q (%v), want %s", strings.TrimSpace(string(v)), err, ContainerdVersion)
	}
	for _, c := range containerdCommands {
		if err := os.Rename(filepath.Join(tmp, c), filepath.Join(out, c)); err != nil {
			return "", err
		}
	}
	if err := writeFileAtomic(stamp, []byte(want), 0o644); err != nil {
		return "", err
	}
	o.Logf("containerd: %s", strings.TrimSpace(string(v)))
	return out, nil
}

func containerdStamp() string {
	return fmt.Sprintf("github.com/containerd/containerd/v2@%s tags=%q CGO_ENABLED=0 %s %s/%s\n",
		ContainerdVersion, containerdBuildTags, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// ensurePauseImage builds test/images/pause into bin/images/pause.tar. The go
// build is cached by Go and the archive is reproducible, so this is cheap.
func ensurePauseImage(ctx context.Context, o Options) (string, error) {
	archive := filepath.Join(o.RepoRoot, "bin", "images", "pause.tar")
	_, err := ocipack.BuildGoImage(ctx, archive, ocipack.GoImage{
		GoBuild: ocipack.GoBuild{Dir: o.RepoRoot, Package: "./test/images/pause"},
		Image:   ocipack.Image{Name: PauseImage, Path: "/pause", User: "65535:65535"},
	})
	if err != nil {
		return "", fmt.Errorf("cluster: pause image: %w", err)
	}
	return archive, nil
}

// flock takes an exclusive lock on path, waiting for ctx.
func flock(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("cluster: lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("cluster: waiting for lock %s: %w", path, ctx.Err())
		case <-sleepChan(200):
		}
	}
}

// setProcessGroup makes cancellation kill a build's whole process tree (go
// build's compilers included), not just the go command.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// logWriter turns a command's output into Logf lines.
func logWriter(logf func(string, ...any), prefix string) io.Writer {
	return &lineWriter{logf: logf, prefix: prefix}
}

type lineWriter struct {
	logf   func(string, ...any)
	prefix string
	buf    []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.logf("%s%s", w.prefix, w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}
