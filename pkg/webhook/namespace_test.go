package webhook

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// reader is a client.Reader over namespaces' metadata.
type reader struct {
	labels map[string]map[string]string
	err    error
	block  bool // wait for the context to end, like a cache that has not synced
	calls  atomic.Int32
}

func (r *reader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.calls.Add(1)
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok || m.Kind != "Namespace" || m.APIVersion != "v1" {
		return errors.New("the lookup must read v1 Namespace metadata only")
	}
	if r.block {
		<-ctx.Done()
		return ctx.Err()
	}
	if r.err != nil {
		return r.err
	}
	l, ok := r.labels[key.Name]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, key.Name)
	}
	m.Name, m.Labels = key.Name, l
	// One key graceguard reads, one it does not, one past its bound.
	m.Annotations = map[string]string{mutate.AnnotationMaxWork: "30s", "a": "b", mutate.AnnotationCleanup: strings.Repeat("x", 1<<20)}
	return nil
}

func (r *reader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("not used")
}

func TestNamespaceLookup(t *testing.T) {
	optedIn := map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}
	for _, tc := range []struct {
		name          string
		cache, live   *reader
		want          map[string]string
		wantErr       string
		wantLiveCalls int32
	}{
		{
			name:  "a namespace in the cache is read from the cache alone",
			cache: &reader{labels: map[string]map[string]string{"shop": optedIn}},
			live:  &reader{},
			want:  optedIn,
		},
		{
			name:          "a namespace created a moment ago, not yet in the cache, is read from the API server",
			cache:         &reader{labels: map[string]map[string]string{}},
			live:          &reader{labels: map[string]map[string]string{"shop": optedIn}},
			want:          optedIn,
			wantLiveCalls: 1,
		},
		{
			name:          "a cache that has not synced yet times out and the API server answers",
			cache:         &reader{block: true},
			live:          &reader{labels: map[string]map[string]string{"shop": optedIn}},
			want:          optedIn,
			wantLiveCalls: 1,
		},
		{
			name:    "a namespace found nowhere is an error naming both reads",
			cache:   &reader{labels: map[string]map[string]string{}},
			live:    &reader{err: errors.New("connection refused")},
			wantErr: `reading Namespace "shop": cache: namespaces "shop" not found; API server: connection refused`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &clientLookup{cache: tc.cache, live: tc.live}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			ns, err := l.Namespace(ctx, "shop")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ns.Name != "shop" || !reflect.DeepEqual(ns.Labels, tc.want) || ns.Annotations[mutate.AnnotationMaxWork] != "30s" {
				t.Errorf("got %+v", ns)
			}
			if _, ok := ns.Annotations["a"]; ok {
				t.Errorf("kept an annotation graceguard does not read: %+v", ns.Annotations)
			}
			if v := ns.Annotations[mutate.AnnotationCleanup]; len(v) > 200 {
				t.Errorf("kept %d bytes of an annotation past its bound", len(v))
			} else if n, clipped := mutate.ValueLength(v); !clipped || n != 1<<20 {
				t.Errorf("the clipped value %q does not say its length", v)
			}
			if got := tc.live.calls.Load(); got != tc.wantLiveCalls {
				t.Errorf("API server read %d times, want %d", got, tc.wantLiveCalls)
			}
			if tc.cache.calls.Load() != 1 {
				t.Errorf("cache read %d times, want 1", tc.cache.calls.Load())
			}
		})
	}
}

// The cache's transform keeps of a Namespace only the keys graceguard
// reads, each value bounded; another kind's metadata, and typed objects,
// pass unchanged.
func TestBoundNamespaceKeepsOnlyTheBoundedKeysOfNamespaces(t *testing.T) {
	huge := strings.Repeat("x", 256<<10)
	meta := func(kind string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kind},
			ObjectMeta: metav1.ObjectMeta{Name: "shop",
				Annotations: map[string]string{mutate.AnnotationMaxWork: huge, "unread": huge}},
		}
	}
	got, err := BoundNamespace(meta("Namespace"))
	if err != nil {
		t.Fatal(err)
	}
	ns := got.(*metav1.PartialObjectMetadata)
	if _, ok := ns.Annotations["unread"]; ok || len(ns.Annotations[mutate.AnnotationMaxWork]) > mutate.MaxAnnotationValueLength+64 {
		t.Errorf("namespace kept %d annotations, %s of %d bytes: want only the keys graceguard reads, bounded",
			len(ns.Annotations), mutate.AnnotationMaxWork, len(ns.Annotations[mutate.AnnotationMaxWork]))
	}
	got, err = BoundNamespace(meta("ConfigMap"))
	if err != nil {
		t.Fatal(err)
	}
	if other := got.(*metav1.PartialObjectMetadata); len(other.Annotations) != 2 {
		t.Errorf("another kind's metadata kept %d annotations, want both", len(other.Annotations))
	}
	if got, _ := BoundNamespace(huge); got != huge {
		t.Error("an object that is not metadata was changed")
	}
}
