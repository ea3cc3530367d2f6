// Package cgroup makes cgroup v1 groups below this process's own for the
// lab's processes: a memory cgroup at the chart's memory limit
// (test/security), a cpu cgroup holding the webhook to its CPU request
// (test/bench). This machine mounts cgroup v1; root is needed.
//
// A group is made below this process's own cgroup of its controller, so
// whatever accounts for this process accounts for the group too.
package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Root is where this machine mounts the v1 controllers, one directory each.
const Root = "/sys/fs/cgroup"

// Group is a cgroup v1 group of one controller.
type Group struct {
	controller, dir string
}

// New makes the group name of controller ("memory", "cpu") below this
// process's own.
func New(controller, name string) (*Group, error) {
	parent, err := own(controller)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(Root, controller, parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("making the %s cgroup (root, and the v1 %s controller at %s, are needed): %w",
			controller, controller, filepath.Join(Root, controller), err)
	}
	return &Group{controller: controller, dir: dir}, nil
}

// own is this process's cgroup of controller, relative to its mount.
func own(controller string) (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		// hierarchy-ID:controller-list:cgroup-path
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), controller) {
			return f[2], nil
		}
	}
	return "", fmt.Errorf("this process is in no cgroup v1 %s hierarchy: the v1 %s controller is needed", controller, controller)
}

// Dir is the group's directory.
func (g *Group) Dir() string { return g.dir }

// ProcsFile is where a process writes its pid to enter the group (a
// wrapper script's `echo $$ > ProcsFile` before it execs the program).
func (g *Group) ProcsFile() string { return filepath.Join(g.dir, "cgroup.procs") }

// Write sets one of the group's files to v.
func (g *Group) Write(file string, v int64) error {
	if err := os.WriteFile(filepath.Join(g.dir, file), []byte(strconv.FormatInt(v, 10)), 0o644); err != nil {
		return fmt.Errorf("cgroup %s: %w", file, err)
	}
	return nil
}

// Read is one of the group's files as a number, -1 when unreadable.
func (g *Group) Read(file string) int64 {
	b, err := os.ReadFile(filepath.Join(g.dir, file))
	if err != nil {
		return -1
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// Field is the value of key in one of the group's "key value" files
// (memory.stat, cpu.stat), -1 when absent.
func (g *Group) Field(file, key string) int64 {
	b, err := os.ReadFile(filepath.Join(g.dir, file))
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

// Remove removes the group; its processes must have exited.
func (g *Group) Remove() error {
	if err := os.Remove(g.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the %s cgroup: %w", g.controller, err)
	}
	return nil
}
