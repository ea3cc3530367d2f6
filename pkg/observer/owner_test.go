package observer

import (
	"context"
	"errors"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func controllerRef(apiVersion, kind, name string, uid types.UID) []metav1.OwnerReference {
	yes := true
	return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &yes}}
}

// rolloutGVK is Argo Rollouts' Rollout, a CRD: the fake API server serves
// it as an unstructured kind, as a cluster with Argo installed does.
var rolloutGVK = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Rollout"}

func rollout(name string, uid types.UID) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(rolloutGVK)
	u.SetNamespace("shop")
	u.SetName(name)
	u.SetUID(uid)
	return u
}

// cluster is a namespace "shop" with a Deployment web and its ReplicaSet,
// an orphaned ReplicaSet, a ReplicaSet whose Deployment is gone and one
// whose Deployment was replaced, a StatefulSet, a CronJob's Job, and an
// Argo Rollout canary with its ReplicaSet, with one of a Rollout gone and
// one of a Rollout replaced.
func cluster(funcs interceptor.Funcs) client.Client {
	meta := func(name string, uid types.UID, owners []metav1.OwnerReference) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "shop", Name: name, UID: uid, OwnerReferences: owners}
	}
	mapper := apimeta.NewDefaultRESTMapper(nil)
	for gvk := range clientgoscheme.Scheme.AllKnownTypes() {
		mapper.Add(gvk, apimeta.RESTScopeNamespace)
	}
	mapper.Add(rolloutGVK, apimeta.RESTScopeNamespace)
	return fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithRESTMapper(mapper).WithInterceptorFuncs(funcs).WithObjects(
		rollout("canary", "ro-uid"),
		&appsv1.ReplicaSet{ObjectMeta: meta("canary-6b7c8d9f5", "ro-rs-uid", controllerRef("argoproj.io/v1alpha1", "Rollout", "canary", "ro-uid"))},
		&appsv1.ReplicaSet{ObjectMeta: meta("retired-5c6d7e8f9", "retired-rs-uid", controllerRef("argoproj.io/v1alpha1", "Rollout", "retired", "retired-uid"))},
		rollout("renamed", "renamed-new-uid"),
		&appsv1.ReplicaSet{ObjectMeta: meta("renamed-4b5c6d7e8", "renamed-rs-uid", controllerRef("argoproj.io/v1alpha1", "Rollout", "renamed", "renamed-old-uid"))},
		&appsv1.ReplicaSet{ObjectMeta: meta("pretender-3a4b5c6d7", "pretender-rs-uid", controllerRef("evil.example/v1alpha1", "Rollout", "canary", "ro-uid"))},
		&appsv1.Deployment{ObjectMeta: meta("web", "dep-uid", nil)},
		&appsv1.ReplicaSet{ObjectMeta: meta("web-7d9f8c6b5", "rs-uid", controllerRef("apps/v1", "Deployment", "web", "dep-uid"))},
		&appsv1.ReplicaSet{ObjectMeta: meta("lonely", "lonely-uid", nil)},
		&appsv1.ReplicaSet{ObjectMeta: meta("gone-5f6d", "gone-rs-uid", controllerRef("apps/v1", "Deployment", "gone", "gone-uid"))},
		&appsv1.Deployment{ObjectMeta: meta("again", "new-uid", nil)},
		&appsv1.ReplicaSet{ObjectMeta: meta("again-6c8b", "again-rs-uid", controllerRef("apps/v1", "Deployment", "again", "old-uid"))},
		&appsv1.StatefulSet{ObjectMeta: meta("db", "sts-uid", nil)},
		&batchv1.CronJob{ObjectMeta: meta("nightly", "cj-uid", nil)},
		&batchv1.Job{ObjectMeta: meta("nightly-29000000", "job-uid", controllerRef("batch/v1", "CronJob", "nightly", "cj-uid"))},
	).Build()
}

