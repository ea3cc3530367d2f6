package observer

import (
	"context"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
)

// owner is a deleted Pod's controller reference, as the Pod states it:
// the unit samples are gathered by before they are written to its
// workload's report, once verified.
type owner struct {
	Namespace string
	ownerRef
}

// workload is what a report belongs to: a verified owner of the Pod.
type workload struct {
	APIVersion, Kind, Name string
	UID                    types.UID
}

func (w workload) ref() v1alpha1.WorkloadReference {
	return v1alpha1.WorkloadReference{APIVersion: w.APIVersion, Kind: w.Kind, Name: w.Name}
}

// verdict is what the check of an owner chain found: the workload the
// samples belong to, or why they belong to none (SkipOwnerUnverified,
// SkipNoWorkload).
type verdict struct {
	wl   workload
	skip Skip
	// final: the same owner would give the same verdict later (UIDs are
	// never reused), so it may be cached.
	final bool
}

// parents are the controllers whose Pods' reports belong to their own
// controller: a Deployment's or an Argo Rollout's ReplicaSets, a
// CronJob's Jobs. A Rollout's ReplicaSets come and go with each revision,
// as a Deployment's do, so their samples are the Rollout's.
var parents = map[schema.GroupKind][]schema.GroupKind{
	{Group: "apps", Kind: "ReplicaSet"}: {{Group: "apps", Kind: "Deployment"}, {Group: "argoproj.io", Kind: "Rollout"}},
	{Group: "batch", Kind: "Job"}:       {{Group: "batch", Kind: "CronJob"}},
}

// verifyOwner checks that the owner a Pod names exists with the UID the
// Pod gives it, and, for a ReplicaSet or Job, that its own controller
// reference names a Deployment, an Argo Rollout or a CronJob that exists
// with that UID. Only metadata is read (PartialObjectMetadata, through r:
// the API server, uncached). A Pod anyone can label and give any owner
// reference is attributed to a workload only through objects that really
// own it; one whose owner is not found (forged, or already gone: nothing
// tells them apart) is not attributed by guessing at names
// (SkipOwnerUnverified). The error is a failure worth retrying.
func verifyOwner(ctx context.Context, r client.Reader, k owner) (verdict, error) {
	m, v, err := getVerified(ctx, r, k.Namespace, k.ownerRef)
	if err != nil || v.skip != "" {
		return v, err
	}
	wl := workload{APIVersion: k.APIVersion, Kind: k.Kind, Name: k.Name, UID: k.UID}
	ref := metav1.GetControllerOf(m)
	if ref == nil || !slices.Contains(parents[gvk(k.APIVersion, k.Kind).GroupKind()], gvk(ref.APIVersion, ref.Kind).GroupKind()) {
		// The owner is the workload: a StatefulSet, a DaemonSet, a
		// ReplicaSet or Job of no Deployment, Rollout or CronJob.
		return verdict{wl: wl, final: true}, nil
	}
	pref, fits := boundedRef(ref.APIVersion, ref.Kind, ref.Name, ref.UID)
	if !fits {
		return verdict{skip: SkipOwnerUnverified, final: true}, nil
	}
	_, pv, err := getVerified(ctx, r, k.Namespace, pref)
	if err != nil {
		return verdict{}, err
	}
	if pv.skip != "" && pv.final {
		// The ReplicaSet (Job) is real, its Deployment or Rollout
		// (CronJob) gone or replaced by another of the same name: so is
		// its report.
		return verdict{skip: SkipNoWorkload, final: true}, nil
	}
	if pv.skip != "" {
		return pv, nil
	}
	return verdict{wl: workload{APIVersion: pref.APIVersion, Kind: pref.Kind, Name: pref.Name, UID: pref.UID}, final: true}, nil
}

// getVerified reads ref's metadata and checks its UID. Not found, another
// UID, an API version that does not parse, a kind the API server does not
// serve, or one the observer may not
// read (its ClusterRole names the workload kinds graceguard treats): the
// reference is unverified. Only the last is not final, as RBAC may change.
func getVerified(ctx context.Context, r client.Reader, ns string, ref ownerRef) (*metav1.PartialObjectMetadata, verdict, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, verdict{skip: SkipOwnerUnverified, final: true}, nil
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gv.WithKind(ref.Kind))
	err = r.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, m)
	switch {
	case err == nil && m.UID == ref.UID:
		return m, verdict{}, nil
	case err == nil, apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		return nil, verdict{skip: SkipOwnerUnverified, final: true}, nil
	case apierrors.IsForbidden(err):
		return nil, verdict{skip: SkipOwnerUnverified}, nil
	}
	return nil, verdict{}, err
}

func gvk(apiVersion, kind string) schema.GroupVersionKind {
	gv, _ := schema.ParseGroupVersion(apiVersion)
	return gv.WithKind(kind)
}

// maxVerdicts bounds the verdicts kept: one per owner (a ReplicaSet, a
// StatefulSet) whose Pods were seen terminating, each an owner and a
// workload, at most 1.5 KiB together with Kubernetes' longest names (a
// few hundred bytes with usual ones). Beyond it the cache starts over:
// owners are verified again, one read each (two for a ReplicaSet or Job).
const maxVerdicts = 4096

// verdicts caches final verdicts by owner, so that the Pods of one
// ReplicaSet cost its verification once.
type verdicts struct {
	mu sync.Mutex
	m  map[owner]verdict
}

func (c *verdicts) get(k owner) (verdict, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *verdicts) put(k owner, v verdict) {
	if !v.final {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxVerdicts {
		c.m = map[owner]verdict{}
	}
	c.m[k] = v
}
