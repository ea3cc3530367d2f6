//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/test/e2e/evidence"
)

// Scenario 13 (seed test 10): scenarios 1-3 again, through a real ingress
// controller instead of the stand-in router, and the controller's own
// withdrawal delay measured. Traefik (hack/traefik.sh builds it from the Go
// module proxy; GG_E2E_TRAEFIK names the binary) runs on the node as a host
// process, as the kubelet does: its Kubernetes Ingress provider reads the
// cluster with a ServiceAccount token of its own (Traefik's documented
// ClusterRole), and its entrypoint listens on loopback. It sends requests
// straight to the Pod IPs of the EndpointSlices over the node's bridge.
const (
	traefikClass = "gg-e2e-traefik"
	traefikSA    = "traefik"
	// traefikThrottle is Traefik's providersThrottleDuration, left at its
	// default (cmd/configuration.go): at most one configuration applied per
	// 2 s, the main part of its withdrawal delay.
	traefikThrottle = 2 * time.Second

	// The withdrawal measurement: withdrawRounds deletions of one Pod of
	// withdrawReplicas, each answering about withdrawRate/withdrawReplicas
	// requests a second. Its Pods sleep withdrawHook in preStop
	// (graceguard's routing-delay), longer than any delay Traefik could
	// take, so they serve whatever Traefik still sends them: the last one
	// is the withdrawal, not the moment the app stopped admitting.
	withdrawRounds   = 12
	withdrawReplicas = 3
	withdrawRate     = 90
	withdrawHook     = 10 * time.Second
	// withdrawQuiet ends a round: this long without a request to the
	// deleted Pod (about 30 it would have had while routed).
	withdrawQuiet = 3 * time.Second
	// traefikMargin is what the traefik profile adds to the slowest
	// withdrawal measured before rounding up to whole seconds.
	traefikMargin = time.Second
)

// traefikProc is Traefik running on the node.
type traefikProc struct {
	cmd     *exec.Cmd
	addr    string
	version string
	goVer   string
	exited  chan struct{}
}

