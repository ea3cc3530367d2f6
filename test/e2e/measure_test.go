//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/cli"
	"github.com/graceguard/graceguard/pkg/routingprobe"
	"github.com/graceguard/graceguard/pkg/routingprobe/kubeprobe"
	"github.com/graceguard/graceguard/test/e2e/evidence"
)

// Scenario 17 (issue 42): kubectl graceguard measure-routing run for real
// on the node, through the plugin's own entry point (as scenario 7 runs
// recommend): twice through Traefik with --url (Traefik as scenario 13
// runs it, the Ingress to the probe's Service created once the command
// made its namespace), and twice through the probe Service's ClusterIP with
// --in-cluster, whose Job runs graceguard's release image (`webhook
// measure`) on the node and whose load kube-proxy routes. Scenario 13's own
// method (measureWithdrawal) times the same Traefik in the same spec: the
// reference the plugin's Traefik figures must agree with.
const (
	measureRuns = 2
	// The plugin's flags: scenario 13's rate (its resolution, about 90/4
	// requests a second per Pod), its default deletions, and a hold long
	// past any withdrawal seen here (kept short: each deleted Pod holds
	// its namespace's deletion that long).
	measureRate      = 90
	measureDeletions = 10
	measureHold      = 20 * time.Second
	measureTimeout   = 6 * time.Minute
	measureMargin    = time.Second
)

var (
	// measureStats is the report's statistics line, measureRound a bar of
	// its plot (one per deletion), measureCounts its count of requests,
	// measureProfile the routing delay of the profile it prints.
	measureStats   = regexp.MustCompile(`min (\d+\.\d+)s, median (\d+\.\d+)s, p90 (\d+\.\d+)s, max (\d+\.\d+)s`)
	measureRound   = regexp.MustCompile(`(?m)^\s*\d+ \S+\s+#*\s*\| (\d+\.\d+)s$`)
	measureCounts  = regexp.MustCompile(`(\d+) requests sent, (\d+) failed`)
	measureProfile = regexp.MustCompile(`Routing profile (\S+): (\S+), the slowest withdrawal`)
)

