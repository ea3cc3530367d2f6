package envtest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/graceguard/graceguard/pkg/mutate"
)

var _ = Describe("bad input never loses anything", func() {
	post := func(path string, body []byte) (int, *admissionv1.AdmissionReview, string) {
		GinkgoHelper()
		resp, err := cp.HTTPClient().Post(cp.WebhookURL+path, "application/json", bytes.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		var review admissionv1.AdmissionReview
		if json.Unmarshal(raw, &review) != nil || review.Response == nil {
			return resp.StatusCode, nil, string(raw)
		}
		return resp.StatusCode, &review, string(raw)
	}
	review := func(kind string, object []byte) []byte {
		r := admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{
				UID: "00000000-0000-0000-0000-000000000001", Kind: metav1.GroupVersionKind{Version: "v1", Kind: kind},
				Resource:  metav1.GroupVersionResource{Version: "v1", Resource: strings.ToLower(kind) + "s"},
				Namespace: "default", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: object},
			},
		}
		b, _ := json.Marshal(r)
		return b
	}
	stillServing := func() {
		GinkgoHelper()
		// The next good review is answered: nothing was lost.
		p, _ := json.Marshal(pod("after", nil))
		code, r, raw := post("/validate-v1-pod", review("Pod", p))
		Expect(code).To(Equal(http.StatusOK), raw)
		Expect(r).NotTo(BeNil(), raw)
		Expect(r.Response.Allowed).To(BeTrue(), raw)
	}

	// A review the server cannot read is refused inside a well-formed
	// AdmissionReview with status code 400, as controller-runtime does.
	refused := func(code int, r *admissionv1.AdmissionReview, raw, message string) {
		GinkgoHelper()
		Expect(code).To(Equal(http.StatusOK), raw)
		Expect(r).NotTo(BeNil(), raw)
		Expect(r.Response.Allowed).To(BeFalse())
		Expect(r.Response.Result.Code).To(Equal(int32(http.StatusBadRequest)))
		Expect(r.Response.Result.Message).To(ContainSubstring(message))
	}

	It("answers a malformed AdmissionReview with a clean error and keeps serving", func() {
		code, r, raw := post("/mutate-v1-pod", []byte(`{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {`))
		refused(code, r, raw, "json parse error")
		stillServing()
	})

	It("answers an empty body with a clean error and keeps serving", func() {
		code, r, raw := post("/mutate-v1-pod", nil)
		refused(code, r, raw, "request body is empty")
		stillServing()
	})

	It("answers a review whose object is not a Pod with a refusal naming the problem", func() {
		code, r, raw := post("/mutate-v1-pod", review("Pod", []byte(`{"spec": {"containers": "not a list"}}`)))
		Expect(code).To(Equal(http.StatusOK), raw)
		Expect(r).NotTo(BeNil(), raw)
		Expect(r.Response.Allowed).To(BeFalse())
		Expect(r.Response.Result.Message).NotTo(BeEmpty())
		stillServing()
	})

	It("answers a review for a kind it does not handle and keeps serving", func() {
		code, r, raw := post("/validate-workloads", review("ConfigMap", []byte(`{"data": {"a": "b"}}`)))
		Expect(code).To(Equal(http.StatusOK), raw)
		Expect(r).NotTo(BeNil(), raw)
		Expect(r.Response.Result.Message).To(ContainSubstring("ConfigMap"))
		stillServing()
	})

	It("handles a Pod with 1 MiB of annotations, directly and through the API server", func(ctx SpecContext) {
		big := map[string]string{}
		for i := 0; i < 16; i++ {
			big["example.com/blob-"+string(rune('a'+i))] = strings.Repeat("x", 64<<10)
		}
		p, _ := json.Marshal(pod("big", big))
		Expect(len(p)).To(BeNumerically(">", 1<<20))
		code, r, raw := post("/mutate-v1-pod", review("Pod", p))
		Expect(code).To(Equal(http.StatusOK), raw[:min(len(raw), 300)])
		Expect(r).NotTo(BeNil())
		stillServing()

		// Through the API server: graceguard answers, then the API
		// server's own validation refuses annotations over 256 KiB.
		ns := optedIn(ctx, "big")
		_, err := kube.CoreV1().Pods(ns).Create(ctx, pod("big", big), metav1.CreateOptions{})
		Expect(err).To(MatchError(ContainSubstring("metadata.annotations: Too long")))
		got, err := kube.CoreV1().Pods(ns).Create(ctx, pod("small", map[string]string{mutate.AnnotationMaxWork: "10s"}), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Annotations).To(HaveKey(mutate.AnnotationBudget))
	})
})
