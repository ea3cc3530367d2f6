package manifest

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// Live makes an object read from a cluster a document, as if read from a
// file: kubectl graceguard audit and the observer's policy reports
// evaluate what they list through Process, as check does files.
func Live(u *unstructured.Unstructured) (Document, error) {
	u.SetManagedFields(nil)
	raw, err := u.MarshalJSON()
	if err != nil {
		return Document{}, err
	}
	return Document{
		Source: "cluster", Raw: raw, APIVersion: u.GetAPIVersion(), Kind: u.GetKind(),
		Namespace: u.GetNamespace(), Name: u.GetName(), UID: string(u.GetUID()),
	}, nil
}

// ControllingWorkload names the workload that owner references make an
// object's controller ("Deployment web"), or "": a ReplicaSet of a
// Deployment, a Job of a CronJob, a Pod of any of them. Its Pod template
// is its controller's, which is evaluated itself.
func ControllingWorkload(refs []metav1.OwnerReference) string {
	for _, ref := range refs {
		if ref.Controller == nil || !*ref.Controller {
			continue
		}
		if _, _, ok := mutate.LookupWorkloadVersion(ref.APIVersion, ref.Kind); ok {
			return ref.Kind + " " + ref.Name
		}
	}
	return ""
}
