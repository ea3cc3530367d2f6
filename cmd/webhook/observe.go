package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/graceguard/graceguard/pkg/observer"
)

// observe is `webhook observe [flags]`: graceguard's shutdown observer,
// run from the same image as a Deployment of its own (pkg/observer).
func observe(ctx context.Context, args []string, stderr io.Writer) int {
	cfg := observer.Default()
	fs := pflag.NewFlagSet("graceguard-webhook observe", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg.BindFlags(fs)
	zapOpts := zap.Options{}
	goFlags := flag.NewFlagSet("", flag.ContinueOnError)
	zapOpts.BindFlags(goFlags)
	fs.AddGoFlagSet(goFlags)
	if f := flag.CommandLine.Lookup("kubeconfig"); f != nil {
		fs.AddGoFlag(f)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "%v\nrun with observe --help for the flags\n", err)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %v\n", fs.Args())
		return exitUsage
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "invalid flags: %v\n", err)
		return exitUsage
	}
	log := zap.New(zap.UseFlagOptions(&zapOpts), zap.WriteTo(stderr))
	ctrl.SetLogger(log)
	ctx = logf.IntoContext(ctx, log)
	if limit, ok := memoryLimit(os.Getenv); ok {
		debug.SetMemoryLimit(limit)
		log.Info("Go heap kept under 90% of the container's memory limit", "bytes", limit)
	}
	if err := observer.Run(ctx, cfg); err != nil {
		log.Error(err, "observer stopped")
		return exitError
	}
	return exitOK
}
