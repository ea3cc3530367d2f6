package observer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/manifest"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/policyreport"
)

// reporter writes graceguard's findings as policy reports
// (pkg/policyreport): one per workload of the namespaces graceguard
// treats, holding the checks of its Pod template as the webhooks would
// decide them now and what the observer saw of its shutdowns. It runs in
// the elected leader only, beside the observer and never in the webhook:
// admission waits for none of it.
//
// Every Reports.Interval it asks the API server which report kinds it
// serves (OpenReports, PolicyReport, or neither: then it writes nothing
// and says so once), reads the workloads one namespace and one page at
// a time, and writes the reports whose digest changed; a ShutdownReport
// just written has its workload's report written at once. Writes and
// deletes together never exceed Reports.WritesPerSecond. It deletes what
// it wrote and no longer stands: the reports of workloads gone or now
// owned by another, of namespaces no longer treated, and of the kind it
// no longer writes.
type reporter struct {
	dyn     dynamic.Interface
	meta    metadata.Interface
	disco   discovery.DiscoveryInterface
	cfg     Config
	ns      *namespaces
	log     logr.Logger
	metrics *Metrics
	limiter flowcontrol.RateLimiter
	now     func() time.Time

	// kind is the kind written ("" for none), served what the API server
	// serves, and said what was last logged of them: the run loop's own.
	kind   policyreport.Kind
	served map[policyreport.Kind]bool
	said   string

	mu      sync.Mutex
	pending map[reportKey]*policyreport.Observed
	wake    chan struct{}
}

// reportKey is a workload whose report waits for its new ShutdownReport.
type reportKey struct {
	namespace string
	wl        workload
}

// Bounds of the reporter's memory: what it reads at once, and how many
// workloads' reports may wait for a ShutdownReport just written (beyond,
// the next sweep writes them).
const (
	// workloadPage is how many workloads are read at once: a page holds
	// them whole, which a few kilobytes each usually are.
	workloadPage = 25
	// shutdownPage: a ShutdownReport is at most maxReportBytes.
	shutdownPage      = 50
	metadataPage      = 500
	maxPendingReports = 4096
)

// fieldManager owns the reports' fields (server-side apply).
const fieldManager = "graceguard-observer"

func newReporter(dyn dynamic.Interface, meta metadata.Interface, disco discovery.DiscoveryInterface, cfg Config, ns *namespaces, log logr.Logger, m *Metrics) *reporter {
	return &reporter{
		dyn: dyn, meta: meta, disco: disco, cfg: cfg, ns: ns, log: log.WithName("reports"), metrics: m,
		// A burst of one: n writes take (n-1)/rate seconds at least.
		limiter: flowcontrol.NewTokenBucketRateLimiter(float32(cfg.Reports.WritesPerSecond), 1),
		now:     time.Now,
		pending: map[reportKey]*policyreport.Observed{},
		wake:    make(chan struct{}, 1),
	}
}

// run sweeps every interval, and writes the reports of new
// ShutdownReports in between, until ctx ends.
func (r *reporter) run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.sweep(ctx)
			t.Reset(r.cfg.Reports.Interval)
		case <-r.wake:
			r.writePending(ctx)
		}
	}
}

