//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/test/e2e/evidence"
)

// Rollout under load (seed 002).
const (
	// routerLag is how long the router takes to act on an EndpointSlice
	// change after its informer saw it: the stand-in for kube-proxy,
	// ingress controllers and load balancers converging.
	routerLag = 2 * time.Second
	// rolloutRouting is arm A's routing delay (its preStop sleep): longer
	// than the router's lag plus the EndpointSlice controller's and the
	// informer's own delays.
	rolloutRouting = 5 * time.Second
	rolloutRate    = 50 // requests per second, open loop
	rolloutWork    = 100 * time.Millisecond
	rolloutTimeout = 5 * time.Second
	rolloutReps    = 3
	// baseline is the load before the restart and after the router
	// converged on the new Pods.
	baseline = 3 * time.Second
)

func rollout(ctx context.Context) {
	ro := &evidence.Rollout{RouterLag: evidence.S(routerLag), Rate: rolloutRate, Work: evidence.S(rolloutWork),
		KeepAlives: false, ClientTimeout: evidence.S(rolloutTimeout), Replicas: rolloutReps,
		Strategy: "RollingUpdate maxSurge=1 maxUnavailable=0"}
	evMu.Lock()
	ev.Rollout = ro
	evMu.Unlock()

	arms := []struct {
		arm         *evidence.Arm
		annotations map[string]string
	}{
		{&evidence.Arm{Name: "A: graceguard", Namespace: nsRollA, OptedIn: true}, map[string]string{
			"graceguard.io/routing-delay":  rolloutRouting.String(),
			"graceguard.io/max-work":       "2s",
			"graceguard.io/readiness-path": "/ready",
			"graceguard.io/liveness-path":  "/live",
		}},
		{&evidence.Arm{Name: "B: no graceguard", Namespace: nsRollB, OptedIn: false}, nil},
	}
	By("creating both Deployments")
	for _, a := range arms {
		dep := appDeployment(a.arm.Namespace, "web", rolloutReps, a.annotations)
		if !a.arm.OptedIn {
			ownProbes(&dep.Spec.Template.Spec.Containers[0])
		}
		must(kube.AppsV1().Deployments(a.arm.Namespace).Create(ctx, dep, metav1.CreateOptions{}))
		must(kube.CoreV1().Services(a.arm.Namespace).Create(ctx, appService(a.arm.Namespace, "web", map[string]string{"app": "web"}), metav1.CreateOptions{}))
		ro.Arms = append(ro.Arms, a.arm)
	}
	for _, a := range arms {
		waitDeploymentDone(ctx, a.arm.Namespace, "web", 3*time.Minute)
	}
	for _, a := range arms {
		By("restarting " + a.arm.Name + " under load")
		runArm(ctx, a.arm, func() {
			restartTemplate(ctx, a.arm.Namespace, "web")
			waitDeploymentDone(ctx, a.arm.Namespace, "web", 5*time.Minute)
		})
	}

	A, B := ro.Arms[0], ro.Arms[1]
	ck := &ro.Checks
	ck.Add("arm A Pods carry graceguard's preStop sleep", "sleep 5s", A.PreStop == "sleep 5s", "%s; %s", A.PreStop, A.Budget)
	ck.Add("arm B Pods have no preStop", "none", B.PreStop == "none", "%s, grace %d", B.PreStop, B.Grace)
	for _, a := range ro.Arms {
		ck.Add(a.Name+": every Pod replaced under load", fmt.Sprintf("%d replaced, > %d requests sent", rolloutReps, rolloutRate*5),
			a.Replaced == rolloutReps && a.Sent > rolloutRate*5, "%d replaced, %d sent over %s", a.Replaced, a.Sent, a.Load)
	}
	ck.Add("arm A (graceguard): no failed request", "0 failed", A.Failed == 0 && A.Sent > 0,
		"%d failed of %d (%s)", A.Failed, A.Sent, evidence.KindList(A.ByKind))
	ck.Add("arm B (no graceguard): requests fail", "> 0 failed", B.Failed > 0,
		"%d failed of %d (%s)", B.Failed, B.Sent, evidence.KindList(B.ByKind))
	Expect(ro.Checks.Failed()).To(BeEmpty())
}

// armLoad is the load runArmWith sends: rate requests/s, open loop, of
// work each, with a client timeout.
type armLoad struct {
	rate          int
	work, timeout time.Duration
}

