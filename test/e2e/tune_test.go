//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/cli"
	"github.com/graceguard/graceguard/pkg/policyreport"
	"github.com/graceguard/graceguard/test/e2e/evidence"
)

// Budgets from evidence (issue 11): an app whose drain takes ~12 s after
// SIGTERM, deployed with max-work 5s and the grace trimmed to the budget.
const (
	tuneRate = 4 // requests per second, open loop
	// tuneWork: requests admitted until the router withdraws a Pod (its
	// lag plus the EndpointSlice update, ~2-3 s after the delete) end
	// ~17-18 s after the delete; SIGTERM comes at 5 s (the preStop sleep),
	// so the app drains ~12-13 s.
	tuneWork    = 15 * time.Second
	tuneTimeout = 40 * time.Second
	tuneReps    = 3
	tuneGrace   = 15
	// tuneReport is how long the observer may take to write a round's
	// samples: its flush interval (the chart's 10s) and the API calls.
	tuneReport = 90 * time.Second
)

var (
	reportsGVR     = schema.GroupVersionResource{Group: "graceguard.io", Version: "v1alpha1", Resource: "shutdownreports"}
	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

func tuneFromEvidence(ctx context.Context) {
	ann := map[string]string{
		"graceguard.io/max-work":       "5s",
		"graceguard.io/readiness-path": "/ready",
		"graceguard.io/liveness-path":  "/live",
	}
	t := &evidence.Tune{Namespace: nsTune, Workload: "web", Replicas: tuneReps, Grace: tuneGrace, Rate: tuneRate,
		Work: evidence.S(tuneWork), RouterLag: evidence.S(routerLag), ClientTimeout: evidence.S(tuneTimeout),
		Annotations: "graceguard.io/max-work: 5s, readiness-path: /ready, liveness-path: /live"}
	evMu.Lock()
	ev.Tune = t
	evMu.Unlock()
	ck := &t.Checks
	dyn := must(dynamic.NewForConfig(cl.RESTConfig))

	By("the observer runs")
	Eventually(func(g Gomega) {
		d, err := kube.AppsV1().Deployments(releaseNS).Get(ctx, fullname+"-observer", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Status.AvailableReplicas).To(Equal(int32(1)))
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())

	By("a Deployment with max-work 5s and grace 15s")
	dep := appDeployment(nsTune, "web", tuneReps, ann)
	g := int64(tuneGrace)
	dep.Spec.Template.Spec.TerminationGracePeriodSeconds = &g
	must(kube.AppsV1().Deployments(nsTune).Create(ctx, dep, metav1.CreateOptions{}))
	must(kube.CoreV1().Services(nsTune).Create(ctx, appService(nsTune, "web", map[string]string{"app": "web"}), metav1.CreateOptions{}))
	waitDeploymentDone(ctx, nsTune, "web", 3*time.Minute)
	DeferCleanup(func(ctx SpecContext) {
		saveLogs(ctx, releaseNS, "app.kubernetes.io/name=graceguard-observer", "observer")
	})

	report := func() *v1alpha1.ShutdownReport {
		GinkgoHelper()
		u, err := dyn.Resource(reportsGVR).Namespace(nsTune).Get(ctx, "deployment-web", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return &v1alpha1.ShutdownReport{}
		}
		Expect(err).NotTo(HaveOccurred())
		r := &v1alpha1.ShutdownReport{}
		Expect(runtimeFromUnstructured(u, r)).To(Succeed())
		return r
	}
	recommend := func(args ...string) string {
		GinkgoHelper()
		var out, errOut bytes.Buffer
		code := cli.Execute(append([]string{"recommend", "--kubeconfig", cl.Kubeconfig, "-n", nsTune}, args...), strings.NewReader(""), &out, &errOut)
		Expect(code).To(Equal(cli.ExitOK), "recommend: %s", errOut.String())
		return out.String()
	}

	// round restarts (or otherwise rolls) the Deployment under load and
	// records what the load and the observer saw.
	round := func(name string, roll func()) *evidence.TuneRound {
		GinkgoHelper()
		rd := &evidence.TuneRound{Name: name, ByKind: map[string]int{}}
		t.Rounds = append(t.Rounds, rd)
		before := report().Status
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		r := startRouter(rctx, nsTune, "web", routerLag)
		old := readyPods(ctx, nsTune, "app=web")
		Expect(old).To(HaveLen(tuneReps))
		Eventually(r.endpoints).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).Should(Equal(podIPs(old)), "the router knows the Pods")
		rd.Budget, rd.Grace = old[0].Annotations[budgetKey], grace(&old[0])
		logs := map[string]*logFollower{}
		for _, p := range old {
			logs[p.Name] = followLog(rctx, nsTune, p.Name)
		}

		ld := startLoad(rctx, r, tuneRate, tuneWork, newClient(tuneTimeout))
		time.Sleep(baseline)
		start := mon.mark("scenario 7, round " + name)
		roll()
		waitDeploymentDone(ctx, nsTune, "web", 5*time.Minute)
		rd.Rollout = evidence.S(time.Since(start))
		Eventually(r.endpoints).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).Should(Equal(podIPs(readyPods(ctx, nsTune, "app=web"))), "the router follows the new Pods")
		time.Sleep(baseline)
		for _, res := range ld.finish() {
			rd.Sent++
			if k := res.kind(); k != "" {
				rd.Failed++
				rd.ByKind[k]++
				continue
			}
			rd.Succeeded++
		}

		By(name + ": waiting for the observer's report")
		var st v1alpha1.ShutdownReportStatus
		Eventually(func() int64 {
			st = report().Status
			return st.Observed - before.Observed
		}).WithContext(ctx).WithTimeout(tuneReport).WithPolling(time.Second).Should(BeNumerically(">=", len(old)), "every old Pod's shutdown observed")
		rd.Observed, rd.Kills = st.Observed-before.Observed, st.KillsObserved-before.KillsObserved
		for _, p := range old {
			i := slices.IndexFunc(st.Samples, func(s v1alpha1.Sample) bool { return s.Pod == p.Name })
			if i < 0 {
				continue
			}
			s := st.Samples[i]
			ts := evidence.TuneSample{Pod: s.Pod, Outcome: string(s.Outcome), ExitCode: s.ExitCode, Drain: s.DrainSeconds,
				Withdrawal: string(s.Withdrawal), WithdrawalSeconds: s.WithdrawalSeconds}
			lf := logs[p.Name]
			lf.waitEnd(10 * time.Second)
			lf.save("tune-" + p.Name)
			if sig, done := lf.first("sigterm"), lf.first("shutdown_complete"); sig != nil && done != nil {
				ts.AppDrain = evidence.AtOf(done.TS.Sub(sig.TS))
			}
			rd.Samples = append(rd.Samples, ts)
		}
		sort.Slice(rd.Samples, func(i, j int) bool { return rd.Samples[i].Pod < rd.Samples[j].Pod })
		if rec := st.Recommendation; rec != nil {
			rd.Recommended = fmt.Sprintf("max-work %s, grace %d (%s)", rec.MaxWork, rec.Grace, rec.Reason)
		}
		GinkgoWriter.Printf("%s: sent %d, failed %d %v; observed %d, killed %d; %s\n", name, rd.Sent, rd.Failed, rd.ByKind, rd.Observed, rd.Kills, rd.Recommended)
		return rd
	}

	// Prometheus beside the node (scenario 12) scrapes the observer: the
	// namespace's kill counter is there at 0 before any kill, so the first
	// one is an increase GraceguardObservedKills can see.
	By("Prometheus: the namespace's kill counter at 0, GraceguardObservedKills silent")
	killsQ := fmt.Sprintf(`graceguard_observed_kills_total{job=%q, namespace=%q}`, releaseNS+"/"+fullname+"-observer", nsTune)
	killAlert := map[string]string{"namespace": nsTune}
	promKills := func() (float64, bool, string) {
		v, ok, err := mon.value(ctx, killsQ)
		if err != nil {
			return 0, false, err.Error()
		}
		if !ok {
			return 0, false, "no series"
		}
		return v, true, fmt.Sprint(v)
	}
	var said string
	var zero bool
	for deadline := time.Now().Add(time.Minute); !zero && time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(time.Second) {
		v, ok, s := promKills()
		zero, said = ok && v == 0, s
	}
	quiet, err := mon.alertState(ctx, "GraceguardObservedKills", killAlert)
	ck.Add("before round 1: Prometheus scrapes the namespace's kill counter at 0; GraceguardObservedKills silent for it", "0; no alert",
		zero && err == nil && quiet.State == "", "%s; alert %s", said, stateOr(quiet.State, err))

	By("round 1: a rollout restart with the budget the team guessed")
	r1 := round("1. restart, max-work 5s", func() { restartTemplate(ctx, nsTune, "web") })
	r1Reported := time.Now()
	ck.Add("round 1: the budget is too short, requests fail", "> 0 failed", r1.Failed > 0 && r1.Sent > 0,
		"%d failed of %d (%s)", r1.Failed, r1.Sent, evidence.KindList(r1.ByKind))
	ck.Add("round 1: the observer saw every old Pod shut down, and the kills", fmt.Sprintf("%d observed, > 0 SIGKILLed", tuneReps),
		r1.Observed == tuneReps && r1.Kills > 0, "%d observed, %d SIGKILLed", r1.Observed, r1.Kills)
	// The Pods are behind a Service: kube-controller-manager's own
	// EndpointSlice controller withdraws them, and the observer times it.
	var withdrawn []string
	timed := 0
	for _, s := range r1.Samples {
		w := s.Withdrawal
		if s.WithdrawalSeconds != nil {
			w = fmt.Sprintf("%s after %d s", w, *s.WithdrawalSeconds)
			if s.Withdrawal == "Withdrawn" && *s.WithdrawalSeconds >= 0 && *s.WithdrawalSeconds <= tuneGrace {
				timed++
			}
		}
		withdrawn = append(withdrawn, s.Pod+": "+evidence.OrNone(w))
	}
	ck.Add("round 1: the observer timed each old Pod's withdrawal from the real EndpointSlice controller's slices", fmt.Sprintf("%d of %d Withdrawn, within the grace", tuneReps, tuneReps),
		timed == tuneReps, "%s", strings.Join(withdrawn, "; "))
	// The alert has no for: it fires at the first evaluation after a
	// scrape shows the increase.
	By("round 1: GraceguardObservedKills fires for the namespace, with the observer's count")
	var fire alert
	var firedAt time.Time
	var count string
	for deadline := time.Now().Add(time.Minute); firedAt.IsZero() && time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(time.Second) {
		v, ok, s := promKills()
		count = s
		if a, err := mon.alertState(ctx, "GraceguardObservedKills", killAlert); err == nil && a.State == "firing" && ok && v == float64(r1.Kills) {
			fire, firedAt = a, time.Now()
		}
	}
	ck.Add("round 1: GraceguardObservedKills fires for "+nsTune+"; Prometheus counts the kills the report counts",
		fmt.Sprintf("firing; counter %d", r1.Kills), !firedAt.IsZero(),
		"%s; counter %s; seen firing %.0f s after the report had the kills, active from %.0f s on Prometheus' clock",
		stateOr(fire.State, nil), count, firedAt.Sub(r1Reported).Seconds(), mon.since(fire.ActiveAt))
	rep := report()
	rec := rep.Status.Recommendation
	var recWork time.Duration
	if rec != nil {
		recWork, _ = budget.ParseDuration(rec.MaxWork)
	}
	ck.Add("round 1: the report recommends a max-work of at least the app's 12 s drain", ">= 12s, enough evidence",
		rec != nil && rec.Enough && recWork >= 12*time.Second, "%s", r1.Recommended)

	By("the workload's Warning event names the budget")
	Eventually(func(g Gomega) {
		evs := must(kube.CoreV1().Events(nsTune).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Deployment,involvedObject.name=web"}))
		t.Events = nil
		for _, e := range evs.Items {
			if e.Reason == "ShutdownKilled" || e.Reason == "PreStopHookFailed" {
				t.Events = append(t.Events, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Message))
			}
		}
		g.Expect(t.Events).NotTo(BeEmpty())
	}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(time.Second).Should(Succeed())
	sort.Strings(t.Events)
	ck.Add("a ShutdownKilled Warning event on the Deployment names the budget", "Warning ShutdownKilled ... budget "+r1.Budget,
		strings.Contains(strings.Join(t.Events, "\n"), "Warning ShutdownKilled: ") && strings.Contains(strings.Join(t.Events, "\n"), "budget "+r1.Budget),
		"%s", strings.Join(t.Events, " / "))

	By("the observer's OpenReports Report for web says the SIGKILLs (the chart's reports.enabled)")
	k := policyreport.OpenReports
	reportGVR := k.GroupVersionKind().GroupVersion().WithResource(k.Resource())
	said = "no Report " + policyreport.Name("deployment", "web")
	killed := false
	// Polled, not asserted: the check records what the Report said.
	for deadline := time.Now().Add(time.Minute); !killed && time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(time.Second) {
		u, err := dyn.Resource(reportGVR).Namespace(nsTune).Get(ctx, policyreport.Name("deployment", "web"), metav1.GetOptions{})
		if err != nil {
			said = err.Error()
			continue
		}
		results, _, _ := unstructured.NestedSlice(u.Object, "results")
		if len(results) == 0 {
			said = "a Report without results"
			continue
		}
		first, _ := results[0].(map[string]any)
		said = fmt.Sprintf("%v %v: %v", first["rule"], first["result"], first["message"])
		killed = first["rule"] == string(policyreport.RuleKilled) && first["result"] == "fail"
	}
	ck.Add("the observer's OpenReports Report on the Deployment says the SIGKILLs, first", string(policyreport.RuleKilled)+" fail", killed, "%s", said)

	By("kubectl graceguard recommend, then its -o yaml applied server-side")
	t.Recommend = recommend()
	t.RecommendYAML = recommend("-o", "yaml")
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(t.RecommendYAML), 4096)
	var doc unstructured.Unstructured
	Expect(dec.Decode(&doc.Object)).To(Succeed())
	Expect(doc.GetKind()).To(Equal("Deployment"))
	Expect(rec).NotTo(BeNil(), "a recommendation after round 1")
	r2 := round("2. applying the recommendation (rolls out)", func() {
		_, err := dyn.Resource(deploymentsGVR).Namespace(nsTune).Apply(ctx, doc.GetName(), &doc,
			metav1.ApplyOptions{FieldManager: "graceguard-recommend", Force: true})
		Expect(err).NotTo(HaveOccurred())
	})
	fresh := readyPods(ctx, nsTune, "app=web")
	wantWork := "work=" + rec.MaxWork
	ck.Add("the new Pods carry the recommended max-work", wantWork+" in "+budgetKey,
		len(fresh) == tuneReps && strings.Contains(fresh[0].Annotations[budgetKey], wantWork+" "),
		"%s, grace %d", fresh[0].Annotations[budgetKey], grace(&fresh[0]))

	By("round 3: the next rollout, with the recommended budget")
	var before3 string
	for deadline := time.Now().Add(promSettle * 2); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(time.Second) {
		v, ok, s := promKills()
		if before3 = s; ok && v == float64(r1.Kills+r2.Kills) {
			break
		}
	}
	r3 := round("3. next restart, recommended max-work", func() { restartTemplate(ctx, nsTune, "web") })
	time.Sleep(promSettle)
	_, _, after3 := promKills()
	ck.Add("round 3: no kill reaches Prometheus (the counter stays at rounds 1 and 2's)", fmt.Sprint(r1.Kills+r2.Kills),
		after3 == before3 && before3 == fmt.Sprint(r1.Kills+r2.Kills), "%s before round 3, %s after", before3, after3)
	ck.Add("round 3: no Pod SIGKILLed", fmt.Sprintf("%d observed, 0 SIGKILLed", tuneReps),
		r3.Observed == tuneReps && r3.Kills == 0, "%d observed, %d SIGKILLed", r3.Observed, r3.Kills)
	ck.Add("round 3: no failed request", "0 failed", r3.Failed == 0 && r3.Sent > tuneRate*10,
		"%d failed of %d (%s)", r3.Failed, r3.Sent, evidence.KindList(r3.ByKind))
	var far []string
	for _, s := range r3.Samples {
		if s.AppDrain == nil || abs(float64(s.Drain)-float64(*s.AppDrain)) > 2 {
			far = append(far, fmt.Sprintf("%s: observed %d s, app %v", s.Pod, s.Drain, s.AppDrain))
		}
	}
	ck.Add("round 3: the observed drains match the app's own log within 2 s (whole-second API times)", "|observed - app| <= 2 s",
		len(r3.Samples) == tuneReps && len(far) == 0, "%d samples; off: %s", len(r3.Samples), evidence.OrNone(strings.Join(far, "; ")))

	t.RecommendAfter = recommend()
	t.Table = reportTable(ctx)

	By("deleting the Deployment takes its report with it")
	del := time.Now()
	Expect(kube.AppsV1().Deployments(nsTune).Delete(ctx, "web", metav1.DeleteOptions{})).To(Succeed())
	Eventually(func() bool {
		_, err := dyn.Resource(reportsGVR).Namespace(nsTune).Get(ctx, "deployment-web", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}).WithContext(ctx).WithTimeout(2*time.Minute).WithPolling(500*time.Millisecond).Should(BeTrue(), "report garbage-collected")
	t.GarbageCollected = evidence.AtOf(time.Since(del))
	ck.Add("the report is garbage-collected with its Deployment", "gone", true, "gone after %.1f s", time.Since(del).Seconds())
	Expect(t.Checks.Failed()).To(BeEmpty())
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

func runtimeFromUnstructured(u *unstructured.Unstructured, into any) error {
	b, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	return yaml.Unmarshal(b, into)
}

// reportTable is `kubectl get shutdownreports -n nsTune`: the API
// server's Table for the CRD's printer columns, laid out as kubectl does.
func reportTable(ctx context.Context) []string {
	GinkgoHelper()
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/apis/graceguard.io/v1alpha1/namespaces/"+nsTune+"/shutdownreports").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	var tbl metav1.Table
	Expect(json.Unmarshal(raw, &tbl)).To(Succeed())
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 8, 3, ' ', 0)
	var cols []int
	var head []string
	for i, c := range tbl.ColumnDefinitions {
		if c.Priority == 0 && c.Name != "Age" {
			cols = append(cols, i)
			head = append(head, strings.ToUpper(c.Name))
		}
	}
	fmt.Fprintln(w, strings.Join(head, "\t"))
	for _, row := range tbl.Rows {
		var cells []string
		for _, i := range cols {
			v := "<none>"
			if i < len(row.Cells) && row.Cells[i] != nil {
				v = fmt.Sprint(row.Cells[i])
			}
			cells = append(cells, v)
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	_ = w.Flush()
	return strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
}
