package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/test/bench/fixture"
)

// Namespaces of the Pod creation phase.
const (
	nsCreateWith    = "bench-create-with"    // opted in: both Pod webhooks are called
	nsCreateWithout = "bench-create-without" // not selected: no webhook is called
)

// graceguardWebhooks are the webhook names the chart gives graceguard's Pod webhooks.
var graceguardWebhooks = []string{"mutate-pods.graceguard.io", "validate-pods.graceguard.io"}

// measureCreation creates pods Pods with clients concurrent clients through
// the API server in an opted-in namespace (graceguard's webhooks called)
// and in one the webhooks' namespaceSelector skips (no webhook called),
// interleaved A-B-B-A in halves so drift in the machine's load hits both
// alike, and reads the API server's own latency histogram of the webhooks.
func (c *cluster) measureCreation(ctx context.Context, pods, clients, serial int) (*Creation, error) {
	for _, ns := range []struct {
		name    string
		optedIn bool
	}{{nsCreateWith, true}, {nsCreateWithout, false}} {
		if err := c.createNamespace(ctx, ns.name, ns.optedIn); err != nil {
			return nil, err
		}
	}
	// Warm both paths (connections, the webhook's first calls), unmeasured.
	for _, ns := range []string{nsCreateWith, nsCreateWithout} {
		if _, err := c.createPods(ctx, ns, "warm", clients, clients); err != nil {
			return nil, err
		}
	}
	before, err := c.webhookHistograms(ctx)
	if err != nil {
		return nil, err
	}
	with, without, err := c.abba(ctx, "c", pods, clients)
	if err != nil {
		return nil, err
	}
	after, err := c.webhookHistograms(ctx)
	if err != nil {
		return nil, err
	}
	cr := &Creation{Pods: pods, Clients: clients, With: with.summary(), Without: without.summary(), SerialPods: serial}
	if cr.Without.PodsPerSec > 0 {
		cr.SlowdownPercent = 100 * (1 - cr.With.PodsPerSec/cr.Without.PodsPerSec)
	}
	for _, name := range graceguardWebhooks {
		for _, typ := range []string{"admit", "validating"} {
			k := histKey{name, typ}
			if h, ok := after[k]; ok {
				cr.Webhooks = append(cr.Webhooks, h.minus(before[k]).latency(name, typ))
			}
		}
	}
	if serial > 0 {
		with, without, err := c.abba(ctx, "s", serial, 1)
		if err != nil {
			return nil, err
		}
		sw, so := with.summary(), without.summary()
		cr.SerialWith, cr.SerialWithout = &sw, &so
	}
	return cr, nil
}

// abba creates pods Pods with and pods without the webhooks, in halves
// ordered with, without, without, with, and measures the CPU time every
// process involved spends.
func (c *cluster) abba(ctx context.Context, prefix string, pods, clients int) (with, without creations, err error) {
	procs := children("kube-apiserver", "etcd")
	procs["graceguard"] = c.webhook.pid()
	procs["bench client"] = os.Getpid()
	half := pods / 2
	with, without = creations{cpu: map[string]time.Duration{}}, creations{cpu: map[string]time.Duration{}}
	for i, ns := range []string{nsCreateWith, nsCreateWithout, nsCreateWithout, nsCreateWith} {
		n := half
		if i >= 2 {
			n = pods - half
		}
		cpu0 := cpuTimes(procs)
		got, err := c.createPods(ctx, ns, prefix+strconv.Itoa(i), n, clients)
		if err != nil {
			return with, without, err
		}
		got.cpu = map[string]time.Duration{}
		for name, t := range cpuTimes(procs) {
			got.cpu[name] = t - cpu0[name]
		}
		if ns == nsCreateWith {
			with.add(got)
		} else {
			without.add(got)
		}
	}
	return with, without, nil
}

// creations accumulates rounds of one mode.
type creations struct {
	wall    time.Duration
	lat     []time.Duration
	errors  int
	mutated int
	cpu     map[string]time.Duration
}

func (c *creations) add(o creations) {
	c.wall += o.wall
	c.lat = append(c.lat, o.lat...)
	c.errors += o.errors
	c.mutated += o.mutated
	for k, v := range o.cpu {
		c.cpu[k] += v
	}
}

func (c *creations) summary() CreateRun {
	ok := len(c.lat) - c.errors
	r := CreateRun{Seconds: c.wall.Seconds(), PodsPerSec: float64(ok) / c.wall.Seconds(), Latency: percentiles(c.lat), Errors: c.errors, Mutated: c.mutated,
		CPUMsPerPod: map[string]float64{}}
	for k, v := range c.cpu {
		r.CPUMsPerPod[k] = ms(v) / float64(len(c.lat))
	}
	return r
}

// cpuTimes reads the CPU time of each process (missing ones are left out).
func cpuTimes(pids map[string]int) map[string]time.Duration {
	out := map[string]time.Duration{}
	for name, pid := range pids {
		if t, err := cpuTime(pid); err == nil {
			out[name] = t
		}
	}
	return out
}

// createPods creates n typical Pods in ns with clients concurrent clients.
func (c *cluster) createPods(ctx context.Context, ns, prefix string, n, clients int) (creations, error) {
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
				p := fixture.TypicalPod()
				p.GenerateName, p.Name, p.Namespace = "", fmt.Sprintf("%s-%04d", prefix, i), ns
				// The API server records its own.
				p.ManagedFields = nil
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

type histKey struct{ name, typ string }

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

func (h hist) latency(name, typ string) WebhookLatency {
	w := WebhookLatency{Name: name, Type: typ, Count: h.count, P50Le: h.quantileLe(0.5), P99Le: h.quantileLe(0.99)}
	if h.count > 0 {
		w.MeanMs = 1000 * h.sum / float64(h.count)
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

// webhookHistograms reads apiserver_admission_webhook_admission_duration_seconds
// of graceguard's webhooks from the API server's /metrics.
func (c *cluster) webhookHistograms(ctx context.Context) (map[histKey]hist, error) {
	raw, err := c.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's /metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing the API server's /metrics: %w", err)
	}
	out := map[histKey]hist{}
	fam, ok := fams["apiserver_admission_webhook_admission_duration_seconds"]
	if !ok {
		return out, nil
	}
	for _, m := range fam.GetMetric() {
		name := label(m, "name")
		if !slices.Contains(graceguardWebhooks, name) {
			continue
		}
		k := histKey{name, label(m, "type")}
		h, ok := out[k]
		if !ok {
			h = hist{buckets: map[float64]uint64{}}
		}
		ph := m.GetHistogram()
		h.count += ph.GetSampleCount()
		h.sum += ph.GetSampleSum()
		for _, b := range ph.GetBucket() {
			h.buckets[b.GetUpperBound()] += b.GetCumulativeCount()
		}
		out[k] = h
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
