//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/test/e2e/evidence"
)

// Scenario 16 (issue 43): an app that reaches its database through a proxy
// sidecar for every request, as apps reach Cloud SQL through
// cloud-sql-proxy, restarted under load behind the router. The sidecar is
// the tcpproxy image: on SIGTERM it exits at once, as cloud-sql-proxy does
// without --max-sigterm-delay, cutting every connection through it. Both
// arms are opted in with the same budget; only arm A names the sidecar in
// graceguard.io/sidecars.
const (
	// sidecarName is the proxy container; sidecarListen where the app
	// reaches it (localhost, as a database proxy listens).
	sidecarName   = "db-proxy"
	sidecarListen = "127.0.0.1:5432"
	// sidecarWork is each request's time at the database, through the
	// proxy: longer than the router's lag plus the kubelet's lateness, so
	// the requests routed to a Pod just before the router dropped it still
	// run when the routing delay ends and the app gets SIGTERM.
	// sidecarMaxWork is the Pods' max-work, which covers it.
	sidecarWork     = 6 * time.Second
	sidecarMaxWork  = 8 * time.Second
	sidecarRate     = 20
	sidecarTimeout  = sidecarWork + 10*time.Second
	sidecarReplicas = rolloutReps
)

func dbSidecar(ctx context.Context) {
	s := &evidence.DBSidecar{Started: ev.Started, Env: ev.Env, Sidecar: sidecarName, Listen: sidecarListen,
		Replicas: sidecarReplicas, RouterLag: evidence.S(routerLag), Rate: sidecarRate, Work: evidence.S(sidecarWork),
		ClientTimeout: evidence.S(sidecarTimeout), Strategy: "RollingUpdate maxSurge=1 maxUnavailable=0"}
	evMu.Lock()
	ev.DBSidecar = s
	evMu.Unlock()

	common := map[string]string{
		"graceguard.io/routing-delay": rolloutRouting.String(),
		"graceguard.io/max-work":      sidecarMaxWork.String(),
	}
	s.Annotations = annotationList(common)
	arms := []*evidence.SidecarArm{
		{Arm: evidence.Arm{Name: "A: sidecar named in graceguard.io/sidecars", Namespace: nsSidecarA, OptedIn: true}, Named: sidecarName},
		{Arm: evidence.Arm{Name: "B: sidecar not named (an app container to graceguard)", Namespace: nsSidecarB, OptedIn: true}},
	}
	By("creating each arm's database and its Deployment")
	for _, a := range arms {
		annotations := map[string]string{}
		for k, v := range common {
			annotations[k] = v
		}
		if a.Named != "" {
			annotations["graceguard.io/sidecars"] = a.Named
		}
		a.Backend = startDatabase(ctx, a.Namespace)
		must(kube.AppsV1().Deployments(a.Namespace).Create(ctx, sidecarDeployment(a.Namespace, a.Backend, annotations), metav1.CreateOptions{}))
		must(kube.CoreV1().Services(a.Namespace).Create(ctx, appService(a.Namespace, "web", map[string]string{"app": "web"}), metav1.CreateOptions{}))
		s.Arms = append(s.Arms, a)
	}
	for _, a := range arms {
		waitDeploymentDone(ctx, a.Namespace, "web", 3*time.Minute)
	}
	for _, a := range arms {
		By("restarting " + a.Name + " under load")
		runSidecarArm(ctx, a)
	}

	// What pkg/budget gives both arms (graceguard's cleanup and margin
	// defaults), and the named sidecar's wait: the app's whole shutdown.
	// The grace is the API server's default 30, which the budget fits:
	// graceguard only raises a grace.
	want := budget.Budget{Routing: rolloutRouting, Work: sidecarMaxWork, Cleanup: 2 * time.Second, Margin: 3 * time.Second}
	wantGrace := max(want.Grace(), 30)
	wantBudget := want.Annotation(wantGrace)
	wantWait := fmt.Sprintf("sleep %ds", budget.CeilSeconds(want.Routing+want.Work+want.Cleanup))
	routingSleep := fmt.Sprintf("sleep %ds", budget.CeilSeconds(rolloutRouting))
	A, B := arms[0], arms[1]
	ck := &s.Checks
	ck.Add("A: graceguard gives the named sidecar a preStop wait of the app's whole shutdown (routing + work + cleanup)", wantWait,
		A.SidecarPreStop == wantWait, "%s", A.SidecarPreStop)
	ck.Add("B: graceguard treats the unnamed sidecar as an app container: the app's routing sleep", routingSleep,
		B.SidecarPreStop == routingSleep, "%s", B.SidecarPreStop)
	for _, a := range arms {
		ck.Add(a.Name+": the app's preStop and the budget", routingSleep+"; "+wantBudget,
			a.PreStop == routingSleep && a.Budget == wantBudget && a.Grace == wantGrace, "%s; %s; grace %d", a.PreStop, a.Budget, a.Grace)
		ck.Add(a.Name+": every Pod replaced under load", fmt.Sprintf("%d replaced, > %d requests sent", sidecarReplicas, sidecarRate*10),
			a.Replaced == sidecarReplicas && a.Sent > sidecarRate*10, "%d replaced, %d sent over %s", a.Replaced, a.Sent, a.Load)
		ck.Add(a.Name+": the log of every old Pod's app and sidecar read to the end", fmt.Sprintf("%d Pods", sidecarReplicas),
			len(a.Pods) == sidecarReplicas && allLogged(a.Pods), "%s", podShutdowns(a.Pods))
	}
	ck.Add("A: no failed request", "0 failed", A.Failed == 0 && A.Sent > 0,
		"%d failed of %d (%s)", A.Failed, A.Sent, evidence.KindList(A.ByKind))
	ck.Add("A: in every old Pod the sidecar gets SIGTERM after the app is done, with no connection open", "sidecar sigterm > app shutdown_complete, 0 open",
		len(A.Pods) > 0 && allPods(A.Pods, func(p evidence.SidecarPod) bool {
			return p.SidecarSIGTERM != nil && p.AppDone != nil && *p.SidecarSIGTERM > *p.AppDone && p.SidecarActive != nil && *p.SidecarActive == 0
		}), "%s", podShutdowns(A.Pods))
	ck.Add("B: requests fail", "> 0 failed", B.Failed > 0,
		"%d failed of %d (%s)", B.Failed, B.Sent, evidence.KindList(B.ByKind))
	cut := 0
	for _, p := range B.Pods {
		cut += p.BackendFailed
	}
	ck.Add("B: every failure is a database call the app saw cut (its 502, backend_failed in its log)", fmt.Sprintf("%d http_502 = %d backend_failed", B.Failed, B.Failed),
		B.Failed > 0 && B.ByKind["http_502"] == B.Failed && cut == B.Failed, "%d http_502 of %d failed; %d backend_failed", B.ByKind["http_502"], B.Failed, cut)
	early := 0
	for _, p := range B.Pods {
		if p.SidecarSIGTERM != nil && (p.AppDone == nil || *p.SidecarSIGTERM < *p.AppDone) && p.SidecarActive != nil && *p.SidecarActive > 0 {
			early++
		}
	}
	ck.Add("B: the sidecar gets SIGTERM with the app, while the app's admitted work still runs through it", "> 0 Pods: sidecar sigterm < app shutdown_complete, > 0 open",
		early > 0, "%d of %d Pods: %s", early, len(B.Pods), podShutdowns(B.Pods))
	Expect(s.Checks.Failed()).To(BeEmpty())
}

