package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	buildversion "github.com/graceguard/graceguard/internal/version"
)

// Exit codes.
const (
	ExitOK     = 0 // allowed (or, in warn mode, allowed with warnings)
	ExitDenied = 1 // at least one object would be denied
	ExitUsage  = 2 // bad flags or unreadable input; nothing was evaluated
)

// Version is the plugin's version: internal/version.Get, which `make build`
// and `make dist` set at link time from git tags (hack/version.sh).
var Version = buildversion.Get()

// errDenied ends a run whose report was already printed with ExitDenied.
var errDenied = errors.New("denied")

// Execute runs the plugin with args (without the program name) and returns
// the exit code. Errors are printed to errOut as "error: ..." followed by
// where to find usage; every error but a denial is a usage or input error.
func Execute(args []string, in io.Reader, out, errOut io.Writer) int {
	root := newRoot(in, out, errOut)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, errDenied):
		return ExitDenied
	}
	fmt.Fprintf(errOut, "error: %v\n", err)
	if cmd != nil {
		fmt.Fprintf(errOut, "See '%s --help' for usage.\n", cmd.CommandPath())
	}
	return ExitUsage
}

func newRoot(in io.Reader, out, errOut io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl-graceguard",
		Short: "Run graceguard's admission decisions on manifests, offline",
		Long: `Run graceguard's admission decisions on manifests, offline.

graceguard writes preStop sleeps, probes and terminationGracePeriodSeconds
from a shutdown budget:

  terminationGracePeriodSeconds >= routing + max work + cleanup + safety margin

These commands run the webhook's own code on Pods and on the Pod templates of
Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs and CronJobs, read
from YAML or JSON files, directories or stdin. Objects are evaluated in a
simulated namespace that is opted in (shape it with --mode and
--namespace-annotations), unless the input holds their Namespace, which is
then used as it is.`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl graceguard"},
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetIn(in)
	root.SetOut(out)
	root.SetErr(errOut)
	// pflag already names the flag, the value and why it was refused.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })
	root.AddCommand(newMutateCmd(), newCheckCmd(), newExplainCmd(), newVersionCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := buildversion.GetInfo()
			info.Version = version()
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "kubectl-graceguard %s\n", info)
			return err
		},
	}
}

// version is the plugin's version (Version), for the version command and
// --version.
func version() string { return Version }

// noArgs refuses positional arguments, pointing at -f for what was most
// likely meant to be a file.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if cmd.Flags().Lookup("filename") != nil {
		return fmt.Errorf("unexpected argument %q: %s reads files given with -f, e.g. -f %s", args[0], cmd.CommandPath(), args[0])
	}
	return fmt.Errorf("unexpected argument %q: %s takes none", args[0], cmd.CommandPath())
}
