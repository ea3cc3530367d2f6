// Package version is the build identity of graceguard's binaries: the
// webhook and the kubectl plugin print, log and export the same one.
//
// Invariant: Get never returns an empty string, and what it returns is a
// semantic version with a leading "v" (vMAJOR.MINOR.PATCH[-PRE][+BUILD]),
// the form krew's plugin manifest and Helm's appVersion accept: the value
// linked in by `make build`/`make dist` (hack/version.sh, from git tags), or
// else the module version of a `go install ...@vX.Y.Z`, or else
// v0.0.0-dev+<commit> from the Go toolchain's VCS stamp, or v0.0.0-dev.
package version

import (
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
)

// Version is set at link time:
//
//	-ldflags "-X github.com/graceguard/graceguard/internal/version.Version=v0.3.1"
//
// The Makefile passes the output of hack/version.sh.
var Version string

// Dev is the version of a build with neither a linked version nor VCS
// information (go test, go run with -buildvcs=false).
const Dev = "v0.0.0-dev"

// semverRE is semver 2.0.0 with a leading "v".
var semverRE = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

// Valid tells whether v has the form Get promises.
func Valid(v string) bool { return semverRE.MatchString(v) }

// Get returns the binary's version (see the package invariant).
func Get() string {
	bi, _ := debug.ReadBuildInfo()
	return resolve(Version, bi)
}

func resolve(linked string, bi *debug.BuildInfo) string {
	if linked != "" {
		return linked
	}
	if bi == nil {
		return Dev
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" && Valid(v) {
		return v
	}
	var rev string
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return Dev
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v := Dev + "+" + rev
	if modified {
		v += ".dirty"
	}
	return v
}

// Info is what the binaries report about themselves.
type Info struct {
	Version   string `json:"version"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// GetInfo returns the version, the Go toolchain and the platform.
func GetInfo() Info {
	return Info{Version: Get(), GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
}

// String is "v0.3.1 (go1.26.8, linux/amd64)".
func (i Info) String() string {
	return fmt.Sprintf("%s (%s, %s)", i.Version, i.GoVersion, i.Platform)
}
