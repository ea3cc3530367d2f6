package envtest_test

import (
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// denied asserts the API server refused with graceguard's 422 and message.
func denied(err error, webhook string, parts ...string) {
	GinkgoHelper()
	Expect(err).To(HaveOccurred(), "the API server admitted what graceguard must deny")
	Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want 422 Invalid, got %v", err)
	Expect(err.Error()).To(ContainSubstring(`admission webhook "` + webhook + `" denied the request`))
	for _, p := range parts {
		Expect(err.Error()).To(ContainSubstring(p))
	}
}

func execHook(cmd ...string) *corev1.Lifecycle {
	return &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: cmd}}}
}

var _ = Describe("denials reach the client with graceguard's message", func() {
	It("refuses a preStop that outlasts the grace period, even for a Pod that opted out", func(ctx SpecContext) {
		ns := optedIn(ctx, "doomed")
		p := pod("doomed", map[string]string{mutate.AnnotationInject: "false"},
			corev1.Container{Name: "app", Image: "registry.local/app:1", Lifecycle: execHook("sleep", "40")})
		_, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		// The native floor refuses it inside the API server, in the
		// webhook's words, before the validating webhooks are called.
		msg := `spec.containers[0].lifecycle.preStop: Invalid value: "exec sleep 40": must be shorter than terminationGracePeriodSeconds (30s): the hook runs inside it and is killed at 30s (exit 137); shorten the hook or raise terminationGracePeriodSeconds`
		floorDenied(err, msg)
		var status *apierrors.StatusError
		Expect(err).To(BeAssignableToTypeOf(status))
		causes := err.(*apierrors.StatusError).ErrStatus.Details.Causes
		Expect(causes).To(ContainElement(HaveField("Message", HaveSuffix(msg))))
	})

	It("admits, with a warning, a Pod the mutating webhook did not treat, and still refuses its hook longer than its grace", func(ctx SpecContext) {
		// As with failurePolicy Ignore during a mutating-webhook outage:
		// graceguard never refuses a Pod for its own unavailability
		// (--untreated-pods=admit, the chart's default while validate-pods
		// fails open).
		restore, err := cp.RemoveMutatingWebhooks(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { Expect(restore(ctx)).To(Succeed()) })
		ns := optedIn(ctx, "outage")
		wc := newWarningClient()
		// A fraction of a second: the mutating floor (1.36+) leaves the Pod
		// to the webhook, which did not run.
		p := pod("api", map[string]string{mutate.AnnotationRoutingDelay: "8s", mutate.AnnotationMaxWork: "30s", mutate.AnnotationSafetyMargin: "5s", mutate.AnnotationCleanup: "1500ms"})
		g := int64(20)
		p.Spec.TerminationGracePeriodSeconds = &g
		Eventually(func() []string {
			got, err := wc.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			Expect(err).NotTo(HaveOccurred())
			Expect(got.Annotations).NotTo(HaveKey(mutate.AnnotationBudget))
			return wc.Warnings()
		}).Should(ContainElement("metadata.annotations[graceguard.io/budget]: mutating webhook did not run (down or overloaded): no budget added"))
		_, err = wc.CoreV1().Pods(ns).Create(ctx, pod("plain", map[string]string{mutate.AnnotationCleanup: "1500ms"}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		Expect(err).NotTo(HaveOccurred())
		_, err = wc.CoreV1().Pods(ns).Create(ctx, pod("hooked", map[string]string{mutate.AnnotationCleanup: "1500ms"},
			corev1.Container{Name: "app", Image: "registry.local/app:1", Lifecycle: execHook("sleep", "30")}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		floorDenied(err, `spec.containers[0].lifecycle.preStop: Invalid value: "exec sleep 30": must be shorter than terminationGracePeriodSeconds (30s)`)
	})

	// What graceguard already sees is wrong is refused by its mutating
	// webhook, with the message the validating webhook would give.
	It("denies a budget over --max-grace-period", func(ctx SpecContext) {
		ns := optedIn(ctx, "cap")
		_, err := kube.CoreV1().Pods(ns).Create(ctx, pod("slow", map[string]string{mutate.AnnotationMaxWork: "1h"}), metav1.CreateOptions{})
		denied(err, "mutate-pods.graceguard.io", "the budget needs 3610s (routing 5s + work 1h + cleanup 2s + margin 3s), over the cluster cap of 10m")
	})

	It("denies an annotation that does not parse, naming the key, the value and the accepted forms", func(ctx SpecContext) {
		ns := optedIn(ctx, "typo")
		_, err := kube.CoreV1().Pods(ns).Create(ctx, pod("typo", map[string]string{mutate.AnnotationMaxWork: "thirty"}), metav1.CreateOptions{})
		denied(err, "mutate-pods.graceguard.io",
			`metadata.annotations[graceguard.io/max-work]: Invalid value: "thirty": not a duration; want a Go duration (30s, 1m30s, 1500ms) or whole seconds (30)`)
	})
})

var _ = Describe("workloads are checked at apply time, never changed", func() {
	template := func(ann map[string]string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "w"}, Annotations: ann},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1"}}},
		}
	}
	bad := map[string]string{mutate.AnnotationMaxWork: "30 s"}
	good := map[string]string{mutate.AnnotationMaxWork: "40s", mutate.AnnotationReadinessPath: "/readyz"}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "w"}}
	deployment := func(ann map[string]string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "w"}, Spec: appsv1.DeploymentSpec{Selector: sel, Template: template(ann)}}
	}
	const badField = `spec.template.metadata.annotations[graceguard.io/max-work]: Invalid value: "30 s"`

	It("denies a Deployment whose template is bad, at its template path", func(ctx SpecContext) {
		ns := optedIn(ctx, "deploy")
		_, err := kube.AppsV1().Deployments(ns).Create(ctx, deployment(bad), metav1.CreateOptions{})
		denied(err, "validate-workloads.graceguard.io", `Deployment.apps "w" is invalid`, badField)
	})

	It("denies a StatefulSet, a Job and a CronJob whose template is bad", func(ctx SpecContext) {
		ns := optedIn(ctx, "kinds")
		_, err := kube.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "w"},
			Spec: appsv1.StatefulSetSpec{Selector: sel, Template: template(bad)}}, metav1.CreateOptions{})
		denied(err, "validate-workloads.graceguard.io", badField)

		jt := template(bad)
		jt.Spec.RestartPolicy = corev1.RestartPolicyNever
		jt.Labels = nil
		_, err = kube.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "w"},
			Spec: batchv1.JobSpec{Template: jt}}, metav1.CreateOptions{})
		denied(err, "validate-workloads.graceguard.io", badField)

		_, err = kube.BatchV1().CronJobs(ns).Create(ctx, &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "w"},
			Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: jt}}}}, metav1.CreateOptions{})
		denied(err, "validate-workloads.graceguard.io",
			`spec.jobTemplate.spec.template.metadata.annotations[graceguard.io/max-work]: Invalid value: "30 s"`)
	})

	It("admits a good Deployment and leaves its template exactly as applied", func(ctx SpecContext) {
		ns := optedIn(ctx, "gitops")
		in := deployment(good)
		created, err := kube.AppsV1().Deployments(ns).Create(ctx, in, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(created.Spec.Template.Annotations).To(Equal(good))
		Expect(created.Spec.Template.Spec.Containers[0].Lifecycle).To(BeNil())
		Expect(created.Spec.Template.Spec.Containers[0].ReadinessProbe).To(BeNil())
		Expect(*created.Spec.Template.Spec.TerminationGracePeriodSeconds).To(Equal(int64(30)))

		// A later update that does not touch the template (scaling) is
		// admitted; one that breaks the template is denied.
		replicas := int32(3)
		created.Spec.Replicas = &replicas
		updated, err := kube.AppsV1().Deployments(ns).Update(ctx, created, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		updated.Spec.Template.Annotations = bad
		_, err = kube.AppsV1().Deployments(ns).Update(ctx, updated, metav1.UpdateOptions{})
		denied(err, "validate-workloads.graceguard.io", badField)
	})

	It("admits Pods that a good template produces, with the budget applied", func(ctx SpecContext) {
		// No controllers run in envtest: create the Pod the ReplicaSet
		// would, from the template, with generateName.
		ns := optedIn(ctx, "rs")
		t := template(good)
		t.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080}}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "w-7d9f-", Labels: t.Labels, Annotations: t.Annotations}, Spec: t.Spec}
		got, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(*got.Spec.TerminationGracePeriodSeconds).To(Equal(int64(50)))
		Expect(got.Spec.Containers[0].ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
		raw, _ := json.Marshal(got.Spec.Containers[0].Lifecycle)
		Expect(string(raw)).To(Equal(`{"preStop":{"sleep":{"seconds":5}}}`))
	})
})
