package observer

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/pkg/shutdownreport"
)

// Event reasons the observer records on workloads.
const (
	ReasonKilled     = "ShutdownKilled"
	ReasonHookFailed = "PreStopHookFailed"
)

// batch is what waits to be written for one owner.
type batch struct {
	pods    []deleted
	samples []v1alpha1.Sample
}

type deleted struct {
	pod *record
	del Deletion
}

// task is a unit of the observer's queue: writing an owner's samples, or
// (verify) checking its owner chain as soon as a Pod of it is seen
// terminating, while its ReplicaSet most likely still exists.
type task struct {
	owner
	verify bool
}

// maxPending bounds the samples kept for one owner while its report cannot
// be written; older ones are dropped (and counted as skipped).
const maxPending = v1alpha1.MaxSamples

// observer turns the deletions of treated Pods into ShutdownReports,
// workload events and metrics. It runs only in the elected leader.
type observer struct {
	cache    cache.Cache
	reader   client.Reader // the API server, uncached
	writer   client.Client
	recorder events.EventRecorder
	metrics  *Metrics
	cfg      Config
	log      logr.Logger

	// ns is the namespaces graceguard treats (the Namespace informer's,
	// shared with the transforms).
	ns       *namespaces
	verdicts verdicts
	// routes follows the EndpointSlices of the treated namespaces.
	routes *routes
	// now is the observer's clock: when it saw an EndpointSlice's event.
	now func() time.Time
	// reports writes the policy reports; nil when they are off.
	reports *reporter
	// writes bounds the ShutdownReport writes (--flush-writes-per-second).
	writes flowcontrol.RateLimiter

	mu        sync.Mutex
	deletions map[types.UID]Deletion
	hooks     map[types.UID][]HookFailure
	pending   map[owner]*batch
	queue     workqueue.TypedRateLimitingInterface[task]
}

// NeedLeaderElection: one observer records each shutdown.
func (o *observer) NeedLeaderElection() bool { return true }

