package proc

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// What the harness reads of a process is what the kernel says of this one:
// it has used CPU, holds memory and its peak is at least its current RSS.
func TestReadsThisProcess(t *testing.T) {
	deadline := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(deadline) {
	}
	cpu, err := CPUTime(os.Getpid())
	if err != nil || cpu <= 0 {
		t.Errorf("CPUTime of this process: %v, %v; want > 0 after 50 ms of spinning", cpu, err)
	}
	m, err := ReadMemory(os.Getpid())
	if err != nil || m.RSS <= 0 || m.HWM < m.RSS {
		t.Errorf("ReadMemory of this process: %+v, %v; want RSS > 0 and HWM >= RSS", m, err)
	}
	if _, err := CPUTime(-1); err == nil {
		t.Error("CPUTime(-1) returned no error")
	}
	if l, err := LoadAvg(); err != nil || l[0] < 0 {
		t.Errorf("LoadAvg: %v, %v", l, err)
	}
	if MemTotal() <= 0 || Kernel() == "unknown" {
		t.Errorf("MemTotal %d, Kernel %q", MemTotal(), Kernel())
	}
}

// Children finds a child by its command name, and only this process's.
func TestChildrenFindsAChildByName(t *testing.T) {
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep command:", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	got := Children("sleep", "kube-apiserver")
	if got["sleep"] != cmd.Process.Pid {
		t.Errorf("Children(sleep) = %v, want sleep: %d", got, cmd.Process.Pid)
	}
	if _, ok := got["kube-apiserver"]; ok {
		t.Errorf("Children found a kube-apiserver that this test did not start: %v", got)
	}
}
