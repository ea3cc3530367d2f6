package apiserver

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/graceguard/graceguard/test/harness/logs"
)

// Process is a server a test or a benchmark runs as a program of its own
// (the webhook binary, the benchmark's no-op baseline), its output
// appended to a log file.
type Process struct {
	// Name names it in errors; Log is its log file.
	Name, Log string
	bin       string
	args      []string
	cmd       *exec.Cmd
	done      chan struct{}
	err       error
}

// StartProcess runs bin with args, its output appended to log.
func StartProcess(name, log, bin string, args ...string) (*Process, error) {
	p := &Process{Name: name, Log: log, bin: bin, args: args}
	return p, p.Start()
}

// Start starts the process (again, after Stop), appending to its log.
func (p *Process) Start() error {
	f, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("starting %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.err = cmd, done, nil
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(done)
	}()
	return nil
}

// PID is the running process's id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited returns nil while the process runs, else how it ended, with the
// end of its log.
func (p *Process) Exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v); its log %s ends with:\n%s", p.Name, p.err, p.Log, logs.Tail(p.Log, 15))
	default:
		return nil
	}
}

// Signal sends sig to the running process without waiting: a test that
// stops a replica the way a kubelet or a node crash would (SIGTERM,
// SIGKILL) and watches what follows.
func (p *Process) Signal(sig os.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signalling %s: %w", p.Name, err)
	}
	return nil
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stop sends SIGTERM and waits for the process to exit; SIGKILL after 15s.
// A nil or exited Process is stopped already.
func (p *Process) Stop() error {
	if p == nil || p.Exited() != nil {
		return nil
	}
	// SIGTERM starts graceguard's graceful shutdown (with --shutdown-delay=0s,
	// at once, then draining).
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within 15s of SIGTERM; killed", p.Name)
	}
}

// Readyz is the status code of GET /readyz on a local health port (0 when
// nothing answers): what a kubelet's readiness probe sees of a webhook.
func Readyz(port int) int {
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
