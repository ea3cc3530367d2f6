package cgroup

import "errors"

// Memory is a memory cgroup with a limit.
type Memory struct{ *Group }

// NewMemory makes a memory cgroup named name below this process's own,
// limited to limit bytes (no swap: this machine has none, and
// memory.memsw is set to the same limit where it exists).
func NewMemory(name string, limit int64) (*Memory, error) {
	g, err := New("memory", name)
	if err != nil {
		return nil, err
	}
	m := &Memory{g}
	if err := m.Write("memory.limit_in_bytes", limit); err != nil {
		return nil, errors.Join(err, m.Remove())
	}
	if m.Read("memory.memsw.limit_in_bytes") >= 0 {
		if err := m.Write("memory.memsw.limit_in_bytes", limit); err != nil {
			return nil, errors.Join(err, m.Remove())
		}
	}
	return m, nil
}

// Limit is memory.limit_in_bytes.
func (m *Memory) Limit() int64 { return m.Read("memory.limit_in_bytes") }

// ResetPeak starts memory.max_usage_in_bytes, and the kernel memory's
// peak, over from the usage now.
func (m *Memory) ResetPeak() error {
	if err := m.Write("memory.kmem.max_usage_in_bytes", 0); err != nil {
		return err
	}
	return m.Write("memory.max_usage_in_bytes", 0)
}

// KernelPeak is memory.kmem.max_usage_in_bytes: the most kernel memory
// (sockets, slab, page tables) charged to the cgroup since ResetPeak.
func (m *Memory) KernelPeak() int64 { return m.Read("memory.kmem.max_usage_in_bytes") }

// Peak is memory.max_usage_in_bytes: the most the cgroup was charged
// (anonymous memory, page cache and kernel memory) since ResetPeak.
func (m *Memory) Peak() int64 { return m.Read("memory.max_usage_in_bytes") }

// OOMKills is the OOM killer's count of processes killed in the cgroup.
func (m *Memory) OOMKills() int64 { return m.Field("memory.oom_control", "oom_kill") }

// Anon is the cgroup's anonymous memory (memory.stat rss: what the kernel
// cannot reclaim but by killing, with no swap).
func (m *Memory) Anon() int64 { return m.Field("memory.stat", "rss") }
