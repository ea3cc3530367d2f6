// Command pause is the only binary of the sandbox ("infra") image the test
// cluster's containerd uses (registry.local/pause:3.10). It holds a Pod's
// namespaces open, reaps every child re-parented to it (it is PID 1 when the
// Pod shares its PID namespace), and exits 0 on SIGTERM or SIGINT so that
// StopPodSandbox is quick.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s == syscall.SIGCHLD {
			reap()
			continue
		}
		os.Exit(0)
	}
}

// reap collects every exited child; one SIGCHLD may stand for several.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
