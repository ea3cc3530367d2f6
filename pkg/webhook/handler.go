package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// Paths of the webhooks on the webhook server.
const (
	// PathMutatePod: Pods, CREATE, mutating.
	PathMutatePod = "/mutate-v1-pod"
	// PathValidatePod: Pods, CREATE, validating.
	PathValidatePod = "/validate-v1-pod"
	// PathValidateWorkloads: Deployments, StatefulSets, DaemonSets,
	// ReplicaSets, Jobs and CronJobs, and Argo Rollouts' Rollouts where the
	// chart registers them, CREATE and UPDATE, validating.
	PathValidateWorkloads = "/validate-workloads"
)

// Config is what the handlers share.
type Config struct {
	// Options are the cluster defaults. ExcludedNamespaces must hold
	// kube-system and graceguard's own namespace: use server.Config.Excluded().
	Options mutate.Options
	// Namespaces reads the labels and annotations of a review's namespace.
	Namespaces NamespaceLookup
	// Metrics records decisions; nil records nothing.
	Metrics *Metrics
	// Log is the base logger of the endpoints built by Endpoints and Serve;
	// each review adds its object, resource, user and UID. The zero value
	// means controller-runtime's logger.
	Log logr.Logger
	// Limits bound the reviews in flight; the zero value means DefaultLimits.
	Limits Limits
	// Evidence reads the observer's reports for graceguard.io/max-work:
	// auto; nil gives such Pods the floor.
	Evidence EvidenceLookup
}

// Endpoints returns the three webhooks' HTTP handlers by path, to register
// on the webhook server. They share one guard: c.Limits bound them together.
func Endpoints(c Config) map[string]http.Handler {
	if c.Limits == (Limits{}) {
		c.Limits = DefaultLimits()
	}
	g := newGuard(c.Limits, c.Metrics)
	return map[string]http.Handler{
		PathMutatePod:         g.wrap(NameMutatePod, Serve(NewPodMutator(c), c.Log)),
		PathValidatePod:       g.wrap(NameValidatePod, Serve(NewPodValidator(c), c.Log)),
		PathValidateWorkloads: g.wrap(NameValidateWorkloads, Serve(NewWorkloadValidator(c), c.Log)),
	}
}

// Serve wraps an admission handler as an HTTP endpoint that reads and
// writes AdmissionReviews (v1 and v1beta1), answering as
// controller-runtime's admission.Webhook would (a body that is not an
// AdmissionReview: allowed false, code 400) but reading each review in one
// pass (Endpoint). Each review's logger is log with the review's object,
// resource, user and uid; the zero logger means controller-runtime's.
// Endpoints puts a guard in front of it, which gives each review its
// context (see guard.wrap).
func Serve(h admission.Handler, log logr.Logger) *Endpoint {
	return &Endpoint{handler: h, log: log}
}

// core is what the three handlers have in common.
//
// No handler looks at req.DryRun: graceguard has no side effects, so a
// dry run (kubectl apply --dry-run=server) must show exactly what the real
// request would get. Metrics count dry runs too: they are decisions a
// person saw, and the API server's own admission metrics count them alike.
type core struct {
	Config
	name Name
	// decodeObject reads a review's Pod: decodeAdmissionPod, except in
	// the benchmarks' "before" variant (export_test.go).
	decodeObject func(raw []byte, m *meter) (*corev1.Pod, []mutate.Unread, error)
}

func newCore(c Config, name Name) core {
	return core{Config: c, name: name, decodeObject: decodeAdmissionPod}
}

// pass answers a review the webhook does not act on: allowed, no patch.
func (c *core) pass(reason mutate.Reason) admission.Response {
	c.Metrics.record(c.name, DecisionSkipped, reason)
	return admission.Allowed("")
}

// errNoRequest is the answer to an AdmissionReview without a request: the
// API server always sends one, with a uid the answer must echo.
var errNoRequest = errors.New("the AdmissionReview has no request (no request.uid): nothing to review")

// invalid answers a review whose object cannot be evaluated: allowed false,
// code 400, with a message naming the problem. The API server shows it to
// the client as the webhook's denial.
func (c *core) invalid(ctx context.Context, req admission.Request, err error) admission.Response {
	err = boundedError(err)
	logf.FromContext(ctx).Info("cannot evaluate review", "webhook", c.name,
		"operation", req.Operation, "kind", kindName(req.Kind), "error", err.Error())
	c.Metrics.record(c.name, DecisionError, ReasonDecodeError)
	return admission.Errored(http.StatusBadRequest, err)
}

