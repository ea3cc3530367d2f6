package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	buildversion "github.com/graceguard/graceguard/internal/version"
)

// Exit codes, stable and documented in docs/plugin.md.
const (
	// ExitOK: nothing found at the --fail-on level (by default: nothing
	// denied), or a command that does not judge (mutate, explain).
	ExitOK = 0
	// ExitFindings: check or audit found something at the --fail-on level
	// (by default: an object would be denied).
	ExitFindings = 1
	// ExitUsage: bad flags or unreadable input (nothing was evaluated), or
	// an object that could not be evaluated (reported with the others), or
	// a cluster audit could not read.
	ExitUsage = 2
)

// ExitDenied is ExitFindings under its first name.
const ExitDenied = ExitFindings

// Version is the plugin's version: internal/version.Get, which `make build`
// and `make dist` set at link time from git tags (hack/version.sh).
var Version = buildversion.Get()

// errFindings ends a run whose report was already printed with ExitFindings.
var errFindings = errors.New("findings at the --fail-on level")

// notEvaluatedError ends a run whose report, already printed, holds objects
// that could not be evaluated.
type notEvaluatedError struct{ n int }

func (e notEvaluatedError) Error() string {
	return fmt.Sprintf("%s could not be evaluated (see the errors in the report)", plural(e.n, "object"))
}

// Execute runs the plugin with args (without the program name) and returns
// the exit code. Errors are printed to errOut as "error: ..." followed by
// where to find usage; every error but a denial is a usage or input error.
func Execute(args []string, in io.Reader, out, errOut io.Writer) int {
	return ExecuteContext(context.Background(), args, in, out, errOut)
}

// ExecuteContext is Execute with a context, for commands that call a
// cluster (audit) or fetch -f URL.
func ExecuteContext(ctx context.Context, args []string, in io.Reader, out, errOut io.Writer) int {
	root := newRoot(in, out, errOut)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	var ne notEvaluatedError
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, errFindings):
		return ExitFindings
	case errors.As(err, &ne):
		fmt.Fprintf(errOut, "error: %v\n", err)
		return ExitUsage
	}
	fmt.Fprintf(errOut, "error: %v\n", err)
	if cmd != nil && !errors.As(err, new(runtimeError)) {
		fmt.Fprintf(errOut, "See '%s --help' for usage.\n", cmd.CommandPath())
	}
	return ExitUsage
}

// runtimeError is an error of the environment, not of the command line
// (a cluster that does not answer): usage would not help.
type runtimeError struct{ err error }

func (e runtimeError) Error() string { return e.err.Error() }
func (e runtimeError) Unwrap() error { return e.err }

func newRoot(in io.Reader, out, errOut io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl-graceguard",
		Short: "Run graceguard's admission decisions on manifests or a cluster, without the webhook",
		Long: `Run graceguard's admission decisions on manifests or a cluster, without the webhook.

graceguard writes preStop sleeps, probes and terminationGracePeriodSeconds
from a shutdown budget:

  terminationGracePeriodSeconds >= routing + max work + cleanup + safety margin

mutate, check and explain run the webhook's own code on Pods and on the Pod
templates of Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs,
CronJobs, ReplicationControllers and Argo Rollouts' Rollouts (older apps/v1beta*, extensions/v1beta1
and batch/v1beta1 versions too), read from YAML or JSON files, directories,
http(s) URLs or stdin. Objects are evaluated in a simulated namespace that is
opted in (shape it with -n, --mode and --namespace-annotations), unless the
input holds their Namespace, which is then used as written; --assume-opted-in
evaluates those as if opted in too. audit does the same for every workload and
running Pod of a live cluster.`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl graceguard"},
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       versionLine(),
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetVersionTemplate("kubectl-graceguard {{.Version}}\n")
	root.SetIn(in)
	root.SetOut(out)
	root.SetErr(errOut)
	// pflag already names the flag, the value and why it was refused; a
	// flag that does not exist gets the nearest ones it may have meant.
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return suggestFlag(cmd, err) })
	root.SuggestionsMinimumDistance = 2
	root.AddCommand(newMutateCmd(), newCheckCmd(), newExplainCmd(), newAuditCmd(), newRecommendCmd(), newMeasureRoutingCmd(), newVersionCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "kubectl-graceguard %s\n", versionLine())
			return err
		},
	}
}

// version is the plugin's version (Version), for the version command and
// --version.
func version() string { return Version }

// versionLine is the version with the Go toolchain and platform, as
// `version` and `--version` print it.
func versionLine() string {
	info := buildversion.GetInfo()
	info.Version = version()
	return info.String()
}

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
