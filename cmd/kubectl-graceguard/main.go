// Command kubectl-graceguard runs graceguard's admission decisions offline,
// on manifests; on PATH it is `kubectl graceguard`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/graceguard/graceguard/pkg/cli"
)

func main() {
	// The first Ctrl-C (or SIGTERM) cancels the context: measure-routing
	// then deletes what it created. A second one kills the plugin at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	os.Exit(cli.ExecuteContext(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