func measureRoutingOnNode(ctx context.Context) {
	mr := &evidence.MeasureRouting{Started: ev.Started, Commit: ev.Env.GitCommit, Image: webhookImage.Name,
		KubeProxy: fmt.Sprintf("v%s, iptables mode, built by hack/envtest-assets.sh", cl.KubernetesVersion)}
	evMu.Lock()
	ev.MeasureRouting = mr
	evMu.Unlock()
	prof, ok := builtinProfile(budget.ProfileTraefik)
	Expect(ok).To(BeTrue())
	kp, ok := builtinProfile(budget.ProfileKubeProxy)
	Expect(ok).To(BeTrue())
	ck := &mr.Checks

	// Traefik follows every namespace: the plugin names its own.
	t := startTraefik(ctx)
	mr.Traefik = t.version

	By("scenario 13's method through the same Traefik: the reference")
	ref := &evidence.Ingress{}
	measureWithdrawal(ctx, t, nsRouting, ref, prof)
	mr.Reference = ref.Withdrawal
	for _, c := range ref.Checks {
		ck.Add("reference: "+c.Name, c.Want, c.Passed, "%s", c.Got)
	}

	By("the test process reaches a ClusterIP Service through kube-proxy")
	svc := must(kube.CoreV1().Services(nsRouting).Get(ctx, "withdraw", metav1.GetOptions{}))
	viaProxy := get(ctx, newClient(3*time.Second), fmt.Sprintf("http://%s:%d/work?seconds=0", svc.Spec.ClusterIP, appPort))
	mr.HostToClusterIP = fmt.Sprintf("GET %s:%d: %s", svc.Spec.ClusterIP, appPort, viaProxy.String())
	ck.Add("the test process (the host) reaches a ClusterIP Service's Pods through kube-proxy", "200 from a Pod of the Service",
		viaProxy.code == http.StatusOK && strings.HasPrefix(servedBy(viaProxy.body), "withdraw-"), "%s", mr.HostToClusterIP)

	for i := 1; i <= measureRuns; i++ {
		By(fmt.Sprintf("measure-routing --in-cluster, run %d of %d: its Job on the node, through kube-proxy", i, measureRuns))
		mr.Runs = append(mr.Runs, measureRun(ctx, fmt.Sprintf("ClusterIP, run %d", i), "clusterip", nil, "--in-cluster"))
	}
	for i := 1; i <= measureRuns; i++ {
		By(fmt.Sprintf("measure-routing --url through Traefik, run %d of %d", i, measureRuns))
		// A path of each run's own: the Ingress of the run before may
		// still route (its namespace is being deleted).
		path := fmt.Sprintf("/traefik-run-%d", i)
		mr.Runs = append(mr.Runs, measureRun(ctx, fmt.Sprintf("Traefik, run %d", i), "traefik", routeProbeThroughTraefik(path), "--url", "http://"+t.addr+path+"/"))
	}

	for _, r := range mr.Runs {
		ck.Add(r.Name+": measure-routing exits 0 having timed every deletion", fmt.Sprintf("exit 0, %d withdrawals", measureDeletions),
			r.ExitCode == 0 && len(r.Delays) == measureDeletions, "exit %d, %d withdrawals", r.ExitCode, len(r.Delays))
		ck.Add(r.Name+": no request failed while the probe's Pods were deleted", "0 failed", r.Sent > 0 && r.Failed == 0,
			"%d failed of %d", r.Failed, r.Sent)
		// The max is printed to the millisecond: either rounding of it.
		maxD := time.Duration(float64(r.Max) * float64(time.Second))
		lo, hi := routingprobe.ProfileDelay(maxD-time.Millisecond/2, measureMargin), routingprobe.ProfileDelay(maxD+time.Millisecond/2, measureMargin)
		ck.Add(r.Name+": the profile printed is the slowest withdrawal + "+budget.Format(measureMargin)+", rounded up",
			budget.Format(routingprobe.ProfileDelay(maxD, measureMargin)), r.Profile != "" && (r.Profile == budget.Format(lo) || r.Profile == budget.Format(hi)),
			"%s (max %.3f s)", evidence.OrNone(r.Profile), float64(r.Max))
		switch r.Path {
		case "clusterip":
			d, err := time.ParseDuration(r.Profile)
			ck.Add(r.Name+": graceguard's "+kp.Name+" profile covers the profile measured here", "<= "+budget.Format(kp.Routing),
				err == nil && d <= kp.Routing, "%s", evidence.OrNone(r.Profile))
		case "traefik":
			// Agreement within the reference's spread: each median lies
			// within the other measurement's range, min to max.
			w := mr.Reference
			ok := w != nil && within(r.Median, w.Min, w.Max) && within(w.Median, r.Min, r.Max)
			got := fmt.Sprintf("measure-routing min/median/p90/max %s; scenario 13's method not measured", stats4(r.Min, r.Median, r.P90, r.Max))
			if w != nil {
				got = fmt.Sprintf("measure-routing min/median/p90/max %s; scenario 13's method (%d deletions) %s",
					stats4(r.Min, r.Median, r.P90, r.Max), len(w.Rounds), stats4(w.Min, w.Median, w.P90, w.Max))
			}
			GinkgoWriter.Printf("%s vs the reference: %s\n", r.Name, got)
			ck.Add(r.Name+": agrees with scenario 13's method through the same Traefik",
				"each median within the other's min..max", ok, "%s", got)
		}
	}
	Expect(ck.Failed()).To(BeEmpty())
}

