package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procRecord identifies a process the cluster started. StartTicks (field 22
// of /proc/PID/stat) guards against a recycled PID.
type procRecord struct {
	Name       string   `json:"name"`
	PID        int      `json:"pid"`
	StartTicks uint64   `json:"startTicks"`
	Identity   string   `json:"identity"`
	Args       []string `json:"args"`
	Started    string   `json:"started"`
}

// procStat returns a process's state letter and start time, or ok=false when
// there is no such process.
func procStat(pid int) (state byte, startTicks uint64, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// comm may hold spaces and parentheses: the fields start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, 0, false
	}
	st, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], st, true
}

// alive tells whether the recorded process still runs (zombies are dead).
func (r procRecord) alive() bool {
	state, st, ok := procStat(r.PID)
	return ok && st == r.StartTicks && state != 'Z' && state != 'X'
}

func pidFile(l layout, name string) string { return filepath.Join(l.pids, name+".json") }

func readRecord(l layout, name string) (procRecord, bool) {
	var r procRecord
	b, err := os.ReadFile(pidFile(l, name))
	if err != nil || json.Unmarshal(b, &r) != nil || r.PID <= 0 {
		return procRecord{}, false
	}
	return r, true
}

// identity is what makes a running component reusable: the binary (path,
// size, mtime), its arguments, extra environment and config file contents.
func (c component) identity() string {
	h := sha256.New()
	fmt.Fprintf(h, "bin=%s\n", c.bin)
	if fi, err := os.Stat(c.bin); err == nil {
		fmt.Fprintf(h, "size=%d mtime=%d\n", fi.Size(), fi.ModTime().UnixNano())
	}
	for _, a := range c.args {
		fmt.Fprintf(h, "arg=%s\n", a)
	}
	for _, e := range c.env {
		fmt.Fprintf(h, "env=%s\n", e)
	}
	for _, f := range c.files {
		b, _ := os.ReadFile(f)
		fmt.Fprintf(h, "file=%s %x\n", f, sha256.Sum256(b))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// startComponent starts c in its own session (so a terminal's Ctrl-C does not
// reach it and it outlives the CLI), appending to its log.
func startComponent(l layout, c component) (procRecord, error) {
	logf, err := os.OpenFile(l.logFile(c.name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return procRecord{}, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "\n==== %s starting %s %s\n", time.Now().Format(time.RFC3339), c.bin, strings.Join(c.args, " "))
	cmd := exec.Command(c.bin, c.args...)
	cmd.Dir = l.dir
	cmd.Env = mergeEnv(os.Environ(), c.env)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return procRecord{}, fmt.Errorf("cluster: start %s: %w", c.name, err)
	}
	// Reap it if it exits while this process lives (the e2e test's case).
	go cmd.Wait() //nolint:errcheck // the exit status is in the log
	_, st, ok := procStat(cmd.Process.Pid)
	if !ok {
		return procRecord{}, fmt.Errorf("cluster: %s exited at once; see %s", c.name, l.logFile(c.name))
	}
	r := procRecord{Name: c.name, PID: cmd.Process.Pid, StartTicks: st, Identity: c.identity(),
		Args: append([]string{c.bin}, c.args...), Started: time.Now().Format(time.RFC3339)}
	b, _ := json.MarshalIndent(r, "", "  ")
	if err := writeFileAtomic(pidFile(l, c.name), b, 0o644); err != nil {
		return r, err
	}
	return r, nil
}

// mergeEnv overrides base with extra (KEY=VALUE entries).
func mergeEnv(base, extra []string) []string {
	out := make([]string, 0, len(base)+len(extra))
	override := map[string]bool{}
	for _, e := range extra {
		k, _, _ := strings.Cut(e, "=")
		override[k] = true
	}
	for _, e := range base {
		if k, _, _ := strings.Cut(e, "="); !override[k] {
			out = append(out, e)
		}
	}
	return append(out, extra...)
}

// stopPID sends SIGTERM to pid's process group (components are session and
// group leaders) or to pid alone, waits up to grace, then SIGKILLs.
func stopPID(pid int, startTicks uint64, grace time.Duration) {
	alive := func() bool {
		state, st, ok := procStat(pid)
		return ok && (startTicks == 0 || st == startTicks) && state != 'Z' && state != 'X'
	}
	if !alive() {
		return
	}
	signal := func(sig syscall.Signal) {
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
			_ = syscall.Kill(-pid, sig)
		} else {
			_ = syscall.Kill(pid, sig)
		}
	}
	signal(syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !alive() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	signal(syscall.SIGKILL)
	for i := 0; i < 100 && alive(); i++ {
		time.Sleep(20 * time.Millisecond)
	}
}

// ownProcesses lists PIDs (other than this process and its ancestors) whose
// command line mentions dir, the mark of every process a run directory
// started: components, containerd shims, and their helpers.
func ownProcesses(dir string) []int {
	skip := map[int]bool{}
	for pid := os.Getpid(); pid > 1; {
		skip[pid] = true
		ppid := parentPID(pid)
		if ppid <= 0 || skip[ppid] {
			break
		}
		pid = ppid
	}
	var pids []int
	entries, _ := os.ReadDir("/proc")
	needle := []byte(dir + "/")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || skip[pid] {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(cmdline) == 0 {
			continue
		}
		if state, _, ok := procStat(pid); !ok || state == 'Z' {
			continue
		}
		if bytes.Contains(cmdline, needle) || bytes.Contains(cmdline, []byte("="+dir+"\x00")) {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	return pids
}

func parentPID(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(f[1])
	return p
}

func cmdlineOf(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// runCmd runs a short helper command and returns its combined output.
func runCmd(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

var errNotRoot = errors.New("cluster: must run as root (it creates a bridge, cgroups, mounts and iptables rules)")
