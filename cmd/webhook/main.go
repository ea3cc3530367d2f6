// Command webhook is graceguard's admission webhook server. It only wires:
// flags (pkg/config) into a validated server.Config, logging, a signal context, the API
// server connection and metrics registry, and server.Run. `webhook observe`
// runs the shutdown observer instead (pkg/observer), from the same image;
// `webhook selftest` and `webhook unregister` are what the chart's Helm
// hooks run (pkg/helmhook): the `helm test` checks and the pre-delete
// removal of the webhook configurations; `webhook probe` is the Pod
// `kubectl graceguard measure-routing` deploys (pkg/routingprobe), which
// answers each request with its name and calls no API server, and
// `webhook measure` the Job of its --in-cluster path.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/graceguard/graceguard/internal/version"
	"github.com/graceguard/graceguard/pkg/config"
	"github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/helmhook"
	"github.com/graceguard/graceguard/pkg/observer"
	"github.com/graceguard/graceguard/pkg/routingprobe"
	"github.com/graceguard/graceguard/pkg/routingprobe/kubeprobe"
	"github.com/graceguard/graceguard/pkg/server"
)

func main() {
	// SetupSignalHandler cancels the context on the first SIGTERM or
	// SIGINT, which starts the graceful shutdown; a second one exits at once.
	os.Exit(run(ctrl.SetupSignalHandler(), os.Args[1:], os.Stdout, os.Stderr))
}

// probeDrain bounds the probe's stop after SIGTERM, which comes at the end
// of its preStop sleep: the requests in flight then are the last.
const probeDrain = 5 * time.Second

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// command is one of the binary's: its flags and what it serves.
type command struct {
	name  string // for --help and errors: "graceguard-webhook observe"
	what  string // for logs: "webhook", "observer"
	flags flags.Flags
	// version adds --version.
	version bool
	// oneShot commands (the Helm hooks') print their failure as a
	// sentence, for `helm test --logs` and Helm's hook logs, not as a
	// log record.
	oneShot bool
	// offline commands call no API server: serve gets a nil config.
	offline bool
	serve   func(ctx context.Context, rest *rest.Config) error
}

// run parses args, validates them and serves until ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	sub := ""
	if len(args) > 0 {
		sub = args[0]
	}
	switch sub {
	case "observe":
		// `webhook observe [flags]`: graceguard's shutdown observer, run
		// from the same image as a Deployment of its own.
		cfg := observer.Default()
		return command{name: "graceguard-webhook observe", what: "observer", flags: config.ObserverFlags(&cfg),
			serve: func(ctx context.Context, rest *rest.Config) error {
				return observer.Run(ctx, cfg, rest, metrics.Registry)
			}}.run(ctx, args[1:], stdout, stderr)
	case "selftest":
		// `webhook selftest --check=service|mutation [flags]`: the chart's
		// `helm test` Pods.
		cfg := helmhook.DefaultSelftest()
		return command{name: "graceguard-webhook selftest", what: "selftest", flags: config.SelftestFlags(&cfg), oneShot: true,
			serve: func(ctx context.Context, rest *rest.Config) error {
				kube, err := kubernetes.NewForConfig(rest)
				if err != nil {
					return err
				}
				return helmhook.Selftest(ctx, cfg, kube, stdout)
			}}.run(ctx, args[1:], stdout, stderr)
	case "unregister":
		// `webhook unregister --release=NAME [flags]`: the chart's
		// pre-delete hook.
		cfg := helmhook.DefaultUnregister()
		return command{name: "graceguard-webhook unregister", what: "unregister", flags: config.UnregisterFlags(&cfg), oneShot: true,
			serve: func(ctx context.Context, rest *rest.Config) error {
				kube, err := kubernetes.NewForConfig(rest)
				if err != nil {
					return err
				}
				return helmhook.Unregister(ctx, cfg, kube, stdout)
			}}.run(ctx, args[1:], stdout, stderr)
	case "probe":
		// `webhook probe [--listen=:8080]`: the routing probe's Pods.
		cfg := config.DefaultProbe()
		return command{name: "graceguard-webhook probe", what: "routing probe", flags: config.ProbeFlags(&cfg), offline: true,
			serve: func(ctx context.Context, _ *rest.Config) error {
				return routingprobe.Serve(ctx, cfg.Listen, os.Getenv("POD_NAME"), probeDrain)
			}}.run(ctx, args[1:], stdout, stderr)
	case "measure":
		// `webhook measure --url=http://$(PROBE_SERVICE_HOST)/ [flags]`: the Job of
		// `kubectl graceguard measure-routing --in-cluster`. It prints its
		// progress, then the result the plugin reads from its log.
		cfg := config.MeasureConfig{Settings: kubeprobe.DefaultSettings(), Namespace: os.Getenv("POD_NAMESPACE")}
		return command{name: "graceguard-webhook measure", what: "routing measurement", flags: config.MeasureFlags(&cfg), oneShot: true,
			serve: func(ctx context.Context, rest *rest.Config) error {
				kube, err := kubernetes.NewForConfig(rest)
				if err != nil {
					return err
				}
				res, err := kubeprobe.Run(ctx, cfg.Settings, &kubeprobe.Cluster{Kube: kube, Namespace: cfg.Namespace}, stdout)
				if err != nil {
					return err
				}
				return routingprobe.WriteResult(stdout, res)
			}}.run(ctx, args[1:], stdout, stderr)
	}
	cfg := config.Default()
	return command{name: "graceguard-webhook", what: "webhook", flags: config.Flags(&cfg), version: true,
		serve: func(ctx context.Context, rest *rest.Config) error {
			return server.Run(ctx, cfg, rest, metrics.Registry)
		}}.run(ctx, args, stdout, stderr)
}

