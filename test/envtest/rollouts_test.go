package envtest_test

import (
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// Argo Rollouts' Rollouts, through Argo's real CRD (pinned, installed by
// the suite) and the chart's Rollout rules (argoRollouts: always).
var _ = Describe("Argo Rollouts", func() {
	rollouts := schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}
	rollout := func(name, spec string) *unstructured.Unstructured {
		GinkgoHelper()
		u := &unstructured.Unstructured{}
		Expect(json.Unmarshal([]byte(`{"apiVersion":"argoproj.io/v1alpha1","kind":"Rollout","metadata":{"name":"`+name+`"},`+
			`"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},`+spec+`}}`), &u.Object)).To(Succeed())
		return u
	}
	template := func(annotations, containers string) string {
		return `"template":{"metadata":{"labels":{"app":"web"},"annotations":{` + annotations + `}},"spec":{"containers":[` + containers + `]}}`
	}
	app := `{"name":"app","image":"registry.local/app:1","ports":[{"containerPort":8080}],"readinessProbe":{"httpGet":{"path":"/readyz","port":8080}}}`
	// withWarnings is a dynamic client that records the API server's warnings.
	withWarnings := func() (dynamic.Interface, *warningClient) {
		GinkgoHelper()
		w := &warningClient{}
		cfg := rest.CopyConfig(cp.Config)
		cfg.WarningHandler = w
		d, err := dynamic.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		return d, w
	}

	It("refuses a Rollout whose template's preStop outlasts its grace, in graceguard's words under spec.template", func(ctx SpecContext) {
		ns := optedIn(ctx, "rollout-hook")
		_, err := dyn.Resource(rollouts).Namespace(ns).Create(ctx, rollout("web", `"strategy":{"canary":{"steps":[{"setWeight":50}]}},`+
			template(`"graceguard.io/inject":"false"`, `{"name":"app","image":"registry.local/app:1","lifecycle":{"preStop":{"exec":{"command":["sleep","60"]}}}}`)),
			metav1.CreateOptions{})
		// The native floor, first, with the webhook's message.
		floorDenied(err, `spec.template.spec.containers[0].lifecycle.preStop: Invalid value: "exec sleep 60": must be shorter than terminationGracePeriodSeconds (30s)`)
	})

	It("refuses, in the workload webhook, a treated Rollout template whose hook needs more than the cap", func(ctx SpecContext) {
		ns := optedIn(ctx, "rollout-cap")
		_, err := dyn.Resource(rollouts).Namespace(ns).Create(ctx, rollout("web", `"strategy":{"blueGreen":{"activeService":"web"}},`+
			template(``, `{"name":"app","image":"registry.local/app:1","lifecycle":{"preStop":{"sleep":{"seconds":700}}}}`)),
			metav1.CreateOptions{})
		denied(err, "validate-workloads.graceguard.io", `Rollout.argoproj.io "web" is invalid: spec.template.spec.terminationGracePeriodSeconds`)
	})

	It("admits a valid canary as applied, and warns when scaleDownDelaySeconds is shorter than the routing term", func(ctx SpecContext) {
		ns := optedIn(ctx, "rollout-ok")
		d, w := withWarnings()
		in := rollout("web", `"strategy":{"canary":{"canaryService":"web-canary","stableService":"web","scaleDownDelaySeconds":30,`+
			`"trafficRouting":{"nginx":{"stableIngress":"web"}},"steps":[{"setWeight":20}]}},`+template(``, app))
		created, err := d.Resource(rollouts).Namespace(ns).Create(ctx, in, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(w.Warnings()).To(BeEmpty())
		// Validated, never mutated: no hook, grace or record in the stored
		// template (its Pods get them at their creation).
		tpl, _, _ := unstructured.NestedMap(created.Object, "spec", "template")
		annotations, _, _ := unstructured.NestedStringMap(tpl, "metadata", "annotations")
		Expect(annotations).NotTo(HaveKey("graceguard.io/budget"))
		Expect(tpl["spec"]).NotTo(HaveKey("terminationGracePeriodSeconds"))
		containers, _, _ := unstructured.NestedSlice(created.Object, "spec", "template", "spec", "containers")
		Expect(containers).To(HaveLen(1))
		Expect(containers[0]).NotTo(HaveKey("lifecycle"))

		d, w = withWarnings()
		_, err = d.Resource(rollouts).Namespace(ns).Create(ctx, rollout("slow", `"strategy":{"canary":{"canaryService":"web-canary","stableService":"web","scaleDownDelaySeconds":5,`+
			`"trafficRouting":{"nginx":{"stableIngress":"web"}},"steps":[{"setWeight":20}]}},`+template(`"graceguard.io/routing-delay":"15s"`, app)), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(w.Warnings()).To(ConsistOf("spec.strategy.canary.scaleDownDelaySeconds: 5s < routing 15s: scaled down before routes move; raise to 15"))
	})

	It("admits a workloadRef Rollout, which has no template, and says nothing", func(ctx SpecContext) {
		ns := optedIn(ctx, "rollout-ref")
		d, w := withWarnings()
		ref := rollout("web", `"workloadRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"strategy":{"blueGreen":{"activeService":"web","scaleDownDelaySeconds":0}}`)
		created, err := d.Resource(rollouts).Namespace(ns).Create(ctx, ref, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(unstructured.SetNestedField(created.Object, int64(3), "spec", "replicas")).To(Succeed())
		_, err = d.Resource(rollouts).Namespace(ns).Update(ctx, created, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(w.Warnings()).To(BeEmpty())
	})
})
