package observer

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// objectMeta is the part of an object's metadata the informer reads of
// the observer's records: its key (namespace and name), and the
// resourceVersion by which it tells an update from a resync (without one,
// every update would look like a resync and reach no handler). UID names
// the Pod in the observer's own maps. It is a metav1.Object (the
// informer's key and index functions take one through meta.Accessor): the
// other fields read as empty and cannot be set.
type objectMeta struct {
	namespace, name, resourceVersion string
	uid                              types.UID
}

func metaOf(m *metav1.ObjectMeta) objectMeta {
	return objectMeta{
		namespace: strings.Clone(m.Namespace), name: strings.Clone(m.Name),
		resourceVersion: strings.Clone(m.ResourceVersion), uid: types.UID(strings.Clone(string(m.UID))),
	}
}

var _ metav1.Object = &objectMeta{}

func (m *objectMeta) GetNamespace() string                                       { return m.namespace }
func (m *objectMeta) SetNamespace(string)                                        {}
func (m *objectMeta) GetName() string                                            { return m.name }
func (m *objectMeta) SetName(string)                                             {}
func (m *objectMeta) GetGenerateName() string                                    { return "" }
func (m *objectMeta) SetGenerateName(string)                                     {}
func (m *objectMeta) GetUID() types.UID                                          { return m.uid }
func (m *objectMeta) SetUID(types.UID)                                           {}
func (m *objectMeta) GetResourceVersion() string                                 { return m.resourceVersion }
func (m *objectMeta) SetResourceVersion(string)                                  {}
func (m *objectMeta) GetGeneration() int64                                       { return 0 }
func (m *objectMeta) SetGeneration(int64)                                        {}
func (m *objectMeta) GetSelfLink() string                                        { return "" }
func (m *objectMeta) SetSelfLink(string)                                         {}
func (m *objectMeta) GetCreationTimestamp() metav1.Time                          { return metav1.Time{} }
func (m *objectMeta) SetCreationTimestamp(metav1.Time)                           {}
func (m *objectMeta) GetDeletionTimestamp() *metav1.Time                         { return nil }
func (m *objectMeta) SetDeletionTimestamp(*metav1.Time)                          {}
func (m *objectMeta) GetDeletionGracePeriodSeconds() *int64                      { return nil }
func (m *objectMeta) SetDeletionGracePeriodSeconds(*int64)                       {}
func (m *objectMeta) GetLabels() map[string]string                               { return nil }
func (m *objectMeta) SetLabels(map[string]string)                                {}
func (m *objectMeta) GetAnnotations() map[string]string                          { return nil }
func (m *objectMeta) SetAnnotations(map[string]string)                           {}
func (m *objectMeta) GetFinalizers() []string                                    { return nil }
func (m *objectMeta) SetFinalizers([]string)                                     {}
func (m *objectMeta) GetOwnerReferences() []metav1.OwnerReference                { return nil }
func (m *objectMeta) SetOwnerReferences([]metav1.OwnerReference)                 {}
func (m *objectMeta) GetManagedFields() []metav1.ManagedFieldsEntry              { return nil }
func (m *objectMeta) SetManagedFields(managedFields []metav1.ManagedFieldsEntry) {}
