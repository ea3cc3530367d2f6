package envtest_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/graceguard/graceguard/pkg/cli"
	"github.com/graceguard/graceguard/pkg/routingprobe"
	"github.com/graceguard/graceguard/pkg/routingprobe/kubeprobe"
)

// measure-routing against a real API server. No kubelet or controller
// manager runs here: the Deployment makes no Pods and no namespace is ever
// removed (its deletion stays Terminating). What can be checked is: the
// objects it creates, its errors, and that it deletes its namespace on
// every way out. The one full run creates the probe's Pods by hand (Ready
// through the status subresource), answers for them with local HTTP
// servers behind a stand-in router, and replaces each deleted one, as the
// Deployment controller and a data plane would.

const probeSelector = "app.kubernetes.io/name=graceguard-routing-probe"

// measureRouting runs `kubectl graceguard measure-routing` through the
// plugin's own entry point.
func measureRouting(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = cli.ExecuteContext(ctx, append([]string{"measure-routing", "--kubeconfig", kubeconfig(), "--image", "registry.local/graceguard:e2e"}, args...),
		strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// probeNamespaces are the live (not deleted) namespaces measure-routing made.
func probeNamespaces(ctx context.Context) []corev1.Namespace {
	GinkgoHelper()
	list, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: probeSelector})
	Expect(err).NotTo(HaveOccurred())
	return slices.DeleteFunc(list.Items, func(n corev1.Namespace) bool { return n.DeletionTimestamp != nil })
}

// waitProbeNamespace waits for the namespace of a run in progress.
func waitProbeNamespace(ctx context.Context) string {
	GinkgoHelper()
	var name string
	Eventually(func() int {
		nss := probeNamespaces(ctx)
		if len(nss) == 1 {
			name = nss[0].Name
		}
		return len(nss)
	}).WithContext(ctx).WithTimeout(20 * time.Second).WithPolling(50 * time.Millisecond).Should(Equal(1))
	return name
}

// expectDeleted checks that the namespace was deleted (it stays
// Terminating here, with no namespace controller to empty it).
func expectDeleted(ctx context.Context, name string) {
	GinkgoHelper()
	ns, err := kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	Expect(err).NotTo(HaveOccurred())
	Expect(ns.DeletionTimestamp).NotTo(BeNil(), "namespace %s was not deleted", name)
}