// startTraefik gives Traefik its ServiceAccount, ClusterRole and IngressClass,
// writes its kubeconfig (the apiserver's CA and a bound token) and starts it
// watching namespaces (none named: all); it is stopped, and the
// cluster-scoped objects deleted, when the spec ends.
func startTraefik(ctx context.Context, namespaces ...string) *traefikProc {
	GinkgoHelper()
	bin := os.Getenv("GG_E2E_TRAEFIK")
	Expect(bin).NotTo(BeEmpty(), "GG_E2E_TRAEFIK must name the Traefik binary (make e2e builds it with hack/traefik.sh)")
	out, err := exec.CommandContext(ctx, bin, "version").CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "%s version: %s", bin, out)
	t := &traefikProc{exited: make(chan struct{})}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch strings.TrimSpace(k) {
		case "Version":
			t.version = strings.TrimSpace(v)
		case "Go version":
			t.goVer = strings.TrimSpace(v)
		}
	}

	By("giving Traefik a ServiceAccount, its documented ClusterRole and an IngressClass")
	_, err = kube.CoreV1().ServiceAccounts(nsIngress).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: traefikSA}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	read := []string{"get", "list", "watch"}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: traefikClass}, Rules: []rbacv1.PolicyRule{
		// Traefik's ClusterRole for the Ingress provider
		// (docs/content/reference/routing-configuration/kubernetes/ingress.md),
		// and nodes, which its cluster-scope informer lists unless
		// disableClusterScopeResources is set.
		{APIGroups: []string{""}, Resources: []string{"services", "secrets", "nodes"}, Verbs: read},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: read},
		{APIGroups: []string{"extensions", "networking.k8s.io"}, Resources: []string{"ingresses", "ingressclasses"}, Verbs: read},
		{APIGroups: []string{"extensions", "networking.k8s.io"}, Resources: []string{"ingresses/status"}, Verbs: []string{"update"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: traefikClass},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: traefikClass},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: traefikSA, Namespace: nsIngress}}}
	class := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: traefikClass},
		Spec: networkingv1.IngressClassSpec{Controller: "traefik.io/ingress-controller"}}
	deleteCluster := func(ctx context.Context) {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(ctx, traefikClass, metav1.DeleteOptions{})
		_ = kube.RbacV1().ClusterRoles().Delete(ctx, traefikClass, metav1.DeleteOptions{})
		_ = kube.NetworkingV1().IngressClasses().Delete(ctx, traefikClass, metav1.DeleteOptions{})
	}
	deleteCluster(ctx)
	must(kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}))
	must(kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}))
	must(kube.NetworkingV1().IngressClasses().Create(ctx, class, metav1.CreateOptions{}))
	DeferCleanup(func(ctx SpecContext) {
		if os.Getenv("GG_E2E_KEEP") != "1" {
			deleteCluster(ctx)
		}
	})

	tok := must(kube.CoreV1().ServiceAccounts(nsIngress).CreateToken(ctx, traefikSA,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{}))
	kc := clientcmdapi.NewConfig()
	kc.Clusters["gg"] = &clientcmdapi.Cluster{Server: cl.RESTConfig.Host, CertificateAuthorityData: cl.RESTConfig.CAData}
	kc.AuthInfos[traefikSA] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	kc.Contexts["gg"] = &clientcmdapi.Context{Cluster: "gg", AuthInfo: traefikSA}
	kc.CurrentContext = "gg"
	kubeconfig := filepath.Join(outDir, "traefik.kubeconfig")
	Expect(clientcmd.WriteToFile(*kc, kubeconfig)).To(Succeed())

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	t.addr = ln.Addr().String()
	Expect(ln.Close()).To(Succeed())

	logPath := filepath.Join(outDir, "traefik.log")
	logFile, err := os.Create(logPath)
	Expect(err).NotTo(HaveOccurred())
	args := []string{
		"--global.checkNewVersion=false", "--global.sendAnonymousUsage=false",
		"--entryPoints.web.address=" + t.addr,
		"--entryPoints.web.transport.lifeCycle.graceTimeOut=1s",
		"--providers.kubernetesIngress=true",
		"--log.level=INFO",
	}
	if len(namespaces) > 0 {
		args = append(args, "--providers.kubernetesIngress.namespaces="+strings.Join(namespaces, ","))
	}
	By(fmt.Sprintf("starting Traefik %s on %s: %s", t.version, t.addr, strings.Join(args, " ")))
	t.cmd = exec.Command(bin, args...)
	// Out of the cluster: KUBECONFIG, and none of the in-cluster variables.
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "KUBERNETES_SERVICE_") && !strings.HasPrefix(e, "KUBECONFIG=") {
			env = append(env, e)
		}
	}
	t.cmd.Env = append(env, "KUBECONFIG="+kubeconfig)
	t.cmd.Stdout, t.cmd.Stderr = logFile, logFile
	t.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	Expect(t.cmd.Start()).To(Succeed())
	go func() {
		_ = t.cmd.Wait()
		logFile.Close()
		close(t.exited)
	}()
	DeferCleanup(func() {
		_ = t.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-t.exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-t.cmd.Process.Pid, syscall.SIGKILL)
			<-t.exited
		}
	})
	return t
}

// client sends every request to Traefik's entrypoint whatever the URL's
// host, which stays the Host header Traefik routes on; one connection per
// request, as in scenario 3.
func (t *traefikProc) client(timeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: 3 * time.Second}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DisableKeepAlives: true,
		Proxy:             nil,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, t.addr)
		},
	}}
}

func ingressHost(ns, name string) string { return name + "." + ns + ".e2e" }

func ingressFor(ns, name string) *networkingv1.Ingress {
	class, prefix := traefikClass, networkingv1.PathTypePrefix
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingv1.IngressSpec{IngressClassName: &class, Rules: []networkingv1.IngressRule{{
			Host: ingressHost(ns, name),
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: name, Port: networkingv1.ServiceBackendPort{Number: appPort}}},
			}}}},
		}}},
	}
}

