package cli

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"

	"github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/manifest"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/optionflags"
)

// skipOwned: a workload whose Pod template is its controller's (a
// Deployment's ReplicaSet, a CronJob's Job); its owner is audited.
const skipOwned mutate.Reason = "owned-by-workload"

// connector makes the client audit reads the cluster through.
type connector func(*genericclioptions.ConfigFlags) (dynamic.Interface, error)

// kubeconfig connects through the kubeconfig and kubectl's flags.
func kubeconfig(kube *genericclioptions.ConfigFlags) (dynamic.Interface, error) {
	cfg, err := kube.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	return dynamic.NewForConfig(cfg)
}

func newAuditCmd() *cobra.Command { return auditCommand(kubeconfig, time.Now) }

// auditCommand is audit reading the cluster through connect, its reports
// stamped with now.
func auditCommand(connect connector, now func() time.Time) *cobra.Command {
	kube := genericclioptions.NewConfigFlags(true)
	in := &inputFlags{annotations: map[string]string{}, opts: mutate.DefaultOptions(), assumeOptedIn: true}
	var all bool
	var rf *reportFlags
	cmd := &cobra.Command{
		Use:   "audit [-n NAMESPACE | -A]",
		Short: "Run graceguard's decisions on every workload and running Pod of a cluster, opted in or not yet",
		Long: `Run graceguard's decisions on every workload and running Pod of a live cluster.

audit reads, through your kubeconfig, the Deployments, StatefulSets,
DaemonSets, ReplicaSets, Jobs, CronJobs, ReplicationControllers, Argo
Rollouts' Rollouts (where the cluster serves them) and the Pods that are not finished in one namespace (-n, default: the context's) or in all
(-A), and says for each what graceguard would change, warn about or deny if
it were created now. Namespaces that are not opted in yet are evaluated as if
they were (label ` + mutate.LabelInject + `=` + mutate.LabelInjectEnabled + `): what would change if you
enabled graceguard there. Each namespace's own mode label and annotations
apply; --mode and --namespace-annotations go over them. Namespaces excluded
by --excluded-namespaces (kube-system) are skipped, as the webhook skips
them. A ReplicaSet or Job whose controller is a Deployment, CronJob or
Rollout is skipped: its owner is audited.

With -o openreports or -o policyreport it prints, as YAML to kubectl apply,
one openreports.io/v1alpha1 Report or wgpolicyk8s.io/v1alpha2 PolicyReport
per workload and bare Pod (owned by it, so deleted with it), as graceguard's
observer writes them where it runs with reports enabled: a result per
finding (fail for a denial, warn for a warning), a pass per rule that found
nothing, and what the observer saw of its shutdowns when its ShutdownReports
are there (docs/reports.md).

audit needs get on the namespaces and list on those kinds (and, for the
reports, on shutdownreports.graceguard.io if installed). It changes nothing.

` + exitCodesHelp + ` A cluster that cannot be read exits 2.`,
		Example: `  kubectl graceguard audit -A
  kubectl graceguard audit -n shop --mode warn -o json
  kubectl graceguard audit -A --fail-on warning -o sarif > graceguard-audit.sarif
  kubectl graceguard audit -A -o openreports | kubectl apply -f -`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := in.opts.Validate(); err != nil {
				return err
			}
			dyn, err := connect(kube)
			if err != nil {
				return err
			}
			objs, ns, err := audit(cmd, dyn, kube, in, all)
			if err != nil {
				return err
			}
			kind, ok := reportKind(rf.output)
			if !ok {
				return rf.write(cmd.OutOrStdout(), objs, "")
			}
			seen, err := readShutdowns(cmd.Context(), dyn, ns, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if err := writeReports(cmd.OutOrStdout(), cmd.ErrOrStderr(), kind, objs, seen, now()); err != nil {
				return err
			}
			return rf.outcome(count(objs))
		},
	}
	fs := cmd.Flags()
	kube.AddFlags(fs)
	fs.BoolVarP(&all, "all-namespaces", "A", false, "audit every namespace")
	fs.Var(flags.ChoiceValue(&in.mode, mutate.Modes...), "mode", "evaluate as if every namespace's "+mutate.LabelMode+" label were this: enforce or warn (default: each namespace's own, else --default-mode)")
	fs.Var(annotationsValue{in.annotations}, "namespace-annotations",
		"evaluate as if every namespace carried these graceguard defaults, over its own (repeatable), e.g. "+mutate.AnnotationMaxWork+"=1m")
	optionflags.Bind(fs, &in.opts)
	rf = bindReportFlags(cmd)
	// audit writes policy reports too: check's formats and theirs.
	out := fs.Lookup("output")
	out.Value, out.Usage = flags.ChoiceValue(&rf.output, auditFormats...), auditOutputUsage
	return cmd
}

