package webhook

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/graceguard/graceguard/pkg/mutate"
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
	m.decodeObject = func(raw []byte, _ *meter) (*corev1.Pod, []mutate.Unread, error) {
		pod := &corev1.Pod{}
		if err := decoder.DecodeRaw(runtime.RawExtension{Raw: raw}, pod); err != nil {
			return nil, nil, err
		}
		return pod, nil, nil
	}
	return m
}

// NamespaceLookupFunc adapts a function to NamespaceLookup.
type NamespaceLookupFunc func(ctx context.Context, name string) (mutate.Namespace, error)

// Namespace calls f.
func (f NamespaceLookupFunc) Namespace(ctx context.Context, name string) (mutate.Namespace, error) {
	return f(ctx, name)
}

// state is what the queue holds now.
func (a *queue) state() (busy, waiting int, service time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.busy, a.waiting.Len(), a.service
}
