package mutate

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Workload is one kind of object whose Pods graceguard treats: the Pods it
// creates meet the Pod webhooks at admission, and its Pod template is
// checked as they will be. Workloads is the one table of them: the
// validating webhook, the kubectl plugin, the report's error kinds and the
// chart's tests read it.
type Workload struct {
	Kind     string
	Group    string // "" for the core group
	Resource string // the plural resource name, as in webhook rules and RBAC
	// Version is the version the API server serves today; Reviewed says
	// whether the validating webhook is registered for Group/Version.
	Version  string
	Reviewed bool
	// Legacy are older versions people still have in git. The API
	// server no longer serves them, so only the plugin reads them; the Pod
	// template has the same shape, so it is read as Version's.
	Legacy []LegacyVersion
	// Template is the JSON pointer of the Pod template in the object.
	Template string
	// new returns an empty object of the served version, for decoding;
	// template returns the object's metadata and its Pod template (nil
	// when the object has none).
	new      func() runtime.Object
	template func(runtime.Object) (*metav1.ObjectMeta, *corev1.PodTemplateSpec)
}

// LegacyVersion is an API version of a workload kind that is no longer served.
type LegacyVersion struct {
	GroupVersion string // "extensions/v1beta1"
	RemovedIn    string // the Kubernetes minor that stopped serving it: "1.16"
}

// Workloads are the kinds graceguard treats through a Pod template.
var Workloads = []Workload{
	{Kind: "Deployment", Group: "apps", Resource: "deployments", Version: "v1", Reviewed: true,
		Legacy:   []LegacyVersion{{"extensions/v1beta1", "1.16"}, {"apps/v1beta1", "1.16"}, {"apps/v1beta2", "1.16"}},
		Template: "/spec/template",
		new:      func() runtime.Object { return &appsv1.Deployment{} },
		template: func(o runtime.Object) (*metav1.ObjectMeta, *corev1.PodTemplateSpec) {
			d := o.(*appsv1.Deployment)
			return &d.ObjectMeta, &d.Spec.Template
		}},
	{Kind: "StatefulSet", Group: "apps", Resource: "statefulsets", Version: "v1", Reviewed: true,
		Legacy:   []LegacyVersion{{"apps/v1beta1", "1.16"}, {"apps/v1beta2", "1.16"}},
		Template: "/spec/template",
		new:      func() runtime.Object { return &appsv1.StatefulSet{} },
		template: func(o runtime.Object) (*metav1.ObjectMeta, *corev1.PodTemplateSpec) {
			s := o.(*appsv1.StatefulSet)
			return &s.ObjectMeta, &s.Spec.Template
		}},
	{Kind: "DaemonSet", Group: "apps", Resource: "daemonsets", Version: "v1", Reviewed: true,
		Legacy:   []LegacyVersion{{"extensions/v1beta1", "1.16"}, {"apps/v1beta2", "1.16"}},
		Template: "/spec/template",
		new:      func() runtime.Object { return &appsv1.DaemonSet{} },
		template: func(o runtime.Object) (*metav1.ObjectMeta, *corev1.PodTemplateSpec) {
			d := o.(*appsv1.DaemonSet)
			return &d.ObjectMeta, &d.Spec.Template
		}},
	{Kind: "ReplicaSet", Group: "apps", Resource: "replicasets", Version: "v1", Reviewed: true,
		Legacy:   []LegacyVersion{{"extensions/v1beta1", "1.16"}, {"apps/v1beta2", "1.16"}},
		Template: "/spec/template",
		new:      func() runtime.Object { return &appsv1.ReplicaSet{} },
		template: func(o runtime.Object) (*metav1.ObjectMeta, *corev1.PodTemplateSpec) {
			r := o.(*appsv1.ReplicaSet)
			return &r.ObjectMeta, &r.Spec.Template
		}},
	{Kind: "Job", Group: "batch", Resource: "jobs", Version: "v1", Reviewed: true,
		Template: "/spec/template",
		new:      func() runtime.Object { return &batchv1.Job{} },
		template: func(o runtime.Object) (*metav1.ObjectMeta, *corev1.PodTemplateSpec) {
			j := o.(*batchv1.Job)
			return &j.ObjectMeta, &j.Spec.Template
		}},
	{Kind: "CronJob", Group: "batch", Resource: "cronjobs", Version: "v1", Reviewed: true,
		Legacy:   []LegacyVersion{{"batch/v2alpha1", "1.21"}, {"batch/v1beta1", "1.25"}},
		Template: "/spec/jobTemplate/spec/template",
		new:      func() runtime.Object { return &batchv1.CronJob{} },
		template: func(o runtime.Object) (*metav1.ObjectMeta, *corev1.PodTemplateSpec) {
			c := o.(*batchv1.CronJob)
			return &c.ObjectMeta, &c.Spec.JobTemplate.Spec.Template
		}},
	// The validating webhook is not registered for ReplicationControllers
	// (their Pods still meet the Pod webhooks); the plugin checks their
	// templates.
	{Kind: "ReplicationController", Resource: "replicationcontrollers", Version: "v1",
		Template: "/spec/template",
		new:      func() runtime.Object { return &corev1.ReplicationController{} },
		template: func(o runtime.Object) (*metav1.ObjectMeta, *corev1.PodTemplateSpec) {
			r := o.(*corev1.ReplicationController)
			return &r.ObjectMeta, r.Spec.Template
		}},
}

