//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/test/e2e/evidence"
)

// Scenario 6: a naive proxy sidecar in front of the app.
const (
	tcpproxyImage = "registry.local/tcpproxy:e2e"
	proxyPort     = 8081
	// meshWork is the Pods' max-work; meshRequest outlasts the routing
	// delay plus the kubelet's lateness by far, so that a proxy getting
	// SIGTERM with the app cuts every request, and ends within meshWork.
	meshWork     = 20 * time.Second
	meshRequest  = 15 * time.Second
	meshRequests = 4
)

func meshProxy(ctx context.Context) {
	m := &evidence.MeshProxy{Requests: meshRequests, Request: evidence.S(meshRequest)}
	evMu.Lock()
	ev.MeshProxy = m
	evMu.Unlock()

	arms := []*evidence.MeshArm{
		{Name: "A: proxy named istio-proxy (mesh handling)", Pod: "meshed", Proxy: "istio-proxy"},
		{Name: "B: the same proxy named proxy (an app container to graceguard)", Pod: "unmeshed", Proxy: "proxy"},
	}
	m.Arms = arms
	for _, a := range arms {
		By("deleting " + a.Pod + " while requests run through its proxy")
		runMeshArm(ctx, a)
	}

	// What pkg/budget predicts for arm A: the proxy waits for the app's
	// routing + work + cleanup and drains Istio's default 5s after it.
	app := labRouting + meshWork + 2*time.Second
	want := budget.Budget{Routing: labRouting, Work: meshWork, Cleanup: 2 * time.Second, Margin: 3 * time.Second, Proxy: 5 * time.Second}
	A, B := arms[0], arms[1]
	ck := &m.Checks
	wantWait := fmt.Sprintf("sleep %ds", int(app.Seconds()))
	ck.Add("A: graceguard gives the proxy a preStop wait of the app's whole shutdown", wantWait, A.ProxyPreStop == wantWait, "%s", A.ProxyPreStop)
	ck.Add("A: the grace covers the proxy's drain after the app", want.Annotation(want.Grace()),
		A.Budget == want.Annotation(want.Grace()) && A.Grace == want.Grace(), "%s; grace %d", A.Budget, A.Grace)
	ck.Add("B: graceguard treats the proxy like the app", "sleep 5s", B.ProxyPreStop == "sleep 5s", "%s", B.ProxyPreStop)
	ck.Add("A: every request through the proxy completes", fmt.Sprintf("%d of %d", meshRequests, meshRequests),
		A.Completed == meshRequests, "%d completed: %s", A.Completed, strings.Join(A.Clients, ", "))
	ck.Add("A: the proxy gets SIGTERM only after the app has exited", "proxy sigterm > app shutdown_complete",
		A.ProxySIGTERM != nil && A.AppShutdown != nil && float64(*A.ProxySIGTERM) > float64(*A.AppShutdown),
		"proxy sigterm %s, app shutdown_complete %s", fmtAt(A.ProxySIGTERM), fmtAt(A.AppShutdown))
	ck.Add("B: the requests are cut when the proxy exits with the app", "> 0 cut",
		B.Cut > 0, "%d cut: %s", B.Cut, strings.Join(B.Clients, ", "))
	ck.Add("B: the proxy gets SIGTERM while the app still works", "proxy sigterm < app shutdown_complete",
		B.ProxySIGTERM != nil && (B.AppShutdown == nil || float64(*B.ProxySIGTERM) < float64(*B.AppShutdown)),
		"proxy sigterm %s, app shutdown_complete %s", fmtAt(B.ProxySIGTERM), fmtAt(B.AppShutdown))
	Expect(m.Checks.Failed()).To(BeEmpty())
}

// runMeshArm creates the Pod (app behind the proxy), sends the requests
// through the proxy, deletes the Pod once the app admitted them all, and
// records what the clients, the app and the proxy saw.
func runMeshArm(ctx context.Context, a *evidence.MeshArm) {
	GinkgoHelper()
	pod := appPod(nsMesh, a.Pod, map[string]string{"app": a.Pod}, map[string]string{
		"graceguard.io/routing-delay": labRouting.String(),
		"graceguard.io/max-work":      meshWork.String(),
	})
	// Probes of its own: the comparison is only about the proxy.
	ownProbes(&pod.Spec.Containers[0])
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
		Name:            a.Proxy,
		Image:           tcpproxyImage,
		ImagePullPolicy: corev1.PullNever,
		Ports:           []corev1.ContainerPort{{Name: "proxy", ContainerPort: proxyPort}},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
		}},
	})
	created := must(kube.CoreV1().Pods(nsMesh).Create(ctx, pod, metav1.CreateOptions{}))
	a.Budget, a.Grace = created.Annotations[budgetKey], grace(created)
	for _, c := range created.Spec.Containers {
		if c.Name == a.Proxy {
			a.ProxyPreStop = preStopString(c)
		} else {
			a.AppPreStop = preStopString(c)
		}
	}
	running := waitPodReady(ctx, nsMesh, a.Pod)
	url := fmt.Sprintf("http://%s:%d/work?seconds=%g", running.Status.PodIP, proxyPort, meshRequest.Seconds())

	appLog := followLog(ctx, nsMesh, a.Pod)
	proxyLog := followContainerLog(ctx, nsMesh, a.Pod, a.Proxy)
	_, ok := proxyLog.waitFor("listening", 30*time.Second)
	Expect(ok).To(BeTrue(), "the proxy's log")
	pw := watchPod(ctx, nsMesh, a.Pod)

	var wg sync.WaitGroup
	results := make([]result, meshRequests)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = get(ctx, newClient(2*time.Minute), url)
		}()
	}
	Eventually(func() int {
		n := 0
		for _, e := range appLog.snapshot() {
			if e.Event == "work_started" {
				n++
			}
		}
		return n
	}).WithTimeout(30*time.Second).WithPolling(50*time.Millisecond).Should(Equal(meshRequests), "the app admitted every request")

	t0 := time.Now()
	Expect(kube.CoreV1().Pods(nsMesh).Delete(ctx, a.Pod, metav1.DeleteOptions{})).To(Succeed())
	wg.Wait()
	var last time.Time
	for _, r := range results {
		if r.completed() {
			a.Completed++
		} else {
			a.Cut++
		}
		a.Clients = append(a.Clients, r.String())
		if r.end.After(last) {
			last = r.end
		}
	}
	a.LastClientAnswer = since(t0, last)
	gone, _, _ := pw.wait(2 * time.Minute)
	a.PodGone = since(t0, gone)
	appLog.waitEnd(time.Minute)
	proxyLog.waitEnd(time.Minute)
	if e := appLog.first("sigterm"); e != nil {
		a.AppSIGTERM = since(t0, e.TS)
	}
	if e := appLog.first("shutdown_complete"); e != nil {
		a.AppShutdown = since(t0, e.TS)
	}
	if e := proxyLog.first("sigterm"); e != nil {
		a.ProxySIGTERM = since(t0, e.TS)
	}
	appLog.save(nsMesh + "-" + a.Pod + "-app")
	proxyLog.save(nsMesh + "-" + a.Pod + "-" + a.Proxy)
}
