//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/pkg/cli"
	"github.com/graceguard/graceguard/pkg/shutdownreport"
	"github.com/graceguard/graceguard/test/e2e/evidence"
)

// Scenario 10 (seed test 6): a user's own preStop hook that fails, and one
// that hangs. graceguard cannot read either hook's length and budgets the
// routing delay for it: grace = routing 5 + work 8 + cleanup 2 + margin 3.
const (
	brokenWork    = 8 * time.Second
	brokenRouting = 5 * time.Second
	// brokenRequest is the request admitted before each delete: the
	// budget's max-work.
	brokenRequest = brokenWork
	// brokenLateLead: the hang arm's second request is sent this long
	// before the grace ends, so that it is in flight at SIGTERM and needs
	// more than the kubelet's 2 s after it.
	brokenLateLead = 3 * time.Second
	// brokenReport bounds the wait for the observer's write: its flush
	// interval (the chart's 10s) after the Pod is gone, and the API calls.
	brokenReport = 90 * time.Second
)

// brokenCommands: curl is not in the drain app's image (no distribution at
// all); the hang is the drain app's own sleep called by its real name, a
// command graceguard cannot read, as a user's drain script would be.
var (
	missingCommand = []string{"curl", "-fsS", "-X", "POST", "http://127.0.0.1:8080/drain"}
	hangCommand    = []string{"/drainapp", "sleep", "3600"}
	sleepCommand   = []string{"/bin/sleep", "3600"}
)

// warningLog keeps the admission warnings of one client's requests.
type warningLog struct {
	mu   sync.Mutex
	list []string
}

func (w *warningLog) HandleWarningHeader(code int, _ string, text string) {
	if code != 299 || text == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warningLog) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

