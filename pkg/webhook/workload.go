package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// WorkloadValidator is the validating webhook for the Pod templates of the
// kinds mutate.Workloads marks Reviewed: Deployments, StatefulSets,
// DaemonSets, ReplicaSets, Jobs and CronJobs, and Argo Rollouts' Rollouts
// where the chart registers them.
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
	if req.UID == "" {
		return h.invalid(ctx, req, errNoRequest)
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return h.pass(mutate.SkipNotApplicable)
	}
	w, err := h.decodeWorkload(ctx, req, req.Object, "object")
	if errors.Is(err, errBusy) {
		return h.busy(ctx)
	}
	if err != nil {
		return h.invalid(ctx, req, err)
	}
	if req.Operation == admissionv1.Update {
		old, err := h.decodeWorkload(ctx, req, req.OldObject, "oldObject")
		if errors.Is(err, errBusy) {
			return h.busy(ctx)
		}
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
		if bytes.Equal(old.raw, w.raw) {
			return h.pass(mutate.SkipNotApplicable)
		}
	}
	if w.noTemplate && w.target.Kind == "Rollout" {
		// spec.workloadRef: its Pods use the referenced Deployment's
		// template, which this webhook reviews as that Deployment's.
		return h.pass(mutate.SkipNotApplicable)
	}
	ns, err := h.namespace(ctx, w.target.Namespace)
	if ctx.Err() != nil {
		return h.expired(ctx)
	}
	if err != nil {
		return h.unavailable(ctx, err, false)
	}
	return h.respond(ctx, mutate.Validate(w.target, ns, h.Options))
}

// decodeWorkload decodes the review's object (or oldObject) and targets
// its Pod template. The request's namespace is the authority.
func (c *core) decodeWorkload(ctx context.Context, req admission.Request, raw runtime.RawExtension, what string) (leanWorkload, error) {
	w, ok := mutate.LookupWorkload(req.Kind.Kind)
	if !ok || !w.Reviewed || w.Group != req.Kind.Group {
		return leanWorkload{}, fmt.Errorf("unsupported kind %s: %s reviews %s", kindName(req.Kind), c.name, workloadList())
	}
	if len(raw.Raw) == 0 {
		return leanWorkload{}, fmt.Errorf("decoding %s: the review has no %s", req.Kind.Kind, what)
	}
	lw, err := decodeAdmissionWorkload(w, raw.Raw, meterFrom(ctx))
	if errors.Is(err, errBusy) {
		return leanWorkload{}, err
	}
	if err != nil {
		return leanWorkload{}, fmt.Errorf("decoding %s %s: %w", req.Kind.Kind, what, err)
	}
	if req.Namespace != "" {
		lw.target.Namespace = req.Namespace
	}
	return lw, nil
}

// workloadList names the workload kinds by group for messages:
// "apps/v1 Deployment, StatefulSet, DaemonSet, ReplicaSet and batch/v1 Job,
// CronJob and argoproj.io/v1alpha1 Rollout".
func workloadList() string {
	var groups []string
	byGroup := map[string][]string{}
	for _, w := range mutate.Workloads {
		if !w.Reviewed {
			continue
		}
		if _, ok := byGroup[w.Group]; !ok {
			groups = append(groups, w.Group)
		}
		byGroup[w.Group] = append(byGroup[w.Group], w.Kind)
	}
	parts := make([]string, len(groups))
	for i, g := range groups {
		w, _ := mutate.LookupWorkload(byGroup[g][0])
		parts[i] = w.GroupVersion() + " " + strings.Join(byGroup[g], ", ")
	}
	return strings.Join(parts, " and ")
}
