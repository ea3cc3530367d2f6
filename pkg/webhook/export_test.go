package webhook

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// NewPodMutatorFullDecode is the mutating Pod handler as graceguard first
// built it: the whole Pod decoded by the API machinery's decoder
// (admission.Decoder) instead of decodeAdmissionPod. Only the benchmarks
// use it, as the "before" beside NewPodMutator's "after", in one run.
func NewPodMutatorFullDecode(c Config) *PodMutator {
	m := NewPodMutator(c)
	s := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(s))
	decoder := admission.NewDecoder(s)
	m.decodeObject = func(raw runtime.RawExtension) (*corev1.Pod, error) {
		pod := &corev1.Pod{}
		if err := decoder.DecodeRaw(raw, pod); err != nil {
			return nil, err
		}
		return pod, nil
	}
	return m
}
