package mutate

import (
	"path"
	"strings"
)

// An exec preStop hook runs a file of the container's image. graceguard
// cannot see inside an image; it can only read its name. Some names say
// the image ships no distribution at all: no shell, no coreutils, no curl
// (Google's distroless images and the `-distroless` variants projects
// publish, Chainguard's static base). There a command looked up on PATH,
// or a distribution's tool under /bin or /usr/bin, may not exist: the
// kubelet then records FailedPreStopHook and sends SIGTERM at once,
// before the routing delay. The rule stays on the side of what the name
// proves: "may be missing", never "is missing"; an absolute path
// elsewhere (the app's own /app/drain, /usr/local/bin/pilot-agent) and
// images whose names say nothing are left alone.

// systemDirs hold a distribution's tools; a distroless image has none.
var systemDirs = []string{"/bin/", "/sbin/", "/usr/bin/", "/usr/sbin/"}

// toolless says whether an image's name marks it as one without a
// distribution's tools ("distroless", Chainguard's word for its static
// base too). Distroless `debug` tags ship a busybox shell, so they are not.
func toolless(image string) (string, bool) {
	ref := strings.ToLower(image)
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		ref = ref[:i]
	}
	repo, tag := ref, ""
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		repo, tag = ref[:i], ref[i+1:]
	}
	switch {
	case strings.Contains(tag, "debug"):
		return "", false
	case strings.Contains(repo, "distroless") || strings.Contains(tag, "distroless"):
		return "distroless", true
	case strings.HasSuffix(repo, "chainguard/static"):
		return "distroless", true
	}
	return "", false
}

// maybeMissing says whether argv0, run in a toolless image, may not exist
// there: a bare name (looked up on PATH) or a path in a system directory.
func maybeMissing(argv0 string) bool {
	if argv0 == "" {
		return false
	}
	if !strings.Contains(argv0, "/") {
		return true
	}
	p := path.Clean(argv0)
	for _, d := range systemDirs {
		if strings.HasPrefix(p, d) {
			return true
		}
	}
	return false
}

// adviseHookBinary warns about an exec preStop hook whose command the
// container's image may lack (WarnHookBinaryMissing). graceguard's own
// exec sleep (graceguard.io/prestop: exec) is warned about too: it fails
// the same way.
func adviseHookBinary(c container, added bool, r *Report) {
	lc := c.c.Lifecycle
	if lc == nil || lc.PreStop == nil || lc.PreStop.Exec == nil || len(lc.PreStop.Exec.Command) == 0 {
		return
	}
	kind, ok := toolless(c.c.Image)
	argv0 := lc.PreStop.Exec.Command[0]
	if !ok || !maybeMissing(argv0) {
		return
	}
	fix := "use sleep or httpGet"
	if added {
		fix = "set " + AnnotationPreStop + ": sleep"
	}
	// Short: a template's field path takes half of an admission warning's
	// 120 characters. docs/annotations.md gives the whole fix.
	r.warn(WarnHookBinaryMissing, c.path.Child("lifecycle", "preStop"), clip(argv0),
		"%q may be missing from a %s image; %s", clip(argv0), kind, fix)
}