// namespace reads the settings of the review's namespace, finishing early
// enough to answer within the review's timeout.
func (c *core) namespace(ctx context.Context, name string) (mutate.Namespace, error) {
	if slices.Contains(c.Options.ExcludedNamespaces, name) {
		// Never read: mutate skips excluded namespaces by name, and Pods
		// of kube-system and of graceguard itself must not depend on this
		// webhook reaching the API server.
		return mutate.Namespace{Name: name}, nil
	}
	if c.Namespaces == nil {
		return mutate.Namespace{}, errors.New("no namespace lookup configured")
	}
	fallback := c.Limits.Timeout
	if fallback == 0 {
		fallback = DefaultLimits().Timeout
	}
	ctx, cancel := context.WithDeadline(ctx, lookupDeadline(ctx, fallback))
	defer cancel()
	ns, err := c.Namespaces.Namespace(ctx, name)
	if err != nil {
		return mutate.Namespace{}, err
	}
	ns.Name = name
	return ns, nil
}

// NamespaceUnavailableWarning is the warning the mutating webhook returns
// when it admits a Pod unchanged because it could not read the namespace.
const NamespaceUnavailableWarning = "metadata.namespace: graceguard could not read it; admitted without graceguard changes"

// unavailable answers a review whose namespace could not be read: allowed,
// unchanged.
//
// The namespace says whether graceguard applies at all (opt-in label) and
// how (mode, defaults). Denying would turn an API-server hiccup into
// failed Pod creation in every namespace the webhook matches, opted in or
// not, including the Pods that would bring the API server back (the
// webhook-blocks-the-cluster failure of vault-k8s#258). Patching blindly
// could change Pods whose owners never opted in. Allowing unchanged leaves
// the object as it would be without graceguard, the same as
// failurePolicy: Ignore would, but on purpose and visibly: an error log, the
// namespace-unavailable metric, and for the mutating webhook a warning the
// user can act on (recreate the Pod). The validating webhooks only log:
// for Pods the mutating webhook has just warned, and a workload's Pods
// meet both Pod webhooks again when they are created.
func (c *core) unavailable(ctx context.Context, err error, warn bool) admission.Response {
	logf.FromContext(ctx).Error(err, "namespace unavailable; admitting unchanged", "webhook", c.name)
	c.Metrics.record(c.name, DecisionError, ReasonNamespaceUnavailable)
	resp := admission.Allowed("")
	if warn {
		resp = resp.WithWarnings(NamespaceUnavailableWarning)
	}
	return resp
}

// busy answers a review that would keep more of its objects than the
// guard's budget has room for now (meter): shed like a review that found
// no room at all, 429, for the API server to apply its failure policy.
func (c *core) busy(ctx context.Context) admission.Response {
	logf.FromContext(ctx).Info("no room in the in-flight budget for what the review keeps; shed", "webhook", c.name)
	c.Metrics.record(c.name, DecisionError, ReasonOverloaded)
	return admission.Errored(http.StatusTooManyRequests, errBusy)
}

// expired answers a review whose deadline passed before it was decided:
// the API server has stopped waiting and applied the failure policy, so
// no more work is spent on it.
func (c *core) expired(ctx context.Context) admission.Response {
	logf.FromContext(ctx).Info("review deadline passed before a decision; not deciding", "webhook", c.name)
	c.Metrics.record(c.name, DecisionError, ReasonDeadline)
	return admission.Errored(http.StatusGatewayTimeout, context.DeadlineExceeded)
}

// respond turns a report into the admission response, records the
// decision and logs denials.
func (c *core) respond(ctx context.Context, r *mutate.Report) admission.Response {
	log := logf.FromContext(ctx)
	warnings := r.AdmissionWarnings()
	if err := r.Err(); err != nil {
		log.Info("denied", "webhook", c.name, "reason", r.Reason(), "object", r.ObjectRef(), "message", err.Error())
		c.Metrics.record(c.name, DecisionDenied, r.Reason())
		return denied(err).WithWarnings(warnings...)
	}
	resp := admission.Allowed("")
	d := DecisionAllowed
	switch ops := r.Patch(); {
	case r.Skip != "":
		d = DecisionSkipped
	case len(ops) > 0:
		// The report's operations, as they are: they only add, so every
		// field of the raw object survives, including fields these Go
		// types do not know (a diff of the re-encoded object would remove
		// them).
		d = DecisionMutated
		resp = admission.Patched("", ops...)
		c.Metrics.observeGrace(r.Grace)
	case len(warnings) > 0:
		d = DecisionWarned
	}
	c.Metrics.record(c.name, d, r.Reason())
	if v := log.V(1); v.Enabled() {
		v.Info("admitted", "webhook", c.name, "decision", d, "reason", r.Reason(), "object", r.ObjectRef(), "grace", r.Grace)
	}
	return resp.WithWarnings(warnings...)
}

// denied carries the whole status of an API error, so the client sees the
// 422, the reason Invalid and every field cause, as if the API server's own
// validation had refused the object. admission.Errored would keep only the
// message.
func denied(err error) admission.Response {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return admission.Denied(err.Error())
	}
	s := st.Status()
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &s}}
}

// kindName prints a GroupVersionKind for messages: "apps/v1 Deployment".
func kindName(k metav1.GroupVersionKind) string {
	if k.Kind == "" {
		return `""`
	}
	gv := k.Version
	if k.Group != "" {
		gv = k.Group + "/" + k.Version
	}
	return fmt.Sprintf("%s %s", gv, k.Kind)
}
