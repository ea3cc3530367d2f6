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
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/test/e2e/evidence"
)

// alertsInPrometheus is scenario 12, the last: the Prometheus the suite
// started before the install (prometheus_test.go) has evaluated the
// chart's alerts through every earlier scenario. GraceguardNoReadyWebhook
// must not have fired (the install's replicas start within its for: 1m,
// graceguard's own rollout keeps one available); it fires once the
// webhook Deployment is scaled to 0 with its Fail webhooks registered, and
// resolves when the replicas are back. GraceguardObservedKills must have
// fired for the namespaces where the observer recorded kills (scenario 7's,
// and scenario 10's hook that hangs past the grace in a full run) and for
// no other.
func alertsInPrometheus(ctx context.Context) {
	a := &evidence.Alerts{Prometheus: mon.prometheus, KubeStateMetrics: mon.kubeStateMetrics,
		ScrapeInterval: evidence.S(promScrape), Rules: mon.rules}
	evMu.Lock()
	ev.Alerts = a
	evMu.Unlock()
	ck := &a.Checks
	// Whatever happens below: the run's alerts as Prometheus recorded them.
	DeferCleanup(func(ctx SpecContext) {
		if eps, err := mon.episodes(ctx); err == nil {
			a.Episodes = eps
		} else {
			GinkgoWriter.Printf("reading ALERTS: %v\n", err)
		}
		mon.mu.Lock()
		a.Marks = slices.Clone(mon.marks)
		mon.mu.Unlock()
	})
	const noReady = "GraceguardNoReadyWebhook"
	const kills = "GraceguardObservedKills"
	webhookJob, observerJob := releaseNS+"/"+fullname, releaseNS+"/"+fullname+"-observer"

	By("Prometheus scrapes both webhook replicas, the observer and kube-state-metrics")
	want := map[string]int{webhookJob: 2, observerJob: 1, ksmJob: 1}
	var up map[string]int
	Eventually(func(g Gomega) {
		s, err := mon.query(ctx, "up == 1")
		g.Expect(err).NotTo(HaveOccurred())
		up = map[string]int{}
		for _, x := range s {
			up[x.Metric["job"]]++
		}
		g.Expect(up).To(Equal(want))
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	a.Targets = mon.targets(ctx)
	ck.Add("Prometheus scrapes both webhook replicas, the observer and kube-state-metrics (up == 1)", jobCounts(want),
		fmt.Sprint(up) == fmt.Sprint(want), "%s", jobCounts(up))
	ck.Add("Prometheus evaluates the chart's rules, as rendered for this install", "GraceguardNoReadyWebhook for 1m, GraceguardObservedKills",
		slices.Contains(a.Rules, noReady+" for 1m0s") && slices.Contains(a.Rules, kills), "%s", strings.Join(a.Rules, ", "))

	eps := must(mon.episodes(ctx))
	var pendings []string
	for _, e := range eps {
		if e.Alert == noReady {
			pendings = append(pendings, episodeText(e))
		}
	}
	ck.Add("GraceguardNoReadyWebhook never fired from before the install to here (the install's replicas start within its for: 1m; graceguard's own rollout keeps one ready)",
		"never firing", len(fired(eps, noReady)) == 0, "%s", evidence.OrNone(strings.Join(pendings, "; ")))

	By("scaling the webhook to 0 replicas while its Fail webhooks stay registered")
	var failing []string
	m := must(kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, fullname, metav1.GetOptions{}))
	for _, w := range m.Webhooks {
		if w.FailurePolicy != nil && *w.FailurePolicy == admissionregv1.Fail {
			failing = append(failing, w.Name)
		}
	}
	v := must(kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, fullname, metav1.GetOptions{}))
	for _, w := range v.Webhooks {
		if w.FailurePolicy != nil && *w.FailurePolicy == admissionregv1.Fail {
			failing = append(failing, w.Name)
		}
	}
	scale := must(kube.AppsV1().Deployments(releaseNS).GetScale(ctx, fullname, metav1.GetOptions{}))
	replicas := scale.Spec.Replicas
	setReplicas := func(n int32) {
		GinkgoHelper()
		s := must(kube.AppsV1().Deployments(releaseNS).GetScale(ctx, fullname, metav1.GetOptions{}))
		s.Spec.Replicas = n
		must(kube.AppsV1().Deployments(releaseNS).UpdateScale(ctx, fullname, s, metav1.UpdateOptions{}))
	}
	restored := false
	DeferCleanup(func() {
		if !restored {
			setReplicas(replicas)
		}
	})
	setReplicas(0)
	down := mon.mark("12. webhook Deployment scaled to 0")
	availQ := fmt.Sprintf(`kube_deployment_status_replicas_available{job=%q, namespace=%q, deployment=%q}`, ksmJob, releaseNS, fullname)
	var zeroAt time.Time
	Eventually(func(g Gomega) {
		x, ok, err := mon.value(ctx, availQ)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok && x == 0).To(BeTrue(), "%s = %v (present %v)", availQ, x, ok)
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	zeroAt = mon.mark("12. Prometheus reads 0 available replicas (kube-state-metrics)")

	By("a Pod create in an opted-in namespace meanwhile: what the alert is about")
	probe, err := kube.CoreV1().Pods(nsLab).Create(ctx, appPod(nsLab, "no-replica-probe", nil, nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		a.Refused = err.Error()
	}
	if len(failing) > 0 {
		ck.Add("meanwhile a Pod create (dry run) in an opted-in namespace is refused, Fail webhooks "+strings.Join(failing, ", "),
			"refused: failed calling webhook", err != nil && strings.Contains(err.Error(), "failed calling webhook"), "%s", evidence.OrNone(a.Refused))
	} else {
		// Every webhook fails open: the Pod is admitted, with the budget
		// of the chart's mutating floor (graceguard.io/treated: floor).
		var label, record string
		if err == nil {
			label, record = probe.Labels["graceguard.io/treated"], probe.Annotations[budgetKey]
		}
		ck.Add("meanwhile a Pod create (dry run) in an opted-in namespace is admitted, with the mutating floor's budget (every webhook fails open)",
			"admitted, treated=floor, "+budgetKey+" set", err == nil && label == "floor" && record != "", "%s", errOr(err, fmt.Sprintf("treated=%s, %s", label, record)))
	}

	By("GraceguardNoReadyWebhook goes pending, then fires after its for: 1m")
	var firing alert
	var firingAt time.Time
	Eventually(func(g Gomega) {
		x, err := mon.alertState(ctx, noReady, nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(x.State).To(Equal("firing"))
		firing, firingAt = x, time.Now()
	}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	mon.mark("12. GraceguardNoReadyWebhook seen firing")
	held := firingAt.Sub(firing.ActiveAt)
	ck.Add("GraceguardNoReadyWebhook fires, after pending for its for: 1m", "firing, >= 60 s after pending",
		held >= time.Minute, "pending %.0f s after the scale to 0 (%.0f s after Prometheus read 0), seen firing %.0f s after pending",
		firing.ActiveAt.Sub(down).Seconds(), firing.ActiveAt.Sub(zeroAt).Seconds(), held.Seconds())

	By("restoring the replicas: the alert resolves")
	setReplicas(replicas)
	restored = true
	back := mon.mark(fmt.Sprintf("12. webhook Deployment scaled back to %d", replicas))
	waitDeploymentDone(ctx, releaseNS, fullname, 3*time.Minute)
	Eventually(func(g Gomega) {
		p, err := kube.CoreV1().Pods(nsLab).Create(ctx, appPod(nsLab, "replica-back-probe", nil, nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.Annotations).To(HaveKey(budgetKey))
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	readyAt := mon.mark("12. webhook serving again (a dry-run Pod comes back mutated)")
	var resolvedAt time.Time
	Eventually(func(g Gomega) {
		x, err := mon.alertState(ctx, noReady, nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(x.State).To(BeEmpty())
		resolvedAt = time.Now()
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	mon.mark("12. GraceguardNoReadyWebhook seen resolved")
	ck.Add("GraceguardNoReadyWebhook resolves once the replicas are back", "resolved", true,
		"resolved %.0f s after the scale back, %.0f s after the webhook served again", resolvedAt.Sub(back).Seconds(), resolvedAt.Sub(readyAt).Seconds())

	By("GraceguardObservedKills fired where treated Pods were SIGKILLed, and nowhere else")
	time.Sleep(promSettle)
	eps = must(mon.episodes(ctx))
	got := map[string]evidence.AlertEpisode{}
	for _, e := range fired(eps, kills) {
		ns := strings.TrimPrefix(e.Labels, "namespace=")
		if _, seen := got[ns]; !seen {
			got[ns] = e
		}
	}
	// Where the observer recorded kills: scenario 7's rounds (its report
	// went with its Deployment), and the ShutdownReports still here that
	// count kills (scenario 10's hook that hangs past the grace).
	var wantNS []string
	var round1 evidence.At
	evMu.Lock()
	if t := ev.Tune; t != nil {
		for _, r := range t.Rounds {
			if r.Kills > 0 && !slices.Contains(wantNS, t.Namespace) {
				wantNS = append(wantNS, t.Namespace)
			}
		}
	}
	evMu.Unlock()
	dyn := must(dynamic.NewForConfig(cl.RESTConfig))
	reports := must(dyn.Resource(reportsGVR).List(ctx, metav1.ListOptions{}))
	for _, u := range reports.Items {
		r := &v1alpha1.ShutdownReport{}
		Expect(runtimeFromUnstructured(&u, r)).To(Succeed())
		if r.Status.KillsObserved > 0 && !slices.Contains(wantNS, r.Namespace) {
			wantNS = append(wantNS, r.Namespace)
		}
	}
	sort.Strings(wantNS)
	mon.mu.Lock()
	for _, mk := range mon.marks {
		if strings.HasPrefix(mk.Name, "scenario 7, round 1.") && round1 == nil {
			at := mk.At
			round1 = &at
		}
	}
	mon.mu.Unlock()
	var gotNS []string
	for ns := range got {
		gotNS = append(gotNS, ns)
	}
	sort.Strings(gotNS)
	ck.Add("GraceguardObservedKills fired for the namespaces where the observer recorded kills, and for no other",
		evidence.OrNone(strings.Join(wantNS, ", ")), slices.Equal(gotNS, wantNS), "%s", evidence.OrNone(strings.Join(gotNS, ", ")))
	if e, ok := got[nsTune]; ok && round1 != nil {
		ck.Add("it first fired for "+nsTune+" after scenario 7's first rollout began (silent before)", fmt.Sprintf("after %.0f s", float64(*round1)),
			*e.Firing > *round1, "firing from %.0f s", float64(*e.Firing))
	}
	Expect(a.Checks.Failed()).To(BeEmpty())
}

func jobCounts(m map[string]int) string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s: %d", k, v))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func episodeText(e evidence.AlertEpisode) string {
	s := "pending"
	if e.Pending != nil {
		s += fmt.Sprintf(" from %.0f s", float64(*e.Pending))
	}
	if e.Firing != nil {
		s += fmt.Sprintf(", firing from %.0f s", float64(*e.Firing))
	}
	if e.Resolved != nil {
		s += fmt.Sprintf(", resolved at %.0f s", float64(*e.Resolved))
	}
	return s
}
