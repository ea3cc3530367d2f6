package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/shutdownreport"
)

// recommendFlags are recommend's flags besides the kubeconfig ones.
type recommendFlags struct {
	kube          *genericclioptions.ConfigFlags
	allNamespaces bool
	output        string
	minSamples    int
}

var recommendOutputs = []string{"text", "yaml"}

func newRecommendCmd() *cobra.Command {
	f := &recommendFlags{kube: genericclioptions.NewConfigFlags(true), output: "text", minSamples: shutdownreport.DefaultMinSamples}
	cmd := &cobra.Command{
		Use:   "recommend [-n NAMESPACE | -A]",
		Short: "Say what graceguard.io/max-work each workload needs, from its observed shutdowns",
		Long: `Say what graceguard.io/max-work each workload needs, from its observed shutdowns.

graceguard's observer records how every treated Pod shut down (SIGTERM to
exit, SIGKILLs at the end of the grace, failed preStop hooks) in one
ShutdownReport per workload. For each report this prints the observed
figures, the max-work that covers every drain seen and why, and the patch
that sets it on the workload's Pod template. It says when there are too few
samples to recommend anything (a kill is always enough: it proves the
budget too short). Times come from the API in whole seconds.

It also prints the control plane's part of each Pod's routing withdrawal
(from its deletion to the last EndpointSlice marking it not ready, as the
observer saw it), and says when a Pod's routing term was below it, and by
how much. Proxies, ingress controllers and load balancers withdraw later
still: the routing term needs at least that figure, plus their delay.

-o yaml prints the changes as partial objects: apply them with
'kubectl apply --server-side --force-conflicts -f -' (which takes over only
that annotation), or copy the annotation into your manifests (GitOps).
Patching a Pod template rolls the workload out; the Pods it replaces still
have their old budget.`,
		Example: `  kubectl graceguard recommend -n shop
  kubectl graceguard recommend -A
  kubectl graceguard recommend -n shop -o yaml | kubectl apply --server-side --force-conflicts --field-manager=graceguard-recommend -f -`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := flags.MinSamples.Check(int64(f.minSamples)); err != nil {
				return err
			}
			reports, ns, err := f.list(cmd.Context())
			if err != nil {
				return err
			}
			if len(reports) == 0 {
				where := "in namespace " + ns
				if f.allNamespaces {
					where = "in any namespace"
				}
				_, err := fmt.Fprintf(cmd.ErrOrStderr(), "No ShutdownReports %s: graceguard's observer writes one per workload once a treated Pod of it is deleted.\n", where)
				return err
			}
			recs := make([]recommendation, len(reports))
			for i := range reports {
				recs[i] = recommendFor(&reports[i], f.minSamples)
			}
			if f.output == "yaml" {
				return writeRecommendYAML(cmd.OutOrStdout(), recs)
			}
			return writeRecommendText(cmd.OutOrStdout(), recs)
		},
	}
	fs := cmd.Flags()
	f.kube.AddFlags(fs)
	fs.BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "every namespace's reports")
	fs.VarP(flags.ChoiceValue(&f.output, recommendOutputs...), "output", "o", "text, or yaml: the changes as partial objects, for kubectl apply --server-side --force-conflicts")
	flags.MinSamplesFlag(&f.minSamples).Bind(fs)
	return cmd
}

// list reads the ShutdownReports of the namespace (or all of them).
func (f *recommendFlags) list(ctx context.Context) ([]v1alpha1.ShutdownReport, string, error) {
	cfg, err := f.kube.ToRESTConfig()
	if err != nil {
		return nil, "", fmt.Errorf("reading the kubeconfig: %w", err)
	}
	ns, _, err := f.kube.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("reading the kubeconfig's namespace: %w", err)
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, "", fmt.Errorf("connecting to the API server: %w", err)
	}
	var list v1alpha1.ShutdownReportList
	var opts []client.ListOption
	if !f.allNamespaces {
		opts = append(opts, client.InNamespace(ns))
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.List(ctx, &list, opts...); err != nil {
		var noMatch *meta.NoKindMatchError
		if errors.As(err, &noMatch) || meta.IsNoMatchError(err) {
			return nil, "", errors.New("this cluster does not serve ShutdownReports (graceguard.io/v1alpha1): install or upgrade graceguard's chart with the observer (observer.enabled=true)")
		}
		return nil, "", fmt.Errorf("listing ShutdownReports: %w", err)
	}
	items := list.Items
	slices.SortFunc(items, func(a, b v1alpha1.ShutdownReport) int {
		return strings.Compare(a.Namespace+"/"+a.Spec.Workload.Kind+"/"+a.Spec.Workload.Name, b.Namespace+"/"+b.Spec.Workload.Kind+"/"+b.Spec.Workload.Name)
	})
	return items, ns, nil
}

