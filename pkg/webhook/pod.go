package webhook

import (
	"context"
	"errors"
	"fmt"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// PodMutator is the mutating webhook for Pods: on CREATE it adds what
// mutate.Mutate decides (preStop hooks, probes, grace, the budget
// annotation) as add-only JSON patch operations, with warnings. A Pod that
// the validating webhook would refuse as it leaves graceguard (a bad
// annotation, a budget over the cap, a hook longer than the grace of a
// container graceguard does not treat) is refused here, with the same
// message: then a Pod that graceguard admits carries graceguard's record
// of what it applied, which the validating webhook's CEL condition reads
// (docs/admission.md).
type PodMutator struct{ podHandler }

// NewPodMutator returns the mutating Pod handler. When the namespace cannot
// be read it admits unchanged and says so in a warning.
func NewPodMutator(c Config) *PodMutator {
	return &PodMutator{podHandler{core: newCore(c, NameMutatePod), decide: mutateThenValidate, warnUnavailable: true, choosesAutoWork: true}}
}

// mutateThenValidate is the mutating webhook's decision: what Mutate
// changes, unless Validate refuses the Pod as Mutate leaves it. In warn
// mode Validate refuses nothing, so warn mode only warns, as before.
func mutateThenValidate(t mutate.Target, ns mutate.Namespace, opts mutate.Options) *mutate.Report {
	r := mutate.Mutate(t, ns, opts)
	if r.Mode == mutate.ModeWarn {
		return r
	}
	// t is the Pod as mutated: Mutate changes it in place in enforce mode.
	v := mutate.ValidateMutated(t, ns, opts)
	// A stop signal is judged on the Pod as stored, by the validating
	// webhook only: the API server drops lifecycle.stopSignal after the
	// mutating webhooks where its feature gate (ContainerStopSignals, alpha
	// through 1.37) is off, and a Pod must not be refused for a field
	// that is not there.
	v.Violations = slices.DeleteFunc(v.Violations, func(f mutate.Finding) bool { return f.Reason == mutate.DenyStopSignalKills })
	if !v.Denied() {
		return r
	}
	// The advice the Pod would have got with its changes comes with the
	// refusal, as it came before from the mutating call beside the
	// validating webhook's refusal.
	v.Warnings = append(r.Warnings, v.Warnings...)
	return v
}

// PodValidator is the validating webhook for Pods: on CREATE it refuses,
// with a 422 naming each field, what mutate.Validate denies.
type PodValidator struct{ podHandler }

// NewPodValidator returns the validating Pod handler.
func NewPodValidator(c Config) *PodValidator {
	return &PodValidator{podHandler{core: newCore(c, NameValidatePod), decide: mutate.Validate}}
}

// podHandler is what both Pod webhooks do around their decision.
type podHandler struct {
	core
	decide func(mutate.Target, mutate.Namespace, mutate.Options) *mutate.Report
	// warnUnavailable adds a warning when the namespace cannot be read.
	warnUnavailable bool
	// choosesAutoWork reads the workload's shutdown report for
	// graceguard.io/max-work: auto. Only the mutating webhook chooses; the
	// validating one checks what it recorded in graceguard.io/budget.
	choosesAutoWork bool
}

// Handle answers one review. Pod lifecycle, probes and grace are
// immutable after creation, so only CREATE is acted on; every other
// operation passes through allowed and unpatched.
func (h *podHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.UID == "" {
		return h.invalid(ctx, req, errNoRequest)
	}
	if req.Operation != admissionv1.Create {
		return h.pass(mutate.SkipNotApplicable)
	}
	pod, unread, err := h.decodePod(ctx, req)
	if errors.Is(err, errBusy) {
		return h.busy(ctx)
	}
	if err != nil {
		return h.invalid(ctx, req, err)
	}
	ns, err := h.namespace(ctx, pod.Namespace)
	if ctx.Err() != nil {
		return h.expired(ctx)
	}
	if err != nil {
		return h.unavailable(ctx, err, h.warnUnavailable)
	}
	t := mutate.ForPod(pod)
	t.Unread = unread
	if h.choosesAutoWork && h.Evidence != nil && mutate.WantsAutoWork(pod.Annotations, ns.Annotations) &&
		pod.Annotations[mutate.AnnotationBudget] == "" {
		t.Observed = h.Evidence.Observed(ctx, pod)
	}
	return h.respond(ctx, h.decide(t, ns, h.Options))
}

// decodePod decodes the review's Pod. The request's namespace is the
// authority: a Pod created from a manifest without one carries none.
func (c *core) decodePod(ctx context.Context, req admission.Request) (*corev1.Pod, []mutate.Unread, error) {
	if req.Kind.Group != "" || req.Kind.Kind != "Pod" {
		return nil, nil, fmt.Errorf("unsupported kind %s: %s reviews only v1 Pod", kindName(req.Kind), c.name)
	}
	pod, unread, err := c.decodeObject(req.Object.Raw, meterFrom(ctx))
	if errors.Is(err, errBusy) {
		return nil, nil, err
	}
	if err != nil {
		return nil, nil, fmt.Errorf("decoding Pod: %w", err)
	}
	if req.Namespace != "" {
		pod.Namespace = req.Namespace
	}
	return pod, unread, nil
}