var _ = Describe("kubectl graceguard measure-routing", Ordered, func() {
	BeforeEach(func(ctx SpecContext) {
		Expect(probeNamespaces(ctx)).To(BeEmpty(), "a previous spec left a live probe namespace")
	})

	It("creates nothing with --dry-run", func(ctx SpecContext) {
		code, stdout, stderr := measureRouting(ctx, "--dry-run")
		Expect(code).To(Equal(cli.ExitOK), stderr)
		Expect(stdout).To(ContainSubstring("generateName: graceguard-measure-"))
		Expect(stdout).To(ContainSubstring("# While it runs, route --url to Service probe port 80"))
		Expect(probeNamespaces(ctx)).To(BeEmpty())
	})

	It("creates the probe, then fails on --timeout when no Pod becomes Ready, saying why, and deletes its namespace", func(ctx SpecContext) {
		type result struct {
			code           int
			stdout, stderr string
		}
		done := make(chan result, 1)
		go func() {
			defer GinkgoRecover()
			code, stdout, stderr := measureRouting(ctx, "--url", "http://127.0.0.1:1/", "--timeout=8s", "--hold=45s", "--replicas=4")
			done <- result{code, stdout, stderr}
		}()
		ns := waitProbeNamespace(ctx)
		// The Service is created last.
		var svc *corev1.Service
		Eventually(func() error {
			var err error
			svc, err = kube.CoreV1().Services(ns).Get(ctx, "probe", metav1.GetOptions{})
			return err
		}).WithContext(ctx).WithTimeout(5 * time.Second).Should(Succeed())
		dep, err := kube.AppsV1().Deployments(ns).Get(ctx, "probe", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(*dep.Spec.Replicas).To(Equal(int32(4)))
		spec := dep.Spec.Template.Spec
		Expect(*spec.TerminationGracePeriodSeconds).To(Equal(int64(55)), "--hold plus 10s")
		c := spec.Containers[0]
		Expect(c.Image).To(Equal("registry.local/graceguard:e2e"))
		Expect(c.Args).To(Equal([]string{"probe", "--listen=:8080"}))
		Expect(c.Lifecycle.PreStop.Sleep.Seconds).To(Equal(int64(45)), "the API server kept the native preStop sleep")
		Expect(c.Env).To(ContainElement(HaveField("ValueFrom.FieldRef.FieldPath", "metadata.name")))
		Expect(svc.Spec.Selector).To(Equal(dep.Spec.Selector.MatchLabels))
		Expect(svc.Spec.Ports[0].Port).To(Equal(int32(80)))

		var r result
		Eventually(done).WithTimeout(30 * time.Second).Should(Receive(&r))
		Expect(r.code).To(Equal(cli.ExitUsage))
		Expect(r.stdout).To(BeEmpty())
		Expect(r.stderr).To(ContainSubstring("error: --timeout=8s reached: 0 of 4 probe Pods Ready: no Pods were created; see kubectl -n " + ns + " describe deployment probe"))
		Expect(r.stderr).To(ContainSubstring("Deleted namespace " + ns + "."))
		Expect(r.stderr).NotTo(ContainSubstring("--help"), "an error of the cluster, not of the command line")
		expectDeleted(ctx, ns)
	})

	It("deletes its namespace when interrupted (Ctrl-C)", func(ctx SpecContext) {
		runCtx, interrupt := context.WithCancel(ctx)
		defer interrupt()
		done := make(chan string, 1)
		go func() {
			defer GinkgoRecover()
			code, _, stderr := measureRouting(runCtx, "--url", "http://127.0.0.1:1/")
			Expect(code).To(Equal(cli.ExitUsage))
			done <- stderr
		}()
		ns := waitProbeNamespace(ctx)
		Eventually(func() error {
			_, err := kube.CoreV1().Services(ns).Get(ctx, "probe", metav1.GetOptions{})
			return err
		}).WithContext(ctx).WithTimeout(5 * time.Second).Should(Succeed())
		interrupt()
		var stderr string
		Eventually(done).WithTimeout(5*time.Second).Should(Receive(&stderr), "it stops soon after Ctrl-C")
		Expect(stderr).To(ContainSubstring("error: interrupted: "))
		Expect(stderr).To(ContainSubstring("Deleted namespace " + ns + "."))
		expectDeleted(ctx, ns)
	})

	It("says what the URL answered when it never reaches a probe Pod, and deletes its namespace", func(ctx SpecContext) {
		notProbe := httptest.NewServer(http.NotFoundHandler())
		defer notProbe.Close()
		fp := startFakeProbes(ctx, 2, 0)
		code, _, stderr := measureRouting(ctx, "--url", notProbe.URL+"/", "--timeout=10s", "--replicas=2")
		fp.stop()
		Expect(code).To(Equal(cli.ExitUsage))
		Expect(stderr).To(ContainSubstring("2 probe Pods Ready; waiting for " + notProbe.URL + "/ to reach one."))
		Expect(stderr).To(MatchRegexp(`error: (--timeout=10s reached: )?%s/ never reached a probe Pod in \d+s; last answer: HTTP 404`, regexp.QuoteMeta(notProbe.URL)))
		expectDeleted(ctx, fp.namespace())
	})

	It("measures each withdrawal through the path and prints the profile it needs", func(ctx SpecContext) {
		const withdrawal = 400 * time.Millisecond
		fp := startFakeProbes(ctx, 2, withdrawal)
		class := ingressClass(ctx, "probe-lb")
		code, stdout, stderr := measureRouting(ctx, "--url", fp.router.URL+"/", "--timeout=90s", "--replicas=2", "--deletions=3",
			"--rate=100", "--hold=6s", "--quiet=1s", "--margin=1s", "--profile-name=corp-lb", "--ingress-class="+class, "--host=probe.shop.example")
		fp.stop()
		GinkgoWriter.Printf("$ kubectl graceguard measure-routing ...\n%s\n--- stdout\n%s", stderr, stdout)
		Expect(code).To(Equal(cli.ExitOK), stderr)
		Expect(stderr).To(ContainSubstring("reaches the probe. Sending 100 requests/s and deleting 3 Pods, one at a time."))
		Expect(strings.Count(stderr, "deletion ")).To(Equal(3), stderr)
		deleted := fp.deletedPods()
		Expect(deleted).To(HaveLen(3))
		for _, p := range deleted {
			Expect(stderr).To(ContainSubstring("Pod "+p+" answered "), "each round names the Pod it deleted")
		}
		// The router withdraws a Pod 400 ms after it sees it gone (it
		// polls every 50 ms): each round's figure, and so the max, is
		// about that; + 1 s margin rounds up to 2 s.
		m := regexp.MustCompile(`min (\d+\.\d+)s, median \d+\.\d+s, p90 \d+\.\d+s, max (\d+\.\d+)s`).FindStringSubmatch(stdout)
		Expect(m).NotTo(BeNil(), stdout)
		var lo, hi float64
		_, _ = fmt.Sscan(m[1], &lo)
		_, _ = fmt.Sscan(m[2], &hi)
		Expect(lo).To(BeNumerically(">=", withdrawal.Seconds()-0.1), stdout)
		Expect(hi).To(BeNumerically("<=", withdrawal.Seconds()+0.4), stdout)
		Expect(stdout).To(ContainSubstring("corp-lb: {routingDelay: 2s}"))
		Expect(stdout).To(ContainSubstring("--routing-profile=corp-lb=2s"))
		Expect(stdout).To(MatchRegexp(`# basis measurement: kubectl graceguard measure-routing, cluster \S+, \d{4}-\d\d-\d\d, path %s/, 3 deletions, \d+ requests`, regexp.QuoteMeta(fp.router.URL)))
		Expect(stdout).To(ContainSubstring(" 0 failed"))
		Expect(stderr).To(ContainSubstring("Deleted namespace " + fp.namespace() + "."))
		expectDeleted(ctx, fp.namespace())

		By("--ingress-class: the Ingress it made routed --host to the probe's Service, and every request named that host")
		Expect(stderr).To(ContainSubstring("Created Ingress probe (class " + class + ") routing host probe.shop.example to it."))
		ing := must(kube.NetworkingV1().Ingresses(fp.namespace()).Get(ctx, "probe", metav1.GetOptions{}))
		Expect(*ing.Spec.IngressClassName).To(Equal(class))
		Expect(ing.Spec.Rules).To(HaveLen(1))
		Expect(ing.Spec.Rules[0].Host).To(Equal("probe.shop.example"))
		Expect(ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name).To(Equal("probe"))
		Expect(fp.hosts()).To(Equal([]string{"probe.shop.example"}))
	})

	It("refuses an IngressClass the cluster lacks before it creates anything, naming those it has", func(ctx SpecContext) {
		have := ingressClass(ctx, "probe-have")
		code, stdout, stderr := measureRouting(ctx, "--url", "http://203.0.113.7/", "--ingress-class=no-such-class", "--timeout=30s")
		Expect(code).To(Equal(cli.ExitUsage))
		Expect(stdout).To(BeEmpty())
		Expect(stderr).To(MatchRegexp(`error: --ingress-class=no-such-class: no IngressClass no-such-class in this cluster; it has: [a-z0-9, -]*\b%s\b`, have))
		Expect(probeNamespaces(ctx)).To(BeEmpty(), "nothing created")
	})

	It("--in-cluster creates the client's ServiceAccount, Role, RoleBinding and Job, and fails on --timeout when the Job never runs", func(ctx SpecContext) {
		done := make(chan string, 1)
		go func() {
			defer GinkgoRecover()
			code, stdout, stderr := measureRouting(ctx, "--in-cluster", "--timeout=8s", "--deletions=4")
			Expect(code).To(Equal(cli.ExitUsage))
			Expect(stdout).To(BeEmpty())
			done <- stderr
		}()
		ns := waitProbeNamespace(ctx)
		var job *batchv1.Job
		Eventually(func() error {
			var err error
			job, err = kube.BatchV1().Jobs(ns).Get(ctx, "probe-client", metav1.GetOptions{})
			return err
		}).WithContext(ctx).WithTimeout(5 * time.Second).Should(Succeed())
		Expect(job.Spec.Template.Spec.ServiceAccountName).To(Equal("probe-client"))
		Expect(*job.Spec.ActiveDeadlineSeconds).To(Equal(int64(8)))
		Expect(job.Spec.Template.Spec.Containers[0].Args).To(ContainElements("measure", "--url=http://$(PROBE_SERVICE_HOST)/", "--deletions=4"))
		Expect(job.Spec.Template.Labels).NotTo(HaveKeyWithValue("app.kubernetes.io/name", "graceguard-routing-probe"), "the probe's Service must not select the client")
		role, err := kube.RbacV1().Roles(ns).Get(ctx, "probe-client", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(role.Rules).To(HaveLen(1))
		Expect(role.Rules[0].Verbs).To(ConsistOf("list", "delete"))
		_, err = kube.RbacV1().RoleBindings(ns).Get(ctx, "probe-client", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())

		var stderr string
		Eventually(done).WithTimeout(30 * time.Second).Should(Receive(&stderr))
		Expect(stderr).To(ContainSubstring("follow it with: kubectl -n " + ns + " logs -f job/probe-client"))
		Expect(stderr).To(ContainSubstring("error: --timeout=8s reached: the client Job probe-client did not finish: no Pods were created; see kubectl -n " + ns + " describe job probe-client"))
		expectDeleted(ctx, ns)
	})

	It("the in-cluster client measures with no more than its Role allows, and prints a result the plugin reads", func(ctx SpecContext) {
		runCtx, interrupt := context.WithCancel(ctx)
		defer interrupt()
		cliDone := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(cliDone)
			measureRouting(runCtx, "--in-cluster", "--timeout=2m")
		}()
		ns := waitProbeNamespace(ctx)
		Eventually(func() error {
			_, err := kube.RbacV1().RoleBindings(ns).Get(ctx, "probe-client", metav1.GetOptions{})
			return err
		}).WithContext(ctx).WithTimeout(5 * time.Second).Should(Succeed())

		// The Job's Pod, as its ServiceAccount, against the stand-in
		// data plane (its URL in place of the Service's ClusterIP).
		const withdrawal = 300 * time.Millisecond
		fp := startFakeProbes(ctx, 2, withdrawal)
		defer fp.stop()
		asClient := rest.CopyConfig(cp.Config)
		asClient.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":probe-client"}
		clientKube, err := kubernetes.NewForConfig(asClient)
		Expect(err).NotTo(HaveOccurred())
		s := kubeprobe.Settings{URL: fp.router.URL + "/", Replicas: 2, Deletions: 2, Rate: 100, MaxRequests: 10000, Hold: 6 * time.Second, Quiet: time.Second}
		var log bytes.Buffer
		res, err := kubeprobe.Run(ctx, s, &kubeprobe.Cluster{Kube: clientKube, Namespace: ns}, &log)
		Expect(err).NotTo(HaveOccurred(), log.String())
		Expect(routingprobe.WriteResult(&log, res)).To(Succeed())
		GinkgoWriter.Print(log.String())

		got, err := routingprobe.ParseResult(log.Bytes())
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Rounds).To(HaveLen(2))
		Expect(fp.deletedPods()).To(Equal([]string{got.Rounds[0].Pod, got.Rounds[1].Pod}))
		for _, r := range got.Rounds {
			Expect(r.Delay).To(BeNumerically("~", withdrawal, 200*time.Millisecond), "round of %s", r.Pod)
		}
		Expect(got.Sent).To(BeNumerically(">", 100))
		Expect(got.Failed).To(BeZero())

		// It may not touch anything else: another namespace's Pods.
		_, err = clientKube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "listing Pods elsewhere: %v", err)

		interrupt()
		Eventually(cliDone).WithTimeout(10 * time.Second).Should(BeClosed())
		expectDeleted(ctx, ns)
	})
})

