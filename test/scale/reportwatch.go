package scale

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// reportWatch counts the ShutdownReport updates the API server announces
// (a watch event each) by the second of their arrival, so that a churn's
// busiest second can be read: each of the observer's report writes ends
// in one status update (the first also creates the report), and
// --flush-writes-per-second bounds them.
type reportWatch struct {
	informer cache.SharedIndexInformer

	mu       sync.Mutex
	counting bool
	perSec   map[int64]int
}

func newReportWatch(dyn dynamic.Interface) *reportWatch {
	f := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	w := &reportWatch{informer: f.ForResource(shutdownReports).Informer(), perSec: map[int64]int{}}
	// Only the event matters, not the report.
	_ = w.informer.SetTransform(func(obj any) (any, error) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			slim := &unstructured.Unstructured{}
			slim.SetAPIVersion(u.GetAPIVersion())
			slim.SetKind(u.GetKind())
			slim.SetNamespace(u.GetNamespace())
			slim.SetName(u.GetName())
			slim.SetResourceVersion(u.GetResourceVersion())
			return slim, nil
		}
		return obj, nil
	})
	count := func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.counting {
			w.perSec[time.Now().Unix()]++
		}
	}
	_, _ = w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, _ any) { count() },
	})
	return w
}

func (w *reportWatch) run(ctx context.Context) bool {
	go w.informer.Run(ctx.Done())
	return cache.WaitForCacheSync(ctx.Done(), w.informer.HasSynced)
}

// start counts from now, afresh.
func (w *reportWatch) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.counting, w.perSec = true, map[int64]int{}
}

// stop ends the count and returns the most updates seen in one second
// and the seconds with any.
func (w *reportWatch) stop() (peak, busySeconds int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.counting = false
	for _, n := range w.perSec {
		peak = max(peak, n)
	}
	return peak, len(w.perSec)
}
