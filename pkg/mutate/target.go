package mutate

import (
	"fmt"
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
	// Unread are the parts of the object its reader counted but did not
	// read (the webhook's decoder bounds what it keeps); each is a finding.
	Unread []Unread
	// ScaleDown are the delays before a rollout tool scales down the Pods
	// of this template it moved traffic away from (a Rollout's strategy);
	// each must cover the Pods' routing term (WarnScaleDownEarly).
	ScaleDown []ScaleDownDelay
}

// Unread is a part of an object the webhook's decoder did not read: a list
// longer than graceguard reads, or, past the most it keeps of one object,
// the rest of the object. graceguard cannot decide on what it has not
// read, so each is a finding (unreadFindings), never a silent cut.
type Unread struct {
	// Path is the field, as people read it: spec.containers[0].ports.
	Path string
	// N is how many elements the list has (0 for the rest of an object),
	// Limit how many graceguard reads; What names the elements.
	N, Limit int
	What     string
}

// unread reports whether the reader did not read all of the list at path.
func (t Target) unread(path *field.Path) bool {
	p := path.String()
	for _, u := range t.Unread {
		if u.Path == p {
			return true
		}
	}
	return false
}

// unreadFindings are the findings of what the reader did not read.
func unreadFindings(t Target) []Finding {
	var out []Finding
	for _, u := range t.Unread {
		reason := DenyTooLarge
		if u.What == "containers" {
			reason = DenyTooManyContainers
		}
		err := &field.Error{Type: field.ErrorTypeTooMany, Field: u.Path, BadValue: int64(u.N),
			Detail: fmt.Sprintf("has %d %s; graceguard reads at most %d and cannot check the rest", u.N, u.What, u.Limit)}
		if u.N == 0 {
			err = &field.Error{Type: field.ErrorTypeTooMany, Field: u.Path, BadValue: int64(u.Limit),
				Detail: fmt.Sprintf("graceguard reads at most %d bytes of what it decides on (containers, hooks, probes, ports, its annotations) and this object has more from here on; it cannot check it", u.Limit)}
		}
		out = append(out, Finding{reason, err})
	}
	return out
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
		if isSidecar(&t.Spec.InitContainers[i]) {
			out = append(out, t.initContainer(i))
		}
	}
	return append(out, t.regularContainers()...)
}

// regularContainers lists the regular containers, in order.
func (t Target) regularContainers() []container {
	out := make([]container, len(t.Spec.Containers))
	for i := range t.Spec.Containers {
		out[i] = t.container(i)
	}
	return out
}

// container is the regular container i, initContainer the init container
// i (a native sidecar when it restarts Always), with their places.
func (t Target) container(i int) container {
	return container{&t.Spec.Containers[i], t.SpecPath.Child("containers").Index(i), t.specPointer() + "/containers/" + strconv.Itoa(i), false}
}

func (t Target) initContainer(i int) container {
	c := &t.Spec.InitContainers[i]
	return container{c, t.SpecPath.Child("initContainers").Index(i), t.specPointer() + "/initContainers/" + strconv.Itoa(i), isSidecar(c)}
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
