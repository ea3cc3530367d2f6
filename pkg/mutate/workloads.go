package mutate

import (
	"fmt"
	"reflect"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// WorkloadKind is a kind whose Pods graceguard treats: the Pods it creates
// meet the Pod webhooks at admission, and its Pod template is checked as
// they will be. Workloads is the one table of them: the validating
// webhook (and its lean decode), the kubectl plugin, the report's error
// kinds and the chart's tests read it.
type WorkloadKind struct {
	Group, Kind string
	// TemplatePath is the field path of the Pod template.
	TemplatePath []string
	// Resource is the plural resource name, as in webhook rules and RBAC.
	Resource string
	// Version is the version the API server serves; Reviewed says whether
	// the validating webhook is registered for Group/Version.
	Version  string
	Reviewed bool
	// Optional marks a custom resource's kind (Argo Rollouts' Rollout):
	// the chart registers the validating webhook for it only where the
	// API server serves it, and audit skips it where it does not.
	Optional bool
	// Legacy are older versions people still have in git. The API server
	// no longer serves them, so only the plugin reads them; their Pod
	// template has the served version's shape.
	Legacy []LegacyVersion
	// newObject returns an empty object of the served version, for
	// decoding; template returns its metadata and Pod template (nil when
	// the object has none).
	newObject func() runtime.Object
	template  func(runtime.Object) (*metav1.ObjectMeta, *corev1.PodTemplateSpec)
	// scaleDown returns the object's scale-down delays (Target.ScaleDown);
	// nil for kinds without any.
	scaleDown func(runtime.Object) []ScaleDownDelay
}

// LegacyVersion is an API version of a workload kind that is no longer served.
type LegacyVersion struct {
	GroupVersion string // "extensions/v1beta1"
	RemovedIn    string // the Kubernetes minor that stopped serving it: "1.16"
}

var (
	specTemplate    = []string{"spec", "template"}
	cronJobTemplate = []string{"spec", "jobTemplate", "spec", "template"}
	removed116      = func(gvs ...string) []LegacyVersion {
		out := make([]LegacyVersion, len(gvs))
		for i, gv := range gvs {
			out[i] = LegacyVersion{gv, "1.16"}
		}
		return out
	}
)

// Workloads are the kinds graceguard treats through a Pod template.
var Workloads = []WorkloadKind{
	{Group: "apps", Kind: "Deployment", TemplatePath: specTemplate, Resource: "deployments", Version: "v1", Reviewed: true,
		Legacy:    removed116("extensions/v1beta1", "apps/v1beta1", "apps/v1beta2"),
		newObject: func() runtime.Object { return &appsv1.Deployment{} },
		template: func(o runtime.Object) (*metav1.ObjectMeta, *corev1.PodTemplateSpec) {
			d := o.(*appsv1.Deployment)
			return &d.ObjectMeta, &d.Spec.Template
		}},
	{Group: "apps", Kind: "StatefulSet", TemplatePath: specTemplate, Resource: "statefulsets", Version: "v1", Reviewed: true,
		Legacy:    removed116("apps/v1beta1", "apps/v1beta2"),
		newObject: func() runtime.Object { return &appsv1.StatefulSet{} },
		template: func(o runtime.Object) (*metav1.ObjectMeta, *corev1.PodTemplateSpec) {
			s := o.(*appsv1.StatefulSet)
			return &s.ObjectMeta, &s.Spec.Template
		}},
	{Group: "apps", Kind: "DaemonSet", TemplatePath: specTemplate, Resource: "daemonsets", Version: "v1", Reviewed: true,
		Legacy:    removed116("extensions/v1beta1", "apps/v1beta2"),
		newObject: func() runtime.Object { return &appsv1.DaemonSet{} },
		template: func(o runtime.Object) (*metav1.ObjectMeta, *corev1.PodTemplateSpec) {
			d := o.(*appsv1.DaemonSet)
			return &d.ObjectMeta, &d.Spec.Template
		}},
	{Group: "apps", Kind: "ReplicaSet", TemplatePath: specTemplate, Resource: "replicasets", Version: "v1", Reviewed: true,
		Legacy:    removed116("extensions/v1beta1", "apps/v1beta2"),
		newObject: func() runtime.Object { return &appsv1.ReplicaSet{} },
		template: func(o runtime.Object) (*metav1.ObjectMeta, *corev1.PodTemplateSpec) {
			r := o.(*appsv1.ReplicaSet)
			return &r.ObjectMeta, &r.Spec.Template
		}},
	{Group: "batch", Kind: "Job", TemplatePath: specTemplate, Resource: "jobs", Version: "v1", Reviewed: true,
		newObject: func() runtime.Object { return &batchv1.Job{} },
		template: func(o runtime.Object) (*metav1.ObjectMeta, *corev1.PodTemplateSpec) {
			j := o.(*batchv1.Job)
			return &j.ObjectMeta, &j.Spec.Template
		}},
	{Group: "batch", Kind: "CronJob", TemplatePath: cronJobTemplate, Resource: "cronjobs", Version: "v1", Reviewed: true,
		Legacy:    []LegacyVersion{{"batch/v2alpha1", "1.21"}, {"batch/v1beta1", "1.25"}},
		newObject: func() runtime.Object { return &batchv1.CronJob{} },
		template: func(o runtime.Object) (*metav1.ObjectMeta, *corev1.PodTemplateSpec) {
			c := o.(*batchv1.CronJob)
			return &c.ObjectMeta, &c.Spec.JobTemplate.Spec.Template
		}},
	// Argo Rollouts: a custom resource, reviewed where its API is served
	// (Optional). A Rollout with spec.workloadRef has no template of its
	// own: its Pods use the referenced Deployment's.
	{Group: "argoproj.io", Kind: "Rollout", TemplatePath: specTemplate, Resource: "rollouts", Version: "v1alpha1", Reviewed: true, Optional: true,
		newObject: func() runtime.Object { return &Rollout{} },
		template: func(o runtime.Object) (*metav1.ObjectMeta, *corev1.PodTemplateSpec) {
			r := o.(*Rollout)
			return &r.ObjectMeta, r.Spec.Template
		},
		scaleDown: func(o runtime.Object) []ScaleDownDelay { return o.(*Rollout).Spec.Strategy.ScaleDownDelays() }},
	// The validating webhook is not registered for ReplicationControllers
	// (their Pods still meet the Pod webhooks); the plugin checks their
	// templates.
	{Group: "", Kind: "ReplicationController", TemplatePath: specTemplate, Resource: "replicationcontrollers", Version: "v1",
		newObject: func() runtime.Object { return &corev1.ReplicationController{} },
		template: func(o runtime.Object) (*metav1.ObjectMeta, *corev1.PodTemplateSpec) {
			r := o.(*corev1.ReplicationController)
			return &r.ObjectMeta, r.Spec.Template
		}},
}

// WorkloadKinds are the names of Workloads' kinds.
var WorkloadKinds = func() []string {
	out := make([]string, len(Workloads))
	for i, w := range Workloads {
		out[i] = w.Kind
	}
	return out
}()

// GroupVersion is the served group/version: "apps/v1", or "v1" for the core group.
func (w WorkloadKind) GroupVersion() string {
	if w.Group == "" {
		return w.Version
	}
	return w.Group + "/" + w.Version
}

// Pointer is the JSON pointer of the Pod template in the object.
func (w WorkloadKind) Pointer() string { return "/" + strings.Join(w.TemplatePath, "/") }

// New returns an empty object of the served version, for decoding.
func (w WorkloadKind) New() runtime.Object { return w.newObject() }

// LookupWorkload returns the workload kind named kind.
func LookupWorkload(kind string) (WorkloadKind, bool) {
	for _, w := range Workloads {
		if w.Kind == kind {
			return w, true
		}
	}
	return WorkloadKind{}, false
}

// LookupWorkloadVersion finds a workload kind by the apiVersion and kind an
// object is written with; legacy is set when that version is no longer
// served.
func LookupWorkloadVersion(apiVersion, kind string) (w WorkloadKind, legacy *LegacyVersion, ok bool) {
	w, ok = LookupWorkload(kind)
	switch {
	case !ok:
		return WorkloadKind{}, nil, false
	case apiVersion == w.GroupVersion():
		return w, nil, true
	}
	for i := range w.Legacy {
		if w.Legacy[i].GroupVersion == apiVersion {
			return w, &w.Legacy[i], true
		}
	}
	return WorkloadKind{}, nil, false
}

// ForTemplate targets the Pod template tpl of a workload of kind kind.
func ForTemplate(kind, namespace, name string, tpl *corev1.PodTemplateSpec) (Target, error) {
	w, ok := LookupWorkload(kind)
	if !ok {
		return Target{}, fmt.Errorf("unsupported kind %q: want one of %v", kind, WorkloadKinds)
	}
	root := field.NewPath(w.TemplatePath[0], w.TemplatePath[1:]...)
	return Target{
		Kind: kind, Namespace: namespace, Name: name,
		Meta: &tpl.ObjectMeta, Spec: &tpl.Spec,
		MetaPath: root.Child("metadata"), SpecPath: root.Child("spec"),
		Pointer: w.Pointer(), Template: true,
	}, nil
}

// ForWorkload targets the Pod template of a workload object (one of
// Workloads, decoded into the served version's type).
func ForWorkload(obj runtime.Object) (Target, error) {
	for _, w := range Workloads {
		if reflect.TypeOf(obj) != reflect.TypeOf(w.newObject()) {
			continue
		}
		meta, tpl := w.template(obj)
		if tpl == nil {
			return Target{}, fmt.Errorf("%s %s has no Pod template (%s)", w.Kind, meta.Name, strings.Join(w.TemplatePath, "."))
		}
		t, err := ForTemplate(w.Kind, meta.Namespace, meta.Name, tpl)
		if err == nil && w.scaleDown != nil {
			t.ScaleDown = w.scaleDown(obj)
		}
		return t, err
	}
	return Target{}, fmt.Errorf("unsupported kind %T: want one of %v", obj, WorkloadKinds)
}
