package envtest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/graceguard/graceguard/pkg/cli"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// audit runs `kubectl graceguard audit` through the plugin's own entry point.
func audit(ctx SpecContext, args ...string) (code int, stdout, stderr string) {
	GinkgoHelper()
	var out, errOut bytes.Buffer
	code = cli.ExecuteContext(ctx, append([]string{"audit", "--kubeconfig", kubeconfig()}, args...), strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

func deployment(name string, replicas int32, c corev1.Container) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{c}}},
		},
	}
}

var _ = Describe("kubectl graceguard audit", Ordered, func() {
	var in, out string

	BeforeAll(func(ctx SpecContext) {
		// An opted-in namespace with a default: its Pod was mutated by the
		// real webhook on the way in.
		in = newNamespace(ctx, "audit-in", map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled},
			map[string]string{mutate.AnnotationMaxWork: "40s"})
		_, err := kube.CoreV1().Pods(in).Create(ctx, pod("api", nil, corev1.Container{Name: "app", Image: "registry.local/api:1",
			Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = kube.AppsV1().Deployments(in).Create(ctx, deployment("web", 2, corev1.Container{Name: "app", Image: "registry.local/web:1"}), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		// A namespace not opted in yet, holding what enabling graceguard
		// would change or refuse.
		out = newNamespace(ctx, "audit-out", nil, nil)
		d := deployment("legacy", 1, corev1.Container{Name: "app", Image: "registry.local/legacy:1", Lifecycle: execHook("sleep", "40")})
		d.Spec.Template.Annotations = map[string]string{mutate.AnnotationMaxWork: "2 minutes"}
		legacy, err := kube.AppsV1().Deployments(out).Create(ctx, d, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		rs := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: "legacy-5d8f7", OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "Deployment", Name: "legacy", UID: legacy.UID, Controller: ptr.To(true)}}},
			Spec: appsv1.ReplicaSetSpec{Selector: legacy.Spec.Selector, Template: legacy.Spec.Template},
		}
		_, err = kube.AppsV1().ReplicaSets(out).Create(ctx, rs, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		rc := &corev1.ReplicationController{
			ObjectMeta: metav1.ObjectMeta{Name: "nginx"},
			Spec: corev1.ReplicationControllerSpec{Selector: map[string]string{"app": "nginx"}, Template: &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "nginx"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}},
			}},
		}
		_, err = kube.CoreV1().ReplicationControllers(out).Create(ctx, rc, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = kube.CoreV1().Pods(out).Create(ctx, pod("worker", nil), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		// A finished Pod never stops again: audit leaves it out.
		done, err := kube.CoreV1().Pods(out).Create(ctx, pod("done", nil), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		done.Status.Phase = corev1.PodSucceeded
		_, err = kube.CoreV1().Pods(out).UpdateStatus(ctx, done, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
	})

	It("says what enabling graceguard in a namespace would change and refuse", func(ctx SpecContext) {
		code, stdout, stderr := audit(ctx, "-n", out)
		Expect(stderr).To(Equal(""))
		Expect(stdout).To(Equal(fmt.Sprintf(`Deployment %[1]s/legacy [enforce]: DENIED (namespace %[1]s not opted in: as if it were)
  error: spec.template.metadata.annotations[graceguard.io/max-work]: Invalid value: "2 minutes": not a duration; want a Go duration (30s, 1m30s, 1500ms) or whole seconds (30), from 0 to 1h
ReplicaSet %[1]s/legacy-5d8f7: skipped: its Pod template is its controller's, Deployment legacy, audited there [owned-by-workload]
ReplicationController %[1]s/nginx [enforce]: allowed (2 changes; namespace %[1]s not opted in: as if it were)
  warning: spec.template.spec.containers[0].readinessProbe: serving container has none; set graceguard.io/readiness-path
Pod %[1]s/worker [enforce]: allowed (3 changes; namespace %[1]s not opted in: as if it were)

4 objects: 1 denied, 2 allowed, 1 skipped
skipped: 1 owned by a workload audited itself
evaluated as if opted in (label graceguard.io/inject=enabled): namespace %[1]s
`, out)))
		Expect(code).To(Equal(cli.ExitFindings))
	})

	It("shows an opted-in namespace as the webhook left it: its Pod already mutated, its template as its Pods will be", func(ctx SpecContext) {
		code, stdout, stderr := audit(ctx, "-n", in)
		Expect(stderr).To(Equal(""))
		Expect(stdout).To(Equal(fmt.Sprintf(`Deployment %[1]s/web [enforce]: allowed (3 changes)
Pod %[1]s/api [enforce]: allowed
  warning: spec.containers[0].readinessProbe: serving container has none; set graceguard.io/readiness-path

2 objects: 0 denied, 2 allowed, 0 skipped
`, in)))
		Expect(code).To(Equal(cli.ExitOK))
	})

	It("covers every namespace with -A, with the same JSON and SARIF outputs as check", func(ctx SpecContext) {
		code, stdout, _ := audit(ctx, "-A", "-o", "json", "--fail-on", "none")
		Expect(code).To(Equal(cli.ExitOK))
		var report struct {
			Objects []struct {
				Kind, Namespace, Name, Verdict, Source string
				NamespaceOptedIn                       *bool
				Grace                                  *struct{ Before, After int64 }
			}
			Summary struct{ Denied, Failed any }
		}
		Expect(json.Unmarshal([]byte(stdout), &report)).To(Succeed())
		seen := map[string]string{}
		for _, o := range report.Objects {
			Expect(o.Source).To(Equal("cluster"))
			if o.Namespace != in && o.Namespace != out {
				continue // other specs' namespaces
			}
			seen[o.Kind+" "+o.Namespace+"/"+o.Name] = o.Verdict
			if o.Verdict == "skipped" {
				continue
			}
			Expect(o.NamespaceOptedIn).NotTo(BeNil())
			Expect(*o.NamespaceOptedIn).To(Equal(o.Namespace == in), "%s %s/%s", o.Kind, o.Namespace, o.Name)
			if o.Kind == "Deployment" && o.Name == "web" {
				Expect(*o.Grace).To(Equal(struct{ Before, After int64 }{30, 50}), "routing 5s + work 40s (the namespace's) + cleanup 2s + margin 3s")
			}
		}
		Expect(seen).To(Equal(map[string]string{
			"Deployment " + in + "/web": "allowed", "Pod " + in + "/api": "allowed",
			"Deployment " + out + "/legacy": "denied", "ReplicaSet " + out + "/legacy-5d8f7": "skipped",
			"ReplicationController " + out + "/nginx": "allowed", "Pod " + out + "/worker": "allowed",
		}))

		code, stdout, _ = audit(ctx, "-n", out, "--mode", "warn", "--fail-on", "warning", "-o", "sarif")
		Expect(code).To(Equal(cli.ExitFindings), "warn mode denies nothing, but what enforce would do is a warning")
		Expect(stdout).To(ContainSubstring(`"fullyQualifiedName": "Deployment/` + out + `/legacy"`))
		Expect(stdout).To(ContainSubstring(`"text": "Deployment ` + out + `/legacy: enforce would deny: spec.template.metadata.annotations[graceguard.io/max-work]: Invalid value: \"2 minutes\"`))
		Expect(stdout).NotTo(ContainSubstring("physicalLocation"), "objects from a cluster have no file")
	})

	It("says what is wrong when the cluster cannot be read, and exits 2", func(ctx SpecContext) {
		code, stdout, stderr := audit(ctx, "-n", "no-such-namespace")
		Expect(code).To(Equal(cli.ExitUsage))
		Expect(stdout).To(BeEmpty())
		Expect(stderr).To(Equal("error: reading namespace no-such-namespace: namespaces \"no-such-namespace\" not found\n"))
	})
})