// recommendation is what recommend says about one report, computed with
// the observer's own Summarize so that both always agree.
type recommendation struct {
	report  *v1alpha1.ShutdownReport
	summary v1alpha1.Summary
	rec     *v1alpha1.Recommendation
	current budget.Budget
	known   bool // the current budget is known
	work    time.Duration
	// change: enough evidence and a max-work different from the current.
	change     bool
	minSamples int
	// evidence has the withdrawals and the routing terms compared with them.
	evidence budget.Evidence
}

func recommendFor(r *v1alpha1.ShutdownReport, minSamples int) recommendation {
	sum, rec := shutdownreport.Summarize(r.Status.Samples, minSamples)
	cur, _, _, known := shutdownreport.Current(r.Status.Samples)
	out := recommendation{report: r, summary: sum, rec: rec, current: cur, known: known, minSamples: minSamples,
		evidence: budget.Summarize(shutdownreport.Observations(r.Status.Samples))}
	if rec != nil {
		out.work, _ = budget.ParseDuration(rec.MaxWork)
		out.change = rec.Enough && (!known || out.work != cur.Work)
	}
	return out
}

func (r recommendation) ref() string {
	w := r.report.Spec.Workload
	return fmt.Sprintf("%s %s/%s", w.Kind, r.report.Namespace, w.Name)
}

// templatePath is where the workload keeps its Pod template's annotations:
// spec.template's for a kind graceguard does not know (an operator's).
func templatePath(kind string) []string {
	tpl := []string{"spec", "template"}
	if w, ok := mutate.LookupWorkload(kind); ok {
		tpl = w.TemplatePath
	}
	return append(slices.Clone(tpl), "metadata", "annotations")
}

// patch is the merge patch that sets max-work on the Pod template.
func (r recommendation) patch() map[string]any {
	var v any = map[string]any{mutate.AnnotationMaxWork: r.rec.MaxWork}
	path := templatePath(r.report.Spec.Workload.Kind)
	for i := len(path) - 1; i >= 0; i-- {
		v = map[string]any{path[i]: v}
	}
	return v.(map[string]any)
}

func writeRecommendText(w io.Writer, recs []recommendation) error {
	p := &printer{w: w}
	for i, r := range recs {
		if i > 0 {
			p.line("")
		}
		s := r.summary
		st := r.report.Status
		p.line("%s: %s (%d observed, %d SIGKILLed, %d failed preStop hooks in all)", r.ref(), plural(int(s.Samples), "sample"), st.Observed, st.KillsObserved, st.HookFailuresObserved)
		if r.known {
			p.line("  budget      %s", s.Budget)
		}
		drains := "none ended on its own"
		if s.DrainMax != "" {
			drains = fmt.Sprintf("p50 %s, p95 %s, max %s", s.DrainP50, s.DrainP95, s.DrainMax)
		}
		p.line("  drain       %s (SIGTERM to exit, whole seconds)", drains)
		if s.Kills > 0 {
			p.line("  killed      %d of %d at the end of their grace, after draining up to %s", s.Kills, s.Samples, s.DrainCut)
		}
		hung := 0
		for _, smp := range r.report.Status.Samples {
			if shutdownreport.HookHung(smp) {
				hung++
			}
		}
		if n := int(s.HookFailures) - hung; n > 0 {
			p.line("  hook failed %d of %d: SIGTERM came at once, before the routing delay; fix the hook (graceguard.io/prestop: sleep needs no binary in the image)", n, s.Samples)
		}
		if hung > 0 {
			p.line("  hook hung   %d of %d: it ran out the grace, so SIGTERM came only at its end, with the kubelet's 2s left; make the hook finish (these drains are not counted)", hung, s.Samples)
		}
		if w := r.withdrawal(); w != "" {
			p.line("  withdrawal  %s", w)
		}
		if rt := r.routing(); rt != "" {
			p.line("  routing     %s", rt)
		}
		switch {
		case r.rec == nil && s.Samples > 0:
			p.line("  no recommendation: every sample's preStop hook ran out its grace, so no drain says anything of the work; fix the hook first")
		case r.rec == nil:
			p.line("  no recommendation: no sample")
		case !r.rec.Enough:
			p.line("  too few samples to recommend (%d of the %d needed, and no kill); so far they suggest %s: %s", s.Samples, r.minSamples, mutate.AnnotationMaxWork, r.rec.MaxWork)
		case !r.change:
			p.line("  keep        %s: %s covers every drain seen", mutate.AnnotationMaxWork, r.rec.MaxWork)
			p.line("  why         %s", r.rec.Reason)
		default:
			verb, from := "set", ""
			if r.known {
				verb = "raise"
				if r.work < r.current.Work {
					verb = "lower"
				}
				from = fmt.Sprintf(" (from %s; grace %ds -> %ds)", budget.Format(r.current.Work), s.Grace, r.rec.Grace)
			}
			p.line("  %-11s %s: %s%s", verb, mutate.AnnotationMaxWork, r.rec.MaxWork, from)
			p.line("  why         %s", r.rec.Reason)
			if verb == "lower" {
				p.line("  note        lowering shortens rollouts and node drains, and leaves no room for work slower than what was seen")
			}
			if r.report.Spec.Workload.Kind == "Job" {
				p.line("  apply       a Job's Pod template cannot change: set it in the Job's manifest for its next run")
				continue
			}
			b, err := json.Marshal(r.patch())
			if err != nil {
				return err
			}
			p.line("  apply       kubectl patch %s %s -n %s --type merge -p '%s'",
				strings.ToLower(r.report.Spec.Workload.Kind), r.report.Spec.Workload.Name, r.report.Namespace, b)
		}
	}
	return p.err
}

