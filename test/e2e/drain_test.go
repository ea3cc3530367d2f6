//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/graceguard/graceguard/test/e2e/evidence"
	"github.com/graceguard/graceguard/test/harness/cluster"
)

// Scenario 14 (seed test 7): a node drain under load. A second node joins
// the cluster; each arm's Deployment runs there, behind a
// PodDisruptionBudget, and `kubectl drain` moves it to the first node while
// the router sends it load. The eviction API honours the Pod's grace period,
// so graceguard's budget holds as in a rollout; the budget paces the drain.
const (
	// drainReps is scenario 3's replica count: runArm expects it.
	drainReps = rolloutReps
	// drainMaxUnavailable is the PodDisruptionBudget's.
	drainMaxUnavailable = 1
	drainTimeout        = 4 * time.Minute
)

func nodeDrain(ctx context.Context) {
	dr := &evidence.Drain{Node: cluster.Node2Name, To: cluster.NodeName, Taint: cluster.Node2TaintKey + ":NoSchedule",
		PDB: fmt.Sprintf("maxUnavailable: %d", drainMaxUnavailable), Replicas: drainReps,
		RouterLag: evidence.S(routerLag), Rate: rolloutRate, Work: evidence.S(rolloutWork), ClientTimeout: evidence.S(rolloutTimeout)}
	evMu.Lock()
	ev.Drain = dr
	evMu.Unlock()

	By("adding the second node")
	start := time.Now()
	Expect(cl.AddNode(ctx)).To(Succeed())
	dr.NodeUp = evidence.S(time.Since(start))
	DeferCleanup(func(ctx SpecContext) {
		Expect(cl.RemoveNode(ctx)).To(Succeed())
	}, NodeTimeout(2*time.Minute))
	dr.Command = "kubectl drain " + cluster.Node2Name + " --ignore-daemonsets --delete-emptydir-data --timeout=" + drainTimeout.String()

	arms := []struct {
		arm         *evidence.DrainArm
		annotations map[string]string
	}{
		{&evidence.DrainArm{Arm: evidence.Arm{Name: "A: graceguard", Namespace: nsDrainA, OptedIn: true}}, map[string]string{
			"graceguard.io/routing-delay":  rolloutRouting.String(),
			"graceguard.io/max-work":       "2s",
			"graceguard.io/readiness-path": "/ready",
			"graceguard.io/liveness-path":  "/live",
		}},
		{&evidence.DrainArm{Arm: evidence.Arm{Name: "B: no graceguard", Namespace: nsDrainB, OptedIn: false}}, nil},
	}
	for _, a := range arms {
		dr.Arms = append(dr.Arms, a.arm)
		By("draining the second node under load: " + a.arm.Name)
		drainArm(ctx, a.arm, a.annotations)
	}

	A, B := dr.Arms[0], dr.Arms[1]
	ck := &dr.Checks
	ck.Add("the second node joined Ready", "Ready", true, "in %s", dr.NodeUp)
	floor := drainReps - drainMaxUnavailable
	for _, a := range dr.Arms {
		ck.Add(a.Name+": every Pod started on the second node", fmt.Sprintf("%d on %s", drainReps, dr.Node),
			countOn(a.Before, dr.Node) == drainReps, "%s", nodeList(a.Before))
		ck.Add(a.Name+": kubectl drain evicted every Pod and finished", fmt.Sprintf("%d evicted, exit 0", drainReps),
			len(a.Evicted) == drainReps && a.ExitCode == 0, "%d evicted, exit %d in %s", len(a.Evicted), a.ExitCode, a.DrainTime)
		ck.Add(a.Name+": the replacements run on the first node", fmt.Sprintf("%d on %s", drainReps, dr.To),
			a.Replaced == drainReps && countOn(a.After, dr.To) == drainReps, "%d replaced: %s", a.Replaced, nodeList(a.After))
		ck.Add(a.Name+": the PodDisruptionBudget refused evictions, and kubectl retried them", "> 0 refused",
			a.Refused > 0, "%d refused", a.Refused)
		ck.Add(a.Name+": ready endpoints never fell below the budget's floor", fmt.Sprintf(">= %d of %d", floor, drainReps),
			a.Floor >= floor, "floor %d (ready endpoints seen by an EndpointSlice informer, %d changes)", a.Floor, a.Changes)
	}
	ck.Add("arm A Pods carry graceguard's preStop sleep", "sleep 5s", A.PreStop == "sleep 5s", "%s; %s", A.PreStop, A.Budget)
	ck.Add("arm A (graceguard): no failed request through the drain", "0 failed", A.Failed == 0 && A.Sent > rolloutRate*5,
		"%d failed of %d (%s)", A.Failed, A.Sent, evidence.KindList(A.ByKind))
	ck.Add("arm B (no graceguard): requests fail although the budget held the floor", "> 0 failed", B.Failed > 0,
		"%d failed of %d (%s)", B.Failed, B.Sent, evidence.KindList(B.ByKind))
	Expect(dr.Checks.Failed()).To(BeEmpty())
}

