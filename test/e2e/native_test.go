//go:build e2e

package e2e

import (
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/graceguard/graceguard/test/e2e/evidence"
)

// Scenario 9: Istio's native sidecar drains at deletion (istio#51855,
// #60649); graceguard moves its drain after the routing window.
const (
	nativeproxyImage = "registry.local/nativeproxy:e2e"
	// nativeStatusPort is pilot-agent's status port, Istio's default
	// (status.sidecar.istio.io/port).
	nativeStatusPort = 15020
	// nativeLag is the router's lag; nativeRouting, arm A's routing delay,
	// outlasts it plus the EndpointSlice controller's and the informer's
	// delays (under a second here), so the drain comes after the router
	// dropped the Pod.
	nativeLag      = 4 * time.Second
	nativeRouting  = 8 * time.Second
	nativeRate     = 40
	nativeWork     = 100 * time.Millisecond
	nativeTimeout  = 5 * time.Second
	nativeBaseline = 3 * time.Second
	// istioStatus is sidecar.istio.io/status as Istio's injector writes it
	// (pkg/kube/inject, SidecarInjectionStatus) for what these Pods carry.
	istioStatus = `{"initContainers":["istio-proxy"],"containers":null,"volumes":null,"imagePullSecrets":null,"revision":"default"}`
)

// istioDrain is the preStop Istio's injection template gives a native
// istio-proxy.
var istioDrain = []string{"pilot-agent", "request", fmt.Sprintf("--debug-port=%d", nativeStatusPort), "POST", "drain"}

// findBusybox is the static busybox packed into the nativeproxy image:
// $GG_E2E_BUSYBOX, else busybox on the PATH (Debian: apt-get install
// busybox-static), and its version line.
func findBusybox(ctx context.Context) (string, string) {
	GinkgoHelper()
	p := os.Getenv("GG_E2E_BUSYBOX")
	if p == "" {
		var err error
		p, err = exec.LookPath("busybox")
		Expect(err).NotTo(HaveOccurred(), "scenario 9's proxy image needs a static busybox (its sh and sleep run graceguard's wrapped hook): "+
			"install one (Debian: apt-get install busybox-static) or name it in GG_E2E_BUSYBOX")
	}
	f, err := elf.Open(p)
	Expect(err).NotTo(HaveOccurred(), "busybox %s", p)
	defer f.Close()
	for _, prog := range f.Progs {
		Expect(prog.Type).NotTo(Equal(elf.PT_INTERP), "busybox %s is dynamically linked; the image has no libc: want a static one (Debian: busybox-static)", p)
	}
	out, _ := exec.CommandContext(ctx, p, "--help").CombinedOutput()
	version, _, _ := strings.Cut(string(out), "\n")
	Expect(version).To(HavePrefix("BusyBox"), "%s --help: %q", p, out)
	return p, strings.TrimSuffix(version, " multi-call binary.")
}

// nativePod is the drain app behind a native istio-proxy, as Istio's
// injector leaves it (the proxy's init container with Istio's drain hook,
// the status annotation); the app has probes of its own (graceguard adds
// none to Istio's Pods: Istio rewrites probes).
func nativePod(name string, annotations map[string]string) *corev1.Pod {
	ann := map[string]string{
		"sidecar.istio.io/status":     istioStatus,
		"graceguard.io/routing-delay": nativeRouting.String(),
		"graceguard.io/max-work":      "2s",
	}
	for k, v := range annotations {
		ann[k] = v
	}
	pod := appPod(nsNative, name, map[string]string{"app": name}, ann)
	ownProbes(&pod.Spec.Containers[0])
	always := corev1.ContainerRestartPolicyAlways
	pod.Spec.InitContainers = []corev1.Container{{
		Name:            "istio-proxy",
		Image:           nativeproxyImage,
		ImagePullPolicy: corev1.PullNever,
		RestartPolicy:   &always,
		Args:            []string{"proxy", "sidecar", "--domain", nsNative + ".svc.cluster.local"},
		Ports: []corev1.ContainerPort{
			{Name: "proxy", ContainerPort: proxyPort},
			{Name: "status", ContainerPort: nativeStatusPort},
		},
		Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: slices.Clone(istioDrain)}}},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
		}},
	}}
	return pod
}

