package webhook

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// WorkloadValidator is the validating webhook for the Pod templates of the
// workloads mutate.Workloads marks Reviewed (Deployments, StatefulSets,
// DaemonSets, ReplicaSets, Jobs and CronJobs).
// It checks each template as its Pods will be after mutation, so a
// template whose Pods would be refused is refused at `kubectl apply` time,
// not later as a FailedCreate event on a ReplicaSet. It never patches.
type WorkloadValidator struct{ core }

// NewWorkloadValidator returns the validating workload handler.
func NewWorkloadValidator(c Config) *WorkloadValidator {
	return &WorkloadValidator{newCore(c, NameValidateWorkloads)}
}

// Handle answers one review: CREATE and UPDATE are validated, anything
// else passes.
func (h *WorkloadValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return h.pass(mutate.SkipNotApplicable)
	}
	t, err := h.decodeWorkload(req, req.Object, "object")
	if err != nil {
		return h.invalid(ctx, req, err)
	}
	if req.Operation == admissionv1.Update {
		old, err := h.decodeWorkload(req, req.OldObject, "oldObject")
		if err != nil {
			return h.invalid(ctx, req, err)
		}
		// An UPDATE that leaves the Pod template as it was (scaling, an
		// HPA or a rollout tool writing replicas, labels on the workload
		// itself) is not judged again: the template creates no new Pods,
		// and refusing it because its Pods would now be refused (say, after
		// the namespace's defaults changed) would block unrelated and
		// often urgent changes like scaling during an incident. The Pods
		// it creates still meet both Pod webhooks.
		if equality.Semantic.DeepEqual(*old.Meta, *t.Meta) && equality.Semantic.DeepEqual(*old.Spec, *t.Spec) {
			return h.pass(mutate.SkipNotApplicable)
		}
	}
	ns, err := h.namespace(ctx, t.Namespace)
	if err != nil {
		return h.unavailable(ctx, err, false)
	}
	return h.respond(ctx, mutate.Validate(t, ns, h.Options))
}

// decodeWorkload decodes the review's object (or oldObject) and targets
// its Pod template.
func (c *core) decodeWorkload(req admission.Request, raw runtime.RawExtension, what string) (mutate.Target, error) {
	w, ok := mutate.LookupWorkloadKind(req.Kind.Group, req.Kind.Kind)
	if !ok || !w.Reviewed || req.Kind.Version != w.Version {
		return mutate.Target{}, fmt.Errorf("unsupported kind %s: %s reviews %s",
			kindName(req.Kind), c.name, mutate.ReviewedWorkloads())
	}
	obj := w.New()
	if len(raw.Raw) == 0 {
		return mutate.Target{}, fmt.Errorf("decoding %s: the review has no %s", req.Kind.Kind, what)
	}
	if err := c.decoder.DecodeRaw(raw, obj); err != nil {
		return mutate.Target{}, fmt.Errorf("decoding %s %s: %w", req.Kind.Kind, what, err)
	}
	if m, err := meta.Accessor(obj); err == nil && req.Namespace != "" {
		m.SetNamespace(req.Namespace)
	}
	return mutate.ForWorkload(obj)
}
