//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	helmkube "helm.sh/helm/v4/pkg/kube"
	helmrelease "helm.sh/helm/v4/pkg/release/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/graceguard/graceguard/test/e2e/evidence"
	"github.com/graceguard/graceguard/test/harness/apiserver"
)

const (
	releaseName = "graceguard"
	// fullname is the chart's resource name for releaseName (it already
	// contains "graceguard").
	fullname     = "graceguard"
	budgetKey    = "graceguard.io/budget"
	webhookLabel = "app.kubernetes.io/name=graceguard,app.kubernetes.io/instance=" + releaseName
)

// graceguardWebhooks are the webhook names the chart registers; the
// apiserver labels its admission metrics with them.
var graceguardWebhooks = []string{"mutate-pods.graceguard.io", "validate-pods.graceguard.io", "validate-pods-warn.graceguard.io", "validate-workloads.graceguard.io"}

// helmConfig is a Helm SDK configuration for the release namespace, acting
// with the cluster's admin kubeconfig.
func helmConfig() *action.Configuration {
	GinkgoHelper()
	cfg := action.NewConfiguration()
	flags := genericclioptions.NewConfigFlags(false)
	ns, kc := releaseNS, cl.Kubeconfig
	cache := filepath.Join(os.TempDir(), "gg-e2e-helm-cache")
	flags.KubeConfig, flags.Namespace, flags.CacheDir = &kc, &ns, &cache
	Expect(cfg.Init(flags, ns, "secret")).To(Succeed())
	return cfg
}

// uninstallGraceguard removes a release left by an earlier run, the
// cluster-scoped objects of the chart, and the release namespace.
func uninstallGraceguard(ctx context.Context) {
	slog.SetDefault(slog.New(slog.DiscardHandler))
	if _, err := kube.CoreV1().Namespaces().Get(ctx, releaseNS, metav1.GetOptions{}); err == nil {
		un := action.NewUninstall(helmConfig())
		un.WaitStrategy = helmkube.HookOnlyStrategy
		un.Timeout = time.Minute
		un.IgnoreNotFound = true
		if _, err := un.Run(releaseName); err != nil {
			GinkgoWriter.Printf("helm uninstall: %v\n", err)
		}
	}
	_ = kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, fullname, metav1.DeleteOptions{})
	_ = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, fullname, metav1.DeleteOptions{})
	_ = kube.RbacV1().ClusterRoles().Delete(ctx, fullname, metav1.DeleteOptions{})
	_ = kube.RbacV1().ClusterRoleBindings().Delete(ctx, fullname, metav1.DeleteOptions{})
	deleteNamespace(ctx, releaseNS, true)
}