// withdrawal says what the samples show of the control plane's part of
// the routing withdrawal: its figures, and why the others have none;
// nothing for samples written before the observer watched EndpointSlices.
func (r recommendation) withdrawal() string {
	var notListed, neverReady, stillReady, recorded int
	for _, s := range r.report.Status.Samples {
		switch s.Withdrawal {
		case v1alpha1.WithdrawalNotListed:
			notListed++
		case v1alpha1.WithdrawalNeverReady:
			neverReady++
		case v1alpha1.WithdrawalStillReady:
			stillReady++
		}
		if s.Withdrawal != "" {
			recorded++
		}
	}
	if recorded == 0 {
		return ""
	}
	n := len(r.report.Status.Samples)
	var others []string
	if notListed > 0 {
		others = append(others, fmt.Sprintf("no EndpointSlice listed %d of %d", notListed, n))
	}
	if neverReady > 0 {
		others = append(others, fmt.Sprintf("%d never seen ready", neverReady))
	}
	if stillReady > 0 {
		others = append(others, fmt.Sprintf("%d still listed ready when written", stillReady))
	}
	e := r.evidence
	if e.Withdrawn == 0 {
		return "no figure: " + strings.Join(others, "; ")
	}
	out := fmt.Sprintf("p50 %s, p95 %s, max %s of %d (deletion to the last EndpointSlice marking the Pod not ready, as the observer saw it: the control plane's part; proxies follow)",
		budget.Format(e.WithdrawalP50), budget.Format(e.WithdrawalP95), budget.Format(e.WithdrawalMax), e.Withdrawn)
	if len(others) > 0 {
		out += "; " + strings.Join(others, "; ")
	}
	return out
}

// routing says whether the Pods' routing terms covered the control
// plane's withdrawal, and when not, by how much they fell short.
func (r recommendation) routing() string {
	rt := r.evidence.Routing
	switch {
	case rt.Compared == 0:
		return ""
	case rt.Short > 0:
		return fmt.Sprintf("below the control plane's withdrawal in %d of %d, by up to %s (routing %s, withdrawn after %s): %s needs at least %s, plus the proxies' own delay",
			rt.Short, rt.Compared, budget.Format(rt.By), budget.Format(rt.Term), budget.Format(rt.Withdrawal), mutate.AnnotationRoutingDelay,
			budget.Format(r.evidence.WithdrawalMax))
	case r.known:
		return fmt.Sprintf("%s covers the control plane's withdrawal seen (max %s); proxies withdraw later, which the observer cannot see",
			budget.Format(r.current.Routing), budget.Format(r.evidence.WithdrawalMax))
	}
	return fmt.Sprintf("every Pod's routing term covered its control plane's withdrawal (max %s); proxies withdraw later, which the observer cannot see",
		budget.Format(r.evidence.WithdrawalMax))
}

// writeRecommendYAML prints one partial object per workload to change, as
// a YAML stream, each with a comment saying why; the others as comments.
// A routing term below the control plane's withdrawal is a comment too:
// the routing delay is the user's to set, with their proxies' delay.
func writeRecommendYAML(w io.Writer, recs []recommendation) error {
	p := &printer{w: w}
	first := true
	for _, r := range recs {
		if r.evidence.Routing.Short > 0 {
			p.line("# %s: routing %s", r.ref(), r.routing())
		}
		switch {
		case r.rec == nil || !r.rec.Enough:
			p.line("# %s: too few samples to recommend (%d); no change", r.ref(), r.summary.Samples)
			continue
		case !r.change:
			p.line("# %s: keep %s %s; no change", r.ref(), mutate.AnnotationMaxWork, r.rec.MaxWork)
			continue
		case r.report.Spec.Workload.Kind == "Job":
			p.line("# %s: set %s %s in the Job's manifest (a Job's Pod template cannot change)", r.ref(), mutate.AnnotationMaxWork, r.rec.MaxWork)
			continue
		}
		wl := r.report.Spec.Workload
		obj := map[string]any{
			"apiVersion": wl.APIVersion,
			"kind":       wl.Kind,
			"metadata":   map[string]any{"name": wl.Name, "namespace": r.report.Namespace},
		}
		for k, v := range r.patch() {
			obj[k] = v
		}
		b, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		if !first {
			p.line("---")
		}
		first = false
		p.line("# %s: %s %s: %s", r.ref(), mutate.AnnotationMaxWork, r.rec.MaxWork, r.rec.Reason)
		p.raw(string(b))
	}
	return p.err
}
