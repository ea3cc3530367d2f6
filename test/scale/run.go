package scale

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/server"
	"github.com/graceguard/graceguard/test/harness/apiserver"
	"github.com/graceguard/graceguard/test/harness/proc"
)

// Names of processes in the CPU figures: the control plane's own (their
// command names), and graceguard's webhook replicas.
const (
	procAPIServer = "kube-apiserver"
	procEtcd      = "etcd"
)

func webhookProc(i int) string { return fmt.Sprintf("graceguard webhook %d", i+1) }

// webhookProcs are the names of the webhook replicas' processes.
func (rn *runner) webhookProcs() []string {
	out := make([]string, len(rn.c.Replicas))
	for i := range out {
		out[i] = webhookProc(i)
	}
	return out
}

// The documents a run writes into Options.OutDir.
const (
	docMarkdown = "scale.md"
	docJSON     = "scale.json"
)

// Run measures a scenario and writes the documents. It returns the
// results even when a phase failed (the failure is in Problems, and the
// error).
func Run(ctx context.Context, o Options) (*Results, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	r := &Results{Options: o, Started: start.UTC().Truncate(time.Second), Machine: Machine{Host: proc.ThisHost()}}
	rn := &runner{o: o, r: r, start: start}
	r.Machine.LoadAvgStart, _ = proc.LoadAvg()
	if l := r.Machine.LoadAvgStart[0]; l > float64(r.Machine.NProc)*0.75 {
		r.caveat("the 1-minute load average was %.2f at the start on %d CPUs: other work shared the machine, so latencies and rates are pessimistic", l, r.Machine.NProc)
	}
	rn.logf("%s scenario: %s", o.Scenario, o)
	if err := rn.run(ctx); err != nil {
		r.problem("%v", err)
	}
	for _, p := range r.Problems {
		rn.logf("problem: %s", p)
	}
	r.Machine.LoadAvgEnd, _ = proc.LoadAvg()
	r.Seconds = time.Since(start).Seconds()
	if o.OutDir != "" {
		if err := r.write(o.OutDir); err != nil {
			return r, err
		}
		rn.logf("wrote %s and %s", filepath.Join(o.OutDir, docMarkdown), filepath.Join(o.OutDir, docJSON))
	}
	if len(r.Problems) > 0 {
		return r, errors.New(strings.Join(r.Problems, "; "))
	}
	return r, ctx.Err()
}

