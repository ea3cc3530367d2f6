package observer

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
)

// Event reasons the observer records on workloads.
const (
	ReasonKilled     = "ShutdownKilled"
	ReasonHookFailed = "PreStopHookFailed"
)

// owner is a deleted Pod's controlling owner: the unit samples are
// gathered by before they are written to its workload's report.
type owner struct {
	Namespace, APIVersion, Kind, Name string
	UID                               types.UID
	// TemplateHash is the Pod's pod-template-hash label: a ReplicaSet's
	// Deployment is its name without "-" + hash, should the ReplicaSet
	// already be gone.
	TemplateHash string
}

// workload is what a report belongs to.
type workload struct {
	APIVersion, Kind, Name string
	UID                    types.UID
}

func (w workload) ref() v1alpha1.WorkloadReference {
	return v1alpha1.WorkloadReference{APIVersion: w.APIVersion, Kind: w.Kind, Name: w.Name}
}

// batch is what waits to be written for one owner.
type batch struct {
	pods    []deleted
	samples []v1alpha1.Sample
}

type deleted struct {
	pod *corev1.Pod
	del Deletion
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

	mu        sync.Mutex
	deletions map[types.UID]Deletion
	hooks     map[types.UID][]HookFailure
	pending   map[owner]*batch
	workloads map[types.UID]workload
	queue     workqueue.TypedRateLimitingInterface[owner]
}

// NeedLeaderElection: one observer records each shutdown.
func (o *observer) NeedLeaderElection() bool { return true }

// Start watches treated Pods and FailedPreStopHook events (informers are
// created here, in the leader only) and writes reports until ctx ends;
// then it writes what is still pending.
func (o *observer) Start(ctx context.Context) error {
	o.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[owner](),
		workqueue.TypedRateLimitingQueueConfig[owner]{Name: "graceguard-observer"})
	pods, err := o.cache.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return fmt.Errorf("watching treated Pods: %w", err)
	}
	if _, err := pods.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			o.metrics.cached(1)
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
	}); err != nil {
		return err
	}
	o.log.Info("observing treated Pods", "flushInterval", o.cfg.FlushInterval)

	var wg sync.WaitGroup
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
		if err := o.flush(drain, k); err != nil {
			o.log.Error(err, "writing samples at shutdown", "owner", k.Kind+"/"+k.Name, "namespace", k.Namespace)
		}
	}
	return nil
}

func (o *observer) next(ctx context.Context) bool {
	k, quit := o.queue.Get()
	if quit {
		return false
	}
	defer o.queue.Done(k)
	if err := o.flush(ctx, k); err != nil {
		o.log.Error(err, "writing a ShutdownReport; retrying", "owner", k.Kind+"/"+k.Name, "namespace", k.Namespace)
		o.queue.AddRateLimited(k)
		return true
	}
	o.queue.Forget(k)
	return true
}

