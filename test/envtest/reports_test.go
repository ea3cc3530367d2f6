package envtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/graceguard/graceguard/pkg/cli"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/policyreport"
	"github.com/graceguard/graceguard/test/harness/apiserver"
)

// installReportCRD installs one report kind's CRDs (as published, pinned:
// apiserver.FindReportCRDs) for the rest of the container, and removes
// them after it, waiting until the API server no longer serves the kind.
func installReportCRD(ctx context.Context, k policyreport.Kind) {
	GinkgoHelper()
	crds := must(apiserver.FindReportCRDs(ctx))
	dir := crds.OpenReports
	if k == policyreport.PolicyReport {
		dir = crds.PolicyReport
	}
	opts := envtest.CRDInstallOptions{Paths: []string{dir}}
	must(envtest.InstallCRDs(cp.Config, opts))
	DeferCleanup(func(ctx SpecContext) {
		Expect(envtest.UninstallCRDs(cp.Config, opts)).To(Succeed())
		Eventually(func() bool { return served(k) }).WithTimeout(time.Minute).Should(BeFalse(), "%s still served", k)
	})
	Eventually(func() bool { return served(k) }).WithTimeout(time.Minute).Should(BeTrue(), "%s served", k)
}

func served(k policyreport.Kind) bool {
	gvk := k.GroupVersionKind()
	list, err := kube.Discovery().ServerResourcesForGroupVersion(gvk.GroupVersion().String())
	if err != nil {
		return false
	}
	for _, r := range list.APIResources {
		if r.Name == k.Resource() {
			return true
		}
	}
	return false
}

func reportResource(k policyreport.Kind) schema.GroupVersionResource {
	return k.GroupVersionKind().GroupVersion().WithResource(k.Resource())
}

// checked is what `audit -o json` says of each object: its findings, by
// "Kind namespace/name".
func checked(ctx SpecContext, args ...string) map[string][]result {
	GinkgoHelper()
	_, stdout, _ := audit(ctx, append(args, "-o", "json", "--fail-on", "none")...)
	var report struct {
		Objects []struct {
			Kind, Namespace, Name, Verdict string
			Findings                       []struct{ Level, Reason, Message string }
		}
	}
	Expect(json.Unmarshal([]byte(stdout), &report)).To(Succeed())
	out := map[string][]result{}
	for _, o := range report.Objects {
		if o.Verdict == "skipped" {
			continue
		}
		rs := []result{}
		for _, f := range o.Findings {
			r := result{Rule: f.Reason, Result: "warn", Message: f.Message}
			if f.Level == "denial" {
				r.Result = "fail"
			}
			rs = append(rs, r)
		}
		out[o.Kind+" "+o.Namespace+"/"+o.Name] = rs
	}
	return out
}

// result is what a report's result says, as a person compares it with check.
type result struct{ Rule, Result, Message string }

// findingsOf are a stored report's admission results other than passes,
// in order, and the rules that pass.
func findingsOf(u *unstructured.Unstructured) (found []result, passed []string) {
	found = []result{}
	results, _, _ := unstructured.NestedSlice(u.Object, "results")
	for _, x := range results {
		m := x.(map[string]any)
		r := result{Rule: str(m["rule"]), Result: str(m["result"]), Message: str(m["message"])}
		switch {
		case m["category"] != policyreport.CategoryAdmission:
		case r.Result == "pass":
			passed = append(passed, r.Rule)
		default:
			found = append(found, r)
		}
	}
	return found, passed
}

func str(v any) string { s, _ := v.(string); return s }

// scopeOf is a stored report's scope, "Kind namespace/name".
func scopeOf(u *unstructured.Unstructured) string {
	s, _, _ := unstructured.NestedStringMap(u.Object, "scope")
	return s["kind"] + " " + s["namespace"] + "/" + s["name"]
}

// expectSaysWhatCheckSays holds a stored report to check's findings for
// its workload: the same rules, messages and verdicts, every other rule
// passing.
func expectSaysWhatCheckSays(u *unstructured.Unstructured, check map[string][]result) {
	GinkgoHelper()
	want, ok := check[scopeOf(u)]
	Expect(ok).To(BeTrue(), "check says nothing of %s", scopeOf(u))
	found, passed := findingsOf(u)
	Expect(found).To(Equal(want), "%s: the report's findings, and check's", scopeOf(u))
	rules := map[string]bool{}
	for _, r := range want {
		rules[r.Rule] = true
	}
	for _, r := range policyreport.Rules() {
		if !rules[string(r)] {
			Expect(passed).To(ContainElement(string(r)), "%s: %s found nothing", scopeOf(u), r)
		}
	}
}

