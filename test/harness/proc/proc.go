// Package proc reads what Linux's /proc says about a process and the
// machine: CPU time, resident memory and its peak, load averages, the CPU
// model. The benchmarks and the scale harness measure the processes they
// start with it, from the outside, so that a figure is what the kernel
// charged, whatever the process says about itself.
package proc

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports (it is fixed by the kernel ABI,
// independent of CONFIG_HZ).
const clockTicks = 100

// CPUTime is the CPU time (user + system, all threads) the process has used.
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may contain spaces; fields after it
	// start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// After ')': state is field 3, so utime (14) and stime (15) are f[11], f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime/stime %q %q", pid, f[11], f[12])
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// Memory is what /proc/<pid>/status says about a process's memory, in bytes.
type Memory struct {
	RSS, HWM int64 // VmRSS, VmHWM (peak RSS since start or the last ResetPeak)
}

// ReadMemory reads VmRSS and VmHWM of the process.
func ReadMemory(pid int) (Memory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, err
	}
	defer f.Close()
	var m Memory
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		var dst *int64
		switch k {
		case "VmRSS":
			dst = &m.RSS
		case "VmHWM":
			dst = &m.HWM
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("/proc/%d/status %s: %v", pid, k, err)
		}
		*dst = kb << 10
	}
	return m, s.Err()
}

// ResetPeak resets VmHWM to the current RSS (Linux >= 4.0, clear_refs 5),
// so the peak of one load run is not the peak of an earlier one.
func ResetPeak(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// LoadAvg is /proc/loadavg's 1, 5 and 15 minute load averages.
func LoadAvg() ([3]float64, error) {
	var l [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l, err
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return l, fmt.Errorf("/proc/loadavg: %q", b)
	}
	for i := range l {
		if l[i], err = strconv.ParseFloat(f[i], 64); err != nil {
			return l, err
		}
	}
	return l, nil
}

// CPUModel is the first "model name" of /proc/cpuinfo.
func CPUModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// MemTotal is MemTotal of /proc/meminfo in bytes.
func MemTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// Kernel is the running kernel's release.
func Kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// Children finds this process's children by command name (envtest starts
// kube-apiserver and etcd as children of the benchmark).
func Children(names ...string) map[string]int {
	out := map[string]int{}
	for _, c := range AllChildren(names...) {
		out[c.Name] = c.PID
	}
	return out
}

// Child is a child process of this one, by the name it was looked for by.
type Child struct {
	Name string
	PID  int
}

// AllChildren is Children with every child of each name (a benchmark
// that runs two control planes).
func AllChildren(names ...string) []Child {
	var out []Child
	self := os.Getpid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		open, close := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || close < open {
			continue
		}
		comm := string(b[open+1 : close])
		f := strings.Fields(string(b[close+1:]))
		if len(f) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid != self {
			continue
		}
		for _, n := range names {
			// comm is cut at 15 characters.
			if comm == n[:min(len(n), 15)] {
				out = append(out, Child{Name: n, PID: pid})
			}
		}
	}
	return out
}

// Host is the machine a lab run measured on, as its results record it
// (docs/benchmarks.json and docs/scale.json embed it).
type Host struct {
	NProc     int     `json:"nproc"`
	CPUModel  string  `json:"cpuModel"`
	MemoryGiB float64 `json:"memoryGiB"`
	Kernel    string  `json:"kernel"`
	GoVersion string  `json:"goVersion"`
}

// ThisHost describes this machine, and the Go toolchain that builds the
// binaries a run measures.
func ThisHost() Host {
	return Host{NProc: runtime.NumCPU(), CPUModel: CPUModel(), MemoryGiB: float64(MemTotal()) / (1 << 30),
		Kernel: Kernel(), GoVersion: goVersion()}
}

// goVersion is the toolchain `go build` uses here (the go command's, not
// this program's).
func goVersion() string {
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return runtime.Version()
	}
	return strings.TrimSpace(string(out))
}

// CPUTimes reads the CPU time of each named process (missing ones are
// left out).
func CPUTimes(pids map[string]int) map[string]time.Duration {
	out := map[string]time.Duration{}
	for name, pid := range pids {
		if t, err := CPUTime(pid); err == nil {
			out[name] = t
		}
	}
	return out
}

// MiB is b bytes in MiB.
func MiB(b int64) float64 { return float64(b) / (1 << 20) }

// Rows are the host's rows of a lab page's machine table (label, value).
func (h Host) Rows() [][2]string {
	return [][2]string{{"CPUs (`nproc`)", fmt.Sprint(h.NProc)}, {"CPU model", h.CPUModel},
		{"memory", fmt.Sprintf("%.1f GiB", h.MemoryGiB)}, {"kernel", h.Kernel}, {"Go", h.GoVersion}}
}

// LoadRows are the machine table's rows of the load averages at a run's
// start and end.
func LoadRows(start, end [3]float64) [][2]string {
	return [][2]string{{"load average at start (1, 5, 15 min)", fmt.Sprintf("%.2f, %.2f, %.2f", start[0], start[1], start[2])},
		{"load average at end", fmt.Sprintf("%.2f, %.2f, %.2f", end[0], end[1], end[2])}}
}
