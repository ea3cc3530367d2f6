package mutate

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Target is a Pod, or the Pod template of a workload, seen the same way:
// the metadata whose annotations configure it and the spec to treat, with
// where both live in the object (for error paths and patches).
type Target struct {
	Kind, Namespace, Name string
	Meta                  *metav1.ObjectMeta
	Spec                  *corev1.PodSpec
	// MetaPath and SpecPath are the field paths of Meta and Spec in the object.
	MetaPath, SpecPath *field.Path
	// Pointer is the JSON pointer of the object holding metadata and spec:
	// "" for a Pod, "/spec/template" for a Deployment.
	Pointer string
	// Template is true for a workload's Pod template: the apiserver
	// never shows graceguard the Pods, so they are checked as they will be.
	Template bool
}

// ForPod targets a Pod.
func ForPod(pod *corev1.Pod) Target {
	// A controller-made Pod has only generateName at admission; that prefix
	// is what FailedCreate events show too.
	name := pod.Name
	if name == "" {
		name = pod.GenerateName
	}
	return Target{
		Kind: "Pod", Namespace: pod.Namespace, Name: name,
		Meta: &pod.ObjectMeta, Spec: &pod.Spec,
		MetaPath: field.NewPath("metadata"), SpecPath: field.NewPath("spec"),
	}
}

// WorkloadKind is a kind whose Pod template graceguard validates, and
// where in its objects the template lives.
type WorkloadKind struct {
	Group, Kind string
	// TemplatePath is the field path of the Pod template.
	TemplatePath []string
}

// Workloads are the kinds whose Pod templates graceguard validates.
var Workloads = []WorkloadKind{
	{"apps", "Deployment", []string{"spec", "template"}},
	{"apps", "StatefulSet", []string{"spec", "template"}},
	{"apps", "DaemonSet", []string{"spec", "template"}},
	{"apps", "ReplicaSet", []string{"spec", "template"}},
	{"batch", "Job", []string{"spec", "template"}},
	{"batch", "CronJob", []string{"spec", "jobTemplate", "spec", "template"}},
}

// WorkloadKinds are the names of Workloads' kinds.
var WorkloadKinds = func() []string {
	out := make([]string, len(Workloads))
	for i, w := range Workloads {
		out[i] = w.Kind
	}
	return out
}()

// LookupWorkload returns the workload kind named kind.
func LookupWorkload(kind string) (WorkloadKind, bool) {
	for _, w := range Workloads {
		if w.Kind == kind {
			return w, true
		}
	}
	return WorkloadKind{}, false
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
		Pointer: "/" + strings.Join(w.TemplatePath, "/"), Template: true,
	}, nil
}

// ForWorkload targets the Pod template of a Deployment, StatefulSet,
// DaemonSet, ReplicaSet, Job or CronJob.
func ForWorkload(obj runtime.Object) (Target, error) {
	var (
		meta *metav1.ObjectMeta
		tpl  *corev1.PodTemplateSpec
		kind string
	)
	switch o := obj.(type) {
	case *appsv1.Deployment:
		meta, tpl, kind = &o.ObjectMeta, &o.Spec.Template, "Deployment"
	case *appsv1.StatefulSet:
		meta, tpl, kind = &o.ObjectMeta, &o.Spec.Template, "StatefulSet"
	case *appsv1.DaemonSet:
		meta, tpl, kind = &o.ObjectMeta, &o.Spec.Template, "DaemonSet"
	case *appsv1.ReplicaSet:
		meta, tpl, kind = &o.ObjectMeta, &o.Spec.Template, "ReplicaSet"
	case *batchv1.Job:
		meta, tpl, kind = &o.ObjectMeta, &o.Spec.Template, "Job"
	case *batchv1.CronJob:
		meta, tpl, kind = &o.ObjectMeta, &o.Spec.JobTemplate.Spec.Template, "CronJob"
	default:
		return Target{}, fmt.Errorf("unsupported kind %T: want one of %v", obj, WorkloadKinds)
	}
	return ForTemplate(kind, meta.Namespace, meta.Name, tpl)
}

// NewWorkload returns an empty object of a workload kind, for decoding.
func NewWorkload(kind string) (runtime.Object, error) {
	switch kind {
	case "Deployment":
		return &appsv1.Deployment{}, nil
	case "StatefulSet":
		return &appsv1.StatefulSet{}, nil
	case "DaemonSet":
		return &appsv1.DaemonSet{}, nil
	case "ReplicaSet":
		return &appsv1.ReplicaSet{}, nil
	case "Job":
		return &batchv1.Job{}, nil
	case "CronJob":
		return &batchv1.CronJob{}, nil
	}
	return nil, fmt.Errorf("unsupported kind %q: want Pod or one of %v", kind, WorkloadKinds)
}

// container is one container graceguard may treat, with its place in the spec.
type container struct {
	c       *corev1.Container
	path    *field.Path
	pointer string
	sidecar bool // a native sidecar: an init container with restartPolicy Always
}

func (t Target) specPointer() string { return t.Pointer + "/spec" }
func (t Target) metaPointer() string { return t.Pointer + "/metadata" }

// containers lists regular containers and native sidecars, in order.
func (t Target) containers() []container {
	out := make([]container, 0, len(t.Spec.Containers)+len(t.Spec.InitContainers))
	for i := range t.Spec.InitContainers {
		c := &t.Spec.InitContainers[i]
		if isSidecar(c) {
			out = append(out, container{c, t.SpecPath.Child("initContainers").Index(i), t.specPointer() + "/initContainers/" + strconv.Itoa(i), true})
		}
	}
	for i := range t.Spec.Containers {
		out = append(out, container{&t.Spec.Containers[i], t.SpecPath.Child("containers").Index(i), t.specPointer() + "/containers/" + strconv.Itoa(i), false})
	}
	return out
}

// regularContainers lists the regular containers, in order.
func (t Target) regularContainers() []container {
	out := make([]container, len(t.Spec.Containers))
	for i := range t.Spec.Containers {
		out[i] = container{&t.Spec.Containers[i], t.SpecPath.Child("containers").Index(i), t.specPointer() + "/containers/" + strconv.Itoa(i), false}
	}
	return out
}

func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

func (t Target) grace() int64 {
	if t.Spec.TerminationGracePeriodSeconds == nil {
		return defaultGracePeriodSecond
	}
	return *t.Spec.TerminationGracePeriodSeconds
}

// deepCopy returns a target over copies of the metadata and spec.
func (t Target) deepCopy() Target {
	t.Meta = t.Meta.DeepCopy()
	t.Spec = t.Spec.DeepCopy()
	return t
}