// measureRun runs kubectl graceguard measure-routing once with args, while
// route (if any) routes its URL to the probe's Service in the namespace
// the command made, and reads its figures from what it printed.
func measureRun(ctx context.Context, name, path string, route func(context.Context, string), args ...string) *evidence.RoutingRun {
	GinkgoHelper()
	args = append([]string{"measure-routing", "--kubeconfig", cl.Kubeconfig, "--image", webhookImage.Name,
		"--rate=" + strconv.Itoa(measureRate), "--deletions=" + strconv.Itoa(measureDeletions),
		"--hold=" + measureHold.String(), "--margin=" + measureMargin.String(), "--timeout=" + measureTimeout.String(),
		"--profile-name=node-" + path}, args...)
	r := &evidence.RoutingRun{Name: name, Path: path, Args: append([]string{"kubectl", "graceguard"}, slices.Delete(slices.Clone(args), 1, 3)...)}
	type outcome struct {
		code        int
		out, errOut string
	}
	done := make(chan outcome, 1)
	start := time.Now()
	go func() {
		var out, errOut bytes.Buffer
		code := cli.ExecuteContext(ctx, args, strings.NewReader(""), &out, &errOut)
		done <- outcome{code, out.String(), errOut.String()}
	}()
	if route != nil {
		route(ctx, waitMeasureNamespace(ctx))
	}
	var o outcome
	Eventually(done).WithContext(ctx).WithTimeout(measureTimeout+time.Minute).Should(Receive(&o), "%s: measure-routing ends", name)
	r.Duration, r.ExitCode, r.Output = evidence.S(time.Since(start)), o.code, o.out
	GinkgoWriter.Printf("$ %s\n%s\n--- stdout\n%s", strings.Join(r.Args, " "), o.errOut, o.out)
	if o.code != cli.ExitOK {
		r.Output = o.out + o.errOut
	}
	// The page shows it in a code block: one newline at its end.
	r.Output = strings.TrimRight(r.Output, "\n") + "\n"
	if m := measureStats.FindStringSubmatch(o.out); m != nil {
		r.Min, r.Median, r.P90, r.Max = secsOf(m[1]), secsOf(m[2]), secsOf(m[3]), secsOf(m[4])
	}
	for _, m := range measureRound.FindAllStringSubmatch(o.out, -1) {
		r.Delays = append(r.Delays, secsOf(m[1]))
	}
	if m := measureCounts.FindStringSubmatch(o.out); m != nil {
		r.Sent, _ = strconv.Atoi(m[1])
		r.Failed, _ = strconv.Atoi(m[2])
	}
	if m := measureProfile.FindStringSubmatch(o.out); m != nil {
		r.Profile = m[2]
	}
	return r
}

// waitMeasureNamespace waits for the namespace a measure-routing run in
// progress made (earlier runs' are being deleted).
func waitMeasureNamespace(ctx context.Context) string {
	GinkgoHelper()
	var name string
	Eventually(func() []string {
		list := must(kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: kubeprobe.Selector}))
		var live []string
		for _, n := range list.Items {
			if n.DeletionTimestamp == nil {
				live = append(live, n.Name)
			}
		}
		if len(live) == 1 {
			name = live[0]
		}
		return live
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(100*time.Millisecond).Should(HaveLen(1), "the namespace measure-routing made")
	return name
}

// routeProbeThroughTraefik routes path, on every host, to the probe's
// Service through Traefik: an Ingress of scenario 13's class without a host
// (the plugin's --url is Traefik's address), to the Service's port 80. The
// probe answers any path.
func routeProbeThroughTraefik(path string) func(context.Context, string) {
	return func(ctx context.Context, ns string) {
		GinkgoHelper()
		ing := ingressFor(ns, kubeprobe.ProbeName)
		rule := &ing.Spec.Rules[0]
		rule.Host = ""
		rule.HTTP.Paths[0].Path = path
		rule.HTTP.Paths[0].Backend.Service.Port.Number = 80
		_, err := kube.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			// The run ended (and deleted its namespace) first: its error says why.
			return
		}
		Expect(err).NotTo(HaveOccurred())
	}
}

func secsOf(s string) evidence.Secs {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return -1
	}
	return evidence.Secs(f)
}

func within(x, lo, hi evidence.Secs) bool { return x >= lo && x <= hi }

func stats4(a, b, c, d evidence.Secs) string {
	return fmt.Sprintf("%.3f/%.3f/%.3f/%.3f s", float64(a), float64(b), float64(c), float64(d))
}