var _ = Describe("graceguard on a real node", Ordered, ContinueOnFailure, func() {
	It("0. installs with its Helm chart, fills its certificates and mutates a dry-run Pod", func(ctx SpecContext) {
		in := &evidence.Install{Release: releaseName, Namespace: releaseNS, Image: webhookImage.Name}
		evMu.Lock()
		ev.Install = in
		evMu.Unlock()

		By("removing what an earlier run left")
		uninstallGraceguard(ctx)

		By("helm install (Helm SDK v4, server-side apply, self-managed certificates)")
		ch, err := loader.Load(filepath.Join(repoRoot, "charts", "graceguard"))
		Expect(err).NotTo(HaveOccurred())
		in.Chart = ch.Metadata.Name + "-" + ch.Metadata.Version
		inst := action.NewInstall(helmConfig())
		inst.ReleaseName, inst.Namespace = releaseName, releaseNS
		inst.CreateNamespace = true
		inst.ServerSideApply = true
		inst.WaitStrategy = helmkube.HookOnlyStrategy
		inst.Timeout = 2 * time.Minute
		values := installValues()
		By("installing the OpenReports CRD (the pinned openreports.io module's), for the observer's policy reports")
		crds, err := apiserver.FindReportCRDs(ctx)
		Expect(err).NotTo(HaveOccurred())
		_, err = envtest.InstallCRDs(cl.RESTConfig, envtest.CRDInstallOptions{Paths: []string{crds.OpenReports}})
		Expect(err).NotTo(HaveOccurred(), "installing the OpenReports CRD")
		start := time.Now()
		_, err = inst.RunWithContext(ctx, ch, values)
		Expect(err).NotTo(HaveOccurred(), "helm install")
		in.HelmInstall = evidence.S(time.Since(start))

		DeferCleanup(func(ctx SpecContext) { saveLogs(ctx, releaseNS, webhookLabel, "webhook-install") })
		By("waiting for the caBundle, both replicas and a mutated dry-run Pod")
		var caAt, readyAt, mutatedAt time.Time
		probe := appPod(nsLab, "dry-run-probe", nil, nil)
		var last string
		Eventually(func(g Gomega) {
			if caAt.IsZero() {
				m, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, fullname, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				v, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, fullname, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				if injected(m, v) {
					caAt = time.Now()
					in.Webhooks = webhookNames(m, v)
				}
			}
			if readyAt.IsZero() {
				d, err := kube.AppsV1().Deployments(releaseNS).Get(ctx, fullname, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				in.Replicas = int(*d.Spec.Replicas)
				if d.Status.ReadyReplicas == *d.Spec.Replicas && d.Status.UpdatedReplicas == *d.Spec.Replicas && d.Status.AvailableReplicas == *d.Spec.Replicas {
					readyAt = time.Now()
				}
			}
			if mutatedAt.IsZero() {
				p, err := kube.CoreV1().Pods(nsLab).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				switch {
				case err != nil:
					last = err.Error()
				case p.Annotations[budgetKey] != "":
					mutatedAt, in.DryRunBudget = time.Now(), p.Annotations[budgetKey]
				default:
					last = "admitted without " + budgetKey + " (mutating webhook failed open)"
				}
				if !mutatedAt.IsZero() {
					last = ""
				}
				noteDryRun(in, last, time.Since(start))
			}
			g.Expect(caAt.IsZero() || readyAt.IsZero() || mutatedAt.IsZero()).To(BeFalse(),
				"caBundle injected: %v, replicas ready: %v, dry-run mutated: %v (last dry-run: %s)", !caAt.IsZero(), !readyAt.IsZero(), !mutatedAt.IsZero(), last)
		}).WithContext(ctx).WithTimeout(6 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		in.CABundle, in.ReplicasUp, in.DryRunMutate = evidence.S(caAt.Sub(start)), evidence.S(readyAt.Sub(start)), evidence.S(mutatedAt.Sub(start))

		in.CertsMounted = certMountTimes(ctx, start)
		pods := readyPods(ctx, releaseNS, webhookLabel)
		var images []string
		for _, p := range pods {
			images = append(images, p.Spec.Containers[0].Image+" "+string(p.Spec.Containers[0].ImagePullPolicy))
		}
		in.Checks.Add("webhook replicas Ready", "2", len(pods) == 2, "%d (%s)", len(pods), strings.Join(images, ", "))
		// The kubelet reports what it runs as imageID: the repo digest (the
		// release's image index) when containerd knows one, else the image
		// ID (the config digest of this node's platform in that index).
		var running []string
		for _, p := range pods {
			for _, cs := range p.Status.ContainerStatuses {
				running = append(running, cs.ImageID)
			}
		}
		config := webhookImage.Configs["linux/"+runtime.GOARCH]
		allRelease := len(running) == len(pods) && len(running) > 0
		for _, id := range running {
			if !strings.HasSuffix(id, "@"+webhookImage.Digest) && id != config {
				allRelease = false
			}
		}
		in.Checks.Add("the replicas run the release image (make image-oci, as make dist builds it)",
			webhookImage.Digest+" (config "+config+")", allRelease, "%s", strings.Join(running, ", "))
		in.Checks.Add("caBundle injected into every webhook by graceguard's rotator", fmt.Sprintf("%d webhooks", len(graceguardWebhooks)), len(in.Webhooks) == len(graceguardWebhooks), "%d: %s", len(in.Webhooks), strings.Join(in.Webhooks, ", "))
		in.Checks.Add("dry-run Pod in an opted-in namespace comes back mutated", budgetKey+" set", in.DryRunBudget != "", "%q", in.DryRunBudget)
		secret, err := kube.CoreV1().Secrets(releaseNS).Get(ctx, fullname+"-cert", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		in.Checks.Add("the chart's empty Secret was filled by the webhook", "ca.crt, tls.crt, tls.key", len(secret.Data["ca.crt"]) > 0 && len(secret.Data["tls.crt"]) > 0 && len(secret.Data["tls.key"]) > 0, "%d keys", len(secret.Data))
		Expect(in.Checks.Failed()).To(BeEmpty())
		installed = true

		// The chart's own `helm test`, its mutation check only: Pods on this node reach
		// the API server through the kubernetes Service, but there is no
		// cluster DNS for the service check's graceguard.<ns>.svc (test/chart
		// runs both against a real API server). The include filter names
		// the hooks to run: the Namespace, ServiceAccount and RBAC (all
		// <fullname>-selftest) and the mutation Pod.
		By("helm test, the mutation check: a Pod from the chart's image, restricted, gets a dry-run Pod back mutated")
		rt := action.NewReleaseTesting(helmConfig())
		rt.Namespace, rt.Timeout = releaseNS, 3*time.Minute
		rt.Filters[action.IncludeNameFilter] = []string{fullname + "-selftest", fullname + "-selftest-mutation"}
		rel, shutdown, err := rt.Run(releaseName)
		var logs strings.Builder
		if r, ok := rel.(*helmrelease.Release); ok {
			_ = rt.GetPodLogs(&logs, r)
		}
		if shutdown != nil {
			_ = shutdown()
		}
		// What the check said: its verdict line, else its last line.
		lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
		said := lines[len(lines)-1]
		for _, l := range lines {
			if strings.Contains(l, "came back mutated") {
				said = l
			}
		}
		if err != nil {
			said = err.Error() + "; " + said
		}
		in.Checks.Add("helm test (mutation check) passes on the node", "the dry-run Pod came back mutated",
			err == nil && strings.Contains(logs.String(), "came back mutated"), "%s", said)
		Expect(err).NotTo(HaveOccurred(), "helm test: %s", logs.String())
	})

	It("1. the shutdown lab: an admitted request survives its Pod's deletion", func(ctx SpecContext) {
		requireInstalled()
		lab(ctx)
	})

	It("2. control arm: without graceguard and with a short grace the same request is cut", func(ctx SpecContext) {
		requireInstalled()
		control(ctx)
	})

	It("3. rollout restart under load: no failed request with graceguard, failures without", func(ctx SpecContext) {
		requireInstalled()
		rollout(ctx)
	})

	It("4. a preStop hook longer than grace: refused with graceguard, killed at grace without", func(ctx SpecContext) {
		requireInstalled()
		hookLongerThanGrace(ctx)
	})

	It("5. graceguard's own rollout while Pods are created: no failed or fail-open admission", func(ctx SpecContext) {
		requireInstalled()
		selfRollout(ctx)
	})

	It("6. a naive proxy sidecar: none lost when graceguard makes it outlive the app, lost when it exits with the app", func(ctx SpecContext) {
		requireInstalled()
		meshProxy(ctx)
	}, NodeTimeout(6*time.Minute))

	It("7. budgets from evidence: kills observed, the recommendation applied, the next rollout clean", func(ctx SpecContext) {
		requireInstalled()
		tuneFromEvidence(ctx)
	})

	It("8. a hostile tenant cannot knock the webhook over: ordinary creates keep being admitted and mutated", func(ctx SpecContext) {
		requireInstalled()
		hostileTenant(ctx)
	}, NodeTimeout(15*time.Minute))

	It("9. Istio native sidecar: none lost when graceguard delays its drain past the routing window, lost when it drains at deletion", func(ctx SpecContext) {
		requireInstalled()
		nativeSidecar(ctx)
	}, NodeTimeout(6*time.Minute))
	It("10. a broken preStop hook: the app still gets SIGTERM and drains in what is left; graceguard warns and reports it", func(ctx SpecContext) {
		requireInstalled()
		brokenHook(ctx)
	}, NodeTimeout(8*time.Minute))

	It("11. a queue consumer deleted mid-batch: no message lost or done twice with graceguard's budget, done twice when the grace is shorter than the work", func(ctx SpecContext) {
		requireInstalled()
		queueConsumer(ctx)
	}, NodeTimeout(6*time.Minute))

	It("12. the chart's alerts in a real Prometheus: no ready webhook replica fires when the Fail webhooks have none, SIGKILLs fire where they happened", func(ctx SpecContext) {
		requireInstalled()
		alertsInPrometheus(ctx)
	}, NodeTimeout(10*time.Minute))

	It("13. through a real ingress (Traefik): its withdrawal delay measured; none lost with graceguard's traefik profile, lost without", func(ctx SpecContext) {
		requireInstalled()
		realIngress(ctx)
	}, NodeTimeout(15*time.Minute))

	It("14. a node drain under load with a PodDisruptionBudget: the budget holds the ready floor in both arms; none lost with graceguard, lost without", func(ctx SpecContext) {
		requireInstalled()
		nodeDrain(ctx)
	}, NodeTimeout(12*time.Minute))

	It("15. graceguard down, then starved, during a rollout under load: no creation refused, no hook past its grace, none lost", func(ctx SpecContext) {
		requireInstalled()
		degrade(ctx)
	}, NodeTimeout(25*time.Minute))

	It("16. a database proxy sidecar: none lost in a rollout under load when graceguard.io/sidecars names it, lost when it exits with the app", func(ctx SpecContext) {
		requireInstalled()
		dbSidecar(ctx)
	}, NodeTimeout(10*time.Minute))

	It("17. kubectl graceguard measure-routing on the node: through Traefik it agrees with scenario 13's method, through kube-proxy it times the ClusterIP from its Job", func(ctx SpecContext) {
		requireInstalled()
		measureRoutingOnNode(ctx)
	}, NodeTimeout(35*time.Minute))

	It("18. Argo Rollouts' real controller: a canary under load loses none with graceguard's budget, loses some without; a short scaleDownDelaySeconds is warned", func(ctx SpecContext) {
		requireInstalled()
		argoCanary(ctx)
	}, NodeTimeout(12*time.Minute))
})

// certMountTimes reads, from each webhook replica's log, when its rotator
// wrote (or found) the certificates in the Secret and when the kubelet had
// them mounted in the cert dir (the webhook serves only then), in seconds
// after start (the log has whole seconds).
func certMountTimes(ctx context.Context, start time.Time) []string {
	pods, err := kube.CoreV1().Pods(releaseNS).List(ctx, metav1.ListOptions{LabelSelector: webhookLabel})
	if err != nil {
		return nil
	}
	var out []string
	for _, p := range pods.Items {
		b, err := kube.CoreV1().Pods(releaseNS).GetLogs(p.Name, &corev1.PodLogOptions{Container: "webhook"}).DoRaw(ctx)
		if err != nil {
			continue
		}
		var written, copied, mounted time.Time
		for _, line := range strings.Split(string(b), "\n") {
			var l struct {
				TS  time.Time `json:"ts"`
				Msg string    `json:"msg"`
			}
			if json.Unmarshal([]byte(line), &l) != nil {
				continue
			}
			switch {
			case written.IsZero() && (l.Msg == "server certs refreshed" || l.Msg == "no cert refresh needed"):
				written = l.TS
			case copied.IsZero() && l.Msg == "certificates written from the Secret":
				copied = l.TS
			case mounted.IsZero() && strings.HasPrefix(l.Msg, "certs are ready in"):
				mounted = l.TS
			}
		}
		out = append(out, fmt.Sprintf("%s: Secret filled %s, copied into the cert dir %s, seen by the rotator %s",
			p.Name, relSecs(written, start), relSecs(copied, start), relSecs(mounted, start)))
	}
	return out
}

func relSecs(t, start time.Time) string {
	if t.IsZero() {
		return "not logged"
	}
	return fmt.Sprintf("~%.0f s", t.Sub(start.Truncate(time.Second)).Seconds())
}

// noteDryRun records how dry-run creates in an opted-in namespace fared
// while graceguard was not serving yet: each distinct outcome (error
// messages with their varying parts cut) with its first and last time.
func noteDryRun(in *evidence.Install, outcome string, at time.Duration) {
	if outcome == "" {
		return
	}
	key := outcome
	if i := strings.Index(key, ": Post "); i >= 0 {
		// "failed calling webhook X: failed to call webhook: Post ...: <cause>"
		if j := strings.LastIndex(key, ": "); j > i {
			key = key[:i] + ": Post ...: " + key[j+2:]
		}
	}
	for i := range in.DryRunOutcomes {
		if in.DryRunOutcomes[i].Outcome == key {
			in.DryRunOutcomes[i].Count++
			in.DryRunOutcomes[i].Last = evidence.S(at)
			return
		}
	}
	if len(in.DryRunOutcomes) < 6 {
		in.DryRunOutcomes = append(in.DryRunOutcomes, evidence.Outcome{Outcome: key, Count: 1, First: evidence.S(at), Last: evidence.S(at)})
	}
}

// installValues are the chart values of the suite's release; the
// Prometheus beside the node loads the alerts the chart renders for them.
func installValues() map[string]any {
	repo, tag, _ := strings.Cut(webhookImage.Name, ":")
	return map[string]any{
		"image": map[string]any{"repository": repo, "tag": tag, "pullPolicy": "Never"},
		// The observer writes OpenReports (scenario 9 reads one) and labels
		// its kill counter with the namespace, which GraceguardObservedKills
		// names (scenario 7 and 12 read it from Prometheus).
		"reports":  map[string]any{"enabled": true},
		"observer": map[string]any{"metricsNamespaceLabel": true},
		// The mutating floor, off by default for its cost: with it, Pods
		// created while graceguard is down still get their budget
		// (scenarios 12 and 15).
		"nativeFloor": map[string]any{"mutate": true},
		// The workload webhook's rule for Argo Rollouts' Rollouts: Argo is
		// installed after graceguard here, by scenario 18.
		"webhooks": map[string]any{"validateWorkloads": map[string]any{"argoRollouts": "always"}},
	}
}

func requireInstalled() {
	GinkgoHelper()
	if !installed {
		Fail("graceguard is not installed (spec 0 failed)")
	}
}

func injected(m *admissionregv1.MutatingWebhookConfiguration, v *admissionregv1.ValidatingWebhookConfiguration) bool {
	n := 0
	for _, w := range m.Webhooks {
		if len(w.ClientConfig.CABundle) == 0 {
			return false
		}
		n++
	}
	for _, w := range v.Webhooks {
		if len(w.ClientConfig.CABundle) == 0 {
			return false
		}
		n++
	}
	return n > 0
}

func webhookNames(m *admissionregv1.MutatingWebhookConfiguration, v *admissionregv1.ValidatingWebhookConfiguration) []string {
	var out []string
	for _, w := range m.Webhooks {
		out = append(out, fmt.Sprintf("%s (%s, failurePolicy %s)", w.Name, "mutating", *w.FailurePolicy))
	}
	for _, w := range v.Webhooks {
		out = append(out, fmt.Sprintf("%s (%s, failurePolicy %s)", w.Name, "validating", *w.FailurePolicy))
	}
	return out
}
