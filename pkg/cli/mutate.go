package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

func newMutateCmd() *cobra.Command {
	output := "yaml"
	var in *inputFlags
	cmd := &cobra.Command{
		Use:   "mutate -f FILE",
		Short: "Print the objects as graceguard's mutating webhook would leave them",
		Long: `Print the objects as graceguard's mutating webhook would leave them.

Pods are printed as admitted; workloads with their Pod template as their Pods
would be (the webhook itself never patches templates). Objects of other kinds,
and objects graceguard skips, are printed unchanged. Fields graceguard does not
know survive: the webhook's JSON patch is applied to the document as written.
Warnings, and the denials the validating webhook would return, go to stderr;
the exit code is 0 whatever they say (use check to gate on denials).`,
		Example: `  kubectl graceguard mutate -f deploy.yaml
  helm template . | kubectl graceguard mutate -f - --default-max-work=1m -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			objs, err := in.load(cmd.InOrStdin(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			for _, o := range objs {
				reportToStderr(cmd.ErrOrStderr(), o)
			}
			return writeObjects(cmd.OutOrStdout(), objs, output)
		},
	}
	in = bindInputFlags(cmd)
	cmd.Flags().VarP(outputValue{&output}, "output", "o", "output format: yaml (multi-document) or json (a List when there are several objects)")
	return cmd
}

// reportToStderr prints what the API server would tell the client.
func reportToStderr(w io.Writer, o object) {
	if o.res == nil {
		return
	}
	if r := o.res.Mutation; r.Skip != "" && !r.OptedOut {
		fmt.Fprintf(w, "note: %s: skipped: %s\n", o.ref(), skipReason(r.Skip, o.ns))
		return
	}
	for _, m := range warnings(o) {
		fmt.Fprintf(w, "Warning: %s: %s\n", o.ref(), m)
	}
	if o.res.Validation.Err() != nil {
		for _, v := range o.res.Validation.Violations {
			fmt.Fprintf(w, "Denied: %s: %s\n", o.ref(), v.Err.Error())
		}
	}
}

// warnings are the admission warnings of both webhooks, as the API server
// would show them.
func warnings(o object) []string {
	return once(o.res.Mutation.AdmissionWarnings(), o.res.Validation.AdmissionWarnings())
}

// once joins lists of messages, keeping the first of any repeated one: for
// templates the validating webhook repeats the mutating one's advice.
func once(lists ...[]string) []string {
	var out []string
	seen := map[string]bool{}
	for _, l := range lists {
		for _, m := range l {
			if !seen[m] {
				seen[m] = true
				out = append(out, m)
			}
		}
	}
	return out
}

// writeObjects prints the objects as YAML documents or as JSON.
func writeObjects(w io.Writer, objs []object, format string) error {
	raws := make([][]byte, len(objs))
	for i, o := range objs {
		raws[i] = o.doc.Raw
		if o.res != nil {
			raws[i] = o.res.Object
		}
	}
	var buf bytes.Buffer
	switch format {
	case "json":
		if len(raws) == 1 {
			if err := json.Indent(&buf, raws[0], "", "  "); err != nil {
				return err
			}
		} else {
			list, err := json.Marshal(struct {
				APIVersion string            `json:"apiVersion"`
				Kind       string            `json:"kind"`
				Items      []json.RawMessage `json:"items"`
			}{"v1", "List", rawMessages(raws)})
			if err != nil {
				return err
			}
			if err := json.Indent(&buf, list, "", "  "); err != nil {
				return err
			}
		}
		buf.WriteByte('\n')
	default:
		for i, raw := range raws {
			y, err := yaml.JSONToYAML(raw)
			if err != nil {
				return err
			}
			if i > 0 {
				buf.WriteString("---\n")
			}
			buf.Write(y)
		}
	}
	_, err := w.Write(buf.Bytes())
	return err
}

func rawMessages(raws [][]byte) []json.RawMessage {
	out := make([]json.RawMessage, len(raws))
	for i, r := range raws {
		out[i] = r
	}
	return out
}
