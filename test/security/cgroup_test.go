package security

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// memCgroup is a cgroup v1 memory cgroup made for the webhook, below this
// process's own (so that whatever accounts for this process accounts for
// the webhook too).
type memCgroup struct{ dir string }

// cgroupV1Memory is where this machine mounts the v1 memory controller.
const cgroupV1Memory = "/sys/fs/cgroup/memory"

// newMemCgroup makes a memory cgroup named name below this process's own,
// limited to limit bytes (no swap: this machine has none, and
// memory.memsw is set to the same limit where it exists).
func newMemCgroup(name string, limit int64) (*memCgroup, error) {
	parent, err := ownMemCgroup()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cgroupV1Memory, parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("making the memory cgroup (root, and the v1 memory controller at %s, are needed): %w", cgroupV1Memory, err)
	}
	c := &memCgroup{dir: dir}
	if err := c.write("memory.limit_in_bytes", limit); err != nil {
		return nil, errors.Join(err, c.remove())
	}
	if _, err := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes")); err == nil {
		if err := c.write("memory.memsw.limit_in_bytes", limit); err != nil {
			return nil, errors.Join(err, c.remove())
		}
	}
	return c, nil
}

// ownMemCgroup is this process's memory cgroup, relative to the mount.
func ownMemCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		// hierarchy-ID:controller-list:cgroup-path
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && (f[1] == "memory" || strings.HasPrefix(f[1], "memory,") || strings.Contains(f[1], ",memory")) {
			return f[2], nil
		}
	}
	return "", errors.New("this process is in no cgroup v1 memory hierarchy: the report needs the v1 memory controller")
}

func (c *memCgroup) write(file string, v int64) error {
	if err := os.WriteFile(filepath.Join(c.dir, file), []byte(strconv.FormatInt(v, 10)), 0o644); err != nil {
		return fmt.Errorf("cgroup %s: %w", file, err)
	}
	return nil
}

func (c *memCgroup) read(file string) int64 {
	b, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		return -1
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// procsFile is where a process writes its pid to enter the cgroup.
func (c *memCgroup) procsFile() string { return filepath.Join(c.dir, "cgroup.procs") }

// limit is memory.limit_in_bytes.
func (c *memCgroup) limit() int64 { return c.read("memory.limit_in_bytes") }

// resetPeak starts memory.max_usage_in_bytes, and the kernel memory's
// peak, over from the usage now.
func (c *memCgroup) resetPeak() error {
	if err := c.write("memory.kmem.max_usage_in_bytes", 0); err != nil {
		return err
	}
	return c.write("memory.max_usage_in_bytes", 0)
}

// kernelPeak is memory.kmem.max_usage_in_bytes: the most kernel memory
// (sockets, slab, page tables) charged to the cgroup since resetPeak.
func (c *memCgroup) kernelPeak() int64 { return c.read("memory.kmem.max_usage_in_bytes") }

// peak is memory.max_usage_in_bytes: the most the cgroup was charged
// (anonymous memory, page cache and kernel memory) since resetPeak.
func (c *memCgroup) peak() int64 { return c.read("memory.max_usage_in_bytes") }

// oomKills is the OOM killer's count of processes killed in the cgroup.
func (c *memCgroup) oomKills() int64 { return c.field("memory.oom_control", "oom_kill") }

// anon is the cgroup's anonymous memory (memory.stat rss: what the kernel
// cannot reclaim but by killing, with no swap).
func (c *memCgroup) anon() int64 { return c.field("memory.stat", "rss") }

func (c *memCgroup) field(file, key string) int64 {
	b, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		return -1
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok && k == key {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return -1
}

// remove removes the cgroup; its processes must have exited.
func (c *memCgroup) remove() error {
	if err := os.Remove(c.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the memory cgroup: %w", err)
	}
	return nil
}

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