func (c command) run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet(c.name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	c.flags.Bind(fs)
	showVersion := false
	if c.version {
		fs.BoolVar(&showVersion, "version", false, "Print the version and exit.")
	}
	zapOpts := zap.Options{}
	goFlags := flag.NewFlagSet("", flag.ContinueOnError)
	zapOpts.BindFlags(goFlags)
	fs.AddGoFlagSet(goFlags)
	// controller-runtime registers --kubeconfig on the standard flag set.
	if f := flag.CommandLine.Lookup("kubeconfig"); f != nil {
		fs.AddGoFlag(f)
	}

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "%v\nrun %s --help for the flags\n", err, c.name)
		return exitUsage
	}
	if showVersion {
		fmt.Fprintf(stdout, "graceguard-webhook %s\n", version.GetInfo())
		return exitOK
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %v\n", fs.Args())
		return exitUsage
	}
	if err := c.flags.Validate(); err != nil {
		fmt.Fprintf(stderr, "invalid flags: %v\n", err)
		return exitUsage
	}

	log := zap.New(zap.UseFlagOptions(&zapOpts), zap.WriteTo(stderr))
	// controller-runtime's own packages log through its global delegating
	// logger; graceguard's packages take the logger from the context.
	ctrl.SetLogger(log)
	ctx = logf.IntoContext(ctx, log)
	info := version.GetInfo()
	log.Info("starting graceguard "+c.what, "version", info.Version, "go", info.GoVersion, "platform", info.Platform)
	if limit, ok := memoryLimit(os.Getenv); ok {
		debug.SetMemoryLimit(limit)
		log.Info("Go heap kept under 90% of the container's memory limit", "bytes", limit)
	}
	if err := c.connect(ctx); err != nil {
		if c.oneShot {
			fmt.Fprintf(stderr, "%s failed: %v\n", c.name, err)
		} else {
			log.Error(err, c.what+" stopped")
		}
		return exitError
	}
	return exitOK
}

// connect finds the API server (in-cluster, or --kubeconfig, or
// $KUBECONFIG) and serves.
func (c command) connect(ctx context.Context) error {
	if c.offline {
		return c.serve(ctx, nil)
	}
	rest, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("connecting to the API server: %w", err)
	}
	return c.serve(ctx, rest)
}

// memoryLimit is the soft limit for the Go heap: 90% of the container's
// memory limit, which the chart passes as GRACEGUARD_MEMORY_LIMIT (bytes,
// from the downward API), so the garbage collector works harder before the
// kernel's OOM killer would. GOMEMLIMIT, when set, wins (the runtime reads it).
func memoryLimit(getenv func(string) string) (int64, bool) {
	if getenv("GOMEMLIMIT") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(getenv("GRACEGUARD_MEMORY_LIMIT"), 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n / 10 * 9, true
}