// servedBy is the Pod the drain app's answer names ("" when no app
// answered: Traefik's own errors, a cut connection).
func servedBy(body string) string {
	var b struct {
		Pod string `json:"pod"`
	}
	if json.Unmarshal([]byte(body), &b) != nil {
		return ""
	}
	return b.Pod
}

// ingressResult is one request of the load through Traefik.
type ingressResult struct {
	result
	pod string
}

// kind is "" for a success, else the failure class: the app's own 503 while
// draining, another status (Traefik's 502 when the Pod's connection fails,
// its 503 when no server is left) or the client's error.
func (r ingressResult) kind() string {
	switch {
	case r.err != nil:
		return errKind(r.err)
	case r.code == http.StatusOK:
		return ""
	case r.code == http.StatusServiceUnavailable && strings.Contains(r.body, `"draining"`):
		return "rejected_503"
	}
	return fmt.Sprintf("http_%d", r.code)
}

// ingressLoad sends requests to one Ingress host through Traefik at a fixed
// rate (open loop) and keeps, per Pod, when the last request it answered
// was sent.
type ingressLoad struct {
	mu       sync.Mutex
	results  []ingressResult
	lastSent map[string]time.Time
	wg       sync.WaitGroup
	stop     chan struct{}
	done     chan struct{}
}

func startIngressLoad(ctx context.Context, t *traefikProc, host string, rate int, work, timeout time.Duration) *ingressLoad {
	l := &ingressLoad{lastSent: map[string]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
	client := t.client(timeout)
	url := fmt.Sprintf("http://%s/work?seconds=%g", host, work.Seconds())
	go func() {
		defer close(l.done)
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for {
			select {
			case <-l.stop:
				l.wg.Wait()
				return
			case <-ctx.Done():
				l.wg.Wait()
				return
			case <-tick.C:
				l.wg.Add(1)
				go func() {
					defer l.wg.Done()
					r := ingressResult{result: get(ctx, client, url)}
					r.pod = servedBy(r.body)
					l.mu.Lock()
					l.results = append(l.results, r)
					if r.pod != "" && r.start.After(l.lastSent[r.pod]) {
						l.lastSent[r.pod] = r.start
					}
					l.mu.Unlock()
				}()
			}
		}
	}()
	return l
}

func (l *ingressLoad) last(pod string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastSent[pod]
}

func (l *ingressLoad) snapshot() []ingressResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.results)
}

func (l *ingressLoad) finish() []ingressResult {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
	return l.snapshot()
}

// waitRoutedToAll waits until Traefik has sent each of pods a request in
// the last second.
func waitRoutedToAll(l *ingressLoad, pods []corev1.Pod, what string) {
	GinkgoHelper()
	Eventually(func() []string {
		var stale []string
		for _, p := range pods {
			if time.Since(l.last(p.Name)) > time.Second {
				stale = append(stale, p.Name)
			}
		}
		return stale
	}).WithTimeout(time.Minute).WithPolling(100*time.Millisecond).Should(BeEmpty(), "Traefik routes to every Pod (%s)", what)
}

