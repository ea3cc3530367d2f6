package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/internal/fixture"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/test/harness/proc"
	"github.com/graceguard/graceguard/test/harness/promscrape"
)

// nsCreateWithout is a namespace no webhook selects, for the managedFields
// check.
const nsCreateWithout = "bench-create-without"

// measureCreation compares each native policy's Pods with graceguard's on
// the Pods their arms create, then measures every arm, then (SerialPods) a
// few arms with one client.
func (c *cluster) measureCreation(ctx context.Context, as []arm, o Options, logf func(string, ...any)) (*Creation, error) {
	cr := &Creation{Rounds: o.Rounds, PodsPerRound: o.PodsPerRound, Clients: o.Clients, SerialPods: o.SerialPods}
	byName := map[string]arm{}
	for _, a := range arms() {
		byName[a.name] = a
	}
	var err error
	if cr.NativePolicy, err = c.sameAsGraceguard(ctx, byName[ArmGraceguard], byName[ArmNativePolicy]); err != nil {
		return cr, err
	}
	if cr.OneMutationPolicy, err = c.sameAsGraceguard(ctx, byName[ArmGraceguardNoProbe], byName[ArmNativeOneMutation]); err != nil {
		return cr, err
	}
	runs, counts, err := c.measureArms(ctx, as, o.Rounds, o.PodsPerRound, o.Clients)
	if err != nil {
		return cr, err
	}
	cr.Arms = runs
	for _, a := range as {
		for _, h := range a.hooks {
			n := counts[h]
			w := n.latency.latency(h)
			w.Skipped = n.skipped
			cr.Webhooks = append(cr.Webhooks, w)
		}
	}
	for _, a := range runs {
		logf("%-22s %6.1f Pods/s (rounds %s)  p50 %6.1f ms  p99 %6.1f ms  %d errors  %d of %d with the record  %.2f calls/Pod",
			a.Arm, a.PodsPerSec, rounded(a.RoundPodsPerSec), a.Latency.P50, a.Latency.P99, a.Errors, a.Mutated, a.Pods, a.CallsPerPod)
	}
	if o.SerialPods > 1 {
		var serial []arm
		for _, a := range as {
			if a.name == ArmNone || a.name == ArmNoopOneCall || a.name == ArmGraceguard {
				serial = append(serial, a)
			}
		}
		logf("one client: %d Pods per arm of %d arms", o.SerialPods, len(serial))
		if cr.Serial, _, err = c.measureArms(ctx, serial, 2, o.SerialPods/2, 1); err != nil {
			return cr, err
		}
	}
	return cr, nil
}

func rounded(vs []float64) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmt.Sprintf("%.0f", v)
	}
	return strings.Join(out, " ")
}

// measureArms creates Pods in every arm's namespace: rounds rounds of
// perRound Pods per arm by clients concurrent clients, the arms in a
// different order each round (rotated, and reversed every other round) so
// that drift in the machine's load hits them alike, the Pods deleted
// between rounds (unmeasured) so the API server's store does not grow
// through the run. It reads the API server's own counts of webhook calls,
// matchCondition skips and latencies over the measured rounds.
func (c *cluster) measureArms(ctx context.Context, as []arm, rounds, perRound, clients int) ([]ArmRun, map[string]admissionCount, error) {
	procs := proc.Children("kube-apiserver", "etcd")
	for k, v := range map[string]int{procGraceguard: c.Webhook.PID(), procHTTP2: c.http2.PID(), procNoop: c.noop.PID(), procClient: os.Getpid()} {
		procs[k] = v
	}
	// Warm every path (connections, the webhooks' first calls), unmeasured.
	for _, a := range as {
		if _, err := c.createPods(ctx, a, "warm", clients, clients); err != nil {
			return nil, nil, err
		}
	}
	if err := c.deleteArmPods(ctx, as); err != nil {
		return nil, nil, err
	}
	before, err := c.admissionCounts(ctx)
	if err != nil {
		return nil, nil, err
	}
	acc := make([]creations, len(as))
	for i := range acc {
		acc[i].cpu = map[string]time.Duration{}
	}
	for r := range rounds {
		order := make([]int, len(as))
		for i := range order {
			order[i] = (i + r) % len(as)
		}
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, i := range order {
			settle(procs)
			cpu0 := proc.CPUTimes(procs)
			got, err := c.createPods(ctx, as[i], fmt.Sprintf("r%d", r), perRound, clients)
			if err != nil {
				return nil, nil, err
			}
			got.cpu = map[string]time.Duration{}
			for name, t := range proc.CPUTimes(procs) {
				got.cpu[name] = t - cpu0[name]
			}
			got.rounds = []float64{float64(perRound-got.errors) / got.wall.Seconds()}
			got.roundP99 = []float64{percentiles(got.lat).P99}
			acc[i].add(got)
		}
		if err := c.deleteArmPods(ctx, as); err != nil {
			return nil, nil, err
		}
	}
	after, err := c.admissionCounts(ctx)
	if err != nil {
		return nil, nil, err
	}
	counts := map[string]admissionCount{}
	for name, a := range after {
		counts[name] = a.minus(before[name])
	}
	out := make([]ArmRun, len(as))
	for i, a := range as {
		out[i] = acc[i].summary(a)
		for _, h := range a.hooks {
			n := counts[h]
			if out[i].Pods > 0 {
				out[i].CallsPerPod += float64(n.calls) / float64(out[i].Pods)
			}
		}
	}
	return out, counts, nil
}