func nativeSidecar(ctx context.Context) {
	n := &evidence.Native{RouterLag: evidence.S(nativeLag), Routing: evidence.S(nativeRouting), Rate: nativeRate,
		Work: evidence.S(nativeWork), ClientTimeout: evidence.S(nativeTimeout)}
	evMu.Lock()
	ev.Native = n
	evMu.Unlock()
	A := &evidence.NativeArm{Name: "A: graceguard (Istio's drain after the routing window)", Pod: "native-a"}
	B := &evidence.NativeArm{Name: "B: opted out (Istio's drain at deletion)", Pod: "native-b"}
	n.Arms = []*evidence.NativeArm{A, B}

	By("creating arm A, then arm B with arm A's app hook and grace")
	a := must(kube.CoreV1().Pods(nsNative).Create(ctx, nativePod(A.Pod, nil), metav1.CreateOptions{}))
	bPod := nativePod(B.Pod, map[string]string{"graceguard.io/inject": "false"})
	bPod.Spec.Containers[0].Lifecycle = a.Spec.Containers[0].Lifecycle.DeepCopy()
	bPod.Spec.TerminationGracePeriodSeconds = a.Spec.TerminationGracePeriodSeconds
	b := must(kube.CoreV1().Pods(nsNative).Create(ctx, bPod, metav1.CreateOptions{}))
	pods := map[*evidence.NativeArm]*corev1.Pod{A: a, B: b}
	hooks := map[*evidence.NativeArm][]string{}
	for arm, p := range pods {
		arm.Budget, arm.Grace = p.Annotations[budgetKey], grace(p)
		arm.AppPreStop = preStopString(p.Spec.Containers[0])
		arm.ProxyPreStop = "none"
		if len(p.Spec.InitContainers) == 1 {
			arm.ProxyPreStop = preStopString(p.Spec.InitContainers[0])
			if l := p.Spec.InitContainers[0].Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Exec != nil {
				hooks[arm] = l.PreStop.Exec.Command
			}
		}
		must(kube.CoreV1().Services(nsNative).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: nsNative, Name: arm.Pod},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": arm.Pod},
				Ports: []corev1.ServicePort{{Name: "http", Port: proxyPort, TargetPort: intstr.FromInt32(proxyPort)}}},
		}, metav1.CreateOptions{}))
	}

	By("deleting both Pods at once while the router sends them requests")
	var wg sync.WaitGroup
	for _, arm := range n.Arms {
		wg.Add(1)
		go func() {
			defer GinkgoRecover()
			defer wg.Done()
			runNativeArm(ctx, arm)
		}()
	}
	wg.Wait()

	ck := &n.Checks
	wrapped := []string{"sh", "-c", fmt.Sprintf("sleep %d && exec %s", int(nativeRouting.Seconds()), strings.Join(istioDrain, " "))}
	ck.Add("A: graceguard wraps Istio's drain hook in the routing window's sleep", strings.Join(wrapped, " "),
		slices.Equal(hooks[A], wrapped), "%s", A.ProxyPreStop)
	ck.Add("B: opted out, the proxy keeps Istio's hook; the app has A's hook and grace", fmt.Sprintf("%s; %s, grace %d", strings.Join(istioDrain, " "), A.AppPreStop, A.Grace),
		slices.Equal(hooks[B], istioDrain) && B.Budget == "" && B.AppPreStop == A.AppPreStop && B.Grace == A.Grace,
		"%s; %s, grace %d, budget %q", B.ProxyPreStop, B.AppPreStop, B.Grace, B.Budget)
	for _, arm := range n.Arms {
		ck.Add(arm.Name+": the router sends the Pod requests after its delete", "> 0 sent, none failed before the delete",
			arm.During > 0 && arm.Before > 0 && arm.BeforeFailed == 0, "%d sent during withdrawal (router dropped the Pod at %s); %d before, %d failed",
			arm.During, fmtAt(arm.RouterDropped), arm.Before, arm.BeforeFailed)
	}
	ck.Add("A: the drain call comes after the routing window, after the router dropped the Pod",
		fmt.Sprintf("drain >= %s and > router dropped", nativeRouting),
		atLeast(A.Drain, nativeRouting.Seconds()) && after(A.Drain, A.RouterDropped), "drain %s, router dropped %s", fmtAt(A.Drain), fmtAt(A.RouterDropped))
	ck.Add("A: no request lost during withdrawal", "0 lost", A.During > 0 && A.Lost == 0,
		"%d lost of %d (%s)", A.Lost, A.During, evidence.KindList(A.ByKind))
	ck.Add("B: the drain call comes at deletion, before the router dropped the Pod", "drain < router dropped",
		after(B.RouterDropped, B.Drain), "drain %s, router dropped %s", fmtAt(B.Drain), fmtAt(B.RouterDropped))
	ck.Add("B: requests lost during withdrawal", "> 0 lost", B.Lost > 0,
		"%d lost of %d (%s), sent %s to %s", B.Lost, B.During, evidence.KindList(B.ByKind), fmtAt(B.FirstLost), fmtAt(B.LastLost))
	// Closing the inbound listener refuses new connections, and the
	// kernel resets those still in its accept queue (never accepted:
	// under load the queue is seldom empty then). A request the proxy read
	// is answered: it exits only once Shutdown has answered them all.
	refused := B.ByKind["connection_refused"] + B.ByKind["connection_reset"]
	ck.Add("B: the drain cuts no request in flight: every lost one was refused or reset before the proxy read it, and the proxy answered every request it read",
		fmt.Sprintf("refused or reset %d, proxy exited", B.Lost),
		refused == B.Lost && B.ProxyRequests > 0, "%s; proxy exited after %d requests, %d answered while draining, with Connection: close",
		evidence.KindList(B.ByKind), B.ProxyRequests, B.ProxyDrained)
	for _, arm := range n.Arms {
		GinkgoWriter.Printf("%s: before %d/%d failed, during %d, lost %d %v, dropped %s, drain %s, gone %s\n", arm.Name, arm.Before, arm.BeforeFailed,
			arm.During, arm.Lost, arm.ByKind, fmtAt(arm.RouterDropped), fmtAt(arm.Drain), fmtAt(arm.PodGone))
	}
	Expect(n.Checks.Failed()).To(BeEmpty())
}