// fakeProbes plays the kubelet, the Deployment controller and the data
// plane for one run: it makes the probe's Pods (Ready), answers for each
// with a local probe server, routes the router's requests among them,
// and withdraws a deleted Pod from the router withdrawal after it sees
// it gone, creating its replacement at once.
type fakeProbes struct {
	router   *httptest.Server
	mu       sync.Mutex
	ns       string
	backends map[string]*httptest.Server
	routed   []string
	deleted  []string
	// hostSeen holds each Host header the router was sent.
	hostSeen map[string]bool
	next     int
	cancel   context.CancelFunc
	done     chan struct{}
}

func startFakeProbes(ctx context.Context, replicas int, withdrawal time.Duration) *fakeProbes {
	GinkgoHelper()
	fp := &fakeProbes{backends: map[string]*httptest.Server{}, done: make(chan struct{})}
	fp.router = httptest.NewServer(http.HandlerFunc(fp.route))
	ctx, fp.cancel = context.WithCancel(ctx)
	go func() {
		defer GinkgoRecover()
		defer close(fp.done)
		fp.loop(ctx, replicas, withdrawal)
	}()
	return fp
}

func (fp *fakeProbes) namespace() string {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	return fp.ns
}

func (fp *fakeProbes) deletedPods() []string {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	return slices.Clone(fp.deleted)
}