// settle waits (at most 5 s) until the API server and etcd are nearly idle
// (under a fifth of a core over 300 ms), so that no arm starts while they
// still work off the one before it (watch events, the deletions between
// rounds).
func settle(procs map[string]int) {
	quiet := map[string]int{}
	for _, name := range []string{procAPIServer, procEtcd} {
		if pid, ok := procs[name]; ok {
			quiet[name] = pid
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		t0 := proc.CPUTimes(quiet)
		time.Sleep(300 * time.Millisecond)
		var used time.Duration
		for name, t := range proc.CPUTimes(quiet) {
			used += t - t0[name]
		}
		if used < 60*time.Millisecond {
			return
		}
	}
}

// deleteArmPods deletes every Pod of the arms' namespaces and waits until
// they are gone (no kubelet: a Pod on no node is deleted at once).
func (c *cluster) deleteArmPods(ctx context.Context, as []arm) error {
	zero := int64(0)
	for _, a := range as {
		if err := c.kube.CoreV1().Pods(armNamespace(a.name)).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(time.Minute)
	for _, a := range as {
		for {
			l, err := c.kube.CoreV1().Pods(armNamespace(a.name)).List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil {
				return err
			}
			if len(l.Items) == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("Pods of %s not deleted within a minute", armNamespace(a.name))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// creations accumulates rounds of one arm.
type creations struct {
	wall    time.Duration
	lat     []time.Duration
	errors  int
	mutated int
	cpu     map[string]time.Duration
	// rounds are the Pods/s of each round, roundP99 its p99 (ms).
	rounds, roundP99 []float64
}

func (c *creations) add(o creations) {
	c.wall += o.wall
	c.lat = append(c.lat, o.lat...)
	c.errors += o.errors
	c.mutated += o.mutated
	c.rounds = append(c.rounds, o.rounds...)
	c.roundP99 = append(c.roundP99, o.roundP99...)
	for k, v := range o.cpu {
		c.cpu[k] += v
	}
}

func (c *creations) summary(a arm) ArmRun {
	ok := len(c.lat) - c.errors
	r := ArmRun{Arm: a.name, Desc: a.desc, Pods: len(c.lat), Seconds: c.wall.Seconds(), Latency: percentiles(c.lat), Errors: c.errors,
		Mutated: c.mutated, WantMutated: a.mutates, Webhook: a.webhook, RoundPodsPerSec: c.rounds, RoundP99: c.roundP99, CPUMsPerPod: map[string]float64{}}
	if c.wall > 0 {
		r.PodsPerSec = float64(ok) / c.wall.Seconds()
	}
	for k, v := range c.cpu {
		if len(c.lat) > 0 {
			r.CPUMsPerPod[k] = ms(v) / float64(len(c.lat))
		}
	}
	return r
}

// createPods creates n of the arm's Pods in its namespace with clients
// concurrent clients.
func (c *cluster) createPods(ctx context.Context, a arm, prefix string, n, clients int) (creations, error) {
	ns := armNamespace(a.name)
	var (
		mu   sync.Mutex
		out  creations
		errs []error
		wg   sync.WaitGroup
	)
	jobs := make(chan int)
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				p := a.pod(fmt.Sprintf("%s-%04d", prefix, i))
				t0 := time.Now()
				got, err := c.kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
				d := time.Since(t0)
				mu.Lock()
				out.lat = append(out.lat, d)
				if err != nil {
					out.errors++
					if len(errs) < 3 {
						errs = append(errs, err)
					}
				} else if got.Annotations[mutate.AnnotationBudget] != "" {
					out.mutated++
				}
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	out.wall = time.Since(start)
	if len(errs) > 0 && out.errors == n {
		return out, fmt.Errorf("creating Pods in %s: every creation failed, e.g. %v", ns, errs[0])
	}
	return out, ctx.Err()
}

// hist is one cumulative histogram.
type hist struct {
	count   uint64
	sum     float64
	buckets map[float64]uint64 // upper bound -> cumulative count
}

func (h hist) minus(o hist) hist {
	d := hist{count: h.count - o.count, sum: h.sum - o.sum, buckets: map[float64]uint64{}}
	for le, n := range h.buckets {
		d.buckets[le] = n - o.buckets[le]
	}
	return d
}

func (h hist) latency(name string) WebhookLatency {
	w := WebhookLatency{Name: name, Count: h.count}
	if h.count > 0 {
		w.MeanMs = 1000 * h.sum / float64(h.count)
		w.P50Le, w.P99Le = h.quantileLe(0.5), h.quantileLe(0.99)
	}
	return w
}

// quantileLe is the upper bound of the first bucket holding q of the calls.
func (h hist) quantileLe(q float64) float64 {
	les := make([]float64, 0, len(h.buckets))
	for le := range h.buckets {
		les = append(les, le)
	}
	sort.Float64s(les)
	for _, le := range les {
		if float64(h.buckets[le]) >= q*float64(h.count) {
			return le
		}
	}
	return math.Inf(1)
}

// admissionCount is what the API server counted of one webhook: its calls
// (with their latency histogram) and the requests a matchCondition kept
// from it.
type admissionCount struct {
	calls, skipped uint64
	latency        hist
}

func (a admissionCount) minus(o admissionCount) admissionCount {
	if o.latency.buckets == nil {
		o.latency.buckets = map[float64]uint64{}
	}
	return admissionCount{calls: a.calls - o.calls, skipped: a.skipped - o.skipped, latency: a.latency.minus(o.latency)}
}

// admissionCounts reads, from the API server's /metrics, every webhook's
// apiserver_admission_webhook_admission_duration_seconds and
// apiserver_admission_match_condition_exclusions_total.
func (c *cluster) admissionCounts(ctx context.Context) (map[string]admissionCount, error) {
	fams, err := promscrape.APIServer(ctx, c.kube)
	if err != nil {
		return nil, err
	}
	out := map[string]admissionCount{}
	get := func(name string) admissionCount {
		a, ok := out[name]
		if !ok {
			a.latency.buckets = map[float64]uint64{}
		}
		return a
	}
	if fam, ok := fams["apiserver_admission_webhook_admission_duration_seconds"]; ok {
		for _, m := range fam.GetMetric() {
			name := label(m, "name")
			a := get(name)
			ph := m.GetHistogram()
			a.calls += ph.GetSampleCount()
			a.latency.count += ph.GetSampleCount()
			a.latency.sum += ph.GetSampleSum()
			for _, b := range ph.GetBucket() {
				a.latency.buckets[b.GetUpperBound()] += b.GetCumulativeCount()
			}
			out[name] = a
		}
	}
	if fam, ok := fams["apiserver_admission_match_condition_exclusions_total"]; ok {
		for _, m := range fam.GetMetric() {
			name := label(m, "name")
			a := get(name)
			a.skipped += uint64(m.GetCounter().GetValue())
			out[name] = a
		}
	}
	return out, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// checkManagedFields creates the typical Pod (dry run) where no webhook
// applies and compares the managedFields the API server records with the
// fixture's, which stand for them in every benchmark.
func (c *cluster) checkManagedFields(ctx context.Context) (*ManagedFieldsCheck, error) {
	if err := c.createNamespace(ctx, nsCreateWithout, false); err != nil {
		return nil, err
	}
	fx := fixture.TypicalPod()
	want, err := json.Marshal(fx.ManagedFields)
	if err != nil {
		return nil, err
	}
	p := fx.DeepCopy()
	p.ManagedFields, p.GenerateName, p.Name, p.Namespace = nil, "", "managed-fields-check", nsCreateWithout
	got, err := c.kube.CoreV1().Pods(nsCreateWithout).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return nil, err
	}
	have, err := json.Marshal(got.ManagedFields)
	if err != nil {
		return nil, err
	}
	return &ManagedFieldsCheck{FixtureBytes: len(want), APIServerBytes: len(have)}, nil
}
