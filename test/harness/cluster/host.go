package cluster

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ---------------------------------------------------------------- host record

// sysctls the components change: the bridge plugin (isGateway) turns on IPv4
// forwarding, and a kubelet with protectKernelDefaults=false sets the rest.
// kube-proxy is told to leave its own (route_localnet, conntrack limit and
// timeouts) alone; they are recorded all the same.
var recordedSysctls = []string{
	"net/ipv4/ip_forward",
	"net/ipv4/conf/all/route_localnet",
	"net/netfilter/nf_conntrack_max",
	"net/netfilter/nf_conntrack_tcp_timeout_established",
	"net/netfilter/nf_conntrack_tcp_timeout_close_wait",
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

// system directories the runtime may create outside the run directory;
// Down removes them again if they did not exist before and are empty.
var systemDirs = []string{
	"/var/log/containers", // the kubelet's container log symlinks: a fixed path
	"/var/lib/cni/results",
	"/var/lib/cni",
	"/run/containerd/s",
	"/run/containerd",
}

// hostRecord is the machine as the first Up found it.
type hostRecord struct {
	Sysctls map[string]string `json:"sysctls"`
	// Chains are the iptables/ip6tables chains per table ("iptables/nat").
	Chains map[string][]string `json:"chains"`
	// Dirs tells which of systemDirs existed.
	Dirs map[string]bool `json:"dirs"`
}

// recordHost writes host.json unless it exists: a second Up must not take
// the cluster's own changes for the machine's state.
func recordHost(ctx context.Context, l layout) error {
	if _, err := os.Stat(l.hostRecord); err == nil {
		return nil
	}
	r := hostRecord{Sysctls: map[string]string{}, Chains: map[string][]string{}, Dirs: map[string]bool{}}
	for _, s := range recordedSysctls {
		if b, err := os.ReadFile("/proc/sys/" + s); err == nil {
			r.Sysctls[s] = strings.TrimSpace(string(b))
		}
	}
	for key, chains := range listChains(ctx) {
		r.Chains[key] = chains
	}
	for _, d := range systemDirs {
		_, err := os.Stat(d)
		r.Dirs[d] = err == nil
	}
	b, _ := json.MarshalIndent(r, "", "  ")
	return writeFileAtomic(l.hostRecord, b, 0o644)
}

func readHostRecord(l layout) (hostRecord, bool) {
	var r hostRecord
	b, err := os.ReadFile(l.hostRecord)
	if err != nil || json.Unmarshal(b, &r) != nil {
		return hostRecord{}, false
	}
	return r, true
}

func restoreSysctls(r hostRecord) []error {
	var errs []error
	keys := make([]string, 0, len(r.Sysctls))
	for k := range r.Sysctls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cur, err := os.ReadFile("/proc/sys/" + k)
		if err != nil || strings.TrimSpace(string(cur)) == r.Sysctls[k] {
			continue
		}
		if err := os.WriteFile("/proc/sys/"+k, []byte(r.Sysctls[k]), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore sysctl %s=%s: %w", k, r.Sysctls[k], err))
		}
	}
	return errs
}

// ---------------------------------------------------------------- bridge

func linkExists(name string) bool {
	_, err := os.Stat("/sys/class/net/" + name)
	return err == nil
}

// ensureBridge creates gg0 with the node address, up. It exists before the
// apiserver starts, since the apiserver binds NodeIP.
func ensureBridge(ctx context.Context) error {
	if !linkExists(Bridge) {
		if _, err := runCmd(ctx, "ip", "link", "add", Bridge, "type", "bridge"); err != nil {
			return err
		}
	}
	if _, err := runCmd(ctx, "ip", "addr", "replace", NodeIP+"/24", "dev", Bridge); err != nil {
		return err
	}
	_, err := runCmd(ctx, "ip", "link", "set", Bridge, "up")
	return err
}