// observed has a workload's report written with its ShutdownReport's
// latest status. It never blocks: the observer calls it after each write.
func (r *reporter) observed(ns string, wl workload, st *v1alpha1.ShutdownReportStatus) {
	if r == nil {
		return
	}
	o := policyreport.Observe(policyreport.Workload{APIVersion: wl.APIVersion, Kind: wl.Kind, Namespace: ns, Name: wl.Name, UID: wl.UID}, st)
	k := reportKey{namespace: ns, wl: wl}
	r.mu.Lock()
	if _, ok := r.pending[k]; ok || len(r.pending) < maxPendingReports {
		r.pending[k] = o
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// noneServed: --reports=auto, and the API server serves neither kind.
type noneServed struct{}

func (noneServed) Error() string {
	return "the API server serves neither " + policyreport.OpenReports.String() + " nor " + policyreport.PolicyReport.String() +
		": no policy reports are written until one's CRD is installed (asked again every --" + flags.ReportsInterval.Name + ")"
}

// pickKind chooses the kind to write from what the API server serves: for
// auto, OpenReports before PolicyReport; a kind asked for by name only if
// served, else an error naming it and what is served.
func pickKind(want string, served map[policyreport.Kind]bool) (policyreport.Kind, error) {
	var names []string
	for _, k := range policyreport.Kinds {
		if served[k] {
			names = append(names, k.String())
		}
	}
	if want == ReportsAuto {
		for _, k := range policyreport.Kinds {
			if served[k] {
				return k, nil
			}
		}
		return "", noneServed{}
	}
	k := policyreport.Kind(want)
	if served[k] {
		return k, nil
	}
	what := "neither " + policyreport.OpenReports.String() + " nor " + policyreport.PolicyReport.String()
	if len(names) > 0 {
		what = strings.Join(names, " and ")
	}
	return "", fmt.Errorf("--reports=%s: the API server does not serve %s (its CRD is not installed); it serves %s: install the CRD, or set --reports=auto",
		want, k, what)
}

// discover asks the API server which kinds it serves and picks one.
func (r *reporter) discover() (policyreport.Kind, map[policyreport.Kind]bool, error) {
	served := map[policyreport.Kind]bool{}
	for _, k := range policyreport.Kinds {
		list, err := r.disco.ServerResourcesForGroupVersion(k.GroupVersionKind().GroupVersion().String())
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("asking the API server whether it serves %s: %w", k, err)
		}
		served[k] = slices.ContainsFunc(list.APIResources, func(res metav1.APIResource) bool { return res.Name == k.Resource() })
	}
	k, err := pickKind(r.cfg.Reports.Kind, served)
	return k, served, err
}

// say logs what the reporter writes when that changes, never twice the
// same: a cluster without the CRDs gets one line, not one per sweep.
func (r *reporter) say(k policyreport.Kind, err error) {
	msg := "writing policy reports: " + k.String()
	if err != nil {
		msg = err.Error()
	}
	if msg == r.said {
		return
	}
	r.said = msg
	var none noneServed
	switch {
	case err == nil:
		r.log.Info("writing policy reports", "kind", k.String(), "interval", r.cfg.Reports.Interval, "writesPerSecond", r.cfg.Reports.WritesPerSecond)
	case errors.As(err, &none):
		r.log.Info(msg)
	default:
		r.log.Error(err, "writing no policy reports")
	}
}

// sweep writes the report of every workload of the treated namespaces.
func (r *reporter) sweep(ctx context.Context) {
	k, served, err := r.discover()
	r.say(k, err)
	if served != nil {
		// Else the API server could not say: go on as before.
		r.kind, r.served = k, served
	}
	if r.kind == "" {
		return
	}
	for _, ns := range r.ns.names() {
		if err := r.sweepNamespace(ctx, ns); err != nil {
			if ctx.Err() != nil {
				return
			}
			r.log.Error(err, "writing policy reports; again at the next sweep", "namespace", ns, "kind", r.kind.String())
		}
	}
	if err := r.clean(ctx); err != nil && ctx.Err() == nil {
		r.log.Error(err, "deleting policy reports that no longer stand; again at the next sweep")
	}
}

var namespacesGVR = corev1.SchemeGroupVersion.WithResource("namespaces")

func resourceOf(k policyreport.Kind) schema.GroupVersionResource {
	return k.GroupVersionKind().GroupVersion().WithResource(k.Resource())
}

func workloadResource(w mutate.WorkloadKind) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: w.Group, Version: w.Version, Resource: w.Resource}
}

// namespace reads a namespace as the webhook sees it: labels (its mode)
// and annotations (its defaults).
func (r *reporter) namespace(ctx context.Context, name string) (mutate.Namespace, error) {
	n, err := r.dyn.Resource(namespacesGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return mutate.Namespace{}, err
	}
	return mutate.Namespace{Name: name, Labels: n.GetLabels(), Annotations: n.GetAnnotations()}, nil
}