// hosts are the Host headers the router was sent, sorted.
func (fp *fakeProbes) hosts() []string {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	return slices.Sorted(maps.Keys(fp.hostSeen))
}

func (fp *fakeProbes) stop() {
	fp.cancel()
	<-fp.done
	fp.router.Close()
	fp.mu.Lock()
	defer fp.mu.Unlock()
	for _, s := range fp.backends {
		s.Close()
	}
}

func (fp *fakeProbes) route(w http.ResponseWriter, r *http.Request) {
	fp.mu.Lock()
	if fp.hostSeen == nil {
		fp.hostSeen = map[string]bool{}
	}
	fp.hostSeen[r.Host] = true
	if len(fp.routed) == 0 {
		fp.mu.Unlock()
		http.Error(w, "no backend", http.StatusServiceUnavailable)
		return
	}
	pod := fp.routed[fp.next%len(fp.routed)]
	fp.next++
	url := fp.backends[pod].URL
	fp.mu.Unlock()
	resp, err := http.Get(url)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	_, _ = io.Copy(w, resp.Body)
}

func (fp *fakeProbes) loop(ctx context.Context, replicas int, withdrawal time.Duration) {
	var ns string
	for ns == "" {
		if nss := probeNamespaces(ctx); len(nss) == 1 {
			ns = nss[0].Name
		}
		if ctx.Err() != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	fp.mu.Lock()
	fp.ns = ns
	fp.mu.Unlock()
	made := 0
	for ctx.Err() == nil {
		list, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: probeSelector})
		if err != nil {
			return
		}
		live := map[string]bool{}
		for _, p := range list.Items {
			live[p.Name] = true
		}
		fp.mu.Lock()
		for name := range fp.backends {
			if !live[name] && !slices.Contains(fp.deleted, name) {
				fp.deleted = append(fp.deleted, name)
				time.AfterFunc(withdrawal, func() {
					fp.mu.Lock()
					defer fp.mu.Unlock()
					fp.routed = slices.DeleteFunc(fp.routed, func(p string) bool { return p == name })
				})
			}
		}
		fp.mu.Unlock()
		for n := len(list.Items); n < replicas; n++ {
			made++
			name := fmt.Sprintf("probe-fake-%d", made)
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/name": "graceguard-routing-probe"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "registry.local/graceguard:e2e"}}},
			}
			created, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			if err != nil {
				return
			}
			created.Status.Phase = corev1.PodRunning
			created.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			if _, err := kube.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
				return
			}
			fp.mu.Lock()
			fp.backends[name] = httptest.NewServer(routingprobe.Handler(name))
			fp.routed = append(fp.routed, name)
			fp.mu.Unlock()
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ingressClass creates an IngressClass named after prefix, for a
// controller nobody runs here.
func ingressClass(ctx context.Context, prefix string) string {
	GinkgoHelper()
	c := must(kube.NetworkingV1().IngressClasses().Create(ctx, &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"},
		Spec:       networkingv1.IngressClassSpec{Controller: "example.com/" + prefix},
	}, metav1.CreateOptions{}))
	DeferCleanup(func(ctx SpecContext) {
		Expect(kube.NetworkingV1().IngressClasses().Delete(ctx, c.Name, metav1.DeleteOptions{})).To(Succeed())
	})
	return c.Name
}