// audit lists the namespaces and objects and evaluates them; ns is the
// namespace audited ("" for all).
func audit(cmd *cobra.Command, dyn dynamic.Interface, kube *genericclioptions.ConfigFlags, in *inputFlags, all bool) (objs []object, ns string, err error) {
	ctx := cmd.Context()
	ns = metav1.NamespaceAll
	if !all {
		if ns, _, err = kube.ToRawKubeConfigLoader().Namespace(); err != nil {
			return nil, "", fmt.Errorf("reading the kubeconfig's namespace: %w", err)
		}
	}
	namespaces, err := readNamespaces(ctx, dyn, ns)
	if err != nil {
		return nil, "", err
	}

	var docs []manifest.Document
	var owned []object
	kinds := make([]schema.GroupVersionResource, 0, len(mutate.Workloads)+1)
	optional := map[schema.GroupVersionResource]bool{}
	for _, w := range mutate.Workloads {
		gvr := schema.GroupVersionResource{Group: w.Group, Version: w.Version, Resource: w.Resource}
		kinds = append(kinds, gvr)
		optional[gvr] = w.Optional
	}
	kinds = append(kinds, corev1.SchemeGroupVersion.WithResource("pods"))
	for _, gvr := range kinds {
		opts := metav1.ListOptions{}
		if gvr.Resource == "pods" {
			// Finished Pods never stop again.
			opts.FieldSelector = "status.phase!=Succeeded,status.phase!=Failed"
		}
		list, err := dyn.Resource(gvr).Namespace(ns).List(ctx, opts)
		if apierrors.IsNotFound(err) {
			continue // a kind this cluster does not serve (Rollouts without Argo's CRD)
		}
		if optional[gvr] && apierrors.IsForbidden(err) {
			fmt.Fprintf(cmd.ErrOrStderr(), "note: not allowed to list %s; audited without them\n", resourceName(gvr, ns))
			continue
		}
		if err != nil {
			return nil, "", runtimeError{fmt.Errorf("listing %s: %w", resourceName(gvr, ns), err)}
		}
		for i := range list.Items {
			item := &list.Items[i]
			d, err := manifest.Live(item)
			if err != nil {
				return nil, "", err
			}
			if owner := manifest.ControllingWorkload(item.GetOwnerReferences()); owner != "" && gvr.Resource != "pods" {
				owned = append(owned, object{doc: d, ns: d.Namespace, skip: skipOwned,
					skipWhy: fmt.Sprintf("its Pod template is its controller's, %s, audited there [%s]", owner, skipOwned)})
				continue
			}
			docs = append(docs, d)
		}
	}

	objs = in.evaluate(docs, func(name string) (mutate.Namespace, *manifest.Document, bool) {
		n, ok := namespaces[name]
		return n, nil, ok
	}, cmd.ErrOrStderr())
	objs = append(objs, owned...)
	order := map[string]int{}
	for i, w := range mutate.Workloads {
		order[w.Kind] = i
	}
	order["Pod"] = len(mutate.Workloads)
	slices.SortStableFunc(objs, func(a, b object) int {
		return cmp.Or(cmp.Compare(a.doc.Namespace, b.doc.Namespace), cmp.Compare(order[a.doc.Kind], order[b.doc.Kind]), cmp.Compare(a.doc.Name, b.doc.Name))
	})
	if len(objs) == 0 {
		where := "namespace " + ns
		if all {
			where = "any namespace"
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "note: no workloads or running Pods in %s\n", where)
	}
	return objs, ns, nil
}

// readNamespaces reads one namespace, or all, as graceguard sees them.
func readNamespaces(ctx context.Context, dyn dynamic.Interface, ns string) (map[string]mutate.Namespace, error) {
	gvr := corev1.SchemeGroupVersion.WithResource("namespaces")
	var items []unstructured.Unstructured
	if ns == metav1.NamespaceAll {
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, runtimeError{fmt.Errorf("listing namespaces: %w", err)}
		}
		items = list.Items
	} else {
		n, err := dyn.Resource(gvr).Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return nil, runtimeError{fmt.Errorf("reading namespace %s: %w", ns, err)}
		}
		items = []unstructured.Unstructured{*n}
	}
	out := make(map[string]mutate.Namespace, len(items))
	for _, n := range items {
		out[n.GetName()] = mutate.Namespace{Name: n.GetName(), Labels: n.GetLabels(), Annotations: n.GetAnnotations()}
	}
	return out, nil
}

func resourceName(gvr schema.GroupVersionResource, ns string) string {
	r := gvr.Resource
	if gvr.Group != "" {
		r += "." + gvr.Group
	}
	if ns == metav1.NamespaceAll {
		return r + " in all namespaces"
	}
	return r + " in namespace " + ns
}
