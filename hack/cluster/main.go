// Command cluster runs graceguard's local single-node test cluster (real
// etcd, kube-apiserver, kube-controller-manager, containerd and kubelet on
// this Linux machine, as root; no Docker). It is a thin CLI over the
// test/harness/cluster package, which the e2e suites call directly.
//
//	go -C hack run ./cluster up            # build/cache what is missing, start, wait for Ready;
//	                                    # prints the admin kubeconfig path on stdout
//	go -C hack run ./cluster status        # processes, Node readiness (exit 1 unless running)
//	go -C hack run ./cluster kubeconfig    # the admin kubeconfig path (exit 1 if none)
//	go -C hack run ./cluster image -pkg ./test/images/hello -name registry.local/hello:dev [-import]
//	go -C hack run ./cluster import ARCHIVE...   # into the running cluster (CRI namespace k8s.io)
//	go -C hack run ./cluster add-node      # start the second node (gg-node2, tainted) and wait for Ready
//	go -C hack run ./cluster remove-node   # stop it and remove what add-node made
//	go -C hack run ./cluster down          # stop everything and clean the machine (idempotent)
//
// Flags common to all: -dir (default $GG_CLUSTER_DIR, else bin/cluster).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/graceguard/graceguard/test/harness/cluster"
	"github.com/graceguard/graceguard/test/harness/ocipack"
	"github.com/graceguard/graceguard/test/harness/repo"
)

const usage = `usage: go -C hack run ./cluster COMMAND [flags]

Commands:
  up          build or reuse the binaries, start the cluster (or the parts not
              running), wait until node %s is Ready; print the kubeconfig path
  down        stop every process and remove every mount, cgroup, veth, the
              bridge, iptables rules and state it made (logs are kept)
  add-node    start the second node %s in its own network namespace (tainted
              %s:NoSchedule) and wait until it is Ready
  remove-node stop the second node and remove what add-node made
  status      show the processes and whether the node is Ready
  kubeconfig  print the admin kubeconfig path
  image       build a Go main package into an OCI image archive (-import: and
              import it into the running cluster)
  import      import OCI/Docker image archives into the running cluster

Run "go -C hack run ./cluster COMMAND -h" for a command's flags.
`

func main() {
	if err := repo.Chdir(); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(2)
	}
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	log.SetPrefix("cluster: ")
	if len(os.Args) < 2 {
		fmt.Fprintf(os.Stderr, usage, cluster.NodeName, cluster.Node2Name, cluster.Node2TaintKey)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1], os.Args[2:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		log.Printf("error: %v", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, command string, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	var opts cluster.Options
	fs.StringVar(&opts.Dir, "dir", "", "run directory (default $GG_CLUSTER_DIR, else <repo>/bin/cluster)")
	switch command {
	case "up":
		fs.BoolVar(&opts.SkipInstall, "skip-install", false, "fail instead of apt-get installing runc, CNI plugins, iptables")
		fs.DurationVar(&opts.Timeout, "timeout", 3*time.Minute, "how long to wait for each component and the Node")
		if err := fs.Parse(args); err != nil {
			return err
		}
		c, err := cluster.Up(ctx, opts)
		if err != nil {
			return err
		}
		log.Printf("export KUBECONFIG=%s   # kubectl: %s", c.Kubeconfig, c.Kubectl)
		if !c.Scheduler {
			log.Printf("no kube-scheduler binary: Pods need spec.nodeName: %s", cluster.NodeName)
		}
		fmt.Fprintln(stdout, c.Kubeconfig)
		return nil

	case "down":
		if err := fs.Parse(args); err != nil {
			return err
		}
		return cluster.Down(ctx, opts)

	case "add-node", "remove-node":
		if err := fs.Parse(args); err != nil {
			return err
		}
		c, err := cluster.Attach(ctx, opts)
		if err != nil {
			return err
		}
		if command == "remove-node" {
			return c.RemoveNode(ctx)
		}
		return c.AddNode(ctx)

	case "status":
		if err := fs.Parse(args); err != nil {
			return err
		}
		s, err := cluster.Status(ctx, opts)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "run dir:    %s\n", s.Dir)
		if s.Kubeconfig != "" {
			fmt.Fprintf(stdout, "kubeconfig: %s\n", s.Kubeconfig)
		}
		for _, c := range s.Components {
			state := "running"
			if !c.Running {
				state = "NOT RUNNING"
			}
			fmt.Fprintf(stdout, "  %-24s pid %-7d %-12s %s\n", c.Name, c.PID, state, c.Log)
		}
		fmt.Fprintf(stdout, "node %s Ready: %v\n", cluster.NodeName, s.NodeReady)
		for _, l := range s.Leftovers {
			fmt.Fprintf(stdout, "leftover: %s\n", l)
		}
		if !s.Running() {
			return errors.New("cluster not running")
		}
		return nil

	case "kubeconfig":
		if err := fs.Parse(args); err != nil {
			return err
		}
		s, err := cluster.Status(ctx, opts)
		if err != nil {
			return err
		}
		if s.Kubeconfig == "" {
			return fmt.Errorf("no kubeconfig in %s: run up", s.Dir)
		}
		fmt.Fprintln(stdout, s.Kubeconfig)
		return nil

	case "image":
		var pkg, name, out, user string
		var doImport bool
		fs.StringVar(&pkg, "pkg", "", "main package to build, e.g. ./test/images/hello (required)")
		fs.StringVar(&name, "name", "", "image reference with registry host and tag, e.g. registry.local/hello:dev (required)")
		fs.StringVar(&out, "o", "", "archive path (default bin/images/<last element of -pkg>.tar)")
		fs.StringVar(&user, "user", "65532:65532", "numeric UID:GID the image runs as")
		fs.BoolVar(&doImport, "import", false, "import the archive into the running cluster")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if pkg == "" || name == "" {
			return errors.New("image: -pkg and -name are required")
		}
		root, err := os.Getwd()
		if err != nil {
			return err
		}
		if out == "" {
			out = filepath.Join(root, "bin", "images", filepath.Base(pkg)+".tar")
		}
		res, err := ocipack.BuildGoImage(ctx, out, ocipack.GoImage{
			GoBuild: ocipack.GoBuild{Dir: root, Package: pkg, Stderr: os.Stderr},
			Image:   ocipack.Image{Name: name, User: user},
		})
		if err != nil {
			return err
		}
		log.Printf("%s %s -> %s", res.Name, res.Digest, res.Archive)
		if doImport {
			c, err := cluster.Attach(ctx, opts)
			if err != nil {
				return err
			}
			if err := c.ImportImage(ctx, res.Archive); err != nil {
				return err
			}
		}
		fmt.Fprintln(stdout, res.Archive)
		return nil

	case "import":
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			return errors.New("import: name at least one archive")
		}
		c, err := cluster.Attach(ctx, opts)
		if err != nil {
			return err
		}
		for _, a := range fs.Args() {
			if err := c.ImportImage(ctx, a); err != nil {
				return err
			}
		}
		return nil

	case "-h", "--help", "help":
		fmt.Fprintf(os.Stderr, usage, cluster.NodeName, cluster.Node2Name, cluster.Node2TaintKey)
		return nil
	}
	fmt.Fprintf(os.Stderr, usage, cluster.NodeName, cluster.Node2Name, cluster.Node2TaintKey)
	return fmt.Errorf("unknown command %q", command)
}