// waitIngressServes waits until Traefik routes the Ingress host to the app.
func waitIngressServes(ctx context.Context, t *traefikProc, host string) {
	GinkgoHelper()
	c := t.client(3 * time.Second)
	Eventually(func() string {
		r := get(ctx, c, "http://"+host+"/work?seconds=0")
		if r.code == http.StatusOK && servedBy(r.body) != "" {
			return ""
		}
		return r.String()
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(200*time.Millisecond).Should(BeEmpty(), "Traefik routes %s to the app", host)
}

func realIngress(ctx context.Context) {
	in := &evidence.Ingress{Throttle: evidence.S(traefikThrottle)}
	evMu.Lock()
	ev.Ingress = in
	evMu.Unlock()
	prof, ok := builtinProfile(budget.ProfileTraefik)
	Expect(ok).To(BeTrue(), "graceguard ships a %q routing profile", budget.ProfileTraefik)

	t := startTraefik(ctx, nsIngressA, nsIngressB)
	in.Traefik, in.Entrypoint = t.version, t.addr
	in.Binary = fmt.Sprintf("github.com/traefik/traefik/v3@%s built by hack/traefik.sh with %s", t.version, t.goVer)
	in.Provider = fmt.Sprintf("kubernetesIngress on namespaces %s and %s; KUBECONFIG with a token of ServiceAccount %s/%s",
		nsIngressA, nsIngressB, nsIngress, traefikSA)

	measureWithdrawal(ctx, t, nsIngressA, in, prof)
	ingressRollout(ctx, t, in, prof)
	heldThroughIngress(ctx, t, in, prof)
	Expect(in.Checks.Failed()).To(BeEmpty())
}

func builtinProfile(name string) (budget.Profile, bool) {
	for _, p := range budget.BuiltinProfiles() {
		if p.Name == name {
			return p, true
		}
	}
	return budget.Profile{}, false
}

// measureWithdrawal deletes one Pod of a Deployment behind Traefik in ns
// (opted in), withdrawRounds times, under load, and records how long after
// each delete call Traefik still sent it requests.
func measureWithdrawal(ctx context.Context, t *traefikProc, ns string, in *evidence.Ingress, prof budget.Profile) {
	GinkgoHelper()
	const name = "withdraw"
	w := &evidence.Withdrawal{Namespace: ns, Workload: name, Replicas: withdrawReplicas, Rate: withdrawRate,
		Quiet: evidence.S(withdrawQuiet), Profile: prof.Name, ProfileRouting: evidence.S(prof.Routing), ProfileMargin: evidence.S(traefikMargin)}
	evMu.Lock()
	in.Withdrawal = w
	evMu.Unlock()

	By("measuring Traefik's withdrawal delay over repeated deletions")
	dep := appDeployment(ns, name, withdrawReplicas, map[string]string{
		"graceguard.io/routing-delay":  withdrawHook.String(),
		"graceguard.io/max-work":       "1s",
		"graceguard.io/readiness-path": "/ready",
	})
	must(kube.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}))
	must(kube.CoreV1().Services(ns).Create(ctx, appService(ns, name, map[string]string{"app": name}), metav1.CreateOptions{}))
	must(kube.NetworkingV1().Ingresses(ns).Create(ctx, ingressFor(ns, name), metav1.CreateOptions{}))
	waitDeploymentDone(ctx, ns, name, 3*time.Minute)
	host := ingressHost(ns, name)
	waitIngressServes(ctx, t, host)

	ld := startIngressLoad(ctx, t, host, withdrawRate, 0, 5*time.Second)
	defer ld.finish()
	var delays []time.Duration
	for i := 0; i < withdrawRounds; i++ {
		var pods []corev1.Pod
		Eventually(func() []corev1.Pod {
			pods = readyPods(ctx, ns, "app="+name)
			return pods
		}).WithContext(ctx).WithTimeout(2*time.Minute).WithPolling(200*time.Millisecond).Should(HaveLen(withdrawReplicas), "round %d: %d Ready Pods", i+1, withdrawReplicas)
		if i == 0 {
			c := pods[0].Spec.Containers[0]
			w.PreStop, w.Budget = preStopString(c), pods[0].Annotations[budgetKey]
		}
		waitRoutedToAll(ld, pods, fmt.Sprintf("before deletion %d", i+1))
		victim := pods[i%len(pods)].Name
		before := len(ld.snapshot())
		t0 := time.Now()
		Expect(kube.CoreV1().Pods(ns).Delete(ctx, victim, metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() time.Duration {
			return time.Since(later(t0, ld.last(victim)))
		}).WithTimeout(2*withdrawHook).WithPolling(50*time.Millisecond).Should(BeNumerically(">=", withdrawQuiet),
			"Traefik stops routing to %s", victim)
		round := evidence.WithdrawalRound{Pod: victim}
		for _, r := range ld.snapshot()[before:] {
			if r.kind() != "" {
				round.Failed++
			}
			if r.pod == victim && !r.start.Before(t0) {
				round.Routed++
			}
		}
		// 0 when Traefik sent it nothing after the delete call.
		var delay time.Duration
		if last := ld.last(victim); last.After(t0) {
			delay = last.Sub(t0)
		}
		round.LastRouted = evidence.AtOf(delay)
		delays = append(delays, delay)
		w.Rounds = append(w.Rounds, round)
		GinkgoWriter.Printf("withdrawal %d: %s routed %d requests after the delete, the last %s after it\n", i+1, victim, round.Routed, *round.LastRouted)
	}
	results := ld.finish()
	w.Sent = len(results)
	for _, r := range results {
		if r.kind() != "" {
			w.Failed++
		}
	}
	sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
	w.Min, w.Median, w.P90, w.Max = evidence.S(delays[0]), evidence.S(nearestRank(delays, 50)), evidence.S(nearestRank(delays, 90)), evidence.S(delays[len(delays)-1])
	GinkgoWriter.Printf("Traefik withdrawal over %d deletions: min %s, median %s, p90 %s, max %s; %d of %d requests failed\n",
		len(delays), w.Min, w.Median, w.P90, w.Max, w.Failed, w.Sent)

	ck := &in.Checks
	ck.Add("withdrawal: measured over repeated deletions", ">= 10 deletions", len(w.Rounds) >= 10, "%d deletions", len(w.Rounds))
	ck.Add("withdrawal: Traefik stopped routing to each deleted Pod within its preStop sleep", fmt.Sprintf("every last request < %s", withdrawHook),
		delays[len(delays)-1] < withdrawHook, "slowest %s", w.Max)
	ck.Add("withdrawal: no request failed while Pods with graceguard's hook were deleted", "0 failed", w.Failed == 0 && w.Sent > 0, "%d failed of %d", w.Failed, w.Sent)
	want := time.Duration(math.Ceil((delays[len(delays)-1] + traefikMargin).Seconds())) * time.Second
	ck.Add(fmt.Sprintf("the %s profile's routing delay is this measurement's: the slowest withdrawal + %s, rounded up", prof.Name, traefikMargin),
		fmt.Sprintf(">= %s (basis %s)", budget.Format(want), budget.BasisMeasurement),
		prof.Routing >= want && prof.Basis == budget.BasisMeasurement, "%s (basis %s)", budget.Format(prof.Routing), prof.Basis)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// nearestRank is the p-th percentile of sorted by the nearest-rank method.
func nearestRank(sorted []time.Duration, p int) time.Duration {
	i := int(math.Ceil(float64(p)/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// ingressRollout is scenario 3 through Traefik: arm A takes the traefik
// profile from graceguard, arm B has no graceguard.
func ingressRollout(ctx context.Context, t *traefikProc, in *evidence.Ingress, prof budget.Profile) {
	GinkgoHelper()
	ro := &evidence.Rollout{Rate: rolloutRate, Work: evidence.S(rolloutWork), KeepAlives: false, ClientTimeout: evidence.S(rolloutTimeout),
		Replicas: rolloutReps, Strategy: "RollingUpdate maxSurge=1 maxUnavailable=0"}
	evMu.Lock()
	in.Rollout = ro
	evMu.Unlock()
	arms := []struct {
		arm         *evidence.Arm
		annotations map[string]string
	}{
		{&evidence.Arm{Name: "A: graceguard, routing-profile " + prof.Name, Namespace: nsIngressA, OptedIn: true}, map[string]string{
			"graceguard.io/routing-profile": prof.Name,
			"graceguard.io/max-work":        "2s",
			"graceguard.io/readiness-path":  "/ready",
			"graceguard.io/liveness-path":   "/live",
		}},
		{&evidence.Arm{Name: "B: no graceguard", Namespace: nsIngressB, OptedIn: false}, nil},
	}
	By("creating both Deployments behind Traefik")
	for _, a := range arms {
		dep := appDeployment(a.arm.Namespace, "web", rolloutReps, a.annotations)
		if !a.arm.OptedIn {
			ownProbes(&dep.Spec.Template.Spec.Containers[0])
		}
		must(kube.AppsV1().Deployments(a.arm.Namespace).Create(ctx, dep, metav1.CreateOptions{}))
		must(kube.CoreV1().Services(a.arm.Namespace).Create(ctx, appService(a.arm.Namespace, "web", map[string]string{"app": "web"}), metav1.CreateOptions{}))
		must(kube.NetworkingV1().Ingresses(a.arm.Namespace).Create(ctx, ingressFor(a.arm.Namespace, "web"), metav1.CreateOptions{}))
		ro.Arms = append(ro.Arms, a.arm)
	}
	for _, a := range arms {
		waitDeploymentDone(ctx, a.arm.Namespace, "web", 3*time.Minute)
		waitIngressServes(ctx, t, ingressHost(a.arm.Namespace, "web"))
	}
	for _, a := range arms {
		By("restarting " + a.arm.Name + " under load through Traefik")
		runIngressArm(ctx, t, a.arm)
	}

	A, B := ro.Arms[0], ro.Arms[1]
	wantHook := fmt.Sprintf("sleep %ds", int(prof.Routing.Seconds()))
	ck := &in.Checks
	ck.Add("rollout: arm A Pods carry the "+prof.Name+" profile's preStop sleep", wantHook, A.PreStop == wantHook, "%s; %s", A.PreStop, A.Budget)
	ck.Add("rollout: arm B Pods have no preStop", "none", B.PreStop == "none", "%s, grace %d", B.PreStop, B.Grace)
	for _, a := range ro.Arms {
		ck.Add("rollout: "+a.Name+": every Pod replaced under load", fmt.Sprintf("%d replaced, > %d requests sent", rolloutReps, rolloutRate*5),
			a.Replaced == rolloutReps && a.Sent > rolloutRate*5, "%d replaced, %d sent over %s", a.Replaced, a.Sent, a.Load)
	}
	ck.Add("rollout: arm A (graceguard) through Traefik: no failed request", "0 failed", A.Failed == 0 && A.Sent > 0,
		"%d failed of %d (%s)", A.Failed, A.Sent, evidence.KindList(A.ByKind))
	ck.Add("rollout: arm B (no graceguard) through Traefik: requests fail", "> 0 failed", B.Failed > 0,
		"%d failed of %d (%s)", B.Failed, B.Sent, evidence.KindList(B.ByKind))
}

func runIngressArm(ctx context.Context, t *traefikProc, arm *evidence.Arm) {
	GinkgoHelper()
	old := readyPods(ctx, arm.Namespace, "app=web")
	Expect(old).To(HaveLen(rolloutReps))
	c := old[0].Spec.Containers[0]
	arm.PreStop, arm.Grace, arm.Budget = preStopString(c), grace(&old[0]), old[0].Annotations[budgetKey]

	start := time.Now()
	ld := startIngressLoad(ctx, t, ingressHost(arm.Namespace, "web"), rolloutRate, rolloutWork, rolloutTimeout)
	defer ld.finish()
	waitRoutedToAll(ld, old, "before the restart")
	time.Sleep(baseline)
	restart := time.Now()
	restartTemplate(ctx, arm.Namespace, "web")
	waitDeploymentDone(ctx, arm.Namespace, "web", 5*time.Minute)
	arm.Rollout = evidence.S(time.Since(restart))
	fresh := readyPods(ctx, arm.Namespace, "app=web")
	waitRoutedToAll(ld, fresh, "after the restart")
	time.Sleep(baseline)
	results := ld.finish()
	arm.Load = evidence.S(time.Since(start))

	for _, p := range fresh {
		if !slices.ContainsFunc(old, func(o corev1.Pod) bool { return o.Name == p.Name }) {
			arm.Replaced++
		}
	}
	arm.ByKind = map[string]int{}
	seen := map[string]int{}
	per := map[string]*evidence.EndpointFailures{}
	for _, res := range results {
		arm.Sent++
		k := res.kind()
		if k == "" {
			arm.Succeeded++
			continue
		}
		arm.Failed++
		arm.ByKind[k]++
		switch {
		case k == "rejected_503":
			arm.Rejected++
		case !strings.HasPrefix(k, "http_"):
			arm.ConnErrors++
		}
		// Who failed it: the Pod when the app answered, else Traefik.
		who := res.pod
		if who == "" {
			who = "traefik"
		}
		at := evidence.S(res.start.Sub(restart))
		if key := who + "/" + k; seen[key] < 2 && len(arm.Samples) < 24 {
			seen[key]++
			detail := fmt.Sprintf("HTTP %d %s", res.code, strings.TrimSpace(res.body))
			if res.err != nil {
				detail = trimErr(res.err)
			}
			if len(detail) > 120 {
				detail = detail[:120] + "..."
			}
			arm.Samples = append(arm.Samples, evidence.Failure{At: at, Endpoint: who, Kind: k, Detail: detail})
		}
		e := per[who]
		if e == nil {
			e = &evidence.EndpointFailures{Endpoint: who, First: at, Last: at}
			per[who] = e
		}
		e.Failed++
		e.First, e.Last = min(e.First, at), max(e.Last, at)
	}
	sort.Slice(arm.Samples, func(i, j int) bool { return arm.Samples[i].At < arm.Samples[j].At })
	for _, e := range per {
		arm.PerEndpoint = append(arm.PerEndpoint, *e)
	}
	sort.Slice(arm.PerEndpoint, func(i, j int) bool { return arm.PerEndpoint[i].First < arm.PerEndpoint[j].First })
	GinkgoWriter.Printf("%s through Traefik: sent %d, ok %d, failed %d %v, rollout %s\n", arm.Name, arm.Sent, arm.Succeeded, arm.Failed, arm.ByKind, arm.Rollout)
}

// heldThroughIngress is scenarios 1 and 2 through Traefik: one long request
// to a lone Pod, the Pod deleted while the app works on it.
func heldThroughIngress(ctx context.Context, t *traefikProc, in *evidence.Ingress, prof budget.Profile) {
	GinkgoHelper()
	appGrace, ctlGrace := int64(labAppGrace), int64(controlGrace)
	cases := []struct {
		h           *evidence.HeldRequest
		annotations map[string]string
		grace       *int64
		sigtermWait time.Duration
	}{
		{&evidence.HeldRequest{Name: "A: graceguard, routing-profile " + prof.Name, Namespace: nsIngressA, OptedIn: true}, map[string]string{
			"graceguard.io/routing-profile": prof.Name,
			"graceguard.io/max-work":        labWork.String(),
			"graceguard.io/readiness-path":  "/ready",
			"graceguard.io/liveness-path":   "/live",
		}, &appGrace, time.Minute},
		{&evidence.HeldRequest{Name: "B: no graceguard, grace 3", Namespace: nsIngressB}, nil, &ctlGrace, 20 * time.Second},
	}
	for _, c := range cases {
		evMu.Lock()
		in.Held = append(in.Held, c.h)
		evMu.Unlock()
		By("holding a request through Traefik across the deletion of its Pod: " + c.h.Name)
		holdThroughIngress(ctx, t, c.h, c.annotations, c.grace, c.sigtermWait)
	}
	A, B := in.Held[0], in.Held[1]
	ck := &in.Checks
	ck.Add("held request: arm A's client gets the completed 200 through Traefik", "200 completed",
		strings.HasPrefix(A.Client, "200 ") && strings.Contains(A.Client, `"completed":true`), "%s after %s", A.Client, fmtAt(A.ClientDone))
	ck.Add("held request: arm A's SIGTERM comes no earlier than the profile's routing delay", fmt.Sprintf(">= %s", budget.Format(prof.Routing)),
		A.SIGTERM != nil && float64(*A.SIGTERM) >= prof.Routing.Seconds(), "%s", fmtAt(A.SIGTERM))
	ck.Add("held request: arm A's app exits before the SIGKILL deadline", fmt.Sprintf("shutdown_complete < %ds, exit 0", A.Grace),
		A.ShutdownComplete != nil && float64(*A.ShutdownComplete) < float64(A.Grace) && A.ExitCode != nil && *A.ExitCode == 0,
		"shutdown_complete at %s, exit code %s", fmtAt(A.ShutdownComplete), fmtExit(A.ExitCode))
	ck.Add("held request: arm B's request through Traefik is cut", "not a completed 200",
		!(strings.HasPrefix(B.Client, "200 ") && strings.Contains(B.Client, `"completed":true`)), "%s after %s", B.Client, fmtAt(B.ClientDone))
}

func holdThroughIngress(ctx context.Context, t *traefikProc, h *evidence.HeldRequest, annotations map[string]string, g *int64, sigtermWait time.Duration) {
	GinkgoHelper()
	const name = "held"
	labels := map[string]string{"app": name}
	pod := appPod(h.Namespace, name, labels, annotations)
	pod.Spec.TerminationGracePeriodSeconds = g
	if !h.OptedIn {
		ownProbes(&pod.Spec.Containers[0])
	}
	must(kube.CoreV1().Services(h.Namespace).Create(ctx, appService(h.Namespace, name, labels), metav1.CreateOptions{}))
	must(kube.NetworkingV1().Ingresses(h.Namespace).Create(ctx, ingressFor(h.Namespace, name), metav1.CreateOptions{}))
	created := must(kube.CoreV1().Pods(h.Namespace).Create(ctx, pod, metav1.CreateOptions{}))
	h.Pod, h.Budget, h.Grace, h.PreStop = created.Name, created.Annotations[budgetKey], grace(created), preStopString(created.Spec.Containers[0])
	h.Request = evidence.S(labRequest)
	waitPodReady(ctx, h.Namespace, name)
	host := ingressHost(h.Namespace, name)
	waitIngressServes(ctx, t, host)

	lf := followLog(ctx, h.Namespace, name)
	_, ok := lf.waitFor("listening", 30*time.Second)
	Expect(ok).To(BeTrue(), "the app's log through the API server")
	pw := watchPod(ctx, h.Namespace, name)
	clientDone := make(chan result, 1)
	go func() {
		clientDone <- get(ctx, t.client(2*time.Minute), fmt.Sprintf("http://%s/work?seconds=%g", host, labRequest.Seconds()))
	}()
	// The probe of waitIngressServes was work too: wait for this request's.
	var started appEvent
	Eventually(func() bool {
		for _, e := range lf.snapshot() {
			if e.Event == "work_started" && strings.Contains(e.Raw, fmt.Sprintf(`"seconds":%g`, labRequest.Seconds())) {
				started = e
				return true
			}
		}
		return false
	}).WithTimeout(20*time.Second).WithPolling(50*time.Millisecond).Should(BeTrue(), "the app logged work_started for the held request")

	t0 := time.Now()
	Expect(kube.CoreV1().Pods(h.Namespace).Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())
	GinkgoWriter.Printf("%s: deleted %s/%s %s after the app admitted the request\n", h.Name, h.Namespace, name, t0.Sub(started.TS).Round(time.Millisecond))
	if sig, ok := lf.waitFor("sigterm", sigtermWait); ok {
		h.SIGTERM = since(t0, sig.TS)
		late := get(ctx, t.client(3*time.Second), "http://"+host+"/work?seconds=0.1")
		h.Late, h.LateAt = late.String(), since(t0, late.start)
	}
	var res result
	select {
	case res = <-clientDone:
	case <-time.After(time.Minute):
		res = result{err: fmt.Errorf("no answer within a minute of the delete")}
	}
	h.Client, h.ClientDone = res.String(), since(t0, res.end)
	lf.waitEnd(time.Minute)
	_, exit, _ := pw.wait(time.Minute)
	h.ExitCode = exit
	if e := lf.first("shutdown_complete"); e != nil {
		h.ShutdownComplete = since(t0, e.TS)
	}
	lf.save("ingress-" + h.Namespace + "-" + name)
	GinkgoWriter.Printf("%s: client %s at %s; sigterm %s; exit %s\n", h.Name, h.Client, fmtAt(h.ClientDone), fmtAt(h.SIGTERM), fmtExit(h.ExitCode))
}