func brokenHook(ctx context.Context) {
	h := &evidence.BrokenHook{Namespace: nsBroken}
	evMu.Lock()
	ev.BrokenHook = h
	evMu.Unlock()
	ck := &h.Checks
	warns := &warningLog{}
	cfg := rest.CopyConfig(cl.RESTConfig)
	cfg.WarningHandler = warns
	wkube := must(kubernetes.NewForConfig(cfg))
	dyn := must(dynamic.NewForConfig(cl.RESTConfig))
	ann := map[string]string{
		"graceguard.io/max-work":       brokenWork.String(),
		"graceguard.io/readiness-path": "/ready",
		"graceguard.io/liveness-path":  "/live",
	}
	deployment := func(name, image string, cmd []string) *appsv1.Deployment {
		dep := appDeployment(nsBroken, name, 1, ann)
		c := &dep.Spec.Template.Spec.Containers[0]
		c.Image = image
		c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: cmd}}}
		return dep
	}
	report := func(name string) *v1alpha1.ShutdownReport {
		GinkgoHelper()
		u, err := dyn.Resource(reportsGVR).Namespace(nsBroken).Get(ctx, v1alpha1.ReportName("Deployment", name), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return &v1alpha1.ShutdownReport{}
		}
		Expect(err).NotTo(HaveOccurred())
		r := &v1alpha1.ShutdownReport{}
		Expect(runtimeFromUnstructured(u, r)).To(Succeed())
		return r
	}
	DeferCleanup(func(ctx SpecContext) {
		saveLogs(ctx, releaseNS, "app.kubernetes.io/name=graceguard-observer", "observer-broken-hook")
	})

	// run creates the arm's Deployment, deletes its Pod during a request
	// and reads what the kubelet and the observer reported.
	run := func(a *evidence.BrokenArm, cmd []string, sigtermWait time.Duration, during func(pod *corev1.Pod)) (*deletion, *v1alpha1.ShutdownReport) {
		GinkgoHelper()
		By(a.Name + ": creating the Deployment")
		a.PreStop = "exec " + strings.Join(cmd, " ")
		warns.take()
		_, err := wkube.AppsV1().Deployments(nsBroken).Create(ctx, deployment(a.Workload, a.Image, cmd), metav1.CreateOptions{})
		a.Warnings = warns.take()
		Expect(err).NotTo(HaveOccurred(), "graceguard admits the Deployment")
		must(kube.CoreV1().Services(nsBroken).Create(ctx, appService(nsBroken, a.Workload, map[string]string{"app": a.Workload}), metav1.CreateOptions{}))
		waitDeploymentDone(ctx, nsBroken, a.Workload, 3*time.Minute)
		pods := readyPods(ctx, nsBroken, "app="+a.Workload)
		Expect(pods).To(HaveLen(1))
		if during != nil {
			go func() {
				defer GinkgoRecover()
				during(&pods[0])
			}()
		}
		del := deleteDuringRequest(ctx, deletionCase{ns: nsBroken, name: a.Workload, optedIn: true, existing: &pods[0], request: brokenRequest,
			sigtermWait: sigtermWait, record: func(d *evidence.Deletion) { a.Deletion = d }})
		a.PodEvents, a.HookEvents = podEvents(ctx, nsBroken, del.d.Pod, del.t0)

		By(a.Name + ": waiting for the observer's report")
		var r *v1alpha1.ShutdownReport
		Eventually(func() int64 {
			r = report(a.Workload)
			return r.Status.Observed
		}).WithContext(ctx).WithTimeout(brokenReport).WithPolling(time.Second).Should(BeNumerically(">=", 1), "the observer wrote the Pod's sample")
		st := r.Status
		a.Observed = fmt.Sprintf("%d observed, %d SIGKILLed, %d failed preStop hooks", st.Observed, st.KillsObserved, st.HookFailuresObserved)
		for _, s := range st.Samples {
			if s.Pod == del.d.Pod {
				est := ""
				if s.PreStopEstimated {
					est = " (estimated)"
				}
				a.Sample = fmt.Sprintf("container %s: grace %ds, preStop %ds%s, hookFailed %v, exit code %d %ds after the delete, drain %ds, outcome %s",
					s.Container, s.GraceSeconds, s.PreStopSeconds, est, s.HookFailed, s.ExitCode, s.Exited.Unix()-s.Deleted.Unix(), s.DrainSeconds, s.Outcome)
			}
		}
		// graceguard's events on the Deployment arrive with the write.
		Eventually(func() []string {
			evs := must(kube.CoreV1().Events(nsBroken).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Deployment,involvedObject.name=" + a.Workload}))
			a.WorkloadEvents = nil
			for _, e := range evs.Items {
				if e.Reason == "ShutdownKilled" || e.Reason == "PreStopHookFailed" {
					a.WorkloadEvents = append(a.WorkloadEvents, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Message))
				}
			}
			sort.Strings(a.WorkloadEvents)
			return a.WorkloadEvents
		}).WithContext(ctx).WithTimeout(20 * time.Second).WithPolling(time.Second).ShouldNot(BeEmpty())
		var out, errOut bytes.Buffer
		code := cli.Execute([]string{"recommend", "--kubeconfig", cl.Kubeconfig, "-n", nsBroken}, strings.NewReader(""), &out, &errOut)
		Expect(code).To(Equal(cli.ExitOK), "recommend: %s", errOut.String())
		a.Recommend = block(out.String(), "Deployment "+nsBroken+"/"+a.Workload+":")
		return del, r
	}

	// (a) The hook's binary is not in the image.
	fail := &evidence.BrokenArm{Name: "a. the hook's binary is missing", Workload: "hook-fails", Image: drainappDistroless}
	h.Arms = append(h.Arms, fail)
	del, rep := run(fail, missingCommand, 30*time.Second, nil)
	d := del.d
	ck.Add("(a) graceguard admits it and warns that the binary may be missing", "a prestop-binary-may-be-missing warning",
		anyContains(fail.Warnings, `"curl" may be missing from a distroless image`), "%s", evidence.OrNone(strings.Join(fail.Warnings, " | ")))
	ck.Add("(a) the kubelet records the failed hook", ">= 1 FailedPreStopHook event", fail.HookEvents >= 1, "%d", fail.HookEvents)
	ck.Add("(a) SIGTERM comes at once, before the routing delay the budget counted for the hook", fmt.Sprintf("< %s after the delete", brokenRouting),
		d.SIGTERM != nil && float64(*d.SIGTERM) < brokenRouting.Seconds(), "%s", fmtAt(d.SIGTERM))
	ck.Add("(a) the app drains the admitted request in the grace left", "200 completed, shutdown_complete before the grace, exit code 0",
		del.client.completed() && d.ShutdownComplete != nil && float64(*d.ShutdownComplete) < float64(d.Grace) && d.ExitCode != nil && *d.ExitCode == 0,
		"%s at %s; shutdown_complete %s of %ds; exit code %s", d.Client, fmtAt(d.ClientDone), fmtAt(d.ShutdownComplete), d.Grace, fmtExit(d.ExitCode))
	ck.Add("(a) the observer's report records the failed hook", "hookFailed: true in the Pod's sample",
		sampleOf(rep, d.Pod) != nil && sampleOf(rep, d.Pod).HookFailed, "%s", evidence.OrNone(fail.Sample))
	ck.Add("(a) the observer warns on the Deployment", "a PreStopHookFailed Warning event: SIGTERM came at once",
		anyContains(fail.WorkloadEvents, "PreStopHookFailed") && anyContains(fail.WorkloadEvents, "SIGTERM came at once"), "%s", evidence.OrNone(strings.Join(fail.WorkloadEvents, " | ")))

	// (b) The hook hangs. The user's first try, a sleep graceguard can
	// read, is refused; a command it cannot read is admitted.
	hang := &evidence.BrokenArm{Name: "b. the hook hangs", Workload: "hook-hangs", Image: drainappImage, Tried: "exec " + strings.Join(sleepCommand, " ")}
	_, err := wkube.AppsV1().Deployments(nsBroken).Create(ctx, deployment("hook-sleeps", drainappImage, sleepCommand), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	hang.TriedAnswer = errOr(err, "admitted")
	warns.take()
	ck.Add("(b) graceguard refuses a preStop sleep 3600: no grace it allows fits it", "denied",
		err != nil && strings.Contains(err.Error(), "graceguard"), "%s", firstLine(hang.TriedAnswer))
	h.Arms = append(h.Arms, hang)
	var (
		inFlight             result
		inFlightSent, sentOK = time.Time{}, false
		inFlightMu           sync.Mutex
	)
	var late sync.WaitGroup
	late.Add(1)
	del, rep = run(hang, hangCommand, 60*time.Second, func(p *corev1.Pod) {
		defer late.Done()
		// When the deletion is seen, wait until shortly before the grace
		// ends, then send a request of the budget's max-work.
		var seen time.Time
		for seen.IsZero() {
			cur, err := kube.CoreV1().Pods(nsBroken).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return
			}
			if cur.DeletionTimestamp != nil {
				seen = time.Now()
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(time.Until(seen.Add(time.Duration(grace(p))*time.Second - brokenLateLead)))
		sent := time.Now()
		res := get(ctx, newClient(time.Minute), fmt.Sprintf("http://%s:%d/work?seconds=%g", p.Status.PodIP, appPort, brokenWork.Seconds()))
		inFlightMu.Lock()
		inFlight, inFlightSent, sentOK = res, sent, true
		inFlightMu.Unlock()
	})
	late.Wait()
	inFlightMu.Lock()
	if sentOK {
		hang.InFlight, hang.InFlightSent, hang.InFlightDone = inFlight.String(), since(del.t0, inFlightSent), since(del.t0, inFlight.end)
	}
	inFlightMu.Unlock()
	d = del.d
	ck.Add("(b) graceguard admits a hang it cannot read, and says its length is unknown", "a prestop-unknown-length warning",
		anyContains(hang.Warnings, "unknown length"), "%s", evidence.OrNone(strings.Join(hang.Warnings, " | ")))
	ck.Add("(b) SIGTERM comes only when the hook has used the whole grace", fmt.Sprintf(">= %ds after the delete", d.Grace),
		d.SIGTERM != nil && float64(*d.SIGTERM) >= float64(d.Grace), "%s", fmtAt(d.SIGTERM))
	ck.Add("(b) the request admitted before the delete completes while the hook runs", "200 completed before SIGTERM",
		del.client.completed() && d.ClientDone != nil && d.SIGTERM != nil && *d.ClientDone < *d.SIGTERM, "%s at %s", d.Client, fmtAt(d.ClientDone))
	var gap float64
	if d.SIGTERM != nil && hang.InFlightDone != nil {
		gap = float64(*hang.InFlightDone) - float64(*d.SIGTERM)
	}
	ck.Add("(b) a request in flight at SIGTERM gets the kubelet's 2 s and is cut", "not completed, cut >= 1.5 s after SIGTERM, exit code 137",
		sentOK && !inFlight.completed() && gap >= 1.5 && d.ExitCode != nil && *d.ExitCode == 137,
		"%s, sent at %s, ended %.3fs after SIGTERM; exit code %s", evidence.OrNone(hang.InFlight), fmtAt(hang.InFlightSent), gap, fmtExit(d.ExitCode))
	s := sampleOf(rep, d.Pod)
	ck.Add("(b) the observer's report records the kill at the grace", "outcome killed in the Pod's sample",
		s != nil && s.Outcome == v1alpha1.OutcomeKilled, "%s", evidence.OrNone(hang.Sample))
	// The drain: the kubelet's 2 s, its lateness in noticing the delete
	// (up to 2 s here) and whole-second times; a hook taken as failed at
	// once would give the whole grace less the routing estimate.
	ck.Add("(b) the observer tells the hang from a hook that failed at once", fmt.Sprintf("hookFailed, preStop %ds (the grace), drain <= 5s", d.Grace),
		s != nil && shutdownreport.HookHung(*s) && s.PreStopSeconds == d.Grace && s.DrainSeconds <= 5, "%s", evidence.OrNone(hang.Sample))
	ck.Add("(b) kubectl graceguard recommend shows no drain measured", "drain: none ended on its own",
		anyContains(hang.Recommend, "none ended on its own"), "%s", evidence.OrNone(strings.Join(hang.Recommend, " | ")))
	ck.Add("(b) the observer warns on the Deployment: the kill, and the hook that ran out the grace", "ShutdownKilled and PreStopHookFailed (\"ran out the\") Warning events",
		anyContains(hang.WorkloadEvents, "ShutdownKilled") && anyContains(hang.WorkloadEvents, "ran out the"), "%s", evidence.OrNone(strings.Join(hang.WorkloadEvents, " | ")))
	ck.Add("(b) kubectl graceguard recommend says the hook hung, and does not count its drain", "hook hung 1 of 1; no max-work from it",
		anyContains(hang.Recommend, "hook hung   1 of 1") && anyContains(hang.Recommend, "no recommendation"), "%s", evidence.OrNone(strings.Join(hang.Recommend, " | ")))
	Expect(h.Checks.Failed()).To(BeEmpty())
}

// podEvents reads the kubelet's events about a Pod (for up to 15 s, until
// a FailedPreStopHook), in time order, and counts the FailedPreStopHook
// events.
func podEvents(ctx context.Context, ns, pod string, t0 time.Time) ([]string, int) {
	GinkgoHelper()
	var lines []string
	var n int
	for deadline := time.Now().Add(15 * time.Second); ; {
		evs, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
		Expect(err).NotTo(HaveOccurred())
		sort.Slice(evs.Items, func(i, j int) bool { return eventTime(evs.Items[i]).Before(eventTime(evs.Items[j])) })
		lines, n = nil, 0
		for _, e := range evs.Items {
			if e.Reason == "FailedPreStopHook" {
				n++
			}
			switch e.Reason {
			case "Scheduled", "Pulled", "Created", "Started", "MissingClusterDNS":
				continue
			}
			lines = append(lines, fmt.Sprintf("%s %s: %s (at %s)", e.Type, e.Reason, strings.TrimSpace(e.Message), fmtAt(since(t0, eventTime(e)))))
		}
		if n > 0 || time.Now().After(deadline) {
			return lines, n
		}
		time.Sleep(time.Second)
	}
}

func sampleOf(r *v1alpha1.ShutdownReport, pod string) *v1alpha1.Sample {
	for i := range r.Status.Samples {
		if r.Status.Samples[i].Pod == pod {
			return &r.Status.Samples[i]
		}
	}
	return nil
}

func anyContains(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// block is the lines of text from the one starting with head to the next
// line that is not indented.
func block(text, head string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(l, head):
			in = true
		case in && !strings.HasPrefix(l, " "):
			in = false
		}
		if in {
			out = append(out, l)
		}
	}
	return out
}