// startDatabase runs the arm's "database": a drain app Pod the sidecars
// relay to (its Pod IP: no kube-proxy here), and returns its address.
func startDatabase(ctx context.Context, ns string) string {
	GinkgoHelper()
	db := appPod(ns, "db", map[string]string{"app": "db"}, map[string]string{"graceguard.io/inject": "false"})
	ownProbes(&db.Spec.Containers[0])
	must(kube.CoreV1().Pods(ns).Create(ctx, db, metav1.CreateOptions{}))
	p := waitPodReady(ctx, ns, "db")
	return fmt.Sprintf("%s:%d", p.Status.PodIP, appPort)
}

// sidecarDeployment is the drain app reaching backend through the proxy
// sidecar beside it: each request a new connection to the sidecar on
// localhost, relayed to the database. The app has probes of its own: the
// arms differ only in the annotation.
func sidecarDeployment(ns, backend string, annotations map[string]string) *appsv1.Deployment {
	dep := appDeployment(ns, "web", sidecarReplicas, annotations)
	spec := &dep.Spec.Template.Spec
	app := &spec.Containers[0]
	ownProbes(app)
	app.Env = append(app.Env, corev1.EnvVar{Name: "BACKEND", Value: sidecarListen})
	spec.Containers = append(spec.Containers, corev1.Container{
		Name:            sidecarName,
		Image:           tcpproxyImage,
		ImagePullPolicy: corev1.PullNever,
		Env:             []corev1.EnvVar{{Name: "LISTEN", Value: sidecarListen}, {Name: "TARGET", Value: backend}},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
		}},
	})
	return dep
}

