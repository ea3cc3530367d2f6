//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/test/e2e/evidence"
)

// The shutdown lab (seed 000): a long request, then the Pod is deleted.
const (
	// labRequest outlasts the routing delay plus the kubelet's lateness in
	// noticing a delete (1.5-2 s here), so that SIGTERM arrives while the
	// request runs: the seed's 6 s request with its 2 s hook would end
	// before graceguard's 5 s sleep and prove nothing.
	labRequest = 10 * time.Second
	// labRouting is the routing delay, graceguard's default.
	labRouting = 5 * time.Second
	labWork    = 10 * time.Second
	// labAppGrace is the grace the lab Pod itself asks for (a guess too
	// short for its budget); graceguard raises it.
	labAppGrace = 10
	// controlGrace is the control arm's grace: shorter than the request.
	controlGrace = 3
)

// deletionCase describes one Pod deleted during an admitted request.
type deletionCase struct {
	ns, name    string
	optedIn     bool
	annotations map[string]string
	grace       *int64
	ownProbes   bool
	preStop     *corev1.LifecycleHandler
	// existing is a running Pod (of a Deployment) to use instead of
	// creating one; the Service named name must select it already.
	existing *corev1.Pod
	request  time.Duration
	// sigtermWait bounds the wait for the app's sigterm line.
	sigtermWait time.Duration
	// record puts the evidence in place as soon as it exists, so that a
	// spec failing halfway still reports what it saw.
	record func(*evidence.Deletion)
}

// deletion is what deleteDuringRequest saw.
type deletion struct {
	d        *evidence.Deletion
	created  *corev1.Pod
	client   result
	late     *result
	sigterm  *appEvent
	log      *logFollower
	t0       time.Time
	endpoint time.Time
}

// deleteDuringRequest creates the Pod (and a Service selecting it), starts
// one request from the test process to the Pod IP over the bridge, waits
// until the app logged that it admitted it, deletes the Pod, and records
// everything it can observe, in seconds after the delete call.
func deleteDuringRequest(ctx context.Context, dc deletionCase) *deletion {
	GinkgoHelper()
	created := dc.existing
	if created == nil {
		labels := map[string]string{"app": dc.name}
		pod := appPod(dc.ns, dc.name, labels, dc.annotations)
		pod.Spec.TerminationGracePeriodSeconds = dc.grace
		if dc.ownProbes {
			ownProbes(&pod.Spec.Containers[0])
		}
		if dc.preStop != nil {
			pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: dc.preStop}
		}
		must(kube.CoreV1().Services(dc.ns).Create(ctx, appService(dc.ns, dc.name, labels), metav1.CreateOptions{}))
		created = must(kube.CoreV1().Pods(dc.ns).Create(ctx, pod, metav1.CreateOptions{}))
	}
	service, podName := dc.name, created.Name
	c := created.Spec.Containers[0]
	d := &evidence.Deletion{
		Namespace: dc.ns, OptedIn: dc.optedIn, Pod: podName, Annotations: created.Annotations,
		Budget: created.Annotations[budgetKey], Grace: grace(created), PreStop: preStopString(c),
		Readiness: probeString(c.ReadinessProbe), Liveness: probeString(c.LivenessProbe),
		Request: evidence.S(dc.request),
	}
	evMu.Lock()
	dc.record(d)
	evMu.Unlock()
	running := waitPodReady(ctx, dc.ns, podName)
	d.PodIP = running.Status.PodIP
	base := fmt.Sprintf("http://%s:%d", d.PodIP, appPort)
	waitEndpointReady(ctx, dc.ns, service, d.PodIP)

	lf := followLog(ctx, dc.ns, podName)
	_, ok := lf.waitFor("listening", 30*time.Second)
	Expect(ok).To(BeTrue(), "the app's log through the API server")
	ew := watchEndpoint(ctx, dc.ns, service, d.PodIP)
	pw := watchPod(ctx, dc.ns, podName)

	clientDone := make(chan result, 1)
	go func() {
		clientDone <- get(ctx, newClient(2*time.Minute), fmt.Sprintf("%s/work?seconds=%g", base, dc.request.Seconds()))
	}()
	started, ok := lf.waitFor("work_started", 20*time.Second)
	Expect(ok).To(BeTrue(), "the app logged work_started")

	By(fmt.Sprintf("deleting Pod %s/%s %s after the app admitted the request", dc.ns, podName, time.Since(started.TS).Round(time.Millisecond)))
	t0 := time.Now()
	Expect(kube.CoreV1().Pods(dc.ns).Delete(ctx, podName, metav1.DeleteOptions{})).To(Succeed())
	d.Admitted = since(t0, started.TS)

	del := &deletion{d: d, created: created, log: lf, t0: t0}
	if sig, ok := lf.waitFor("sigterm", dc.sigtermWait); ok {
		del.sigterm = &sig
		// Draining has begun: new work must be refused.
		late := get(ctx, newClient(3*time.Second), base+"/work?seconds=0.1")
		del.late = &late
		d.LateRequest, d.LateRequestAt = late.String(), since(t0, late.start)
	}
	select {
	case del.client = <-clientDone:
	case <-time.After(time.Minute):
		del.client = result{err: fmt.Errorf("no answer within a minute of the delete")}
	}
	d.Client, d.ClientDone = del.client.String(), since(t0, del.client.end)
	lf.waitEnd(time.Minute)
	gone, exit, _ := pw.wait(time.Minute)
	d.PodGone, d.ExitCode = since(t0, gone), exit
	if at, conds := ew.result(); !at.IsZero() {
		del.endpoint = at
		d.EndpointNotReady, d.EndpointConditions = since(t0, at), condString(conds)
	}
	if del.sigterm != nil {
		d.SIGTERM = since(t0, del.sigterm.TS)
	}
	if e := lf.first("work_completed"); e != nil {
		d.WorkCompleted = since(t0, e.TS)
	}
	if e := lf.first("shutdown_complete"); e != nil {
		d.ShutdownComplete = since(t0, e.TS)
	}
	d.LogOrder, d.Logs = lf.order(), lf.lines(t0)
	lf.save(dc.ns + "-" + podName)
	return del
}