// bridgePorts lists the interfaces enslaved to gg0 (the Pods' host-side veths).
func bridgePorts() []string {
	entries, _ := os.ReadDir("/sys/class/net/" + Bridge + "/brif")
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func deleteBridge(ctx context.Context) []error {
	var errs []error
	for _, port := range bridgePorts() {
		if _, err := runCmd(ctx, "ip", "link", "del", port); err != nil && linkExists(port) {
			errs = append(errs, err)
		}
	}
	if linkExists(Bridge) {
		if _, err := runCmd(ctx, "ip", "link", "del", Bridge); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// ---------------------------------------------------------------- iptables

var iptablesTables = []string{"filter", "nat", "mangle"}

// listChains returns the chains of every table, keyed "iptables/nat" and
// "ip6tables/nat"; binaries that are missing are skipped.
func listChains(ctx context.Context) map[string][]string {
	out := map[string][]string{}
	for _, bin := range []string{"iptables", "ip6tables"} {
		if _, err := exec.LookPath(bin); err != nil {
			continue
		}
		for _, table := range iptablesTables {
			s, err := runCmd(ctx, bin, "-w", "5", "-t", table, "-S")
			if err != nil {
				continue
			}
			var chains []string
			for _, line := range strings.Split(s, "\n") {
				f := strings.Fields(line)
				if len(f) >= 2 && (f[0] == "-N" || f[0] == "-P") {
					chains = append(chains, f[1])
				}
			}
			out[bin+"/"+table] = chains
		}
	}
	return out
}

// ensureServiceDNAT stands in for kube-proxy for one Service before it has
// synced (its rules come first then): Pods' packets to the kubernetes
// Service reach the apiserver on NodeIP.
func ensureServiceDNAT(ctx context.Context) error {
	ipt := func(args ...string) (string, error) {
		return runCmd(ctx, "iptables", append([]string{"-w", "5", "-t", "nat"}, args...)...)
	}
	if _, err := ipt("-S", IptablesChain); err != nil {
		if _, err := ipt("-N", IptablesChain); err != nil {
			return err
		}
	}
	if _, err := ipt("-F", IptablesChain); err != nil {
		return err
	}
	if _, err := ipt("-A", IptablesChain, "-d", KubernetesServiceIP+"/32", "-p", "tcp", "--dport", "443",
		"-j", "DNAT", "--to-destination", NodeIP+":"+strconv.Itoa(APIServerPort)); err != nil {
		return err
	}
	return ensurePreroutingJump(ctx, Bridge)
}

// ensurePreroutingJump sends packets arriving on dev (a node's bridge or
// link) through the cluster's chain.
func ensurePreroutingJump(ctx context.Context, dev string) error {
	ipt := func(args ...string) (string, error) {
		return runCmd(ctx, "iptables", append([]string{"-w", "5", "-t", "nat"}, args...)...)
	}
	if _, err := ipt("-C", "PREROUTING", "-i", dev, "-j", IptablesChain); err != nil {
		if _, err := ipt("-I", "PREROUTING", "-i", dev, "-j", IptablesChain); err != nil {
			return err
		}
	}
	return nil
}

// cleanupIptables removes the cluster's chain and every chain the kubelet
// added (the KUBE-* chains the host record did not list), with the rules
// that jump to them.
func cleanupIptables(ctx context.Context, rec hostRecord, haveRecord bool) []error {
	var errs []error
	before := map[string]map[string]bool{}
	for key, chains := range rec.Chains {
		before[key] = map[string]bool{}
		for _, c := range chains {
			before[key][c] = true
		}
	}
	for key, chains := range listChains(ctx) {
		bin, table, _ := strings.Cut(key, "/")
		var drop []string
		for _, c := range chains {
			ours := c == IptablesChain
			kubelet := strings.HasPrefix(c, "KUBE-") && (!haveRecord || !before[key][c])
			if ours || kubelet {
				drop = append(drop, c)
			}
		}
		if len(drop) == 0 {
			continue
		}
		dropSet := map[string]bool{}
		for _, c := range drop {
			dropSet[c] = true
		}
		// Delete rules (in any chain) that jump to a dropped chain.
		rules, _ := runCmd(ctx, bin, "-w", "5", "-t", table, "-S")
		for _, line := range strings.Split(rules, "\n") {
			// kube-proxy's rules carry quoted comments with spaces.
			f := ruleArgs(line)
			if len(f) < 2 || f[0] != "-A" {
				continue
			}
			for i := 0; i+1 < len(f); i++ {
				if f[i] == "-j" && dropSet[f[i+1]] && !dropSet[f[1]] {
					args := append([]string{"-w", "5", "-t", table, "-D"}, f[1:]...)
					if _, err := runCmd(ctx, bin, args...); err != nil {
						errs = append(errs, err)
					}
					break
				}
			}
		}
		for _, c := range drop {
			if _, err := runCmd(ctx, bin, "-w", "5", "-t", table, "-F", c); err != nil {
				errs = append(errs, err)
			}
		}
		for _, c := range drop {
			if _, err := runCmd(ctx, bin, "-w", "5", "-t", table, "-X", c); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// ruleArgs splits a line of iptables -S into the arguments that delete
// it again: fields apart at spaces, but a double-quoted one kept whole and
// unquoted (iptables quotes a comment with spaces, escaping \" and \\).
func ruleArgs(line string) []string {
	var out []string
	var cur strings.Builder
	in, quoted := false, false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case quoted && ch == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case ch == '"':
			quoted, in = !quoted, true
		case ch == ' ' && !quoted:
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(ch)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// ---------------------------------------------------------------- mounts

type mount struct {
	point  string
	fstype string
}

// unescapeMount decodes mountinfo's octal escapes (\040 for a space...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseMountinfo returns the mounts of a /proc/PID/mountinfo text, in order.
func parseMountinfo(text string) []mount {
	var out []mount
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 7 {
			continue
		}
		m := mount{point: unescapeMount(f[4])}
		for i := 6; i < len(f); i++ {
			if f[i] == "-" && i+1 < len(f) {
				m.fstype = f[i+1]
				break
			}
		}
		out = append(out, m)
	}
	return out
}

func mounts() []mount {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	return parseMountinfo(string(b))
}

// mountsUnder lists mount points at or below dir, deepest (latest) first.
func mountsUnder(dir string) []string {
	// The kernel lists mount points by their resolved path: a run directory
	// reached through a symlink (bin/ -> a shared cache) must match too.
	dirs := []string{dir}
	if real, err := filepath.EvalSymlinks(dir); err == nil && real != dir {
		dirs = append(dirs, real)
	}
	var out []string
	all := mounts()
	for i := len(all) - 1; i >= 0; i-- {
		p := all[i].point
		for _, d := range dirs {
			if p == d || strings.HasPrefix(p, d+"/") {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// unmountUnder unmounts everything at or below dir (kubelet volumes and its
// rshared root bind, container rootfs overlays, network namespaces).
func unmountUnder(dir string) error {
	for pass := 0; pass < 10; pass++ {
		ms := mountsUnder(dir)
		if len(ms) == 0 {
			return nil
		}
		for _, m := range ms {
			if err := unix.Unmount(m, 0); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				_ = unix.Unmount(m, unix.MNT_DETACH)
			}
		}
	}
	if ms := mountsUnder(dir); len(ms) > 0 {
		return fmt.Errorf("still mounted under %s: %s", dir, strings.Join(ms, ", "))
	}
	return nil
}

// removeAllSameDevice is os.RemoveAll that refuses to descend into another
// filesystem: if an unmount was missed, host files behind a bind mount stay.
func removeAllSameDevice(dir string) error {
	root, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	dev := root.Sys().(*syscall.Stat_t).Dev
	var walk func(p string) error
	walk = func(p string) error {
		fi, err := os.Lstat(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Dev != dev {
			return fmt.Errorf("%s is on another filesystem (a mount Down could not remove); not deleting it", p)
		}
		if fi.IsDir() {
			entries, err := os.ReadDir(p)
			if err != nil {
				return err
			}
			for _, e := range entries {
				if err := walk(filepath.Join(p, e.Name())); err != nil {
					return err
				}
			}
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return walk(dir)
}

// ---------------------------------------------------------------- cgroups

// cgroupMounts lists the mount points of every cgroup (v1) and cgroup2
// hierarchy; this VM has the v1 controllers plus cgroup2 at
// /sys/fs/cgroup/unified.
func cgroupMounts() []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range mounts() {
		if (m.fstype == "cgroup" || m.fstype == "cgroup2") && !seen[m.point] {
			seen[m.point] = true
			out = append(out, m.point)
		}
	}
	return out
}

// cgroupDirs lists cgroup root (CgroupRoot, or the second node's below it)
// and its descendants in every hierarchy, children before parents.
func cgroupDirs(cgroup string) []string {
	var out []string
	for _, mp := range cgroupMounts() {
		root := filepath.Join(mp, cgroup)
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			out = append(out, dirs[i])
		}
	}
	return out
}

// cgroupPIDs lists the processes in a cgroup's subtree.
func cgroupPIDs(cgroup string) []int {
	seen := map[int]bool{}
	var out []int
	for _, d := range cgroupDirs(cgroup) {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
				seen[pid] = true
				out = append(out, pid)
			}
		}
	}
	sort.Ints(out)
	return out
}

// killCgroupProcesses SIGKILLs every process of every Pod below cgroup
// until none is left (they may fork meanwhile).
func killCgroupProcesses(cgroup string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pids := cgroupPIDs(cgroup)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes still in cgroup %s after SIGKILL: %v", cgroup, pids)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func removeCgroupsUnder(cgroup string) []error {
	var errs []error
	for _, d := range cgroupDirs(cgroup) {
		var err error
		for i := 0; i < 50; i++ {
			if err = unix.Rmdir(d); err == nil || errors.Is(err, unix.ENOENT) {
				err = nil
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
		}
	}
	return errs
}

// ---------------------------------------------------------------- containerd leftovers

// shimSocket is where a containerd v2 shim listens, as pkg/shim.SocketAddress
// computes it: /run/containerd/s/sha256(address/namespace/id).
func shimSocket(address, namespace, id string) string {
	return fmt.Sprintf("/run/containerd/s/%x", sha256.Sum256([]byte(filepath.Join(address, namespace, id))))
}

// shimSocketsOf returns the sockets of a shim from its command line
// (containerd-shim-runc-v2 -namespace NS -id ID -address ADDR).
func shimSocketsOf(args []string) []string {
	var ns, id, addr string
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "-namespace", "--namespace":
			ns = args[i+1]
		case "-id", "--id":
			id = args[i+1]
		case "-address", "--address":
			addr = args[i+1]
		}
	}
	if ns == "" || id == "" || addr == "" {
		return nil
	}
	return []string{shimSocket(addr, ns, id), shimSocket(addr, ns, filepath.Join(id, "debug"))}
}

// removeCNICache deletes libcni's result cache entries of the cluster's
// containers: "graceguard-<container>-eth0" and the matching loopback entry
// "cni-loopback-<container>-lo" (containerd sets up lo with the plugin too).
func removeCNICache() []error {
	var errs []error
	const dir = "/var/lib/cni/results/"
	matches, _ := filepath.Glob(dir + CNINetwork + "-*")
	for _, m := range matches {
		rest := strings.TrimPrefix(filepath.Base(m), CNINetwork+"-")
		if i := strings.LastIndexByte(rest, '-'); i > 0 {
			matches = append(matches, dir+"cni-loopback-"+rest[:i]+"-lo")
		}
	}
	for _, m := range matches {
		if err := os.Remove(m); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errs
}

// removeContainerLogLinks deletes the kubelet's /var/log/containers symlinks
// that point into the run directory (the kubelet removes them only when it
// removes the container, which a torn-down cluster never does).
func removeContainerLogLinks(dir string) []error {
	var errs []error
	entries, _ := os.ReadDir("/var/log/containers")
	for _, e := range entries {
		p := filepath.Join("/var/log/containers", e.Name())
		target, err := os.Readlink(p)
		if err != nil || !(target == dir || strings.HasPrefix(target, dir+"/")) {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errs
}

// removeSystemDirs removes systemDirs the runtime created, if empty.
func removeSystemDirs(rec hostRecord, haveRecord bool) {
	for _, d := range systemDirs {
		if haveRecord && rec.Dirs[d] {
			continue
		}
		_ = unix.Rmdir(d) // only succeeds when empty
	}
}