// podChanged remembers when a Pod's deletion was requested and with what
// grace, the first time it is seen terminating.
func (o *observer) podChanged(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	d, ok := DeletionOf(pod)
	if !ok {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if prev, seen := o.deletions[pod.UID]; seen {
		// A later delete may only shorten the grace; the request time stays.
		d.Requested, d.Grace = prev.Requested, min(prev.Grace, d.Grace)
	}
	o.deletions[pod.UID] = d
}

// podDeleted takes the Pod's final object (the kubelet removes it once its
// containers have stopped and their final status is written) and queues it
// for its owner's next write.
func (o *observer) podDeleted(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	o.mu.Lock()
	d, seen := o.deletions[pod.UID]
	delete(o.deletions, pod.UID)
	o.mu.Unlock()
	if !seen {
		o.metrics.skip(SkipDeletionUnseen)
		return
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		o.metrics.skip(SkipNoWorkload)
		o.forgetHooks(pod.UID)
		return
	}
	k := owner{Namespace: pod.Namespace, APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID, TemplateHash: pod.Labels["pod-template-hash"]}
	o.mu.Lock()
	b := o.pending[k]
	if b == nil {
		b = &batch{}
		o.pending[k] = b
	}
	b.pods = append(b.pods, deleted{pod: pod, del: d})
	o.mu.Unlock()
	// The hook-failure events of the Pod may still be on their way: they
	// are read when the batch is written, a flush interval from now.
	o.queue.AddAfter(k, o.cfg.FlushInterval)
}

// eventSeen keeps FailedPreStopHook events by the Pod they name.
func (o *observer) eventSeen(obj any) {
	ev, ok := obj.(*corev1.Event)
	if !ok || ev.InvolvedObject.Kind != "Pod" || ev.InvolvedObject.UID == "" {
		return
	}
	at := ev.EventTime.Time
	if at.IsZero() {
		at = ev.LastTimestamp.Time
	}
	if at.IsZero() {
		at = ev.FirstTimestamp.Time
	}
	h := HookFailure{Container: containerOf(ev.InvolvedObject.FieldPath), At: at.Truncate(time.Second)}
	o.mu.Lock()
	defer o.mu.Unlock()
	list := o.hooks[ev.InvolvedObject.UID]
	for _, x := range list {
		if x == h {
			return
		}
	}
	o.hooks[ev.InvolvedObject.UID] = append(list, h)
}

func (o *observer) forgetHooks(uid types.UID) {
	o.mu.Lock()
	delete(o.hooks, uid)
	o.mu.Unlock()
}

// containerOf reads "spec.containers{app}" (or initContainers{...}).
func containerOf(fieldPath string) string {
	i := strings.IndexByte(fieldPath, '{')
	if i < 0 || !strings.HasSuffix(fieldPath, "}") {
		return ""
	}
	return fieldPath[i+1 : len(fieldPath)-1]
}

// flush turns an owner's deleted Pods into samples and writes them to its
// workload's report, then records events on the workload.
func (o *observer) flush(ctx context.Context, k owner) error {
	o.mu.Lock()
	b := o.pending[k]
	if b == nil {
		o.mu.Unlock()
		return nil
	}
	pods := b.pods
	b.pods = nil
	hooks := make([][]HookFailure, len(pods))
	for i, p := range pods {
		hooks[i] = o.hooks[p.pod.UID]
		delete(o.hooks, p.pod.UID)
	}
	o.mu.Unlock()

	var fresh []v1alpha1.Sample
	for i, p := range pods {
		s, skip := Observe(p.pod, p.del, hooks[i])
		if skip != "" {
			o.metrics.skip(skip)
			continue
		}
		o.metrics.sample(k.Namespace, s)
		fresh = append(fresh, s)
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

	wl, err := o.workload(ctx, k)
	if apierrors.IsNotFound(err) {
		// The workload is gone, and its report with it.
		o.log.V(1).Info("workload gone; samples dropped", "owner", k.Kind+"/"+k.Name, "namespace", k.Namespace, "samples", len(samples))
		for range samples {
			o.metrics.skip(SkipNoWorkload)
		}
		o.done(k, len(samples))
		return nil
	}
	if err != nil {
		return err
	}
	report, err := o.record(ctx, k.Namespace, wl, samples)
	if err != nil {
		return err
	}
	o.done(k, len(samples))
	o.announce(k.Namespace, wl, report, samples)
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

// workload resolves an owner to the workload that owns the report: a
// ReplicaSet's Deployment, a Job's CronJob, or the owner itself.
func (o *observer) workload(ctx context.Context, k owner) (workload, error) {
	o.mu.Lock()
	wl, ok := o.workloads[k.UID]
	o.mu.Unlock()
	if ok {
		return wl, nil
	}
	wl = workload{APIVersion: k.APIVersion, Kind: k.Kind, Name: k.Name, UID: k.UID}
	if parentKind := parentOf(k.Kind); parentKind != "" {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk(k.APIVersion, k.Kind))
		err := o.reader.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: k.Name}, m)
		switch {
		case err == nil:
			if ref := metav1.GetControllerOf(m); ref != nil && ref.Kind == parentKind {
				wl = workload{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID}
			}
		case apierrors.IsNotFound(err) && k.Kind == "ReplicaSet" && k.TemplateHash != "" && strings.HasSuffix(k.Name, "-"+k.TemplateHash):
			// A Deployment may remove an old ReplicaSet while its Pods
			// still terminate: its name is the Deployment's and the hash.
			d := &metav1.PartialObjectMetadata{}
			d.SetGroupVersionKind(gvk("apps/v1", "Deployment"))
			name := strings.TrimSuffix(k.Name, "-"+k.TemplateHash)
			if err := o.reader.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: name}, d); err != nil {
				return workload{}, err
			}
			wl = workload{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: d.UID}
		default:
			return workload{}, err
		}
	}
	o.mu.Lock()
	if len(o.workloads) > 10000 {
		// A bounded cache: start over rather than grow with every owner
		// the cluster ever had.
		clear(o.workloads)
	}
	o.workloads[k.UID] = wl
	o.mu.Unlock()
	return wl, nil
}

