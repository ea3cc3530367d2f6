package server

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// The cache keeps of a namespace only the keys graceguard reads, each
// value bounded, and no managedFields; the metadata of another kind, and
// typed objects, only lose their managedFields.
func TestTheCacheBoundsNamespacesAndStripsManagedFields(t *testing.T) {
	huge := strings.Repeat("x", 256<<10)
	meta := func(kind string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kind},
			ObjectMeta: metav1.ObjectMeta{Name: "shop",
				Annotations:   map[string]string{mutate.AnnotationMaxWork: huge, "unread": huge},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		}
	}
	got, err := boundCache(meta("Namespace"))
	if err != nil {
		t.Fatal(err)
	}
	ns := got.(*metav1.PartialObjectMetadata)
	if _, ok := ns.Annotations["unread"]; ok || len(ns.Annotations[mutate.AnnotationMaxWork]) > mutate.MaxAnnotationValueLength || ns.ManagedFields != nil {
		t.Errorf("namespace kept %d annotations, %s of %d bytes, managedFields %v: want only the keys graceguard reads, bounded",
			len(ns.Annotations), mutate.AnnotationMaxWork, len(ns.Annotations[mutate.AnnotationMaxWork]), ns.ManagedFields)
	}

	got, err = boundCache(meta("ConfigMap"))
	if err != nil {
		t.Fatal(err)
	}
	if other := got.(*metav1.PartialObjectMetadata); len(other.Annotations) != 2 || other.ManagedFields != nil {
		t.Errorf("another kind's metadata: %d annotations, managedFields %v; want both annotations and none", len(other.Annotations), other.ManagedFields)
	}

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cert", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "graceguard"}}}}
	got, err = boundCache(secret)
	if err != nil {
		t.Fatal(err)
	}
	if got.(*corev1.Secret).ManagedFields != nil {
		t.Error("a Secret kept its managedFields")
	}
}
