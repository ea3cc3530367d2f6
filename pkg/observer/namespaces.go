package observer

import (
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// namespaces says which namespaces graceguard treats, as the webhook
// decides it (mutate.skip): those labelled graceguard.io/inject=enabled,
// except the excluded ones (kube-system, graceguard's own,
// --excluded-namespaces). The labelled ones come from a label-selected,
// metadata-only Namespace informer: the API server sends a deletion when
// a namespace loses the label, so the set is exactly the opted-in names.
type namespaces struct {
	excluded []string

	mu      sync.RWMutex
	optedIn map[string]struct{}
}

func newNamespaces(excluded []string) *namespaces {
	return &namespaces{excluded: slices.Clone(excluded), optedIn: map[string]struct{}{}}
}

// treats reports whether graceguard treats the Pods of namespace ns.
func (n *namespaces) treats(ns string) bool {
	if slices.Contains(n.excluded, ns) {
		return false
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	_, ok := n.optedIn[ns]
	return ok
}

// names lists the namespaces graceguard treats, in order.
func (n *namespaces) names() []string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := make([]string, 0, len(n.optedIn))
	for ns := range n.optedIn {
		if !slices.Contains(n.excluded, ns) {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return out
}

// handler keeps the set from the Namespace informer's events.
func (n *namespaces) handler() toolscache.ResourceEventHandlerFuncs {
	name := func(obj any) (string, bool) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		m, ok := obj.(metav1.Object)
		if !ok {
			return "", false
		}
		return m.GetName(), true
	}
	add := func(obj any) {
		if ns, ok := name(obj); ok {
			n.mu.Lock()
			n.optedIn[strings.Clone(ns)] = struct{}{}
			n.mu.Unlock()
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    add,
		UpdateFunc: func(_, obj any) { add(obj) },
		DeleteFunc: func(obj any) {
			if ns, ok := name(obj); ok {
				n.mu.Lock()
				delete(n.optedIn, ns)
				n.mu.Unlock()
			}
		},
	}
}

// leanNamespace keeps a namespace's name and resourceVersion: the set
// needs only the name.
func leanNamespace(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	out := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion}}
	return out, nil
}