func gvk(apiVersion, kind string) schema.GroupVersionKind {
	gv, _ := schema.ParseGroupVersion(apiVersion)
	return gv.WithKind(kind)
}

func parentOf(kind string) string {
	switch kind {
	case "ReplicaSet":
		return "Deployment"
	case "Job":
		return "CronJob"
	}
	return ""
}

// record adds samples to the workload's report, creating it (owned by the
// workload, so it is garbage-collected with it) when there is none.
func (o *observer) record(ctx context.Context, ns string, wl workload, samples []v1alpha1.Sample) (*v1alpha1.ShutdownReport, error) {
	name := ReportName(wl.Kind, wl.Name)
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
		Add(&r.Status, samples, o.cfg.MinSamples)
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
// Pods, so a mass rollout does not flood the events.
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
	hint := fmt.Sprintf("kubectl graceguard recommend -n %s (ShutdownReport %s)", ns, r.Name)
	if len(killed) > 0 {
		last := killed[len(killed)-1]
		o.recorder.Eventf(regarding, r, corev1.EventTypeWarning, ReasonKilled, "Observe",
			"%s SIGKILLed at the end of %ds grace after draining %ds (%s); budget %s; recommended max-work %s: %s",
			podCount(len(killed)), last.GraceSeconds, last.DrainSeconds, podNames(killed), budgetOrNone(last.Budget), recWork(r), hint)
	}
	if len(failed) > 0 {
		last := failed[len(failed)-1]
		o.recorder.Eventf(regarding, r, corev1.EventTypeWarning, ReasonHookFailed, "Observe",
			"preStop hook failed in %s (%s): SIGTERM came at once, before the routing delay; budget %s; fix the hook (graceguard.io/prestop: sleep needs no binary in the image): %s",
			podCount(len(failed)), podNames(failed), budgetOrNone(last.Budget), hint)
	}
}

func recWork(r *v1alpha1.ShutdownReport) string {
	if r.Status.Recommendation == nil {
		return "unknown"
	}
	return r.Status.Recommendation.MaxWork
}

func budgetOrNone(b string) string {
	if b == "" {
		return "(none recorded)"
	}
	return b
}

func podCount(n int) string {
	if n == 1 {
		return "1 Pod"
	}
	return fmt.Sprintf("%d Pods", n)
}

// podNames lists up to three Pods and their container.
func podNames(samples []v1alpha1.Sample) string {
	var names []string
	for i, s := range samples {
		if i == 3 {
			names = append(names, fmt.Sprintf("and %d more", len(samples)-3))
			break
		}
		names = append(names, s.Pod+" container "+s.Container)
	}
	return strings.Join(names, ", ")
}