func (r *Results) problem(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

func (r *Results) caveat(format string, args ...any) {
	r.Caveats = append(r.Caveats, fmt.Sprintf(format, args...))
}

// runner is one run in progress.
type runner struct {
	o     Options
	r     *Results
	start time.Time
	c     *cluster
	w     *podWatch
	// reportsW counts the ShutdownReport updates of the churn.
	reportsW *reportWatch
	// pids of the processes whose CPU the run reports, and their CPU time
	// at the start.
	pids map[string]int
	cpu0 map[string]time.Duration
	// peak RSS seen of a process whose peak was reset.
	peak map[string]int64
}

func (rn *runner) logf(format string, args ...any) {
	fmt.Fprintf(rn.o.Log, "[%6.1fs] %s\n", time.Since(rn.start).Seconds(), fmt.Sprintf(format, args...))
}

// phase runs do and records its wall time.
func (rn *runner) phase(name string, do func() (pods int, err error)) error {
	t0 := time.Now()
	rn.logf("%s", name)
	pods, err := do()
	p := Phase{Name: name, Seconds: time.Since(t0).Seconds(), Pods: pods}
	rn.r.Phases = append(rn.r.Phases, p)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if pods > 0 {
		rn.logf("%s: %d Pods in %.1f s (%.0f/s)", name, pods, p.Seconds, p.Rate())
	} else {
		rn.logf("%s: %.1f s", name, p.Seconds)
	}
	return nil
}

func (rn *runner) run(ctx context.Context) error {
	o, r := rn.o, rn.r
	dir, err := os.MkdirTemp("", "graceguard-scale-")
	if err != nil {
		return err
	}
	keep := true
	defer func() {
		if keep {
			rn.logf("logs kept in %s", dir)
		} else {
			os.RemoveAll(dir)
		}
	}()
	rn.logf("building cmd/webhook, and kwok %s unless bin/ holds it", kwokVersion())
	webhookBin, err := buildWebhook(ctx, o.Root, dir, o.Log)
	if err != nil {
		return err
	}
	if o.Kwok == "" {
		if o.Kwok, err = buildKwok(ctx, o.Root, o.Log); err != nil {
			return err
		}
		rn.o.Kwok = o.Kwok
	}
	if o.Assets == "" {
		return errors.New("no kube-apiserver and etcd: set KUBEBUILDER_ASSETS=$(hack/envtest-assets.sh kube-controller-manager kube-scheduler) (make scale does)")
	}
	rn.logf("starting kube-apiserver, etcd, graceguard, kube-controller-manager, kube-scheduler, kwok and the observer")
	c, err := startCluster(ctx, o, dir, webhookBin, &r.Chart)
	if err != nil {
		return fmt.Errorf("starting the cluster: %w", err)
	}
	rn.c = c
	defer func() {
		if err := c.Stop(); err != nil {
			r.problem("stopping: %v", err)
		}
	}()
	r.Machine.KubeAPIServer, r.Machine.Kwok = c.Version, kwokVersion()
	rn.pids = proc.Children(procAPIServer, procEtcd)
	for name, p := range map[string]*apiserver.Process{"graceguard observer": c.observer,
		"kube-controller-manager": c.controllers, "kube-scheduler": c.scheduler, "kwok": c.kwok} {
		rn.pids[name] = p.PID()
	}
	for i, p := range c.Replicas {
		rn.pids[webhookProc(i)] = p.PID()
	}
	rn.pids["harness (clients, informer)"] = os.Getpid()
	rn.cpu0, rn.peak = proc.CPUTimes(rn.pids), map[string]int64{}
	measured := time.Now()

	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	rn.w = newPodWatch(c.kube)
	if err := rn.w.run(wctx); err != nil {
		return err
	}
	rn.reportsW = newReportWatch(c.dyn)
	if !rn.reportsW.run(wctx) {
		return fmt.Errorf("the harness's ShutdownReport informer did not sync: %w", wctx.Err())
	}
	api0, err := scrapeAPIServer(ctx, c.kube)
	if err != nil {
		return err
	}
	gg0, err := c.scrapeWebhooks(ctx)
	if err != nil {
		return err
	}
	if err := rn.memoryStep(ctx, StepStarted); err != nil {
		return err
	}
	if err := rn.steps(ctx); err != nil {
		return err
	}
	if err := rn.admission(ctx, api0, gg0); err != nil {
		return err
	}
	rn.cpuFigures()
	r.ClusterSeconds = time.Since(measured).Seconds()
	if o.Failover {
		if err := rn.failovers(ctx); err != nil {
			return err
		}
	}
	keep = len(r.Problems) > 0
	return nil
}

// steps are the scenario's phases, in order.
func (rn *runner) steps(ctx context.Context) error {
	o, c, w := rn.o, rn.c, rn.w
	if err := rn.phase(fmt.Sprintf("%d nodes created and Ready", o.Nodes), func() (int, error) {
		if err := c.createNodes(ctx, o); err != nil {
			return 0, err
		}
		deadline := time.Now().Add(o.Timeout)
		for {
			n, err := c.readyNodes(ctx)
			if err != nil {
				return 0, err
			}
			if n == o.Nodes {
				return 0, c.untaint(ctx, o)
			}
			if err := c.exited(); err != nil {
				return 0, err
			}
			if time.Now().After(deadline) {
				return 0, fmt.Errorf("%d of %d nodes Ready after %s", n, o.Nodes, o.Timeout)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}); err != nil {
		return err
	}

	var workload, empty []string
	for i := range o.Namespaces {
		workload = append(workload, workloadNamespace(i))
	}
	for i := range o.EmptyNamespaces {
		empty = append(empty, emptyNamespace(i))
	}
	if err := rn.phase(fmt.Sprintf("%d namespaces created", len(workload)+len(empty)+2), func() (int, error) {
		if err := c.createNamespaces(ctx, append(append(workload, empty...), nsBare), true, o.Clients); err != nil {
			return 0, err
		}
		return 0, c.createNamespaces(ctx, []string{nsBareNone}, false, o.Clients)
	}); err != nil {
		return err
	}
	// The caches see the namespaces through their watches.
	time.Sleep(2 * time.Second)
	if err := rn.memoryStep(ctx, StepNamespaces); err != nil {
		return err
	}

	if err := rn.phase(fmt.Sprintf("%d Deployments of %d Pods running", o.Deployments(), o.Replicas), func() (int, error) {
		if err := c.createDeployments(ctx, o); err != nil {
			return 0, err
		}
		_, err := w.waitFor(ctx, o.Timeout, "Deployments' Pods running", func(n counts) bool {
			return sumOver(n.running, workload) >= o.DeploymentPods()
		}, c.exited)
		if err != nil {
			err = fmt.Errorf("%w: %s", err, c.stuck(ctx, workload))
		}
		return o.DeploymentPods(), err
	}); err != nil {
		return err
	}
	if err := rn.memoryStep(ctx, StepPods); err != nil {
		return err
	}

	if err := rn.bursts(ctx); err != nil {
		return err
	}
	if o.ClientPods > 0 {
		if err := rn.phase(fmt.Sprintf("%d bare Pods per arm by %d clients", o.ClientPods, o.Clients), func() (int, error) {
			return 2 * o.ClientPods, rn.clientArms(ctx)
		}); err != nil {
			return err
		}
	}
	if err := rn.churn(ctx, workload); err != nil {
		return err
	}
	return rn.memoryStep(ctx, StepChurn)
}

func sumOver(m map[string]int, keys []string) int {
	n := 0
	for _, k := range keys {
		n += m[k]
	}
	return n
}

// clientArms creates bare Pods in both arms, half of them each in two
// rounds, alternating which arm goes first.
func (rn *runner) clientArms(ctx context.Context) error {
	o, c := rn.o, rn.c
	arms := map[string]*ClientArm{ArmNone: {Arm: ArmNone}, ArmGraceguard: {Arm: ArmGraceguard}}
	latencies := map[string][]float64{}
	nsOf := map[string]string{ArmNone: nsBareNone, ArmGraceguard: nsBare}
	half := (o.ClientPods + 1) / 2
	for round, order := range [][]string{{ArmNone, ArmGraceguard}, {ArmGraceguard, ArmNone}} {
		for _, name := range order {
			a, from := arms[name], round*half
			n := min(half, o.ClientPods-from)
			var mu sync.Mutex
			_, _ = parallel(ctx, n, o.Clients, func(i int) error {
				p := barePod(from + i)
				t0 := time.Now()
				got, err := c.kube.CoreV1().Pods(nsOf[name]).Create(ctx, p, metav1.CreateOptions{})
				ms := float64(time.Since(t0).Microseconds()) / 1000
				if err == nil && name == ArmGraceguard && got.Labels[mutate.LabelTreated] != mutate.LabelTreatedValue {
					err = fmt.Errorf("Pod %s/%s was not treated by graceguard (labels %v)", got.Namespace, got.Name, got.Labels)
				}
				mu.Lock()
				defer mu.Unlock()
				a.Pods++
				if err != nil {
					a.Errors++
					if a.ErrorSample == "" {
						a.ErrorSample = err.Error()
					}
					return err
				}
				latencies[name] = append(latencies[name], ms)
				return nil
			})
		}
	}
	for _, name := range []string{ArmNone, ArmGraceguard} {
		a := arms[name]
		a.LatencyMs = percentiles(latencies[name])
		rn.r.Admission.Client = append(rn.r.Admission.Client, *a)
		rn.logf("bare Pods (%s): %d created, %d errors, p50 %.1f ms, p99 %.1f ms", name, a.Pods, a.Errors, a.LatencyMs.P50, a.LatencyMs.P99)
	}
	return ctx.Err()
}

// churn restarts a tenth of the Deployments and deletes Pods of the
// others, then waits until every Pod shut down and the observer's reports
// count the shutdowns.
func (rn *runner) churn(ctx context.Context, workload []string) error {
	o, c, w := rn.o, rn.c, rn.w
	s := &Shutdowns{}
	rn.r.Shutdowns = s
	obsPID := c.observer.PID()
	if m, err := proc.ReadMemory(obsPID); err == nil {
		rn.peak["graceguard observer"] = m.HWM
	}
	_ = proc.ResetPeak(obsPID)
	obsCPU0, err := proc.CPUTime(obsPID)
	if err != nil {
		return err
	}
	api0, err := scrapeAPIServer(ctx, c.kube)
	if err != nil {
		return err
	}
	obs0, err := scrape(ctx, c.observerMetrics)
	if err != nil {
		return err
	}
	w.resetShutdowns()
	rn.reportsW.start()
	restart := restartSet(o)
	err = rn.phase(fmt.Sprintf("churn: %d Deployments restarted, %d Pods deleted", len(restart), o.Deletions), func() (int, error) {
		var err error
		if s.Restarted, s.Deleted, err = rn.disrupt(ctx, restart); err != nil {
			return 0, err
		}
		return rn.settle(ctx, workload)
	})
	n := w.snapshot()
	s.Shutdowns, s.Kills, s.Unfinished = n.shutdowns, n.kills, n.unfinished
	if !n.firstDelete.IsZero() && n.lastGone.After(n.firstDelete) {
		s.ChurnSeconds = n.lastGone.Sub(n.firstDelete).Seconds()
	}
	if err != nil {
		return err
	}
	// The observer writes a workload's report once per flush interval.
	deadline := time.Now().Add(o.Timeout)
	for {
		if s.Recorded, s.RecordedKills, s.Reports, err = c.reports(ctx, rn.o); err != nil {
			return err
		}
		if s.Recorded >= s.Shutdowns || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	s.LagSeconds = time.Since(n.lastGone).Seconds()
	s.ReportUpdatesPeak, s.ReportUpdateSeconds = rn.reportsW.stop()
	rn.logf("shutdowns: %d seen (%d killed), %d recorded (%d killed) in %d reports, %.1f s after the last Pod went",
		s.Shutdowns, s.Kills, s.Recorded, s.RecordedKills, s.Reports, s.LagSeconds)
	obsCPU1, err := proc.CPUTime(obsPID)
	if err != nil {
		return err
	}
	s.ObserverCPUSeconds = (obsCPU1 - obsCPU0).Seconds()
	if m, err := proc.ReadMemory(obsPID); err == nil {
		s.ObserverPeakRSSMiB = proc.MiB(m.HWM)
		rn.peak["graceguard observer"] = max(rn.peak["graceguard observer"], m.HWM)
	}
	api1, err := scrapeAPIServer(ctx, c.kube)
	if err != nil {
		return err
	}
	obs1, err := scrape(ctx, c.observerMetrics)
	if err != nil {
		return err
	}
	for _, verb := range []string{"POST", "PUT", "PATCH", "APPLY"} {
		want := map[string]string{"resource": "shutdownreports", "verb": verb}
		s.ReportWrites += api1.sum("apiserver_request_total", want) - api0.sum("apiserver_request_total", want)
	}
	s.Samples = deltaMap(obs1.by("graceguard_observed_drain_seconds", nil, "outcome"), obs0.by("graceguard_observed_drain_seconds", nil, "outcome"))
	s.Skipped = deltaMap(obs1.by("graceguard_observer_skipped_total", nil, "reason"), obs0.by("graceguard_observer_skipped_total", nil, "reason"))
	if !s.ObservedOnce() {
		rn.r.problem("shutdowns: %d Pods shut down (%d killed), the reports count %d (%d killed)", s.Shutdowns, s.Kills, s.Recorded, s.RecordedKills)
	}
	return nil
}

// disrupt restarts the Deployments of restart and deletes o.Deletions
// Pods of the others.
func (rn *runner) disrupt(ctx context.Context, restart []int) (restarted, deleted int, err error) {
	o, c := rn.o, rn.c
	now := time.Now()
	var others []int
	for g := range o.Deployments() {
		ns, name := workloadNamespace(g/o.DeploymentsPerNamespace), deploymentName(g%o.DeploymentsPerNamespace)
		if slices.Contains(restart, g) {
			if err := c.restartDeployment(ctx, ns, name, now); err != nil {
				return restarted, deleted, err
			}
			restarted++
			continue
		}
		others = append(others, g)
	}
	// The deletions, spread over the other Deployments.
	for i := 0; deleted < o.Deletions && len(others) > 0; i++ {
		g := others[i%len(others)]
		per := (o.Deletions + len(others) - 1) / len(others)
		n, err := c.deletePods(ctx, workloadNamespace(g/o.DeploymentsPerNamespace), deploymentName(g%o.DeploymentsPerNamespace), min(per, o.Deletions-deleted))
		deleted += n
		if err != nil {
			return restarted, deleted, err
		}
		if i >= len(others) && n == 0 {
			break
		}
	}
	return restarted, deleted, nil
}

// settle waits until every Deployment runs its template again and no Pod
// is still shutting down; it returns the shutdowns seen since the watch's
// reset.
func (rn *runner) settle(ctx context.Context, workload []string) (int, error) {
	o, c, w := rn.o, rn.c, rn.w
	deadline := time.Now().Add(o.Timeout)
	for {
		done, err := c.rolledOut(ctx, o)
		if err != nil {
			return 0, err
		}
		n := w.snapshot()
		if done && n.terminating == 0 && sumOver(n.running, workload) >= o.DeploymentPods() {
			return n.shutdowns, nil
		}
		if err := c.exited(); err != nil {
			return 0, err
		}
		if time.Now().After(deadline) {
			return n.shutdowns, fmt.Errorf("not rolled out within %s (%d Pods still terminating)", o.Timeout, n.terminating)
		}
		select {
		case <-ctx.Done():
			return n.shutdowns, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// slowRestarted is how many of the Deployments a churn restarts drain past
// the grace.
func slowRestarted(o Options) int {
	n := 0
	for _, g := range restartSet(o) {
		if g%o.DeploymentsPerNamespace < o.SlowDeployments {
			n++
		}
	}
	return n
}

// restartSet is the global indexes of the Deployments a churn restarts,
// spread evenly over them.
func restartSet(o Options) []int {
	n, total := o.Restarted(), o.Deployments()
	var out []int
	for i := range n {
		out = append(out, i*total/n)
	}
	return out
}

// deltaMap is later minus earlier, keeping the keys that changed.
func deltaMap(later, earlier map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range later {
		if d := v - earlier[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// webhookLatencies is the API server's latency histograms of graceguard's
// webhooks between two scrapes.
func (rn *runner) webhookLatencies(before, after exposition) []WebhookLatency {
	var out []WebhookLatency
	const family = "apiserver_admission_webhook_admission_duration_seconds"
	for _, name := range rn.webhookNames() {
		for _, typ := range []string{"admit", "validating"} {
			want := map[string]string{"name": name, "type": typ}
			h := after.histogram(family, want).Sub(before.histogram(family, want))
			if h.Count > 0 {
				out = append(out, WebhookLatency{Name: name, Type: typ, Histogram: h})
			}
		}
	}
	return out
}

// webhookNames are the names of graceguard's webhooks, as the chart
// registers them.
func (rn *runner) webhookNames() []string {
	var out []string
	for _, m := range rn.c.Webhooks.Mutating {
		for _, h := range m.Webhooks {
			out = append(out, h.Name)
		}
	}
	for _, v := range rn.c.Webhooks.Validating {
		for _, h := range v.Webhooks {
			out = append(out, h.Name)
		}
	}
	return out
}

// admission fills the figures of the whole run from the first and a last
// scrape of the API server and of the webhook.
func (rn *runner) admission(ctx context.Context, api0, gg0 exposition) error {
	c, a := rn.c, &rn.r.Admission
	api1, err := scrapeAPIServer(ctx, c.kube)
	if err != nil {
		return err
	}
	gg1, err := c.scrapeWebhooks(ctx)
	if err != nil {
		return err
	}
	a.Webhooks = rn.webhookLatencies(api0, api1)
	const decisions = "graceguard_admission_decisions_total"
	a.Decisions = deltaMap(gg1.by(decisions, nil, "webhook", "decision", "reason"), gg0.by(decisions, nil, "webhook", "decision", "reason"))
	over := map[string]string{"reason": "overloaded"}
	a.Shed = gg1.sum(decisions, over) - gg0.sum(decisions, over)
	a.FailOpen, a.Rejected = map[string]float64{}, map[string]float64{}
	for _, name := range rn.webhookNames() {
		want := map[string]string{"name": name}
		const failOpen, rejected = "apiserver_admission_webhook_fail_open_count", "apiserver_admission_webhook_rejection_count"
		if d := api1.sum(failOpen, want) - api0.sum(failOpen, want); d != 0 {
			a.FailOpen[name] = d
		}
		for k, v := range deltaMap(api1.by(rejected, want, "name", "error_type"), api0.by(rejected, want, "name", "error_type")) {
			a.Rejected[k] = v
		}
	}
	a.Connections = connectionCounters(gg0, gg1)
	a.Connections["peak open on one replica"] = gg1.max(server.ConnectionsPeakName)
	created := map[string]string{"verb": "POST", "resource": "pods", "subresource": "", "code": "201"}
	a.PodsCreated = api1.sum("apiserver_request_total", created) - api0.sum("apiserver_request_total", created)
	now := proc.CPUTimes(rn.pids)
	for _, name := range rn.webhookProcs() {
		a.WebhookCPUSeconds += (now[name] - rn.cpu0[name]).Seconds()
	}
	rn.logf("admission: %.0f reviews (%.3f ms CPU each), %.0f shed, %.0f failed open, %.0f rejected, %.0f Pods created",
		a.Reviews(), a.CPUMsPerReview(), a.Shed, total(a.FailOpen), total(a.Rejected), a.PodsCreated)
	return nil
}

// cpuFigures records each process's CPU time over the run and peak RSS.
func (rn *runner) cpuFigures() {
	now := proc.CPUTimes(rn.pids)
	names := make([]string, 0, len(rn.pids))
	for n := range rn.pids {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		pc := ProcCPU{Name: n, CPUSeconds: (now[n] - rn.cpu0[n]).Seconds()}
		if m, err := proc.ReadMemory(rn.pids[n]); err == nil {
			pc.PeakRSSMiB = proc.MiB(max(m.HWM, rn.peak[n]))
		}
		rn.r.CPU = append(rn.r.CPU, pc)
	}
}

// memoryStep measures the webhook and the observer once the observer's
// cache holds every treated Pod: the smallest of three readings a second
// apart (the heap in use includes garbage not yet collected).
func (rn *runner) memoryStep(ctx context.Context, name string) error {
	c, w := rn.c, rn.w
	s := MemoryStep{Name: name}
	deadline := time.Now().Add(rn.o.Timeout)
	for {
		m, err := scrape(ctx, c.observerMetrics)
		if err != nil {
			return err
		}
		s.TreatedPods = int(m.sum("graceguard_observer_pods", nil))
		if want := w.snapshot().treated; s.TreatedPods == want {
			break
		} else if time.Now().After(deadline) {
			return fmt.Errorf("memory step %q: the observer caches %d Pods, the cluster has %d treated", name, s.TreatedPods, want)
		}
		time.Sleep(250 * time.Millisecond)
	}
	list, err := c.kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: mutate.LabelInject + "=" + mutate.LabelInjectEnabled})
	if err != nil {
		return err
	}
	s.Namespaces = len(list.Items)
	for i := range 3 {
		if i > 0 {
			time.Sleep(time.Second)
		}
		for _, x := range []struct {
			p   *apiserver.Process
			url string
			dst *ProcMem
		}{{c.Webhook, c.ReplicaMetrics[0], &s.Webhook}, {c.observer, c.observerMetrics, &s.Observer}} {
			mem, err := proc.ReadMemory(x.p.PID())
			if err != nil {
				return err
			}
			m, err := scrape(ctx, x.url)
			if err != nil {
				return err
			}
			got := ProcMem{RSSMiB: proc.MiB(mem.RSS), HeapInuseMiB: m.sum("go_memstats_heap_inuse_bytes", nil) / (1 << 20)}
			// The latest collection's figure.
			x.dst.HeapLiveMiB = m.sum("go_memstats_next_gc_bytes", nil) / 2 / (1 << 20)
			if i == 0 || got.HeapInuseMiB < x.dst.HeapInuseMiB {
				x.dst.HeapInuseMiB = got.HeapInuseMiB
			}
			if i == 0 || got.RSSMiB < x.dst.RSSMiB {
				x.dst.RSSMiB = got.RSSMiB
			}
		}
	}
	rn.r.Memory = append(rn.r.Memory, s)
	rn.logf("memory, %s: %d opted-in namespaces, %d treated Pods; webhook RSS %.1f MiB, heap in use %.1f, live %.2f; observer RSS %.1f MiB, heap in use %.1f, live %.2f",
		name, s.Namespaces, s.TreatedPods, s.Webhook.RSSMiB, s.Webhook.HeapInuseMiB, s.Webhook.HeapLiveMiB, s.Observer.RSSMiB, s.Observer.HeapInuseMiB, s.Observer.HeapLiveMiB)
	return nil
}
