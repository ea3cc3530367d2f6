package security

import (
	"os"
	"strconv"
	"strings"
)

// procStatus is a size field of /proc/PID/status, in bytes.
func procStatus(pid int, field string) int64 {
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if k, v, _ := strings.Cut(line, ":"); k == field {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// resetHWM starts the process's peak RSS (VmHWM) over from its RSS now.
func resetHWM(pid int) error {
	return os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0o200)
}
