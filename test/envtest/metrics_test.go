package envtest_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// The chart's alerts read the API server's admission metrics by name and
// label (test/alerts parses every query against exporters.json). Those
// rows are held here to a real kube-apiserver: after a mutation, a
// denial and a call that fails open, each metric has series, and their
// labels are the ones the table says.
var _ = Describe("the API server's admission metrics the alerts read", func() {
	It("carry the labels test/alerts/exporters.json gives them", func(ctx SpecContext) {
		b, err := os.ReadFile(filepath.Join("..", "alerts", "exporters.json"))
		Expect(err).NotTo(HaveOccurred())
		var exporters map[string]map[string][]string
		Expect(json.Unmarshal(b, &exporters)).To(Succeed())
		want := exporters["kube-apiserver"]
		Expect(want).NotTo(BeEmpty(), "exporters.json lists no kube-apiserver metric")

		// A mutation (and a validating call), and a denial.
		ns := optedIn(ctx, "metrics")
		_, err = kube.CoreV1().Pods(ns).Create(ctx, pod("ok", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		Expect(err).NotTo(HaveOccurred())
		_, err = kube.CoreV1().Pods(ns).Create(ctx, pod("bad", map[string]string{mutate.AnnotationPreStop: "wait"}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		Expect(err).To(HaveOccurred())

		// A call that fails open: a webhook of this spec's own, with
		// failurePolicy Ignore, at a port nothing listens on, for this
		// namespace only.
		name := "fail-open." + ns + ".example.com"
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-fail-open"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{
				Name:                    name,
				ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/mutate")},
				Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
				NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
				FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
				SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1"},
				TimeoutSeconds:          ptr.To[int32](2),
			}},
		}
		_, err = kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_ = kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, cfg.Name, metav1.DeleteOptions{})
		})
		Eventually(func() float64 {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "fail-open-"}}
			_, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			Expect(err).NotTo(HaveOccurred(), "failurePolicy Ignore must admit")
			return counter(apiserverMetrics(ctx), "apiserver_admission_webhook_fail_open_count", map[string]string{"name": name})
		}, "30s", "1s").Should(BeNumerically(">", 0), "the API server counted no fail-open call of the unreachable webhook")

		fams := apiserverMetrics(ctx)
		for metric, labels := range want {
			fam, ok := fams[metric]
			if !ok {
				// Histograms are exposed by their base name too.
				fam, ok = fams[strings.TrimSuffix(metric, "_bucket")]
			}
			Expect(ok).To(BeTrue(), "the kube-apiserver exports no %s", metric)
			Expect(fam.GetMetric()).NotTo(BeEmpty(), "%s has no series", metric)
			for _, m := range fam.GetMetric() {
				var got []string
				for _, l := range m.GetLabel() {
					got = append(got, l.GetName())
				}
				Expect(got).To(ConsistOf(labels), "the labels of %s (exporters.json says %v)", metric, labels)
			}
		}
	})
})