// reportWorkloads creates, in a namespace not opted in (so the webhook
// lets them in as they are), a Deployment that enforce mode denies (a
// stop signal no process catches) with two warnings, one that passes
// every rule, and a StatefulSet whose budget is over the cap.
func reportWorkloads(ctx context.Context, ns string) {
	GinkgoHelper()
	api := deployment("api", 1, corev1.Container{Name: "app", Image: "registry.local/api:1", Command: []string{"sh", "-c", "/api --port=8080"},
		Ports: []corev1.ContainerPort{{ContainerPort: 8080}}, Lifecycle: &corev1.Lifecycle{StopSignal: ptr.To(corev1.SIGKILL)}})
	api.Spec.Template.Spec.OS = &corev1.PodOS{Name: corev1.Linux} // the API server's condition for a stop signal
	must(kube.AppsV1().Deployments(ns).Create(ctx, api, metav1.CreateOptions{}))
	web := deployment("web", 1, corev1.Container{Name: "app", Image: "registry.local/web:1", Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080)}}}})
	must(kube.AppsV1().Deployments(ns).Create(ctx, web, metav1.CreateOptions{}))
	labels := map[string]string{"app": "db"}
	db := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: appsv1.StatefulSetSpec{
		ServiceName: "db", Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{mutate.AnnotationMaxWork: "15m"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "postgres", Image: "registry.local/postgres:16", Ports: []corev1.ContainerPort{{ContainerPort: 5432}}}}}},
	}}
	must(kube.AppsV1().StatefulSets(ns).Create(ctx, db, metav1.CreateOptions{}))
}

// decodeStream reads the YAML documents audit prints.
func decodeStream(out string) []*unstructured.Unstructured {
	GinkgoHelper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs
		}
		Expect(err).NotTo(HaveOccurred())
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

var _ = Describe("kubectl graceguard audit -o openreports and -o policyreport on the real CRDs", Ordered, func() {
	var ns string
	BeforeAll(func(ctx SpecContext) {
		ns = newNamespace(ctx, "audit-reports", nil, nil)
		reportWorkloads(ctx, ns)
	})

	for _, k := range policyreport.Kinds {
		It("prints "+k.String()+"s the API server stores as they are (strict field validation), saying what check says", func(ctx SpecContext) {
			installReportCRD(ctx, k)
			code, stdout, stderr := audit(ctx, "-n", ns, "-o", string(k))
			Expect(stderr).To(BeEmpty())
			Expect(code).To(Equal(cli.ExitFindings), "api is denied")
			objs := decodeStream(stdout)
			Expect(objs).To(HaveLen(3))
			check := checked(ctx, "-n", ns)
			for _, u := range objs {
				Expect(u.GetAPIVersion() + " " + u.GetKind()).To(Equal(k.String()))
				// What kubectl apply does: the server refuses unknown fields.
				stored, err := dyn.Resource(reportResource(k)).Namespace(ns).Create(ctx, u, metav1.CreateOptions{FieldValidation: "Strict"})
				Expect(err).NotTo(HaveOccurred(), "creating %s", u.GetName())
				expectSaysWhatCheckSays(stored, check)
				Expect(stored.GetOwnerReferences()).To(HaveLen(1), "owned by its workload")
			}
			api := must(dyn.Resource(reportResource(k)).Namespace(ns).Get(ctx, "graceguard-deployment-api", metav1.GetOptions{}))
			fails, _, _ := unstructured.NestedInt64(api.Object, "summary", "fail")
			Expect(fails).To(Equal(int64(1)))
			found, _ := findingsOf(api)
			Expect(found).To(ContainElement(result{Rule: string(mutate.DenyStopSignalKills), Result: "fail",
				Message: `spec.template.spec.containers[0].lifecycle.stopSignal: Invalid value: "SIGKILL": container "app" gets SIGKILL, which no process can catch: it dies at once, its admitted work lost; remove it or use a signal the app drains on (SIGTERM, SIGINT, SIGQUIT)`}))
		})
	}
})
