package cgroup

import (
	"fmt"
	"time"
)

// CPU is a cpu cgroup: CFS bandwidth control holds its processes to a
// quota of CPU time per period, as the kernel holds a container to its
// CPU limit, and as a busy node holds one to its request.
type CPU struct{ *Group }

// Period is the CFS period the quotas are set in: the kernel's default,
// which kubelets use too.
const Period = 100 * time.Millisecond

// NewCPU makes a cpu cgroup named name below this process's own, with no
// quota.
func NewCPU(name string) (*CPU, error) {
	g, err := New("cpu", name)
	if err != nil {
		return nil, err
	}
	c := &CPU{g}
	return c, c.Hold(0)
}

// Hold limits the group to millicores (1000: one CPU) of CPU time, as a
// CPU limit of that many millicores would; 0 lifts the limit.
func (c *CPU) Hold(millicores int64) error {
	if millicores < 0 {
		return fmt.Errorf("cpu cgroup: %dm: want 0 (no limit) or more", millicores)
	}
	if err := c.Write("cpu.cfs_period_us", Period.Microseconds()); err != nil {
		return err
	}
	quota := int64(-1)
	if millicores > 0 {
		// The kernel's smallest quota is 1ms.
		quota = max(Period.Microseconds()*millicores/1000, 1000)
	}
	return c.Write("cpu.cfs_quota_us", quota)
}

// Throttled is how often and for how long in all the kernel held the
// group's processes back at their quota (cpu.stat nr_throttled,
// throttled_time), since the group was made.
func (c *CPU) Throttled() (periods int64, held time.Duration) {
	return c.Field("cpu.stat", "nr_throttled"), time.Duration(c.Field("cpu.stat", "throttled_time"))
}
