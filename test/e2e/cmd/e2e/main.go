// Command e2e is the runner behind `make e2e` (hack/e2e.sh): it starts the
// local single-node cluster (test/harness/cluster) while compiling the e2e suite,
// runs the suite against it, tears the cluster down whatever happened
// (failure, Ctrl-C, SIGTERM), and renders the run's evidence: into
// bin/e2e/<timestamp>/ always, into docs/e2e.md and docs/e2e/ when the run
// passed (-docs=always: also when it failed).
//
//	go -C test build -o ../bin/e2e-runner ./e2e/cmd/e2e
//	bin/e2e-runner [-focus REGEXP] [-keep] [-docs pass|always|never] [-timeout 60m]
//	bin/e2e-runner -render bin/e2e/<timestamp>   (docs/ from a passing run made with -docs never)
//
// It must run as root from the repository root. Exit status: the suite's (0
// when every spec passed), 1 on a runner error, 130 when interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/graceguard/graceguard/test/e2e/evidence"
	"github.com/graceguard/graceguard/test/harness/cluster"
)

func main() {
	log.SetFlags(log.Ltime)
	log.SetPrefix("e2e: ")
	focus := flag.String("focus", "", "run only the specs matching this regexp (ginkgo -focus); spec 0 (install) always runs")
	keep := flag.Bool("keep", false, "leave the cluster running after the suite (tear it down with: go -C hack run ./cluster down)")
	docs := flag.String("docs", "pass", "when to refresh docs/e2e.md and docs/e2e/: pass (only a passing run), always, never")
	timeout := flag.Duration("timeout", 60*time.Minute, "bound on the suite (go test -timeout)")
	render := flag.String("render", "", "run nothing: refresh docs/e2e.md and docs/e2e/ from this earlier run's directory (bin/e2e/<timestamp>), if it passed")
	flag.Parse()
	if *render != "" {
		os.Exit(renderRun(*render))
	}
	if *docs != "pass" && *docs != "always" && *docs != "never" {
		log.Fatalf("-docs must be pass, always or never")
	}
	os.Exit(run(*focus, *keep, *docs, *timeout))
}

