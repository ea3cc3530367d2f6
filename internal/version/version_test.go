package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	vcs := func(rev, modified string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}
		if rev != "" {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: "vcs.revision", Value: rev})
		}
		if modified != "" {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: "vcs.modified", Value: modified})
		}
		return bi
	}
	for _, tc := range []struct {
		name, linked string
		bi           *debug.BuildInfo
		want         string
	}{
		{"the linked version wins", "v0.3.1", vcs("0123456789abcdef0123", "true"), "v0.3.1"},
		{"go install module@version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.3.1"}}, "v0.3.1"},
		{"a clean VCS build", "", vcs("0123456789abcdef0123", "false"), "v0.0.0-dev+0123456789ab"},
		{"a modified VCS build", "", vcs("0123456789abcdef0123", "true"), "v0.0.0-dev+0123456789ab.dirty"},
		{"no VCS stamp (go test, -buildvcs=false)", "", vcs("", ""), Dev},
		{"no build info", "", nil, Dev},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := resolve(tc.linked, tc.bi)
			if got != tc.want {
				t.Errorf("resolve = %q, want %q", got, tc.want)
			}
			if !Valid(got) {
				t.Errorf("%q is not a semantic version", got)
			}
		})
	}
}

func TestValid(t *testing.T) {
	for v, want := range map[string]bool{
		"v0.1.0": true, "v1.2.3-rc.1": true, "v0.1.0-3-g0123456789ab": true, "v0.1.0-3-g0123456789ab+dirty": true,
		"v0.0.0-dev+0123456789ab.dirty": true,
		"0.1.0":                         false, "v0.1": false, "v01.1.0": false, "v0.1.0+": false, "dev": false, "": false,
	} {
		if got := Valid(v); got != want {
			t.Errorf("Valid(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestVersionScript runs hack/version.sh, which `make build` and `make dist`
// link in, on a scratch repository through the states a release goes
// through.
func TestVersionScript(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("hack/version.sh needs git: %v", err)
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "hack", "version.sh"))
	if err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	version := func() string {
		t.Helper()
		cmd := exec.Command("bash", script)
		cmd.Env = append(os.Environ(), "GRACEGUARD_REPO="+repo, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("hack/version.sh: %v", err)
		}
		v := strings.TrimSpace(string(out))
		if !Valid(v) {
			t.Errorf("hack/version.sh printed %q, not a semantic version", v)
		}
		return v
	}
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(repo, "f"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	if got := version(); got != Dev {
		t.Errorf("outside a commit: %q, want %q", got, Dev)
	}
	git("init", "-q")
	write("1")
	git("add", "f")
	git("commit", "-q", "-m", "one")
	sha := git("rev-parse", "--short=12", "HEAD")
	if got, want := version(), "v0.0.0-dev+"+sha; got != want {
		t.Errorf("no tag: %q, want %q", got, want)
	}
	write("2")
	if got, want := version(), "v0.0.0-dev+"+sha+".dirty"; got != want {
		t.Errorf("no tag, modified: %q, want %q", got, want)
	}
	git("commit", "-q", "-am", "two")
	git("tag", "not-a-version")
	git("tag", "v0.2.0")
	if got := version(); got != "v0.2.0" {
		t.Errorf("at tag v0.2.0: %q", got)
	}
	write("3")
	if got := version(); got != "v0.2.0+dirty" {
		t.Errorf("at tag v0.2.0, modified: %q", got)
	}
	git("commit", "-q", "-am", "three")
	sha = git("rev-parse", "--short=12", "HEAD")
	if got, want := version(), "v0.2.0-1-g"+sha; got != want {
		t.Errorf("one commit after v0.2.0: %q, want %q", got, want)
	}
}