func TestVerifyOwnerAttributesOnlyThroughRealOwners(t *testing.T) {
	c := cluster(interceptor.Funcs{})
	ref := func(apiVersion, kind, name string, uid types.UID) owner {
		return owner{Namespace: "shop", ownerRef: ownerRef{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid}}
	}
	deployment := workload{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "dep-uid"}
	for _, tc := range []struct {
		name  string
		owner owner
		want  verdict
	}{
		{"a ReplicaSet of a Deployment, both with the UIDs named: the Deployment's report",
			ref("apps/v1", "ReplicaSet", "web-7d9f8c6b5", "rs-uid"), verdict{wl: deployment, final: true}},
		{"the real ReplicaSet's name with another UID (forged): unverified",
			ref("apps/v1", "ReplicaSet", "web-7d9f8c6b5", "forged"), verdict{skip: SkipOwnerUnverified, final: true}},
		{"a made-up ReplicaSet whose name is the Deployment's and a hash: unverified, no guess by name",
			ref("apps/v1", "ReplicaSet", "web-5f6d7c8b9", "made-up"), verdict{skip: SkipOwnerUnverified, final: true}},
		{"a ReplicaSet of no Deployment: its own report",
			ref("apps/v1", "ReplicaSet", "lonely", "lonely-uid"), verdict{wl: workload{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "lonely", UID: "lonely-uid"}, final: true}},
		{"a real ReplicaSet whose Deployment is gone: the report went with it",
			ref("apps/v1", "ReplicaSet", "gone-5f6d", "gone-rs-uid"), verdict{skip: SkipNoWorkload, final: true}},
		{"a real ReplicaSet of a Deployment since replaced by another of its name: not the new one's",
			ref("apps/v1", "ReplicaSet", "again-6c8b", "again-rs-uid"), verdict{skip: SkipNoWorkload, final: true}},
		{"a StatefulSet with its UID",
			ref("apps/v1", "StatefulSet", "db", "sts-uid"), verdict{wl: workload{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts-uid"}, final: true}},
		{"a StatefulSet's name with another UID: unverified",
			ref("apps/v1", "StatefulSet", "db", "forged"), verdict{skip: SkipOwnerUnverified, final: true}},
		{"the Deployment named directly by a Pod with its UID: the Deployment (Kubernetes says it owns the Pod)",
			ref("apps/v1", "Deployment", "web", "dep-uid"), verdict{wl: deployment, final: true}},
		{"a Job of a CronJob: the CronJob's report",
			ref("batch/v1", "Job", "nightly-29000000", "job-uid"), verdict{wl: workload{APIVersion: "batch/v1", Kind: "CronJob", Name: "nightly", UID: "cj-uid"}, final: true}},
		{"a ReplicaSet of an Argo Rollout, both with the UIDs named: the Rollout's report",
			ref("apps/v1", "ReplicaSet", "canary-6b7c8d9f5", "ro-rs-uid"), verdict{wl: workload{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "canary", UID: "ro-uid"}, final: true}},
		{"a Rollout's ReplicaSet with another UID (forged): unverified",
			ref("apps/v1", "ReplicaSet", "canary-6b7c8d9f5", "forged"), verdict{skip: SkipOwnerUnverified, final: true}},
		{"a real ReplicaSet whose Rollout is gone: the report went with it",
			ref("apps/v1", "ReplicaSet", "retired-5c6d7e8f9", "retired-rs-uid"), verdict{skip: SkipNoWorkload, final: true}},
		{"a real ReplicaSet of a Rollout since replaced by another of its name: not the new one's",
			ref("apps/v1", "ReplicaSet", "renamed-4b5c6d7e8", "renamed-rs-uid"), verdict{skip: SkipNoWorkload, final: true}},
		{"a ReplicaSet whose controller is a Rollout of another group: its own report",
			ref("apps/v1", "ReplicaSet", "pretender-3a4b5c6d7", "pretender-rs-uid"),
			verdict{wl: workload{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "pretender-3a4b5c6d7", UID: "pretender-rs-uid"}, final: true}},
		{"the Rollout named directly with its UID: the Rollout",
			ref("argoproj.io/v1alpha1", "Rollout", "canary", "ro-uid"), verdict{wl: workload{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "canary", UID: "ro-uid"}, final: true}},
		{"a kind the API server does not serve: unverified",
			ref("evil.example/v1", "Puppet", "web", "x"), verdict{skip: SkipOwnerUnverified, final: true}},
		{"an API version that does not parse: unverified",
			ref("a/b/c", "ReplicaSet", "web", "x"), verdict{skip: SkipOwnerUnverified, final: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := verifyOwner(context.Background(), c, tc.owner)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("verdict %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestVerifyOwnerRetriesFailuresAndDoesNotCacheForbidden(t *testing.T) {
	rs := owner{Namespace: "shop", ownerRef: ownerRef{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f8c6b5", UID: "rs-uid"}}
	fail := func(err error) interceptor.Funcs {
		return interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if key.Name == "web" {
				return err
			}
			return c.Get(ctx, key, obj, opts...)
		}}
	}
	timeout := apierrors.NewTimeoutError("slow", 1)
	if _, err := verifyOwner(context.Background(), cluster(fail(timeout)), rs); !errors.Is(err, timeout) {
		t.Errorf("a failed read of the Deployment: error %v, want it returned, to be retried", err)
	}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("RBAC"))
	v, err := verifyOwner(context.Background(), cluster(fail(forbidden)), rs)
	if err != nil || v.skip != SkipOwnerUnverified || v.final {
		t.Errorf("a Deployment the observer may not read: %+v, %v; want unverified, not final", v, err)
	}
	var cache verdicts
	cache.put(rs, v)
	if _, ok := cache.get(rs); ok {
		t.Error("a verdict that is not final must not be cached: RBAC may change")
	}
	for i := range maxVerdicts + 1 {
		cache.put(owner{Namespace: "shop", ownerRef: ownerRef{Name: fmt.Sprint(i)}}, verdict{final: true})
	}
	if n := len(cache.m); n > maxVerdicts {
		t.Errorf("%d verdicts cached, more than %d", n, maxVerdicts)
	}
}