// sweepNamespace writes the reports of one namespace's workloads and
// deletes those of workloads it no longer has.
func (r *reporter) sweepNamespace(ctx context.Context, name string) error {
	ns, err := r.namespace(ctx, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	observed, err := r.shutdowns(ctx, name)
	if err != nil {
		return err
	}
	existing := map[string]string{}
	err = r.eachMeta(ctx, resourceOf(r.kind), name, func(m *metav1.PartialObjectMetadata) error {
		existing[m.Name] = m.Annotations[policyreport.AnnotationDigest]
		return nil
	})
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, w := range mutate.Workloads {
		err := eachPage(ctx, r.dyn.Resource(workloadResource(w)).Namespace(name), workloadPage, func(u *unstructured.Unstructured) error {
			if manifest.ControllingWorkload(u.GetOwnerReferences()) != "" {
				return nil // its controller's template: reported there
			}
			rep := r.build(u, ns, observed[u.GetKind()+" "+u.GetName()])
			seen[rep.Name] = true
			if d, ok := existing[rep.Name]; ok && d == rep.Annotations[policyreport.AnnotationDigest] {
				return nil
			}
			return r.apply(ctx, rep)
		})
		if apierrors.IsNotFound(err) || (w.Optional && apierrors.IsForbidden(err)) {
			// A kind the API server does not serve, or a custom resource
			// the chart did not grant (webhooks.validateWorkloads.argoRollouts).
			continue
		}
		if err != nil {
			return fmt.Errorf("listing %s: %w", w.Resource, err)
		}
	}
	for n := range existing {
		if !seen[n] {
			if err := r.delete(ctx, r.kind, name, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// shutdowns reads what the ShutdownReports of a namespace say, by
// "Kind name" of their workload.
func (r *reporter) shutdowns(ctx context.Context, ns string) (map[string]*policyreport.Observed, error) {
	out := map[string]*policyreport.Observed{}
	err := eachPage(ctx, r.dyn.Resource(v1alpha1.GroupVersion.WithResource("shutdownreports")).Namespace(ns), shutdownPage, func(u *unstructured.Unstructured) error {
		var sr v1alpha1.ShutdownReport
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &sr); err != nil {
			return nil // not one the observer wrote
		}
		w := sr.Spec.Workload
		out[w.Kind+" "+w.Name] = policyreport.Observe(policyreport.Workload{APIVersion: w.APIVersion, Kind: w.Kind, Namespace: ns, Name: w.Name}, &sr.Status)
		return nil
	})
	return out, err
}

// build evaluates a workload as the webhooks would now (manifest.Process,
// as kubectl graceguard check and audit do) and makes its report.
func (r *reporter) build(u *unstructured.Unstructured, ns mutate.Namespace, o *policyreport.Observed) *openreports.Report {
	in := policyreport.Input{
		Workload: policyreport.Workload{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), UID: u.GetUID()},
		Observed: o,
	}
	d, err := manifest.Live(u)
	if err == nil {
		var res manifest.Result
		if res, err = manifest.Process(d, ns, r.cfg.Options); err == nil {
			in.Mutation, in.Validation = res.Mutation, res.Validation
		}
	}
	in.Err = err
	return policyreport.Build(in, r.cfg.Reports.Bounds, r.now())
}

// apply writes a report (server-side apply: created or replaced in one
// request, whoever wrote it before).
func (r *reporter) apply(ctx context.Context, rep *openreports.Report) error {
	rep.Labels[policyreport.LabelWriter] = policyreport.WriterObserver
	u, err := policyreport.Object(r.kind, rep)
	if err != nil {
		return err
	}
	if err := r.limiter.Wait(ctx); err != nil {
		return err
	}
	_, err = r.dyn.Resource(resourceOf(r.kind)).Namespace(rep.Namespace).Apply(ctx, rep.Name, u, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("writing %s %s/%s: %w", r.kind, rep.Namespace, rep.Name, err)
	}
	r.metrics.reportWrite(r.kind, "apply")
	return nil
}

func (r *reporter) delete(ctx context.Context, k policyreport.Kind, ns, name string) error {
	if err := r.limiter.Wait(ctx); err != nil {
		return err
	}
	err := r.dyn.Resource(resourceOf(k)).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s %s/%s: %w", k, ns, name, err)
	}
	r.metrics.reportWrite(k, "delete")
	return nil
}

// clean deletes graceguard's reports that no longer stand: those of
// namespaces graceguard no longer treats, and every one of a kind it no
// longer writes (it writes one kind at a time).
func (r *reporter) clean(ctx context.Context) error {
	for _, k := range policyreport.Kinds {
		if !r.served[k] {
			continue
		}
		var stale []reportRef
		err := r.eachMeta(ctx, resourceOf(k), metav1.NamespaceAll, func(m *metav1.PartialObjectMetadata) error {
			if k != r.kind || !r.ns.treats(m.Namespace) {
				stale = append(stale, reportRef{m.Namespace, m.Name})
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, s := range stale {
			if err := r.delete(ctx, k, s.namespace, s.name); err != nil {
				return err
			}
		}
	}
	return nil
}

// reportRef names a report.
type reportRef struct{ namespace, name string }

// writePending writes the reports of the workloads whose ShutdownReport
// was just written, without waiting for the next sweep.
func (r *reporter) writePending(ctx context.Context) {
	r.mu.Lock()
	pending := r.pending
	r.pending = map[reportKey]*policyreport.Observed{}
	r.mu.Unlock()
	if r.kind == "" {
		return // nothing is written; the next sweep says why
	}
	for k, o := range pending {
		if err := r.writeOne(ctx, k, o); err != nil {
			if ctx.Err() != nil {
				return
			}
			r.log.Error(err, "writing a policy report; again at the next sweep", "namespace", k.namespace, "workload", k.wl.Kind+"/"+k.wl.Name)
		}
	}
}

func (r *reporter) writeOne(ctx context.Context, k reportKey, o *policyreport.Observed) error {
	if !r.ns.treats(k.namespace) {
		return nil
	}
	w, _, ok := mutate.LookupWorkloadVersion(k.wl.APIVersion, k.wl.Kind)
	if !ok {
		return nil
	}
	u, err := r.dyn.Resource(workloadResource(w)).Namespace(k.namespace).Get(ctx, k.wl.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if u.GetUID() != k.wl.UID {
		return nil // another workload of the name since
	}
	ns, err := r.namespace(ctx, k.namespace)
	if err != nil {
		return err
	}
	rep := r.build(u, ns, o)
	m, err := r.meta.Resource(resourceOf(r.kind)).Namespace(k.namespace).Get(ctx, rep.Name, metav1.GetOptions{})
	switch {
	case err == nil && m.Annotations[policyreport.AnnotationDigest] == rep.Annotations[policyreport.AnnotationDigest]:
		return nil
	case err != nil && !apierrors.IsNotFound(err):
		return err
	}
	return r.apply(ctx, rep)
}

// eachMeta calls fn for the reports the observer wrote in a namespace (or
// all), reading their metadata only, a page at a time. Those applied by
// hand (kubectl graceguard audit -o openreports) are not its own.
func (r *reporter) eachMeta(ctx context.Context, gvr schema.GroupVersionResource, ns string, fn func(*metav1.PartialObjectMetadata) error) error {
	opts := metav1.ListOptions{Limit: metadataPage, LabelSelector: policyreport.LabelWriter + "=" + policyreport.WriterObserver}
	for {
		list, err := r.meta.Resource(gvr).Namespace(ns).List(ctx, opts)
		if err != nil {
			return err
		}
		for i := range list.Items {
			if err := fn(&list.Items[i]); err != nil {
				return err
			}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return nil
		}
	}
}

// eachPage calls fn for every object of a list, reading size at a time.
func eachPage(ctx context.Context, c dynamic.ResourceInterface, size int64, fn func(*unstructured.Unstructured) error) error {
	opts := metav1.ListOptions{Limit: size}
	for {
		list, err := c.List(ctx, opts)
		if err != nil {
			return err
		}
		for i := range list.Items {
			if err := fn(&list.Items[i]); err != nil {
				return err
			}
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return nil
		}
	}
}
