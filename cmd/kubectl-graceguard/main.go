// Command kubectl-graceguard runs graceguard's admission decisions offline,
// on manifests; on PATH it is `kubectl graceguard`.
package main

import (
	"os"

	"github.com/graceguard/graceguard/pkg/cli"
)

func main() {
	os.Exit(cli.Execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
