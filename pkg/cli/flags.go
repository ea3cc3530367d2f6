package cli

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/optionflags"
)

// inputFlags are the flags mutate, check and explain share: what to read
// and the cluster and namespace to evaluate it in.
type inputFlags struct {
	files     []string
	recursive bool
	// namespace is where objects without metadata.namespace are evaluated.
	namespace string
	// mode, when set, is the simulated namespace's graceguard.io/mode label.
	mode mutate.Mode
	// annotations are the simulated namespace's graceguard annotations.
	annotations map[string]string
	// assumeOptedIn evaluates namespaces defined in the input as if opted
	// in, with mode and annotations over their own.
	assumeOptedIn bool
	// namespaceSet records that -n was given.
	namespaceSet bool
	opts         mutate.Options
	fs           *pflag.FlagSet
	// command names the command in hints ("render it and pipe it into mutate").
	command string
}

func bindInputFlags(cmd *cobra.Command) *inputFlags {
	f := &inputFlags{namespace: "default", annotations: map[string]string{}, opts: mutate.DefaultOptions(), fs: cmd.Flags(), command: cmd.Name()}
	fs := cmd.Flags()
	fs.StringArrayVarP(&f.files, "filename", "f", nil, "YAML or JSON file, directory of them, http(s) URL, or - for stdin (repeatable)")
	fs.BoolVarP(&f.recursive, "recursive", "R", false, "read directories given with -f recursively")
	bindNamespaceFlags(fs, f)
	fs.StringVarP(&f.namespace, "namespace", "n", f.namespace, "namespace of objects that set none")
	optionflags.Bind(fs, &f.opts)
	return f
}

// bindNamespaceFlags binds the flags that shape the namespace objects are
// evaluated in; audit shares them.
func bindNamespaceFlags(fs *pflag.FlagSet, f *inputFlags) {
	fs.Var(flags.ChoiceValue(&f.mode, mutate.Modes...), "mode", "evaluate as if the namespace's "+mutate.LabelMode+" label were this: enforce or warn (default: --default-mode)")
	fs.Var(annotationsValue{f.annotations}, "namespace-annotations",
		"evaluate as if the namespace carried these graceguard defaults (repeatable), e.g. "+mutate.AnnotationMaxWork+"=1m,"+mutate.AnnotationPreStop+"=exec")
	fs.BoolVar(&f.assumeOptedIn, "assume-opted-in", false,
		"evaluate Namespaces defined in the input as if labelled "+mutate.LabelInject+"="+mutate.LabelInjectEnabled+
			", with --mode and --namespace-annotations over their own label and annotations (by default they are used as written, as the cluster would)")
}

// validate checks what pflag could not check flag by flag.
func (f *inputFlags) validate() error {
	if len(f.files) == 0 {
		return fmt.Errorf("no input: give -f FILE (repeatable), -f DIRECTORY, -f URL or -f - for stdin")
	}
	f.namespaceSet = f.fs != nil && f.fs.Changed("namespace")
	if errs := validation.IsDNS1123Label(f.namespace); len(errs) > 0 {
		return fmt.Errorf("invalid argument %q for \"-n, --namespace\" flag: %s", f.namespace, strings.Join(errs, "; "))
	}
	return f.opts.Validate()
}

// annotationsValue parses --namespace-annotations: key=value pairs,
// comma-separated, repeatable. Keys are limited to the annotations a
// Namespace may carry, and values are checked by graceguard's own parser,
// so a typo is a usage error here rather than a denial of every object.
type annotationsValue struct{ m map[string]string }

func (v annotationsValue) String() string {
	if v.m == nil {
		return ""
	}
	keys := slices.Sorted(maps.Keys(v.m))
	kv := make([]string, len(keys))
	for i, k := range keys {
		kv[i] = k + "=" + v.m[k]
	}
	return strings.Join(kv, ",")
}

func (v annotationsValue) Set(s string) error {
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		k, val, ok := strings.Cut(pair, "=")
		if !ok {
			return fmt.Errorf("%q is not key=value: want key=value,... with keys %s", pair, strings.Join(mutate.NamespaceDefaultKeys, ", "))
		}
		if !slices.Contains(mutate.NamespaceDefaultKeys, k) {
			return fmt.Errorf("unknown key %q: want one of %s", k, strings.Join(mutate.NamespaceDefaultKeys, ", "))
		}
		if err := checkNamespaceDefault(k, val); err != nil {
			return err
		}
		v.m[k] = val
	}
	return nil
}

func (v annotationsValue) Type() string { return "key=value" }

// checkNamespaceDefault runs graceguard's validation on an empty Pod in a
// namespace carrying only this annotation: the webhook's parser is the one
// authority on what a value may be.
func checkNamespaceDefault(key, value string) error {
	ns := mutate.Namespace{
		Name:        "flag-check",
		Labels:      map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled},
		Annotations: map[string]string{key: value},
	}
	opts := mutate.DefaultOptions()
	opts.ExcludedNamespaces = nil
	r := mutate.Validate(mutate.ForPod(&corev1.Pod{}), ns, opts)
	for _, v := range r.Violations {
		if v.Reason == mutate.DenyInvalidNamespace {
			return fmt.Errorf("%s=%q: %s", key, value, v.Err.Detail)
		}
	}
	return nil
}
