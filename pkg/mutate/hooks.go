package mutate

import (
	"errors"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// hookLength is what graceguard can tell about a preStop hook's duration.
type hookLength struct {
	// D is the duration: exact when Known, else a lower bound (often 0).
	D     time.Duration
	Known bool
	// Desc describes the hook for messages: "sleep 40s", "exec sh -c ...".
	Desc string
}

// infinite stands for "sleep infinity": longer than any grace period.
const infinite = time.Duration(math.MaxInt64)

// preStopLength reads the duration of a preStop hook: the sleep action's
// seconds, or an exec of `sleep N` (directly or as the whole of an
// `sh -c` script). Anything else (HTTP, TCP, other commands) has an
// unknown length, with any leading sleeps as its lower bound.
func preStopLength(h *corev1.LifecycleHandler) hookLength {
	switch {
	case h == nil:
		return hookLength{Known: true}
	case h.Sleep != nil:
		// secs saturates: 9223372037 seconds must not wrap to a negative
		// duration that fits every grace period.
		return hookLength{D: secs(h.Sleep.Seconds), Known: true, Desc: "sleep " + strconv.FormatInt(h.Sleep.Seconds, 10) + "s"}
	case h.Exec != nil:
		return execLength(h.Exec.Command)
	case h.HTTPGet != nil:
		return hookLength{Desc: "httpGet " + h.HTTPGet.Path}
	case h.TCPSocket != nil:
		return hookLength{Desc: "tcpSocket"}
	}
	return hookLength{Desc: "unknown handler"}
}

func execLength(cmd []string) hookLength {
	desc := "exec " + strings.Join(cmd, " ")
	desc = shortenTo(desc, 60)
	if len(cmd) == 0 {
		return hookLength{Desc: desc}
	}
	if path.Base(cmd[0]) == SleepCommand {
		d, ok := sleepArgs(cmd[1:])
		return hookLength{D: d, Known: ok, Desc: desc}
	}
	if script, ok := shellScript(cmd); ok {
		d, known := scriptLength(script)
		return hookLength{D: d, Known: known, Desc: desc}
	}
	return hookLength{Desc: desc}
}

// SleepCommand is the program whose operands are a hook's length: exec
// ["sleep", "N"], ["/bin/sleep", "N"], or a shell script of sleeps.
const SleepCommand = "sleep"

// Shells are the shells whose `-c` script graceguard reads (also through
// busybox: `busybox sh -c`). pkg/cel reads the same list.
var Shells = []string{"sh", "bash", "ash", "dash", "zsh"}

// shellScript returns the script of `sh -c SCRIPT` (also bash, ash, dash,
// zsh, and combined flags like -ec).
func shellScript(cmd []string) (string, bool) {
	if len(cmd) < 3 {
		return "", false
	}
	if base := path.Base(cmd[0]); base != "busybox" && !slices.Contains(Shells, base) {
		return "", false
	}
	i := 1
	if path.Base(cmd[0]) == "busybox" {
		if cmd[1] != "sh" {
			return "", false
		}
		i = 2
	}
	if i+1 >= len(cmd) {
		return "", false
	}
	f := cmd[i]
	if !strings.HasPrefix(f, "-") || !strings.Contains(f, "c") {
		return "", false
	}
	return cmd[i+1], true
}

// scriptLength sums the `sleep` statements of a script joined by ;, && or
// newlines. The length is known only if the script is nothing but sleeps
// (and harmless no-ops); otherwise the sleeps are a lower bound.
func scriptLength(script string) (time.Duration, bool) {
	r := strings.NewReplacer("&&", "\n", ";", "\n")
	var total time.Duration
	known := true
	for _, stmt := range strings.Split(r.Replace(script), "\n") {
		f := strings.Fields(stmt)
		if len(f) == 0 || f[0] == "true" || f[0] == ":" {
			continue
		}
		if f[0] == "exec" {
			f = f[1:]
		}
		if len(f) > 0 && path.Base(f[0]) == SleepCommand {
			if d, ok := sleepArgs(f[1:]); ok {
				total = saturatingAdd(total, d)
				continue
			}
		}
		known = false
	}
	return total, known
}

// sleepArgs reads sleep's operands as GNU coreutils does: numbers with an
// optional s, m, h or d suffix, summed; "infinity" is longer than anything.
func sleepArgs(args []string) (time.Duration, bool) {
	if len(args) == 0 {
		return 0, false
	}
	var total time.Duration
	for _, a := range args {
		if a == "infinity" || a == "inf" {
			return infinite, true
		}
		unit := time.Second
		switch {
		case strings.HasSuffix(a, "s"):
			a = strings.TrimSuffix(a, "s")
		case strings.HasSuffix(a, "m"):
			a, unit = strings.TrimSuffix(a, "m"), time.Minute
		case strings.HasSuffix(a, "h"):
			a, unit = strings.TrimSuffix(a, "h"), time.Hour
		case strings.HasSuffix(a, "d"):
			a, unit = strings.TrimSuffix(a, "d"), 24*time.Hour
		}
		f, err := strconv.ParseFloat(a, 64)
		if errors.Is(err, strconv.ErrRange) {
			// GNU sleep takes a number out of range as its nearest value
			// (xstrtod's ERANGE): past the largest double it sleeps for
			// ever, under the smallest not at all.
			err = nil
		}
		if err != nil || f < 0 || math.IsNaN(f) {
			return 0, false
		}
		v := f * float64(unit)
		if v >= float64(math.MaxInt64) {
			return infinite, true
		}
		total = saturatingAdd(total, time.Duration(v))
	}
	return total, true
}

func saturatingAdd(a, b time.Duration) time.Duration {
	if a > infinite-b {
		return infinite
	}
	return a + b
}

// formatHook prints a hook length for messages.
func formatHook(d time.Duration) string {
	if d == infinite {
		return "infinity"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

// isShellForm reports whether a container runs its process through a shell
// (`sh -c "..."`) without exec-ing it, so SIGTERM may stop at the shell.
func isShellForm(c *corev1.Container) bool {
	cmd := append(append([]string{}, c.Command...), c.Args...)
	script, ok := shellScript(cmd)
	if !ok {
		return false
	}
	script = strings.TrimSpace(script)
	return !strings.HasPrefix(script, "exec ")
}

// secs converts whole seconds from a Pod spec to a duration, saturating at
// infinite; negative counts (which the API refuses) are 0.
func secs(n int64) time.Duration {
	switch {
	case n > int64(infinite/time.Second):
		return infinite
	case n < 0:
		return 0
	}
	return time.Duration(n) * time.Second
}

// PreStopLength reads how long a preStop hook lasts, as the budget counts
// it: exact when known is true, else a lower bound (often 0) for hooks
// whose length cannot be read from the spec (HTTP, scripts doing more
// than sleep).
func PreStopLength(h *corev1.LifecycleHandler) (d time.Duration, known bool) {
	hl := preStopLength(h)
	return hl.D, hl.Known
}
