package mutate

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// Observed is what the observer recorded for the Pod's workload, for
	// graceguard.io/max-work: auto; nil when there is none (or no auto).
	Observed *Observed
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