// runArm sends load through the router to the arm's Deployment "web",
// disrupts it (a rollout restart, a node drain) and, once the router follows
// the new Pods, tells what the clients saw. disrupt returns when every old
// Pod is replaced.
func runArm(ctx context.Context, arm *evidence.Arm, disrupt func()) {
	GinkgoHelper()
	dep := must(kube.AppsV1().Deployments(arm.Namespace).Get(ctx, "web", metav1.GetOptions{}))
	runArmWith(ctx, arm, armLoad{rate: rolloutRate, work: rolloutWork, timeout: rolloutTimeout}, int(*dep.Spec.Replicas), disrupt)
}

// runArmWith is runArm with a load of its own, for a workload "web" (a
// Deployment, an Argo Rollout) of replicas Pods labelled app=web.
func runArmWith(ctx context.Context, arm *evidence.Arm, l armLoad, replicas int, disrupt func()) {
	GinkgoHelper()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := startRouter(rctx, arm.Namespace, "web", routerLag)
	old := readyPods(ctx, arm.Namespace, "app=web")
	Expect(old).To(HaveLen(replicas), "every replica of %s/web ready before the disruption", arm.Namespace)
	oldIPs := podIPs(old)
	Eventually(r.endpoints).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).Should(Equal(oldIPs), "the router knows the Pods")
	c := old[0].Spec.Containers[0]
	arm.PreStop, arm.Grace, arm.Budget = preStopString(c), grace(&old[0]), old[0].Annotations[budgetKey]

	start := time.Now()
	ld := startLoad(rctx, r, l.rate, l.work, newClient(l.timeout))
	time.Sleep(baseline)
	restart := time.Now()
	disrupt()
	arm.Rollout = evidence.S(time.Since(restart))
	fresh := readyPods(ctx, arm.Namespace, "app=web")
	newIPs := podIPs(fresh)
	Eventually(r.endpoints).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).Should(Equal(newIPs), "the router follows the new Pods")
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
	for _, res := range results {
		arm.Sent++
		k := res.kind()
		if k == "" {
			arm.Succeeded++
			continue
		}
		arm.Failed++
		arm.ByKind[k]++
		switch k {
		case "rejected_503":
			arm.Rejected++
		case "no_endpoint":
		default:
			if !strings.HasPrefix(k, "http_") {
				arm.ConnErrors++
			}
		}
		// Samples: the first two failures of each kind at each endpoint.
		if key := res.endpoint + "/" + k; seen[key] < 2 && len(arm.Samples) < 24 {
			seen[key]++
			detail := fmt.Sprintf("HTTP %d", res.code)
			if res.body != "" {
				detail += " " + res.body
			}
			if res.err != nil {
				detail = trimErr(res.err)
			}
			arm.Samples = append(arm.Samples, evidence.Failure{At: evidence.S(res.at.Sub(restart)), Endpoint: res.endpoint, Kind: k, Detail: detail})
		}
	}
	sort.Slice(arm.Samples, func(i, j int) bool { return arm.Samples[i].At < arm.Samples[j].At })
	per := map[string]*evidence.EndpointFailures{}
	for _, res := range results {
		if res.kind() == "" || res.endpoint == "" {
			continue
		}
		at := evidence.S(res.at.Sub(restart))
		e := per[res.endpoint]
		if e == nil {
			e = &evidence.EndpointFailures{Endpoint: res.endpoint, First: at, Last: at}
			per[res.endpoint] = e
		}
		e.Failed++
		e.First, e.Last = min(e.First, at), max(e.Last, at)
	}
	for _, e := range per {
		arm.PerEndpoint = append(arm.PerEndpoint, *e)
	}
	sort.Slice(arm.PerEndpoint, func(i, j int) bool { return arm.PerEndpoint[i].First < arm.PerEndpoint[j].First })
	GinkgoWriter.Printf("%s: sent %d, ok %d, failed %d %v, rollout %s\n", arm.Name, arm.Sent, arm.Succeeded, arm.Failed, arm.ByKind, arm.Rollout)
}

func podIPs(pods []corev1.Pod) []string {
	var ips []string
	for _, p := range pods {
		ips = append(ips, p.Status.PodIP)
	}
	sort.Strings(ips)
	return ips
}
