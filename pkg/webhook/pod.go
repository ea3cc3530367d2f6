package webhook

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// PodMutator is the mutating webhook for Pods: on CREATE it adds what
// mutate.Mutate decides (preStop hooks, probes, grace, the budget
// annotation) as add-only JSON patch operations, with warnings.
type PodMutator struct{ core }

// NewPodMutator returns the mutating Pod handler.
func NewPodMutator(c Config) *PodMutator { return &PodMutator{newCore(c, NameMutatePod)} }

// Handle answers one review. Pod lifecycle, probes and grace are
// immutable after creation, so only CREATE is acted on; every other
// operation passes through allowed and unpatched.
func (h *PodMutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return h.pass(mutate.SkipNotApplicable)
	}
	pod, err := h.decodePod(req)
	if err != nil {
		return h.invalid(ctx, req, err)
	}
	ns, err := h.namespace(ctx, pod.Namespace)
	if err != nil {
		return h.unavailable(ctx, err, true)
	}
	return h.respond(ctx, mutate.Mutate(mutate.ForPod(pod), ns, h.Options))
}

// PodValidator is the validating webhook for Pods: on CREATE it refuses,
// with a 422 naming each field, what mutate.Validate denies.
type PodValidator struct{ core }

// NewPodValidator returns the validating Pod handler.
func NewPodValidator(c Config) *PodValidator { return &PodValidator{newCore(c, NameValidatePod)} }

// Handle answers one review; only CREATE is acted on, as for PodMutator.
func (h *PodValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return h.pass(mutate.SkipNotApplicable)
	}
	pod, err := h.decodePod(req)
	if err != nil {
		return h.invalid(ctx, req, err)
	}
	ns, err := h.namespace(ctx, pod.Namespace)
	if err != nil {
		return h.unavailable(ctx, err, false)
	}
	return h.respond(ctx, mutate.Validate(mutate.ForPod(pod), ns, h.Options))
}

// decodePod decodes the review's Pod. The request's namespace is the
// authority: a Pod created from a manifest without one carries none.
func (c *core) decodePod(req admission.Request) (*corev1.Pod, error) {
	if req.Kind.Group != "" || req.Kind.Kind != "Pod" {
		return nil, fmt.Errorf("unsupported kind %s: %s reviews only v1 Pod", kindName(req.Kind), c.name)
	}
	pod := &corev1.Pod{}
	if err := c.decoder.Decode(req, pod); err != nil {
		return nil, fmt.Errorf("decoding Pod: %w", err)
	}
	if req.Namespace != "" {
		pod.Namespace = req.Namespace
	}
	return pod, nil
}
