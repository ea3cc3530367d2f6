package scale

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// exitSIGKILL is the exit code of a SIGKILLed process (128 + 9).
const exitSIGKILL = 137

// podWatch is the harness's own view of every Pod, from one informer that
// keeps a few fields of each: the counts the run waits for, and the ground
// truth of the shutdowns the observer should record.
type podWatch struct {
	informer cache.SharedIndexInformer

	mu   sync.Mutex
	pods map[types.UID]podState
	// all, running and succeeded count the Pods by namespace; treated
	// counts the Pods labelled treated, as the observer's gauge does.
	all, running, succeeded map[string]int
	treated                 int
	terminating             int
	// Of the treated Pods: those seen terminating while running, and
	// what their deletion showed.
	shutdowns, kills, unfinished int
	firstDelete, lastGone        time.Time
	// gone is when each of those shutdowns' Pods went (the failover counts
	// those gone while no observer led).
	gone []time.Time
}

// podState is what the watch keeps of a Pod.
type podState struct {
	namespace          string
	treated, running   bool
	succeeded          bool
	terminating        bool
	shutdownWhileAlive bool
}

func newPodWatch(kube kubernetes.Interface) *podWatch {
	lw := cache.NewListWatchFromClient(kube.CoreV1().RESTClient(), "pods", metav1.NamespaceAll, fields.Everything())
	w := &podWatch{
		informer: cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{}),
		pods:     map[types.UID]podState{}, all: map[string]int{}, running: map[string]int{}, succeeded: map[string]int{},
	}
	// Keep only what the counts need: a few KiB less per Pod.
	_ = w.informer.SetTransform(func(obj any) (any, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return obj, nil
		}
		slim := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			DeletionTimestamp: p.DeletionTimestamp, Labels: map[string]string{mutate.LabelTreated: p.Labels[mutate.LabelTreated]}},
			Status: corev1.PodStatus{Phase: p.Status.Phase}}
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil {
				slim.Status.ContainerStatuses = append(slim.Status.ContainerStatuses,
					corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: t.ExitCode}}})
			}
		}
		return slim, nil
	})
	_, _ = w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.update(obj) },
		UpdateFunc: func(_, obj any) { w.update(obj) },
		DeleteFunc: w.delete,
	})
	return w
}

func (w *podWatch) run(ctx context.Context) error {
	go w.informer.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), w.informer.HasSynced) {
		return fmt.Errorf("the harness's Pod informer did not sync: %w", ctx.Err())
	}
	return nil
}

func stateOf(p *corev1.Pod, prev podState) podState {
	s := podState{namespace: p.Namespace, treated: p.Labels[mutate.LabelTreated] == mutate.LabelTreatedValue,
		terminating: p.DeletionTimestamp != nil, succeeded: p.Status.Phase == corev1.PodSucceeded,
		shutdownWhileAlive: prev.shutdownWhileAlive}
	s.running = p.Status.Phase == corev1.PodRunning && !s.terminating
	// A shutdown: the deletion found the Pod running.
	if s.terminating && !prev.terminating && p.Status.Phase == corev1.PodRunning {
		s.shutdownWhileAlive = true
	}
	return s
}

func (w *podWatch) update(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	prev, seen := w.pods[p.UID]
	s := stateOf(p, prev)
	if seen {
		w.count(prev, -1)
	}
	w.count(s, 1)
	w.pods[p.UID] = s
	if s.terminating && !prev.terminating && w.firstDelete.IsZero() {
		w.firstDelete = time.Now()
	}
}

func (w *podWatch) count(s podState, d int) {
	w.all[s.namespace] += d
	if s.running {
		w.running[s.namespace] += d
	}
	if s.succeeded {
		w.succeeded[s.namespace] += d
	}
	if s.treated {
		w.treated += d
	}
	if s.terminating {
		w.terminating += d
	}
}

func (w *podWatch) delete(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s, seen := w.pods[p.UID]
	if !seen {
		return
	}
	w.count(s, -1)
	delete(w.pods, p.UID)
	w.lastGone = time.Now()
	if !s.treated || !s.shutdownWhileAlive {
		return
	}
	w.shutdowns++
	w.gone = append(w.gone, w.lastGone)
	exited := false
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Terminated != nil {
			exited = true
			if cs.State.Terminated.ExitCode == exitSIGKILL {
				w.kills++
				break
			}
		}
	}
	if !exited {
		w.unfinished++
	}
}

// counts is a snapshot for waits.
type counts struct {
	all, running, succeeded map[string]int
	treated, terminating    int
	shutdowns, kills        int
	unfinished              int
	firstDelete, lastGone   time.Time
}

func (w *podWatch) snapshot() counts {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := counts{all: maps.Clone(w.all), running: maps.Clone(w.running), succeeded: maps.Clone(w.succeeded), treated: w.treated, terminating: w.terminating,
		shutdowns: w.shutdowns, kills: w.kills, unfinished: w.unfinished, firstDelete: w.firstDelete, lastGone: w.lastGone}
	return c
}

// resetShutdowns starts counting shutdowns afresh (the churn).
func (w *podWatch) resetShutdowns() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.shutdowns, w.kills, w.unfinished = 0, 0, 0
	w.firstDelete, w.lastGone = time.Time{}, time.Time{}
	w.gone = nil
}

// goneBetween counts the shutdowns since the reset whose Pods went in
// [from, to).
func (w *podWatch) goneBetween(from, to time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, t := range w.gone {
		if !t.Before(from) && t.Before(to) {
			n++
		}
	}
	return n
}

// waitFor polls the snapshot until done says so, or the timeout; then
// it returns what the last snapshot showed.
func (w *podWatch) waitFor(ctx context.Context, timeout time.Duration, what string, done func(counts) bool, check func() error) (counts, error) {
	deadline := time.Now().Add(timeout)
	for {
		c := w.snapshot()
		if done(c) {
			return c, nil
		}
		if err := check(); err != nil {
			return c, err
		}
		if time.Now().After(deadline) {
			return c, fmt.Errorf("%s: not within %s", what, timeout)
		}
		select {
		case <-ctx.Done():
			return c, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