func timelineOf(tl budget.Timeline) *evidence.Timeline {
	return &evidence.Timeline{Hook: evidence.S(tl.Hook), SIGTERM: evidence.S(tl.SIGTERM), Drained: evidence.S(tl.Drained), Exited: evidence.S(tl.Exited), Deadline: evidence.S(tl.Deadline)}
}

func lab(ctx context.Context) {
	appGrace := int64(labAppGrace)
	annotations := map[string]string{
		"graceguard.io/routing-delay":  labRouting.String(),
		"graceguard.io/max-work":       labWork.String(),
		"graceguard.io/readiness-path": "/ready",
		"graceguard.io/liveness-path":  "/live",
	}
	del := deleteDuringRequest(ctx, deletionCase{ns: nsLab, name: "drainapp", optedIn: true, annotations: annotations,
		grace: &appGrace, request: labRequest, sigtermWait: time.Minute, record: func(d *evidence.Deletion) { ev.Lab = d }})
	d := del.d

	// What pkg/budget predicts for this Pod (cleanup 2s and margin 3s are
	// the chart's defaults).
	b := budget.Budget{Routing: labRouting, Work: labWork, Cleanup: 2 * time.Second, Margin: 3 * time.Second}
	tl := budget.NewTimeline(b, labRouting, d.Grace)
	d.Expected = timelineOf(tl)
	wantGrace := int64(b.Sum() / time.Second)

	ck := &d.Checks
	wantHook := fmt.Sprintf("sleep %ds", int(labRouting.Seconds()))
	ck.Add("graceguard added a preStop sleep of the routing delay", wantHook, d.PreStop == wantHook, "%s", d.PreStop)
	ck.Add("graceguard raised the grace to the budget", fmt.Sprintf("%d (Pod asked for %d)", wantGrace, labAppGrace), d.Grace == wantGrace, "%d; %s=%q", d.Grace, budgetKey, d.Budget)
	ck.Add("graceguard added the probes from the annotations", "readiness /ready, liveness /live",
		strings.Contains(d.Readiness, "/ready") && strings.Contains(d.Liveness, "/live"), "readiness %s; liveness %s", d.Readiness, d.Liveness)
	ck.Add("the client gets the completed 200 response", "200 completed", del.client.completed(), "%s after %s", d.Client, fmtAt(d.ClientDone))
	ck.Add("SIGTERM arrives no earlier than the routing delay after the delete", fmt.Sprintf(">= %s (and before the work ends)", labRouting),
		d.SIGTERM != nil && float64(*d.SIGTERM) >= labRouting.Seconds() && float64(*d.SIGTERM) < float64(tl.Deadline.Seconds()),
		"%s", fmtAt(d.SIGTERM))
	ck.Add("during the hook the EndpointSlice shows the Pod ready=false, terminating=true", "observed before SIGTERM",
		d.EndpointNotReady != nil && d.SIGTERM != nil && float64(*d.EndpointNotReady) < float64(*d.SIGTERM),
		"%s at %s", evidence.OrNone(d.EndpointConditions), fmtAt(d.EndpointNotReady))
	wantOrder := []string{"work_started", "sigterm active=1", "work_completed", "shutdown_complete"}
	ck.Add("the app logs work_started → sigterm(active=1) → work_completed → shutdown_complete", strings.Join(wantOrder, " → "),
		slices.Equal(d.LogOrder, wantOrder), "%s", strings.Join(d.LogOrder, " → "))
	lateOK := del.late != nil && (del.late.code == http.StatusServiceUnavailable || errKind(del.late.err) == "connection_refused")
	ck.Add("a request sent after draining began is rejected", "503 or connection refused", lateOK, "%s, sent at %s", evidence.OrNone(d.LateRequest), fmtAt(d.LateRequestAt))
	ck.Add("the app exits before the SIGKILL deadline", fmt.Sprintf("shutdown_complete < %ds", d.Grace),
		d.ShutdownComplete != nil && float64(*d.ShutdownComplete) < float64(d.Grace), "shutdown_complete at %s, exit code %s", fmtAt(d.ShutdownComplete), fmtExit(d.ExitCode))
	Expect(d.Checks.Failed()).To(BeEmpty())
}

