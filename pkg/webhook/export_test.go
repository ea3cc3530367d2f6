package webhook

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// NewPodMutatorFullDecode is the mutating Pod handler as graceguard first
// built it: the whole Pod decoded by the API machinery's decoder
// (admission.Decoder) instead of decodeAdmissionPod. Only the benchmarks
// use it, as the "before" beside NewPodMutator's "after", in one run.
func NewPodMutatorFullDecode(c Config) *PodMutator {
	m := NewPodMutator(c)
	m.decodeObject = func(raw runtime.RawExtension) (*corev1.Pod, error) {
		pod := &corev1.Pod{}
		if err := m.decoder.DecodeRaw(raw, pod); err != nil {
			return nil, err
		}
		return pod, nil
	}
	return m
}
