package webhook

import (
	"bytes"
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
		// OwnerReferences name the workload, whose shutdown report
		// graceguard.io/max-work: auto reads.
		OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
	} `json:"metadata"`
	Spec admissionSpec `json:"spec"`
}

// admissionSpec is the part of a PodSpec that pkg/mutate reads.
type admissionSpec struct {
	Containers          []admissionContainer `json:"containers"`
	InitContainers      []admissionContainer `json:"initContainers"`
	EphemeralContainers []struct {
		Name string `json:"name"`
	} `json:"ephemeralContainers"`
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds"`
}

// podSpec converts the lean spec into the PodSpec pkg/mutate takes.
func (a admissionSpec) podSpec() corev1.PodSpec {
	var spec corev1.PodSpec
	spec.TerminationGracePeriodSeconds = a.TerminationGracePeriodSeconds
	if n := len(a.Containers); n > 0 {
		spec.Containers = make([]corev1.Container, n)
		for i, c := range a.Containers {
			spec.Containers[i] = c.container()
		}
	}
	if n := len(a.InitContainers); n > 0 {
		spec.InitContainers = make([]corev1.Container, n)
		for i, c := range a.InitContainers {
			spec.InitContainers[i] = c.container()
		}
	}
	for _, e := range a.EphemeralContainers {
		spec.EphemeralContainers = append(spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: e.Name}})
	}
	return spec
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
		out.Env = decodeEnv(c.Env)
	}
	return out
}

// decodeEnv reads a container's env. It is a function of its own so that
// container() does not take its result's address, which would move every
// container of a big Pod to the heap. A malformed env fails the whole
// decode before this is called.
func decodeEnv(raw jsontext.Value) []corev1.EnvVar {
	var env []corev1.EnvVar
	_ = jsonv2.Unmarshal(raw, &env, decodeOptions)
	return env
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
	pod := &corev1.Pod{TypeMeta: a.TypeMeta, Spec: a.Spec.podSpec()}
	pod.Name, pod.GenerateName, pod.Namespace = a.Metadata.Name, a.Metadata.GenerateName, a.Metadata.Namespace
	pod.Labels, pod.Annotations, pod.OwnerReferences = a.Metadata.Labels, a.Metadata.Annotations, a.Metadata.OwnerReferences
	return pod, nil
}

// admissionWorkload is the part of a workload that pkg/mutate reads: its
// name and its Pod template, wherever the kind keeps it.
type admissionWorkload struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Template    rawTemplate `json:"template"`
		JobTemplate struct {
			Spec struct {
				Template rawTemplate `json:"template"`
			} `json:"spec"`
		} `json:"jobTemplate"`
	} `json:"spec"`
}

// rawTemplate is a workload's Pod template, decoded in the pass that reads
// the workload and located in the workload's JSON (start to end), so that
// an UPDATE can tell whether the template changed at all, not only in the
// fields graceguard reads, without a copy of it.
type rawTemplate struct {
	tpl        admissionTemplate
	start, end int64
}

func (t *rawTemplate) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	// A repeated name: the last template is the template, as a whole.
	*t = rawTemplate{}
	start := dec.InputOffset()
	if err := jsonv2.UnmarshalDecode(dec, &t.tpl); err != nil {
		return err
	}
	t.start, t.end = start, dec.InputOffset()
	return nil
}

// in is the template's JSON in raw, the workload it was decoded from.
func (t *rawTemplate) in(raw []byte) []byte {
	// start is just after the name's colon: before any space.
	return bytes.TrimLeft(raw[t.start:t.end], " \t\r\n")
}

type admissionTemplate struct {
	Metadata struct {
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec admissionSpec `json:"spec"`
}

// leanWorkload is a decoded workload: its Pod template as a target, and the
// template's JSON as sent (part of the review's body, not a copy).
type leanWorkload struct {
	target mutate.Target
	raw    []byte
}

// decodeAdmissionWorkload decodes what graceguard reads of a workload of
// kind w, in one pass like decodeAdmissionPod: a Deployment with 10,000
// containers costs what its annotations and probes do, not what its env
// vars, volumes and resources would.
func decodeAdmissionWorkload(w mutate.WorkloadKind, raw []byte) (leanWorkload, error) {
	if len(raw) == 0 {
		return leanWorkload{}, errors.New("there is no content to decode")
	}
	var a admissionWorkload
	if err := jsonv2.Unmarshal(raw, &a, decodeOptions); err != nil {
		return leanWorkload{}, err
	}
	gv := w.Group + "/v1"
	if (a.APIVersion != "" && a.APIVersion != gv) || (a.Kind != "" && a.Kind != w.Kind) {
		return leanWorkload{}, fmt.Errorf("the object is %s %s, not %s %s", a.APIVersion, a.Kind, gv, w.Kind)
	}
	rt := &a.Spec.Template
	if w.Kind == "CronJob" {
		rt = &a.Spec.JobTemplate.Spec.Template
	}
	at := rt.tpl
	tpl := &corev1.PodTemplateSpec{Spec: at.Spec.podSpec()}
	tpl.Annotations = at.Metadata.Annotations
	t, err := mutate.ForTemplate(w.Kind, a.Metadata.Namespace, a.Metadata.Name, tpl)
	if err != nil {
		return leanWorkload{}, err
	}
	return leanWorkload{target: t, raw: rt.in(raw)}, nil
}