// runSidecarArm restarts the arm's Deployment under load (runArmWith), and
// reads each old Pod's shutdown from the logs of its app and its sidecar.
func runSidecarArm(ctx context.Context, a *evidence.SidecarArm) {
	GinkgoHelper()
	old := readyPods(ctx, a.Namespace, "app=web")
	Expect(old).To(HaveLen(sidecarReplicas), "every replica of %s/web ready before the restart", a.Namespace)
	for _, c := range old[0].Spec.Containers {
		if c.Name == sidecarName {
			a.SidecarPreStop = preStopString(c)
		}
	}
	type followed struct {
		pod          string
		app, sidecar *logFollower
	}
	var logs []followed
	for _, p := range old {
		f := followed{pod: p.Name, app: followLog(ctx, a.Namespace, p.Name), sidecar: followContainerLog(ctx, a.Namespace, p.Name, sidecarName)}
		_, ok := f.sidecar.waitFor("listening", 30*time.Second)
		Expect(ok).To(BeTrue(), "the sidecar's log of %s", p.Name)
		logs = append(logs, f)
	}
	runArmWith(ctx, &a.Arm, armLoad{rate: sidecarRate, work: sidecarWork, timeout: sidecarTimeout}, sidecarReplicas, func() {
		restartTemplate(ctx, a.Namespace, "web")
		waitDeploymentDone(ctx, a.Namespace, "web", 5*time.Minute)
	})
	for _, f := range logs {
		p := evidence.SidecarPod{Pod: f.pod}
		// The old Pods are gone: their containers exited, the streams end.
		p.AppLogEnded, p.SidecarLogEnded = f.app.waitEnd(time.Minute), f.sidecar.waitEnd(time.Minute)
		f.app.save(a.Namespace + "-" + f.pod + "-app")
		f.sidecar.save(a.Namespace + "-" + f.pod + "-" + sidecarName)
		sig := f.app.first("sigterm")
		if sig == nil {
			a.Pods = append(a.Pods, p)
			continue
		}
		p.AppActive = sig.Active
		if e := f.app.first("shutdown_complete"); e != nil {
			p.AppDone = since(sig.TS, e.TS)
		}
		if e := f.sidecar.first("sigterm"); e != nil {
			p.SidecarSIGTERM, p.SidecarActive = since(sig.TS, e.TS), e.Active
		}
		for _, e := range f.app.snapshot() {
			if e.Event == "backend_failed" {
				p.BackendFailed++
			}
		}
		a.Pods = append(a.Pods, p)
	}
	GinkgoWriter.Printf("%s: %s\n", a.Name, podShutdowns(a.Pods))
}

func allLogged(pods []evidence.SidecarPod) bool {
	return allPods(pods, func(p evidence.SidecarPod) bool {
		return p.AppLogEnded && p.SidecarLogEnded && p.AppDone != nil && p.SidecarSIGTERM != nil
	})
}

func allPods(pods []evidence.SidecarPod, ok func(evidence.SidecarPod) bool) bool {
	for _, p := range pods {
		if !ok(p) {
			return false
		}
	}
	return true
}

// podShutdowns says, per old Pod, when its app was done and its sidecar
// got SIGTERM (seconds after the app's SIGTERM) and what was open then.
func podShutdowns(pods []evidence.SidecarPod) string {
	var parts []string
	for _, p := range pods {
		parts = append(parts, fmt.Sprintf("%s: app done %s (active at sigterm %s, %d backend_failed), sidecar sigterm %s (%s open)",
			p.Pod, fmtAt(p.AppDone), intOr(p.AppActive), p.BackendFailed, fmtAt(p.SidecarSIGTERM), intOr(p.SidecarActive)))
	}
	if len(parts) == 0 {
		return "no old Pods"
	}
	return strings.Join(parts, "; ")
}

func intOr(n *int) string {
	if n == nil {
		return "?"
	}
	return fmt.Sprint(*n)
}

// annotationList renders annotations as "key: value" in key order.
func annotationList(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+": "+v)
	}
	slices.Sort(out)
	return out
}
