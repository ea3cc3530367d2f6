package webhook

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// NamespaceLookup reads the labels and annotations of a namespace.
type NamespaceLookup interface {
	Namespace(ctx context.Context, name string) (mutate.Namespace, error)
}

// NewNamespaceLookup reads namespaces from cache (the manager's informer
// cache) and, when the cache does not have one, from live (the manager's
// GetAPIReader()).
//
// Only metadata is read (PartialObjectMetadata), so the cache holds labels
// and annotations, not whole Namespace objects.
//
// A lookup ends by its context's deadline, which the handlers set early
// enough to answer within the review's timeout (lookupDeadline): the cache
// read, which waits only while the informer has not synced yet (just after
// start), gets a third of that time and the live read the rest.
func NewNamespaceLookup(cache, live client.Reader) NamespaceLookup {
	return &clientLookup{cache: cache, live: live}
}

type clientLookup struct {
	cache, live client.Reader
}

// NamespaceMetadata is the object the lookup reads; register an informer
// for it to warm the cache before the first review.
func NamespaceMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	return m
}

func (l *clientLookup) Namespace(ctx context.Context, name string) (mutate.Namespace, error) {
	cacheCtx := ctx
	if end, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		cacheCtx, cancel = context.WithTimeout(ctx, time.Until(end)/3)
		defer cancel()
	}
	cacheErr := get(cacheCtx, l.cache, name)
	if cacheErr.err == nil {
		return cacheErr.ns, nil
	}
	// A namespace created a moment ago (the usual case: `kubectl create ns`
	// then `kubectl apply`) is NotFound in the cache until the watch
	// delivers it; a cache still syncing times out. Both are answered by
	// one live read. A namespace missing there too really does not exist.
	if l.live == nil {
		return mutate.Namespace{}, fmt.Errorf("reading Namespace %q from the cache: %w", name, cacheErr.err)
	}
	live := get(ctx, l.live, name)
	if live.err != nil {
		return mutate.Namespace{}, fmt.Errorf("reading Namespace %q: cache: %v; API server: %w", name, cacheErr.err, live.err)
	}
	return live.ns, nil
}

type result struct {
	ns  mutate.Namespace
	err error
}

func get(ctx context.Context, r client.Reader, name string) result {
	m := NamespaceMetadata()
	if err := r.Get(ctx, client.ObjectKey{Name: name}, m); err != nil {
		return result{err: err}
	}
	// The live read is the whole metadata; the cache's is bounded already.
	m = boundNamespace(m)
	return result{ns: mutate.Namespace{Name: m.Name, Labels: m.Labels, Annotations: m.Annotations}}
}

// BoundNamespace is the cache transform of the namespace informer: of a
// Namespace's metadata it keeps the name and the labels and annotations
// graceguard reads there (mutate.Keys), each value clipped past its
// key's bound (mutate.Clipped, which the size guard still refuses). So a
// namespace holding 256 KiB of annotations costs the cache a few hundred
// bytes, and every review that reads it a copy of those, not of 256 KiB.
func BoundNamespace(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok || m.Kind != "Namespace" {
		return obj, nil
	}
	return boundNamespace(m), nil
}

func boundNamespace(m *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	out := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta}
	out.Name, out.UID, out.ResourceVersion = m.Name, m.UID, m.ResourceVersion
	out.Labels = boundMap(m.Labels, mutate.NamespaceLabel)
	out.Annotations = boundMap(m.Annotations, mutate.NamespaceAnnotation)
	return out
}

// boundMap keeps the keys graceguard reads in where, each value clipped
// past its bound.
func boundMap(in map[string]string, where mutate.Where) map[string]string {
	var out map[string]string
	for k, v := range in {
		key, ok := mutate.LookupKey(k, where)
		if !ok {
			continue
		}
		limit := key.MaxLength
		if where == mutate.NamespaceLabel {
			limit = mutate.MaxLabelValueLength
		}
		if len(v) > limit {
			v = mutate.Clipped(v[:min(len(v), mutate.MaxValueLength)], len(v), fnv(fnvOffset, []byte(v)))
		}
		if out == nil {
			out = make(map[string]string, 4)
		}
		out[k] = v
	}
	return out
}
