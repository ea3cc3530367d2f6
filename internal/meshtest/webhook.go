package meshtest

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func yamlToJSON(s string, v any) error { return yaml.Unmarshal([]byte(s), v) }

// NamespaceFunc reads a namespace's labels and annotations, as the real
// injectors do from their caches.
type NamespaceFunc func(ctx context.Context, name string) (labels, annotations map[string]string, err error)

// Webhook serves an Injector as a mutating admission webhook: it answers
// an AdmissionReview of a Pod with the JSON patch from the Pod as received
// to the Pod as the injector leaves it (nothing, when already injected).
type Webhook struct {
	Injector   Injector
	Namespaces NamespaceFunc
	// Calls counts the reviews answered.
	Calls atomic.Int32
}

func (w *Webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w.Calls.Add(1)
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(rw, "want an AdmissionReview", http.StatusBadRequest)
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	if err := w.patch(r.Context(), review.Request, resp); err != nil {
		resp.Allowed = false
		resp.Result = &metav1.Status{Message: err.Error()}
	}
	review.Request, review.Response = nil, resp
	_ = json.NewEncoder(rw).Encode(review)
}

func (w *Webhook) patch(ctx context.Context, req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) error {
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return err
	}
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	labels, annotations, err := w.Namespaces(ctx, pod.Namespace)
	if err != nil {
		return err
	}
	out := w.Injector.Inject(&pod, labels, annotations)
	before, err := json.Marshal(&pod)
	if err != nil {
		return err
	}
	after, err := json.Marshal(out)
	if err != nil {
		return err
	}
	ops, err := jsonpatch.CreatePatch(before, after)
	if err != nil || len(ops) == 0 {
		return err
	}
	b, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	pt := admissionv1.PatchTypeJSONPatch
	resp.Patch, resp.PatchType = b, &pt
	return nil
}