func run(focus string, keep bool, docs string, timeout time.Duration) (code int) {
	if os.Geteuid() != 0 {
		log.Print("the e2e suite runs a real kubelet and containerd: run it as root")
		return 1
	}
	root, err := os.Getwd()
	if err != nil {
		log.Print(err)
		return 1
	}
	if _, err := os.Stat(filepath.Join(root, "test", "e2e", "suite_test.go")); err != nil {
		log.Printf("run it from the repository root: %v", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()

	start := time.Now()
	out := filepath.Join(root, "bin", "e2e", start.UTC().Format("20060102-150405"))
	if err := os.MkdirAll(out, 0o755); err != nil {
		log.Print(err)
		return 1
	}
	rn := &evidence.Runner{}
	opts := cluster.Options{RepoRoot: root, Logf: func(f string, a ...any) { log.Printf("cluster: "+f, a...) }}

	// Tear down whatever happens from here on.
	defer func() {
		if keep {
			log.Printf("-keep: the cluster stays up (go -C hack run ./cluster down)")
		} else {
			t := time.Now()
			dctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if err := cluster.Down(dctx, opts); err != nil {
				log.Printf("cluster down: %v", err)
				if code == 0 {
					code = 1
				}
			}
			rn.Down = evidence.S(time.Since(t))
			dir := os.Getenv("GG_CLUSTER_DIR")
			if dir == "" {
				dir = filepath.Join(root, "bin", "cluster")
			}
			rn.Leftovers = cluster.Leftovers(dir)
			if len(rn.Leftovers) > 0 {
				log.Printf("left behind after down:\n  %s", strings.Join(rn.Leftovers, "\n  "))
				if code == 0 {
					code = 1
				}
			}
		}
		rn.Total = evidence.S(time.Since(start))
		if c := report(root, out, rn, docs); c != 0 && code == 0 {
			code = c
		}
		if ctx.Err() != nil && code == 0 {
			code = 130
		}
		log.Printf("done in %s: exit %d; evidence in %s", time.Since(start).Round(time.Second), code, out)
	}()

	// Compile the suite while the cluster comes up.
	testBin := filepath.Join(root, "bin", "e2e", "e2e.test")
	built := make(chan error, 1)
	go func() {
		t := time.Now()
		cmd := exec.CommandContext(ctx, "go", "test", "-tags", "e2e", "-c", "-o", testBin, "./e2e/")
		cmd.Dir = filepath.Join(root, "test") // the lab's module
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		err := cmd.Run()
		rn.Build = evidence.S(time.Since(t))
		built <- err
	}()
	t := time.Now()
	if _, err := cluster.Up(ctx, opts); err != nil {
		log.Printf("cluster up: %v", err)
		<-built
		return 1
	}
	rn.Up = evidence.S(time.Since(t))
	log.Printf("cluster up in %s", time.Duration(float64(rn.Up)*float64(time.Second)).Round(time.Millisecond))
	if err := <-built; err != nil {
		log.Printf("building the suite: %v", err)
		return 1
	}
	if ctx.Err() != nil {
		return 130
	}

	// The suite, in its own process group so that a signal reaches it
	// once, from here, and it can run its cleanup.
	args := []string{"-test.v", "-test.timeout", timeout.String(), "-ginkgo.v", "-ginkgo.junit-report", filepath.Join(out, "junit.xml")}
	if focus != "" {
		args = append(args, "-ginkgo.focus", "installs|"+focus)
	}
	logFile, err := os.Create(filepath.Join(out, "test.log"))
	if err != nil {
		log.Print(err)
		return 1
	}
	defer logFile.Close()
	cmd := exec.Command(testBin, args...)
	cmd.Dir = filepath.Join(root, "test", "e2e")
	cmd.Env = append(os.Environ(), "GG_E2E_OUT="+out)
	if !keep {
		// The cluster goes away after the suite: it need not clean up.
		cmd.Env = append(cmd.Env, "GG_E2E_DISPOSABLE=1")
	}
	cmd.Stdout = io.MultiWriter(os.Stdout, logFile)
	cmd.Stderr = io.MultiWriter(os.Stderr, logFile)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t = time.Now()
	if err := cmd.Start(); err != nil {
		log.Print(err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-done:
	case <-ctx.Done():
		log.Printf("interrupted: asking the suite to clean up (SIGINT), then tearing the cluster down")
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		select {
		case werr = <-done:
		case <-time.After(3 * time.Minute):
			log.Printf("the suite did not stop within 3 minutes: killing it")
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			werr = <-done
		}
	}
	rn.Test = evidence.S(time.Since(t))
	var ee *exec.ExitError
	switch {
	case werr == nil:
		rn.ExitCode = 0
	case errors.As(werr, &ee):
		rn.ExitCode = ee.ExitCode()
	default:
		log.Printf("the suite: %v", werr)
		rn.ExitCode = 1
	}
	if ctx.Err() != nil {
		return 130
	}
	if rn.ExitCode != 0 {
		return 1
	}
	return 0
}

// renderRun refreshes docs/ from the evidence of a passing run made with
// -docs never (as CI makes it), so the docs show a run CI made.
func renderRun(dir string) int {
	if _, err := os.Stat(filepath.Join("test", "e2e", "suite_test.go")); err != nil {
		log.Printf("run it from the repository root: %v", err)
		return 1
	}
	r, err := evidence.Read(filepath.Join(dir, evidence.JSONName))
	if err != nil {
		log.Printf("-render %s: %v", dir, err)
		return 1
	}
	if !r.Passed || r.Runner == nil || r.Runner.ExitCode != 0 || len(r.Runner.Leftovers) > 0 {
		log.Printf("-render %s: the run did not pass; docs/e2e.md shows passing runs only", dir)
		return 1
	}
	if err := evidence.RenderFiles(r, "docs", "e2e"); err != nil {
		log.Printf("-render %s: %v", dir, err)
		return 1
	}
	log.Printf("docs/e2e.md and docs/e2e/ now show %s", dir)
	return 0
}

// report adds the runner's numbers to the run's evidence and renders it,
// into the run directory and, per docs, into docs/.
func report(root, out string, rn *evidence.Runner, docs string) int {
	path := filepath.Join(out, evidence.JSONName)
	r, err := evidence.Read(path)
	if err != nil {
		log.Printf("no evidence to render: %v", err)
		return 1
	}
	r.Runner = rn
	if err := evidence.RenderFiles(r, out, "."); err != nil {
		log.Printf("rendering %s: %v", out, err)
		return 1
	}
	passed := r.Passed && rn.ExitCode == 0 && len(rn.Leftovers) == 0
	if docs == "always" || (docs == "pass" && passed) {
		if err := evidence.RenderFiles(r, filepath.Join(root, "docs"), "e2e"); err != nil {
			log.Printf("rendering docs: %v", err)
			return 1
		}
		log.Printf("docs/e2e.md and docs/e2e/ now show this run (passed=%v)", passed)
	} else {
		log.Printf("docs/e2e.md left alone (run passed=%v, -docs=%s); this run: %s", passed, docs, filepath.Join(out, evidence.MDName))
	}
	fmt.Println()
	fmt.Print(summaryText(r))
	return 0
}

func summaryText(r *evidence.Run) string {
	return fmt.Sprintf("e2e evidence summary (passed=%v)\n", r.Passed) + evidence.Summary(r) + failures(r)
}

// failures is, for each spec that did not pass, the start of its failure
// and graceguard's state at that moment: the end of the output is often
// all that is kept of a CI run.
func failures(r *evidence.Run) string {
	var b strings.Builder
	for _, s := range r.Specs {
		switch s.State {
		case "passed", "skipped", "pending":
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\nSpecs that did not pass:\n")
		}
		msg := strings.Join(strings.Fields(s.Failure), " ")
		if len(msg) > 400 {
			msg = msg[:400] + "..."
		}
		fmt.Fprintf(&b, "- %s (%s): %s\n", s.Name, s.State, msg)
		if s.Graceguard != "" {
			fmt.Fprintf(&b, "  graceguard: %s\n", s.Graceguard)
		}
	}
	return b.String()
}