// Start watches the opted-in namespaces, then EndpointSlices, treated
// Pods and FailedPreStopHook events (informers are created here, in the
// leader only), and writes reports until ctx ends; then it writes what is
// still pending. The namespaces come first: the transforms read them. The
// slices come before the Pods, so that a Pod found terminating at the
// start is judged against its slices.
func (o *observer) Start(ctx context.Context) error {
	o.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[task](),
		workqueue.TypedRateLimitingQueueConfig[task]{Name: "graceguard-observer"})
	nsi, err := o.cache.GetInformer(ctx, optedInNamespaces())
	if err != nil {
		return fmt.Errorf("watching opted-in namespaces: %w", err)
	}
	reg, err := nsi.AddEventHandler(o.ns.handler())
	if err != nil {
		return err
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return ctx.Err()
	}
	sliceInf, err := o.cache.GetInformer(ctx, &discoveryv1.EndpointSlice{})
	if err != nil {
		return fmt.Errorf("watching EndpointSlices: %w", err)
	}
	sreg, err := sliceInf.AddEventHandler(o.routes.handler(func() int64 { return clampUnix(o.now().Unix()) }))
	if err != nil {
		return err
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), sreg.HasSynced) {
		return ctx.Err()
	}
	pods, err := o.cache.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return fmt.Errorf("watching treated Pods: %w", err)
	}
	if _, err := pods.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			o.metrics.cached(1)
			if r, ok := obj.(*record); ok && !r.ignored {
				o.metrics.seen(r.namespace)
			}
			o.podChanged(obj)
		},
		UpdateFunc: func(_, obj any) { o.podChanged(obj) },
		DeleteFunc: func(obj any) {
			o.metrics.cached(-1)
			o.podDeleted(obj)
		},
	}); err != nil {
		return err
	}
	evs, err := o.cache.GetInformer(ctx, &corev1.Event{})
	if err != nil {
		return fmt.Errorf("watching FailedPreStopHook events: %w", err)
	}
	if _, err := evs.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    o.eventSeen,
		UpdateFunc: func(_, obj any) { o.eventSeen(obj) },
		DeleteFunc: o.eventGone,
	}); err != nil {
		return err
	}
	o.log.Info("observing treated Pods", "flushInterval", o.cfg.FlushInterval)

	var wg sync.WaitGroup
	if o.reports != nil {
		// After the namespaces are known: it deletes the reports of
		// namespaces graceguard does not treat.
		wg.Go(func() { o.reports.run(ctx) })
	}
	for range 2 {
		wg.Go(func() {
			for o.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	o.queue.ShutDown()
	wg.Wait()
	// Write what was gathered; a new leader would not see these Pods again.
	drain, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	o.mu.Lock()
	owners := make([]owner, 0, len(o.pending))
	for k := range o.pending {
		owners = append(owners, k)
	}
	o.mu.Unlock()
	for _, k := range owners {
		// Not held back by --flush-writes-per-second: the drain has
		// 10 s, and what is not written now is lost.
		if err := o.flush(drain, k, false); err != nil {
			o.log.Error(err, "writing samples at shutdown", "owner", k.Kind+"/"+k.Name, "namespace", k.Namespace)
		}
	}
	return nil
}

func (o *observer) next(ctx context.Context) bool {
	t, quit := o.queue.Get()
	if quit {
		return false
	}
	defer o.queue.Done(t)
	var err error
	if t.verify {
		_, err = o.verdict(ctx, t.owner)
	} else {
		err = o.flush(ctx, t.owner, true)
	}
	if err != nil {
		o.log.Error(err, "writing a ShutdownReport; retrying", "owner", t.Kind+"/"+t.Name, "namespace", t.Namespace, "verifying", t.verify)
		o.queue.AddRateLimited(t)
		return true
	}
	o.queue.Forget(t)
	return true
}

// podChanged remembers when a Pod's deletion was requested and with what
// grace, the first time it is seen terminating, starts following its
// withdrawal from its EndpointSlices, and has its owner chain verified
// then.
func (o *observer) podChanged(obj any) {
	r, ok := obj.(*record)
	if !ok {
		return
	}
	d, ok := r.deletion()
	if !ok {
		return
	}
	o.mu.Lock()
	prev, seen := o.deletions[r.uid]
	if seen {
		// A later delete may only shorten the grace; the request time stays.
		d.Requested, d.Grace = prev.Requested, min(prev.Grace, d.Grace)
	}
	o.deletions[r.uid] = d
	o.mu.Unlock()
	if !seen {
		o.routes.terminating(r.uid)
	}
	if !seen && r.shutdown.ownerOK {
		k := owner{Namespace: r.namespace, ownerRef: r.shutdown.owner}
		if _, known := o.verdicts.get(k); !known {
			o.queue.Add(task{owner: k, verify: true})
		}
	}
}

// podDeleted takes the Pod's final object (the kubelet removes it once its
// containers have stopped and their final status is written) and queues it
// for its owner's next write.
func (o *observer) podDeleted(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	r, ok := obj.(*record)
	if !ok {
		return
	}
	o.mu.Lock()
	d, seen := o.deletions[r.uid]
	delete(o.deletions, r.uid)
	o.mu.Unlock()
	var k owner
	skip := Skip("")
	switch s := r.shutdown; {
	case r.ignored || !o.ns.treats(r.namespace):
		skip = SkipNamespace
	case !seen || s == nil:
		skip = SkipDeletionUnseen
	case s.ownerTooLong:
		skip = SkipOwnerUnverified
	case !s.ownerOK:
		skip = SkipNoWorkload
	default:
		k = owner{Namespace: r.namespace, ownerRef: s.owner}
	}
	if skip != "" {
		o.metrics.skip(skip)
		o.forget(r.uid)
		return
	}
	o.mu.Lock()
	b := o.pending[k]
	if b == nil {
		b = &batch{}
		o.pending[k] = b
	}
	b.pods = append(b.pods, deleted{pod: r, del: d})
	o.mu.Unlock()
	// The hook-failure events of the Pod, and the last of its slices'
	// updates, may still be on their way: they are read when the batch is
	// written, a flush interval from now.
	o.queue.AddAfter(task{owner: k}, o.cfg.FlushInterval)
}

// eventSeen keeps FailedPreStopHook events by the Pod they name, at most
// one per container of it.
func (o *observer) eventSeen(obj any) {
	ev, ok := obj.(*event)
	if !ok || ev.pod == "" {
		return
	}
	h := HookFailure{Container: ev.container, At: unixTime(ev.at)}
	o.mu.Lock()
	defer o.mu.Unlock()
	list := o.hooks[ev.pod]
	for i, x := range list {
		if x.Container == h.Container {
			// The kubelet's next failure of the same hook: the earliest
			// after the deletion is what observe needs, the latest may be.
			if h.At.After(x.At) {
				list[i] = h
			}
			return
		}
	}
	if len(list) < maxContainers {
		o.hooks[ev.pod] = append(list, h)
	}
}

// eventGone forgets an expired event (the API server keeps events for an
// hour): failures of Pods the observer never sees deleted (untreated ones
// share the event watch) do not pile up.
func (o *observer) eventGone(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	ev, ok := obj.(*event)
	if !ok || ev.pod == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	list := slices.DeleteFunc(o.hooks[ev.pod], func(h HookFailure) bool {
		return h.Container == ev.container && h.At.Equal(unixTime(ev.at))
	})
	if len(list) == 0 {
		delete(o.hooks, ev.pod)
	} else {
		o.hooks[ev.pod] = list
	}
}

// forget drops what the observer kept of a Pod that gives no sample: its
// failed hooks and its withdrawal.
func (o *observer) forget(uid types.UID) {
	o.mu.Lock()
	delete(o.hooks, uid)
	o.mu.Unlock()
	o.routes.forget(uid)
}

// flush turns an owner's deleted Pods into samples and writes them to its
// workload's report, then records events on the workload. Samples count
// in the metrics only once their owner is verified. A limited flush waits
// for its turn among the writes (--flush-writes-per-second) before it
// takes the pending Pods, so that the write carries all that came in
// while it waited.
func (o *observer) flush(ctx context.Context, k owner, limited bool) error {
	o.mu.Lock()
	b := o.pending[k]
	o.mu.Unlock()
	if b == nil {
		return nil
	}
	v, err := o.verdict(ctx, k)
	if err != nil {
		return err
	}
	if limited && v.skip == "" && o.writes != nil {
		if err := o.writes.Wait(ctx); err != nil {
			return err
		}
	}

	o.mu.Lock()
	pods := b.pods
	b.pods = nil
	hooks := make([][]HookFailure, len(pods))
	for i, p := range pods {
		hooks[i] = o.hooks[p.pod.uid]
		delete(o.hooks, p.pod.uid)
	}
	o.mu.Unlock()
	ws := make([]withdrawal, len(pods))
	for i, p := range pods {
		ws[i], _ = o.routes.take(p.pod.uid)
	}

	var fresh []v1alpha1.Sample
	for i, p := range pods {
		s, skip := observe(p.pod, p.del, hooks[i], ws[i])
		if skip != "" {
			o.metrics.skip(skip)
			continue
		}
		fresh = append(fresh, s)
	}
	if v.skip != "" {
		// Not the workload's samples (SkipOwnerUnverified), or the
		// workload is gone, and its report with it (SkipNoWorkload).
		o.mu.Lock()
		n := len(fresh) + len(b.samples)
		b.samples = nil
		o.mu.Unlock()
		o.log.V(1).Info("samples dropped", "reason", string(v.skip), "owner", k.Kind+"/"+k.Name, "namespace", k.Namespace, "samples", n)
		for range n {
			o.metrics.skip(v.skip)
		}
		o.dropIfEmpty(k)
		return nil
	}
	for _, s := range fresh {
		o.metrics.sample(k.Namespace, s)
	}

	o.mu.Lock()
	b.samples = append(b.samples, fresh...)
	if n := len(b.samples) - maxPending; n > 0 {
		b.samples = b.samples[n:]
		for range n {
			o.metrics.skip(SkipBacklog)
		}
	}
	samples := append([]v1alpha1.Sample(nil), b.samples...)
	o.mu.Unlock()
	if len(samples) == 0 {
		o.dropIfEmpty(k)
		return nil
	}
	report, err := o.record(ctx, k.Namespace, v.wl, samples)
	if err != nil {
		return err
	}
	o.done(k, len(samples))
	o.announce(k.Namespace, v.wl, report, samples)
	o.reports.observed(k.Namespace, v.wl, &report.Status)
	return nil
}

// done removes the n samples written from the owner's batch.
func (o *observer) done(k owner, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if b := o.pending[k]; b != nil {
		b.samples = b.samples[min(n, len(b.samples)):]
		if len(b.samples) == 0 && len(b.pods) == 0 {
			delete(o.pending, k)
		}
	}
}

func (o *observer) dropIfEmpty(k owner) { o.done(k, 0) }

// verdict is the verified workload of an owner, from the cache or the API
// server (verifyOwner).
func (o *observer) verdict(ctx context.Context, k owner) (verdict, error) {
	if v, ok := o.verdicts.get(k); ok {
		return v, nil
	}
	v, err := verifyOwner(ctx, o.reader, k)
	if err != nil {
		return verdict{}, err
	}
	o.verdicts.put(k, v)
	return v, nil
}

// record adds samples to the workload's report, creating it (owned by the
// workload, so it is garbage-collected with it) when there is none.
func (o *observer) record(ctx context.Context, ns string, wl workload, samples []v1alpha1.Sample) (*v1alpha1.ShutdownReport, error) {
	name := v1alpha1.ReportName(wl.Kind, wl.Name)
	var out *v1alpha1.ShutdownReport
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		r := &v1alpha1.ShutdownReport{}
		err := o.reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, r)
		if apierrors.IsNotFound(err) {
			r = &v1alpha1.ShutdownReport{
				ObjectMeta: metav1.ObjectMeta{
					Namespace: ns, Name: name,
					Labels: map[string]string{"app.kubernetes.io/managed-by": "graceguard"},
					// Not a controller reference and no blockOwnerDeletion:
					// those would need more rights on every workload.
					OwnerReferences: []metav1.OwnerReference{{APIVersion: wl.APIVersion, Kind: wl.Kind, Name: wl.Name, UID: wl.UID}},
				},
				Spec: v1alpha1.ShutdownReportSpec{Workload: wl.ref()},
			}
			if err := o.writer.Create(ctx, r); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		shutdownreport.Add(&r.Status, samples, o.cfg.MinSamples)
		if err := o.writer.Status().Update(ctx, r); err != nil {
			return err
		}
		out = r
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ShutdownReport %s/%s: %w", ns, name, err)
	}
	return out, nil
}

// announce records Warning events on the workload for the kills and the
// failed hooks just written: one event per kind and write, however many
// Pods, so a mass rollout does not flood the events. The report is the
// events' related object.
func (o *observer) announce(ns string, wl workload, r *v1alpha1.ShutdownReport, samples []v1alpha1.Sample) {
	var killed, failed []v1alpha1.Sample
	for _, s := range samples {
		if s.Outcome == v1alpha1.OutcomeKilled {
			killed = append(killed, s)
		}
		if s.HookFailed {
			failed = append(failed, s)
		}
	}
	regarding := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: wl.Name, UID: wl.UID}}
	regarding.SetGroupVersionKind(gvk(wl.APIVersion, wl.Kind))
	if len(killed) > 0 {
		o.recorder.Eventf(regarding, r, corev1.EventTypeWarning, ReasonKilled, "Observe", "%s", shutdownreport.KilledNote(ns, recWork(r), killed))
	}
	if len(failed) > 0 {
		o.recorder.Eventf(regarding, r, corev1.EventTypeWarning, ReasonHookFailed, "Observe", "%s", shutdownreport.FailedNote(ns, failed))
	}
}

func recWork(r *v1alpha1.ShutdownReport) string {
	if r.Status.Recommendation == nil {
		return "unknown"
	}
	return r.Status.Recommendation.MaxWork
}
