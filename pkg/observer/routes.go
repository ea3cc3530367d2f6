package observer

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// routes follows the EndpointSlices of the treated namespaces: per Pod
// they list, how many list it and route to it (listings), and, per Pod
// the observer saw terminating, its withdrawal until its sample is written
// (withdrawals). Both hold fixed-size entries; a listing goes when no
// slice lists its Pod, a withdrawal with its Pod's sample (take) or skip
// (forget).
//
// The counts follow from the slices' events alone: the informer hands
// each handler the version it had cached (lean) and the new one, so an
// update changes the counts by what changed between them, and a resync
// (the same version twice) by nothing.
type routes struct {
	mu          sync.Mutex
	listings    map[podKey]listing
	withdrawals map[podKey]withdrawal
}

func newRoutes() *routes {
	return &routes{listings: map[podKey]listing{}, withdrawals: map[podKey]withdrawal{}}
}

// delta is how a slice event changes one Pod's counts.
type delta struct{ slices, routed int32 }

// changed applies a slice event: from old (nil when added) to new (nil
// when deleted), seen at now (Unix seconds of the observer's clock). A
// Pod whose last routing slice stops routing to it (marks it not ready
// or terminating, drops it, or is deleted) is withdrawn at now.
func (r *routes) changed(old, new *endpointSlice, now int64) {
	var d map[podKey]delta
	add := func(s *endpointSlice, sign int32) {
		if s == nil {
			return
		}
		for _, e := range s.endpoints {
			if d == nil {
				d = make(map[podKey]delta, len(s.endpoints))
			}
			x := d[e.pod]
			x.slices += sign
			if e.routed {
				x.routed += sign
			}
			d[e.pod] = x
		}
	}
	add(old, -1)
	add(new, 1)
	if len(d) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, x := range d {
		if x == (delta{}) {
			continue
		}
		l := r.listings[k]
		wasRouted := l.routed > 0
		l.slices, l.routed = max(l.slices+x.slices, 0), max(l.routed+x.routed, 0)
		if wasRouted && l.routed == 0 {
			l.stopped = now
		}
		if w, ok := r.withdrawals[k]; ok {
			w.listed = w.listed || l.slices > 0 || x.slices < 0
			w.routed = l.routed > 0
			if wasRouted && l.routed == 0 {
				w.stopped = now
			}
			r.withdrawals[k] = w
		}
		if l.slices == 0 {
			delete(r.listings, k)
		} else {
			r.listings[k] = l
		}
	}
}

// terminating starts the withdrawal of a Pod first seen terminating, from
// what the slices say of it then.
func (r *routes) terminating(uid types.UID) {
	k, ok := keyOf(uid)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.withdrawals[k]; ok {
		return
	}
	l, listed := r.listings[k]
	w := withdrawal{listed: listed, routed: l.routed > 0}
	if listed && l.routed == 0 {
		w.stopped = l.stopped
	}
	r.withdrawals[k] = w
}

// take returns and forgets a Pod's withdrawal; ok is false when the
// observer never saw the Pod terminating.
func (r *routes) take(uid types.UID) (withdrawal, bool) {
	k, ok := keyOf(uid)
	if !ok {
		return withdrawal{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.withdrawals[k]
	delete(r.withdrawals, k)
	return w, ok
}

func (r *routes) forget(uid types.UID) { r.take(uid) }

// handler keeps routes from the EndpointSlice informer's events, at the
// time now gives.
func (r *routes) handler(now func() int64) toolscache.ResourceEventHandlerFuncs {
	lean := func(obj any) *endpointSlice {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		s, _ := obj.(*endpointSlice)
		return s
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { r.changed(nil, lean(obj), now()) },
		UpdateFunc: func(old, obj any) {
			if o, n := lean(old), lean(obj); o != n {
				r.changed(o, n, now())
			}
		},
		DeleteFunc: func(obj any) { r.changed(lean(obj), nil, now()) },
	}
}
