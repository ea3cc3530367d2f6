package webhook

import (
	"errors"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// admissionPod is the part of a Pod that pkg/mutate reads. Decoding only it
// skips what graceguard never looks at (env vars, volumes, resources,
// managedFields, status): the JSON is still scanned, but nothing of it is
// allocated, which is most of the cost of a big Pod. Patches are built from
// the Report alone and only add, so nothing left out here can be lost.
type admissionPod struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        struct {
		Name         string            `json:"name"`
		GenerateName string            `json:"generateName"`
		Namespace    string            `json:"namespace"`
		Labels       map[string]string `json:"labels"`
		Annotations  map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Containers          []admissionContainer `json:"containers"`
		InitContainers      []admissionContainer `json:"initContainers"`
		EphemeralContainers []struct {
			Name string `json:"name"`
		} `json:"ephemeralContainers"`
		TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds"`
	} `json:"spec"`
}

type admissionContainer struct {
	Name           string                         `json:"name"`
	Command        []string                       `json:"command"`
	Args           []string                       `json:"args"`
	Ports          []corev1.ContainerPort         `json:"ports"`
	Lifecycle      *corev1.Lifecycle              `json:"lifecycle"`
	ReadinessProbe *corev1.Probe                  `json:"readinessProbe"`
	LivenessProbe  *corev1.Probe                  `json:"livenessProbe"`
	StartupProbe   *corev1.Probe                  `json:"startupProbe"`
	RestartPolicy  *corev1.ContainerRestartPolicy `json:"restartPolicy"`
	// Env is kept raw and read only for Istio's proxy, whose environment
	// says how long it drains (pkg/mutate/mesh.go): env is most of a big
	// Pod's bytes, and no other container's is needed.
	Env jsontext.Value `json:"env"`
}

func (c admissionContainer) container() corev1.Container {
	out := corev1.Container{Name: c.Name, Command: c.Command, Args: c.Args, Ports: c.Ports, Lifecycle: c.Lifecycle,
		ReadinessProbe: c.ReadinessProbe, LivenessProbe: c.LivenessProbe, StartupProbe: c.StartupProbe, RestartPolicy: c.RestartPolicy}
	if c.Name == mutate.ContainerIstioProxy && len(c.Env) > 0 {
		// A malformed env would have failed the whole decode already.
		_ = jsonv2.Unmarshal(c.Env, &out.Env, decodeOptions)
	}
	return out
}

// decodeOptions make encoding/json/v2 (go-json-experiment/json, the
// standard library's v2 from Go 1.27) read a Pod as the API machinery's
// decoder does: field names case-sensitive (v2's default), unknown fields
// skipped, a repeated name's last value kept, invalid UTF-8 replaced.
// FuzzLeanDecodeReadsLikeTheAPIMachinery holds it to that.
var decodeOptions = jsonv2.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// decodeAdmissionPod decodes what graceguard reads of a Pod. v2 reads the
// JSON in one pass; v1 (sigs.k8s.io/json) validates all of it first and
// then scans it again, which was most of the handler's own cost
// (docs/benchmarks.md).
func decodeAdmissionPod(raw runtime.RawExtension) (*corev1.Pod, error) {
	if len(raw.Raw) == 0 {
		return nil, errors.New("there is no content to decode")
	}
	var a admissionPod
	if err := jsonv2.Unmarshal(raw.Raw, &a, decodeOptions); err != nil {
		return nil, err
	}
	if (a.APIVersion != "" && a.APIVersion != "v1") || (a.Kind != "" && a.Kind != "Pod") {
		return nil, fmt.Errorf("the object is %s %s, not v1 Pod", a.APIVersion, a.Kind)
	}
	pod := &corev1.Pod{TypeMeta: a.TypeMeta}
	pod.Name, pod.GenerateName, pod.Namespace, pod.Annotations = a.Metadata.Name, a.Metadata.GenerateName, a.Metadata.Namespace, a.Metadata.Annotations
	pod.Labels = a.Metadata.Labels
	pod.Spec.TerminationGracePeriodSeconds = a.Spec.TerminationGracePeriodSeconds
	if n := len(a.Spec.Containers); n > 0 {
		pod.Spec.Containers = make([]corev1.Container, n)
		for i, c := range a.Spec.Containers {
			pod.Spec.Containers[i] = c.container()
		}
	}
	if n := len(a.Spec.InitContainers); n > 0 {
		pod.Spec.InitContainers = make([]corev1.Container, n)
		for i, c := range a.Spec.InitContainers {
			pod.Spec.InitContainers[i] = c.container()
		}
	}
	for _, e := range a.Spec.EphemeralContainers {
		pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: e.Name}})
	}
	return pod, nil
}