// drainArm runs one arm: its Deployment on the second node behind the
// budget, the drain under load, the node uncordoned afterwards.
func drainArm(ctx context.Context, arm *evidence.DrainArm, annotations map[string]string) {
	GinkgoHelper()
	ns := arm.Namespace
	dep := appDeployment(ns, "web", drainReps, annotations)
	if !arm.OptedIn {
		ownProbes(&dep.Spec.Template.Spec.Containers[0])
	}
	// Tolerate the second node's taint and prefer it: the Pods start there;
	// once it is cordoned, the replacements can only go to the first node.
	spec := &dep.Spec.Template.Spec
	spec.Tolerations = []corev1.Toleration{{Key: cluster.Node2TaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
		Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{cluster.Node2Name}}}},
	}}}}
	must(kube.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}))
	must(kube.CoreV1().Services(ns).Create(ctx, appService(ns, "web", map[string]string{"app": "web"}), metav1.CreateOptions{}))
	maxUnavailable := intstr.FromInt32(drainMaxUnavailable)
	must(kube.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &maxUnavailable,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}, metav1.CreateOptions{}))
	waitDeploymentDone(ctx, ns, "web", 3*time.Minute)
	Eventually(func(g Gomega) {
		pdb, err := kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pdb.Status.ObservedGeneration).To(Equal(pdb.Generation))
		g.Expect(pdb.Status.CurrentHealthy).To(BeNumerically("==", drainReps))
		g.Expect(pdb.Status.DisruptionsAllowed).To(BeNumerically("==", drainMaxUnavailable))
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), "the PodDisruptionBudget counts the Pods")
	arm.Before = podNodes(readyPods(ctx, ns, "app=web"))

	fctx, stop := context.WithCancel(ctx)
	defer stop()
	fl := watchReadyFloor(fctx, ns, "web")
	runArm(ctx, &arm.Arm, func() {
		fl.arm()
		drainStart := time.Now()
		arm.Log, arm.ExitCode = kubectlLines(ctx, drainTimeout+time.Minute, "drain", cluster.Node2Name,
			"--ignore-daemonsets", "--delete-emptydir-data", "--timeout="+drainTimeout.String())
		arm.DrainTime = evidence.S(time.Since(drainStart))
		waitDeploymentDone(ctx, ns, "web", 3*time.Minute)
		arm.Floor, arm.Changes = fl.result()
	})
	arm.After = podNodes(readyPods(ctx, ns, "app=web"))
	for _, l := range arm.Log {
		switch {
		case strings.Contains(l.Line, "disruption budget"):
			arm.Refused++
		case strings.HasSuffix(l.Line, " evicted"):
			arm.Evicted = append(arm.Evicted, strings.TrimSuffix(strings.TrimPrefix(l.Line, "pod/"), " evicted"))
		}
	}
	out, code := kubectlLines(ctx, time.Minute, "uncordon", cluster.Node2Name)
	Expect(code).To(BeZero(), "kubectl uncordon: %v", out)
	GinkgoWriter.Printf("%s: drain %s, %d evicted, %d refused by the PDB, floor %d\n", arm.Name, arm.DrainTime, len(arm.Evicted), arm.Refused, arm.Floor)
}

// kubectlLines runs the cluster's kubectl and returns its output lines, each
// stamped with when it came (seconds after the start), and its exit code.
func kubectlLines(ctx context.Context, timeout time.Duration, args ...string) ([]evidence.DrainLine, int) {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, cl.Kubectl, append([]string{"--kubeconfig", cl.Kubeconfig}, args...)...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	start := time.Now()
	Expect(cmd.Start()).To(Succeed())
	var lines []evidence.DrainLine
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines = append(lines, evidence.DrainLine{At: evidence.S(time.Since(start)), Line: sc.Text()})
			GinkgoWriter.Printf("kubectl %s: %s\n", args[0], sc.Text())
		}
	}()
	err := cmd.Wait()
	pw.Close()
	<-done
	code := 0
	if err != nil {
		code = -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	}
	return lines, code
}

// readyFloor keeps the fewest ready endpoints of a Service seen once armed
// (followReady: no lag).
type readyFloor struct {
	mu      sync.Mutex
	current func() []string
	armed   bool
	floor   int
	changes int
}

func watchReadyFloor(ctx context.Context, ns, service string) *readyFloor {
	GinkgoHelper()
	fl := &readyFloor{}
	fl.current = followReady(ctx, ns, service, func(ips []string) {
		fl.mu.Lock()
		defer fl.mu.Unlock()
		if !fl.armed {
			return
		}
		fl.changes++
		fl.floor = min(fl.floor, len(ips))
	})
	return fl
}

// arm starts the count at the current number of ready endpoints.
func (fl *readyFloor) arm() {
	n := len(fl.current())
	fl.mu.Lock()
	defer fl.mu.Unlock()
	fl.armed, fl.floor = true, n
}

func (fl *readyFloor) result() (floor, changes int) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.floor, fl.changes
}

func podNodes(pods []corev1.Pod) []evidence.PodNode {
	var out []evidence.PodNode
	for _, p := range pods {
		out = append(out, evidence.PodNode{Pod: p.Name, Node: p.Spec.NodeName})
	}
	return out
}

func countOn(pods []evidence.PodNode, node string) int {
	n := 0
	for _, p := range pods {
		if p.Node == node {
			n++
		}
	}
	return n
}

func nodeList(pods []evidence.PodNode) string {
	var s []string
	for _, p := range pods {
		s = append(s, p.Pod+" on "+p.Node)
	}
	return strings.Join(s, ", ")
}