func control(ctx context.Context) {
	g := int64(controlGrace)
	del := deleteDuringRequest(ctx, deletionCase{ns: nsControl, name: "drainapp", optedIn: false, grace: &g, ownProbes: true,
		request: labRequest, sigtermWait: 20 * time.Second, record: func(d *evidence.Deletion) { ev.Control = d }})
	d := del.d
	// The work needs 6 s after SIGTERM, the deadline is 3 s.
	d.Expected = timelineOf(budget.NewTimeline(budget.Budget{Work: labRequest}, 0, d.Grace))

	ck := &d.Checks
	ck.Add("graceguard left the Pod alone (namespace not opted in)", "no preStop, grace 3, no budget",
		d.PreStop == "none" && d.Grace == controlGrace && d.Budget == "", "preStop %s, grace %d, budget %q", d.PreStop, d.Grace, d.Budget)
	ck.Add("SIGTERM arrives while the request is active", "sigterm active=1",
		del.sigterm != nil && del.sigterm.Active != nil && *del.sigterm.Active == 1, "sigterm at %s; log %s", fmtAt(d.SIGTERM), strings.Join(d.LogOrder, " → "))
	ck.Add("the admitted request is cut", "connection reset/EOF or non-200", !del.client.completed(), "%s after %s", d.Client, fmtAt(d.ClientDone))
	// Without a hook the kubelet sends SIGKILL the grace period after
	// SIGTERM (a lower bound only: never a tight window).
	var killGap float64
	if d.SIGTERM != nil && d.ClientDone != nil {
		killGap = float64(*d.ClientDone) - float64(*d.SIGTERM)
	}
	ck.Add("the request is cut by SIGKILL, the grace period after SIGTERM", fmt.Sprintf(">= %ds after sigterm", controlGrace),
		killGap >= controlGrace-0.25, "%.3fs after sigterm (cut at %s)", killGap, fmtAt(d.ClientDone))
	ck.Add("the app never logs work_completed (nor shutdown_complete)", "absent", d.WorkCompleted == nil && d.ShutdownComplete == nil,
		"work_completed %s, shutdown_complete %s; exit code %s", fmtAt(d.WorkCompleted), fmtAt(d.ShutdownComplete), fmtExit(d.ExitCode))
	Expect(d.Checks.Failed()).To(BeEmpty())
}

func fmtAt(a evidence.At) string {
	if a == nil {
		return "not observed"
	}
	return fmt.Sprintf("%.3fs", float64(*a))
}

func fmtExit(c *int32) string {
	if c == nil {
		return "not observed"
	}
	return fmt.Sprint(*c)
}