// runNativeArm routes load to the arm's Pod, deletes it after the
// baseline, keeps the load on until the Pod is gone, and records what the
// clients, the router, the app and the proxy saw.
func runNativeArm(ctx context.Context, arm *evidence.NativeArm) {
	GinkgoHelper()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	running := waitPodReady(ctx, nsNative, arm.Pod)
	ip := running.Status.PodIP
	r := startRouter(rctx, nsNative, arm.Pod, nativeLag)
	Eventually(r.endpoints).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).Should(Equal([]string{ip}), "the router knows the Pod")
	appLog := followLog(ctx, nsNative, arm.Pod)
	proxyLog := followContainerLog(ctx, nsNative, arm.Pod, "istio-proxy")
	_, ok := proxyLog.waitFor("listening", 30*time.Second)
	Expect(ok).To(BeTrue(), "the proxy's log")
	pw := watchPod(ctx, nsNative, arm.Pod)

	ld := startLoadOn(rctx, r, proxyPort, nativeRate, nativeWork, newClient(nativeTimeout))
	time.Sleep(nativeBaseline)
	t0 := time.Now()
	Expect(kube.CoreV1().Pods(nsNative).Delete(ctx, arm.Pod, metav1.DeleteOptions{})).To(Succeed())
	var dropped time.Time
	for dropped.IsZero() && time.Since(t0) < time.Minute {
		if len(r.endpoints()) == 0 {
			dropped = time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	gone, _, _ := pw.wait(2 * time.Minute)
	results := ld.finish()
	arm.RouterDropped, arm.PodGone = since(t0, dropped), since(t0, gone)

	arm.ByKind = map[string]int{}
	var first, last time.Time
	for _, res := range results {
		if res.endpoint == "" {
			arm.NoEndpoint++
			continue
		}
		k := res.kind()
		if res.at.Before(t0) {
			arm.Before++
			if k != "" {
				arm.BeforeFailed++
			}
			continue
		}
		arm.During++
		if k == "" {
			continue
		}
		arm.Lost++
		arm.ByKind[k]++
		if first.IsZero() || res.at.Before(first) {
			first = res.at
		}
		if res.at.After(last) {
			last = res.at
		}
	}
	arm.FirstLost, arm.LastLost = since(t0, first), since(t0, last)

	appLog.waitEnd(time.Minute)
	proxyLog.waitEnd(time.Minute)
	if e := appLog.first("sigterm"); e != nil {
		arm.AppSIGTERM = since(t0, e.TS)
	}
	if e := appLog.first("shutdown_complete"); e != nil {
		arm.AppShutdown = since(t0, e.TS)
	}
	for name, at := range map[string]*evidence.At{"drain": &arm.Drain, "listener_closed": &arm.ListenerClosed, "sigterm": &arm.ProxySIGTERM} {
		if e := proxyLog.first(name); e != nil {
			*at = since(t0, e.TS)
		}
	}
	if e := proxyLog.first("exit"); e != nil {
		var exit struct{ Requests, Drained int }
		if json.Unmarshal([]byte(e.Raw), &exit) == nil {
			arm.ProxyRequests, arm.ProxyDrained = exit.Requests, exit.Drained
		}
	}
	appLog.save(nsNative + "-" + arm.Pod + "-app")
	proxyLog.save(nsNative + "-" + arm.Pod + "-istio-proxy")
}

func atLeast(a evidence.At, s float64) bool { return a != nil && float64(*a) >= s }

// after: both observed, a later than b.
func after(a, b evidence.At) bool { return a != nil && b != nil && float64(*a) > float64(*b) }
