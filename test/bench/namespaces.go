package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/graceguard/graceguard/internal/fixture"
	"github.com/graceguard/graceguard/pkg/webhook"
)

// namespaceCache is a namespace-metadata informer cache over the API server
// and graceguard's lookup on top of it, as pkg/server wires them.
type namespaceCache struct {
	cache  crcache.Cache
	lookup webhook.NamespaceLookup
}

func (c *cluster) startNamespaceCache(ctx context.Context) (*namespaceCache, error) {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		return nil, err
	}
	cc, err := crcache.New(c.rest, crcache.Options{Scheme: s})
	if err != nil {
		return nil, err
	}
	if _, err := cc.GetInformer(ctx, webhook.NamespaceMetadata()); err != nil {
		return nil, err
	}
	go func() { _ = cc.Start(ctx) }()
	if !cc.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the namespace cache did not sync")
	}
	return &namespaceCache{cache: cc, lookup: webhook.NewNamespaceLookup(cc, nil)}, nil
}

func (n *namespaceCache) count(ctx context.Context) (int, error) {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := n.cache.List(ctx, l); err != nil {
		return 0, err
	}
	return len(l.Items), nil
}

// waitFor waits until the cache holds at least want namespaces.
func (n *namespaceCache) waitFor(ctx context.Context, want int) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := n.count(ctx)
		if err != nil {
			return err
		}
		if got >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the namespace cache holds %d namespaces, want %d", got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// benchLookup measures one lookup of the opted-in namespace.
func (n *namespaceCache) benchLookup(ctx context.Context) (testing.BenchmarkResult, error) {
	if ns, err := n.lookup.Namespace(ctx, fixture.Namespace); err != nil || ns.Labels == nil {
		return testing.BenchmarkResult{}, fmt.Errorf("looking up %s: %v (labels %v)", fixture.Namespace, err, ns.Labels)
	}
	var failed error
	r := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := n.lookup.Namespace(ctx, fixture.Namespace); err != nil {
				failed = err
				b.FailNow()
			}
		}
	})
	return r, failed
}

// growNamespaces creates namespaces named bench-scale-NNNNN until the
// cluster holds total, with 32 concurrent clients.
func (c *cluster) growNamespaces(ctx context.Context, have, total int) error {
	jobs := make(chan int)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := c.createNamespace(ctx, fmt.Sprintf("bench-scale-%05d", i), false); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := have; i < total; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return first
}