// GroupVersion is the served group/version: "apps/v1", or "v1" for the core group.
func (w Workload) GroupVersion() string {
	if w.Group == "" {
		return w.Version
	}
	return w.Group + "/" + w.Version
}

// LookupWorkload finds a workload kind by the apiVersion and kind an object
// is written with; legacy is set when that version is no longer served.
func LookupWorkload(apiVersion, kind string) (w Workload, legacy *LegacyVersion, ok bool) {
	for _, w := range Workloads {
		if w.Kind != kind {
			continue
		}
		if apiVersion == w.GroupVersion() {
			return w, nil, true
		}
		for i := range w.Legacy {
			if w.Legacy[i].GroupVersion == apiVersion {
				return w, &w.Legacy[i], true
			}
		}
	}
	return Workload{}, nil, false
}

// LookupWorkloadKind finds a workload kind by its served group and kind, as
// an admission review names them.
func LookupWorkloadKind(group, kind string) (Workload, bool) {
	i := slices.IndexFunc(Workloads, func(w Workload) bool { return w.Group == group && w.Kind == kind })
	if i < 0 {
		return Workload{}, false
	}
	return Workloads[i], true
}

// WorkloadKinds are the kinds of Workloads, in order.
var WorkloadKinds = func() []string {
	out := make([]string, len(Workloads))
	for i, w := range Workloads {
		out[i] = w.Kind
	}
	return out
}()

// ReviewedWorkloads lists the workloads the validating webhook reviews as
// "group/version Kind, ...", for messages.
func ReviewedWorkloads() string {
	var out []string
	for _, w := range Workloads {
		if w.Reviewed {
			out = append(out, w.GroupVersion()+" "+w.Kind)
		}
	}
	return strings.Join(out, ", ")
}

// New returns an empty object of the served version, for decoding.
func (w Workload) New() runtime.Object { return w.new() }

// NewWorkload returns an empty object of a workload kind, for decoding.
func NewWorkload(kind string) (runtime.Object, error) {
	for _, w := range Workloads {
		if w.Kind == kind {
			return w.new(), nil
		}
	}
	return nil, fmt.Errorf("unsupported kind %q: want Pod or one of %v", kind, WorkloadKinds)
}

// ForWorkload targets the Pod template of a workload object (one of
// Workloads, decoded into the served version's type).
func ForWorkload(obj runtime.Object) (Target, error) {
	for _, w := range Workloads {
		if reflect.TypeOf(obj) != reflect.TypeOf(w.new()) {
			continue
		}
		meta, tpl := w.template(obj)
		if tpl == nil {
			return Target{}, fmt.Errorf("%s %s has no Pod template (%s)", w.Kind, meta.Name, pointerPath(w.Template))
		}
		root := pointerPath(w.Template)
		return Target{
			Kind: w.Kind, Namespace: meta.Namespace, Name: meta.Name,
			Meta: &tpl.ObjectMeta, Spec: &tpl.Spec,
			MetaPath: root.Child("metadata"), SpecPath: root.Child("spec"),
			Pointer: w.Template, Template: true,
		}, nil
	}
	return Target{}, fmt.Errorf("unsupported kind %T: want one of %v", obj, WorkloadKinds)
}

// pointerPath turns a JSON pointer of plain field names into a field path.
func pointerPath(ptr string) *field.Path {
	parts := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	return field.NewPath(parts[0], parts[1:]...)
}
