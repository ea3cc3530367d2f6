package envtest_test

import (
	"bytes"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	helmkube "helm.sh/helm/v4/pkg/kube"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/graceguard/graceguard/test/harness/chart"
)

var _ = Describe("a real helm install", Ordered, func() {
	It("is accepted by the API server, and the installed webhook configurations get their CA bundle from the running webhook, which an upgrade keeps", func(ctx SpecContext) {
		const release, ns = "gg-install", "gg-install"
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { _ = kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) })

		cfg := helmConfig(ns)
		ch, err := loader.Load(chart.ChartDir())
		Expect(err).NotTo(HaveOccurred())
		inst := action.NewInstall(cfg)
		inst.ReleaseName, inst.Namespace = release, ns
		inst.WaitStrategy = kubeHookOnly
		inst.Timeout = time.Minute
		// The suite's API server has the ShutdownReport CRD already (the
		// harness installs it, as no release): one a release does not own
		// is not the chart's to take.
		noCRD := map[string]any{"install": false}
		_, err = inst.RunWithContext(ctx, ch, map[string]any{"crds": noCRD})
		Expect(err).NotTo(HaveOccurred(), "helm install")
		uninstallCfg := helmConfig(ns)
		DeferCleanup(func() {
			un := action.NewUninstall(uninstallCfg)
			un.WaitStrategy = kubeHookOnly
			// No kubelet runs the pre-delete Job here (`helm uninstall
			// --no-hooks`); test/chart runs it.
			un.DisableHooks = true
			_, err := un.Run(release)
			Expect(err).NotTo(HaveOccurred(), "helm uninstall")
		})

		// No kubelet here: run the installed Deployment's container as a
		// process, with its own arguments; it writes its certificates from
		// the Secret into its cert dir itself.
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, release+"-graceguard", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		args := d.Spec.Template.Spec.Containers[0].Args
		Expect(args).To(ContainElement("--cert-mode=self-managed"))
		secretName, mwc, vwc := flagValue(args, "--cert-secret-name"), flagValue(args, "--mutating-webhook-configuration"), flagValue(args, "--validating-webhook-configuration")
		// Only what a Pod gets from elsewhere changes: its namespace (from
		// the downward API), and ports and a cert dir of this machine.
		var own []string
		for _, a := range args {
			switch strings.SplitN(a, "=", 2)[0] {
			case "--port", "--health-probe-bind-address", "--metrics-bind-address", "--cert-dir", "--shutdown-delay":
			default:
				own = append(own, a)
			}
		}
		// As the installed ServiceAccount: the chart's RBAC, by name only,
		// must be all the webhook needs.
		sa := "system:serviceaccount:" + ns + ":" + d.Spec.Template.Spec.ServiceAccountName
		r := startReplica(replicaOpts{}, append(own, "--namespace="+ns, "--shutdown-delay=0s", "--kubeconfig="+kubeconfigWith(cp.Config.Host, sa))...)
		r.waitReady(90 * time.Second)

		By("the ServiceAccount reads its own Secret and no other")
		asSA := rest.CopyConfig(cp.Config)
		asSA.Impersonate = rest.ImpersonationConfig{UserName: sa}
		saClient, err := kubernetes.NewForConfig(asSA)
		Expect(err).NotTo(HaveOccurred())
		_, err = saClient.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = saClient.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "listing every Secret: %v", err)
		_, err = saClient.CoreV1().Secrets(ns).Get(ctx, "sh.helm.release.v1."+release+".v1", metav1.GetOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "reading Helm's release record: %v", err)

		caBundles := func(g Gomega) [][]byte {
			var out [][]byte
			m, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mwc, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			for _, w := range m.Webhooks {
				out = append(out, bytes.TrimSpace(w.ClientConfig.CABundle))
			}
			v, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, vwc, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			for _, w := range v.Webhooks {
				out = append(out, bytes.TrimSpace(w.ClientConfig.CABundle))
			}
			return out
		}
		secretData := func() map[string][]byte {
			s, err := kube.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return s.Data
		}
		ca := bytes.TrimSpace(secretData()["ca.crt"])
		Expect(ca).NotTo(BeEmpty())
		Eventually(func(g Gomega) {
			bundles := caBundles(g)
			g.Expect(bundles).To(HaveLen(4), "mutate-pods, validate-pods, validate-pods-warn and validate-workloads")
			for _, b := range bundles {
				g.Expect(b).To(Equal(ca))
			}
		}, 30*time.Second).Should(Succeed())

		By("helm upgrade with a changed value keeps the certificates and CA bundles")
		before := secretData()
		up := action.NewUpgrade(helmConfig(ns))
		up.Namespace = ns
		up.WaitStrategy = kubeHookOnly
		up.Timeout = time.Minute
		_, err = up.RunWithContext(ctx, release, ch, map[string]any{"config": map[string]any{"defaultMaxWork": "25s"}, "crds": noCRD})
		Expect(err).NotTo(HaveOccurred(), "helm upgrade")
		d, err = kube.AppsV1().Deployments(ns).Get(ctx, release+"-graceguard", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--default-max-work=25s"), "the upgrade did not land")
		Expect(secretData()).To(Equal(before), "helm upgrade changed the certificates")
		Consistently(func(g Gomega) {
			for _, b := range caBundles(g) {
				g.Expect(b).To(Equal(ca))
			}
		}, 3*time.Second).Should(Succeed(), "helm upgrade wiped or changed a CA bundle")
	})
})

func helmConfig(ns string) *action.Configuration {
	GinkgoHelper()
	cfg := action.NewConfiguration()
	flags := genericclioptions.NewConfigFlags(false)
	kc, cache := kubeconfig(), GinkgoT().TempDir()
	flags.KubeConfig, flags.Namespace, flags.CacheDir = &kc, &ns, &cache
	Expect(cfg.Init(flags, ns, "secret")).To(Succeed())
	return cfg
}

// kubeHookOnly: no kubelet runs here, so Helm must not wait for Pods.
const kubeHookOnly = helmkube.HookOnlyStrategy

func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	Fail("the chart's Deployment has no " + name)
	return ""
}
