package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/graceguard/graceguard/internal/freeport"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/server"
	"github.com/graceguard/graceguard/test/harness/apiserver"
	"github.com/graceguard/graceguard/test/harness/cgroup"
	"github.com/graceguard/graceguard/test/harness/chart"
	"github.com/graceguard/graceguard/test/harness/proc"
	"github.com/graceguard/graceguard/test/harness/promscrape"
)

// PhaseCPUHeld is the phase that holds one webhook replica to its CPU
// request (cpuHeld).
const PhaseCPUHeld = "cpu-held"

// heldNamespace is where the phase creates its Pods (opted in).
const heldNamespace = "bench-held"

// Variants of the cpu-held phase.
const (
	HeldThis   = "this checkout"
	HeldBefore = "before"
)

// heldFraction is the starved setting: this share of the CPU request.
const heldFraction = 0.4

// heldVariant is one webhook binary, run as its own chart runs it (its
// arguments and environment, its registrations) behind an API server of
// its own, in a cpu cgroup.
type heldVariant struct {
	HeldVariant
	bin, chartDir string
	api           *apiserver.APIServer
	kube          kubernetes.Interface
	cg            *cgroup.CPU
	health        int
	metricsURL    string
	probe         corev1.Probe
}

// cpuHeld measures Pod creation through a real kube-apiserver calling one
// webhook replica (the real cmd/webhook binary, through the chart's own
// registrations) held by the kernel to the chart's CPU request, to
// heldFraction of it, and unlimited, at each of o.HeldCreators concurrent
// creators; with o.HeldBefore, the same for the webhook of that git
// revision, with its own chart, the cells interleaved.
func (r *Results) cpuHeld(ctx context.Context, o Options, logf func(string, ...any)) (err error) {
	run := &CPUHeldRun{Started: time.Now().UTC().Truncate(time.Second), Creators: o.HeldCreators,
		CellSeconds: o.HeldDuration.Seconds(), WarmupSeconds: o.HeldWarmup.Seconds()}
	run.LoadAvgStart, _ = proc.LoadAvg()
	r.CPUHeld = run
	t0 := time.Now()
	defer func() {
		run.LoadAvgEnd, _ = proc.LoadAvg()
		run.Seconds = time.Since(t0).Seconds()
	}()
	if o.Assets == "" {
		return errors.New("no kube-apiserver and etcd: set KUBEBUILDER_ASSETS (make bench runs hack/envtest-assets.sh)")
	}
	dir, err := os.MkdirTemp("", "graceguard-bench-held-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	this := &heldVariant{HeldVariant: HeldVariant{Name: HeldThis, Commit: commitOf(o.Root, "HEAD", true)}, chartDir: chart.ChartDir()}
	variants := []*heldVariant{this}
	if o.HeldBefore != "" {
		variants = append(variants, &heldVariant{HeldVariant: HeldVariant{Name: HeldBefore, Ref: o.HeldBefore, Commit: commitOf(o.Root, o.HeldBefore, false)}})
	}
	for _, v := range variants {
		vdir := filepath.Join(dir, strings.ReplaceAll(v.Name, " ", "-"))
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			return err
		}
		src := o.Root
		if v.Ref != "" {
			logf("cpu-held: extracting %s (%s) into %s", v.Ref, v.Commit, vdir)
			if src, err = extract(ctx, o.Root, v.Ref, filepath.Join(vdir, "src")); err != nil {
				return err
			}
			v.chartDir = filepath.Join(src, "charts", "graceguard")
		}
		v.bin = filepath.Join(vdir, "webhook")
		if err := goBuild(ctx, src, "./cmd/webhook", v.bin, prefixWriter(o.Log, "    build: ")); err != nil {
			return err
		}
		if err := v.start(ctx, o, vdir); err != nil {
			return fmt.Errorf("%s: %w", v.Name, err)
		}
		defer func() {
			_ = v.cg.Hold(0)
			if serr := v.api.Stop(); serr != nil {
				err = errors.Join(err, serr)
			}
			err = errors.Join(err, v.cg.Remove())
		}()
		run.Variants = append(run.Variants, v.HeldVariant)
		logf("cpu-held: %s (%s): webhook pid %d, %s", v.Name, v.Commit, v.api.Webhook.PID(), strings.Join(v.Env, " "))
	}
	run.KubeAPIServer = this.api.Version

	request := o.HeldMillicores
	if request == 0 {
		request = this.RequestMillicores
	}
	if request <= 0 {
		return errors.New("the chart sets no CPU request and -held-cpu is 0: nothing to hold the webhook to")
	}
	run.RequestMillicores = request
	levels := []int{0, request, heldLevel(request)}
	if len(o.HeldLevels) > 0 {
		levels = o.HeldLevels
	}
	run.Rounds = max(o.HeldRounds, 1)
	for round := range run.Rounds {
		for li, mc := range levels {
			for ni, n := range o.HeldCreators {
				// Which variant goes first alternates along the rounds, the
				// levels and the creators, so that neither always follows
				// the other at the same number of creators.
				order := slices.Clone(variants)
				if (round+li+ni)%2 == 1 {
					slices.Reverse(order)
				}
				for _, v := range order {
					c, err := v.cell(ctx, mc, n, o.HeldWarmup, o.HeldDuration)
					if err != nil {
						return fmt.Errorf("%s at %s, %d creators, round %d: %w", v.Name, cpuName(mc, request), n, round+1, err)
					}
					c.Round = round
					run.Cells = append(run.Cells, c)
					logf("cpu-held round %d/%d %-14s %-18s %3d creators: %6.1f creates/s  goodput %6.1f/s  p99 %7.0f ms  refused %d  unmutated %d  shed %d  expired %d  handshakes cut %d  connections %d  /readyz failed %d of %d  webhook %.3f cores %s",
						round+1, run.Rounds, v.Name, cpuName(mc, request), n, c.PodsPerSec, c.Goodput, c.Latency.P99, c.Refused, c.Unmutated, c.Shed, c.Expired, c.HandshakesAborted, c.Connections,
						c.ReadyzFailed, c.ReadyzProbes, c.Cores, fmt.Sprint(c.Calls))
					if err := v.api.Webhook.Exited(); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// cpuName names a CPU setting of the phase for logs.
func cpuName(mc, request int) string {
	switch mc {
	case 0:
		return "unlimited"
	case request:
		return fmt.Sprintf("%dm (the request)", mc)
	}
	return fmt.Sprintf("%dm (%.0f%%)", mc, 100*float64(mc)/float64(request))
}

// commitOf is ref's commit, with "+ changes" when ref is HEAD and the
// work tree has uncommitted changes (dirty).
func commitOf(root, ref string, dirty bool) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short=12", ref).Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if dirty {
		if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			c += " + uncommitted changes"
		}
	}
	return c
}

// extract writes ref's tree (git archive) into dir and returns it.
func extract(ctx context.Context, root, ref, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "sh", root, ref, dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("git archive %s: %v\n%s", ref, err, out)
	}
	return dir, nil
}

// goBuild builds pkg of the module in dir as `make build` does.
func goBuild(ctx context.Context, dir, pkg, out string, log interface{ Write([]byte) (int, error) }) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = log, log
	fmt.Fprintf(log, "$ (cd %s && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o %s %s)\n", dir, out, pkg)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %s in %s: %w", pkg, dir, err)
	}
	return nil
}

// heldConnectingFlags are the chart's flags the phase sets itself (where
// the webhook listens, its certificate, its namespace, its shutdown, and
// the self-managed certificate's, which the API server's serving
// certificate replaces here); every other flag is the chart's.
var heldConnectingFlags = []string{
	"--port", "--health-probe-bind-address", "--metrics-bind-address", "--cert-dir", "--namespace",
	"--shutdown-delay", "--drain-timeout",
	"--cert-mode", "--cert-secret-name", "--service-name", "--mutating-webhook-configuration", "--validating-webhook-configuration",
}

// start renders the variant's chart, makes its cpu cgroup, and starts
// etcd, kube-apiserver with the chart's registrations, and the webhook in
// the cgroup with the chart's arguments and environment.
func (v *heldVariant) start(ctx context.Context, o Options, dir string) error {
	c, err := chart.ContainerDir(v.chartDir, "graceguard", releaseNamespace, nil, "webhook")
	if err != nil {
		return err
	}
	if rp := c.ReadinessProbe; rp != nil {
		v.probe = *rp
	}
	v.RequestMillicores = int(c.Resources.Requests.Cpu().MilliValue())
	var args []string
	for _, a := range c.Args {
		name, _, _ := strings.Cut(a, "=")
		if !slices.Contains(heldConnectingFlags, name) {
			args = append(args, a)
		}
	}
	v.Args = args
	if v.Env, err = chart.Env(c, releaseNamespace); err != nil {
		return err
	}
	if v.cg, err = cgroup.NewCPU(fmt.Sprintf("graceguard-bench-%s-%d", strings.ReplaceAll(v.Name, " ", "-"), os.Getpid())); err != nil {
		return err
	}
	// The webhook enters the cgroup before it runs, with the chart's
	// environment and none of this process's Go settings. The runtime
	// would read the cgroup's quota as a CPU limit (Go 1.25+); a Pod with
	// only a request has none, so that is turned off: GOMAXPROCS is what
	// the chart's environment makes it, else the machine's CPUs.
	wrapper := filepath.Join(dir, "webhook-in-cgroup")
	script := "#!/bin/sh\necho $$ > " + v.cg.ProcsFile() + " || exit 1\nexec env -u GOMAXPROCS -u GOMEMLIMIT -u GOGC -u GODEBUG " +
		"GODEBUG=cgroupgomaxprocs=0,updatemaxprocs=0 " + shellQuote(v.Env...) + " " + shellQuote(v.bin) + ` "$@"` + "\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		return err
	}
	ports := make([]int, 2)
	for i := range ports {
		if ports[i], err = freeport.Get(); err != nil {
			return err
		}
	}
	v.health, v.metricsURL = ports[0], "http://127.0.0.1:"+strconv.Itoa(ports[1])+"/metrics"
	v.api, err = apiserver.StartAPIServer(ctx, apiserver.APIServerOptions{
		AssetsDir: o.Assets, ReleaseNamespace: releaseNamespace, Dir: dir, ChartDir: v.chartDir, WebhookBinary: wrapper,
		WebhookArgs: append(slices.Clone(args), "--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(ports[0]),
			"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(ports[1])),
	})
	if err != nil {
		return err
	}
	cfg := rest.CopyConfig(v.api.Config)
	cfg.QPS, cfg.Burst = 5000, 5000
	cfg.WarningHandler = rest.NoWarnings{}
	if v.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: heldNamespace, Labels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}}}
	if _, err := v.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// shellQuote quotes words for sh.
func shellQuote(words ...string) string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}

// cell holds the webhook to millicores (0: unlimited), creates Pods with
// creators concurrent clients for warm (unmeasured) then d, probes
// /readyz as the kubelet would (the chart's period and timeout), and
// deletes the Pods.
func (v *heldVariant) cell(ctx context.Context, millicores, creators int, warm, d time.Duration) (HeldCell, error) {
	c := HeldCell{Variant: v.Name, Millicores: millicores, Creators: creators}
	if err := v.cg.Hold(int64(millicores)); err != nil {
		return c, err
	}
	settleAll()
	type result struct {
		got heldCreations
		err error
	}
	done := make(chan result, 1)
	go func() {
		got, err := v.create(ctx, "m", creators, warm, d)
		done <- result{got, err}
	}()
	// The counters start where the measured creations do.
	select {
	case <-ctx.Done():
		return c, ctx.Err()
	case <-time.After(warm):
	}
	n0, err0 := v.counts(ctx)
	calls0, err1 := v.apiCalls(ctx)
	pid := v.api.Webhook.PID()
	cpu0, _ := proc.CPUTime(pid)
	thr0, held0 := v.cg.Throttled()
	pctx, stopProbe := context.WithCancel(ctx)
	probes := make(chan [2]int, 1)
	go func() { probes <- v.probeReadyz(pctx) }()
	res := <-done
	got := res.got
	stopProbe()
	p := <-probes
	c.ReadyzProbes, c.ReadyzFailed = p[0], p[1]
	if err := errors.Join(res.err, err0, err1); err != nil {
		return c, err
	}
	cpu1, _ := proc.CPUTime(pid)
	thr1, held1 := v.cg.Throttled()
	n1, err := v.counts(ctx)
	if err != nil {
		return c, err
	}
	c.Seconds = got.wall.Seconds()
	c.Attempts, c.Refused, c.Unmutated = len(got.lat), got.errors, len(got.lat)-got.errors-got.mutated
	c.Created = len(got.lat) - got.errors
	c.PodsPerSec = float64(c.Created) / got.wall.Seconds()
	c.Goodput = float64(got.goodput) / d.Seconds()
	c.Latency = percentiles(got.lat)
	c.Shed, c.Expired, c.HandshakesAborted = int(n1.shed-n0.shed), int(n1.expired-n0.expired), int(n1.aborted-n0.aborted)
	c.Connections = -1
	if n0.accepted >= 0 && n1.accepted >= 0 {
		c.Connections = int(n1.accepted - n0.accepted)
	}
	c.Cores = (cpu1 - cpu0).Seconds() / got.wall.Seconds()
	c.ThrottledPeriods, c.ThrottledSeconds = thr1-thr0, (held1 - held0).Seconds()
	c.ErrorSample = got.sample
	calls1, err := v.apiCalls(ctx)
	if err != nil {
		return c, err
	}
	for k, n := range calls1 {
		if d := n - calls0[k]; d > 0 {
			if c.Calls == nil {
				c.Calls = map[string]int{}
			}
			c.Calls[k] = d
		}
	}
	return c, v.deletePods(ctx)
}

// heldCreations is what one cell's creators saw. goodput counts the
// creations answered with graceguard's changes within the measured
// window, whenever they started.
type heldCreations struct {
	creations
	sample  string
	goodput int
}

// create creates Pods with creators clients, each one after another,
// for warm then d, without a pause between them: the creations started
// in d are measured, from the end of warm until the last of them
// answered.
func (v *heldVariant) create(ctx context.Context, prefix string, creators int, warm, d time.Duration) (heldCreations, error) {
	var (
		mu   sync.Mutex
		out  heldCreations
		wg   sync.WaitGroup
		last time.Time
	)
	start := time.Now().Add(warm)
	stop := start.Add(d)
	for k := range creators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(stop) && ctx.Err() == nil; i++ {
				p := benchPod(heldNamespace, fmt.Sprintf("%s-%d-%d", prefix, k, i))
				t0 := time.Now()
				got, err := v.kube.CoreV1().Pods(heldNamespace).Create(ctx, p, metav1.CreateOptions{})
				lat := time.Since(t0)
				end := t0.Add(lat)
				mu.Lock()
				if err == nil && got.Annotations[mutate.AnnotationBudget] != "" && !end.Before(start) && !end.After(stop) {
					out.goodput++
				}
				if t0.Before(start) {
					mu.Unlock()
					continue
				}
				if end.After(last) {
					last = end
				}
				out.lat = append(out.lat, lat)
				switch {
				case err != nil:
					out.errors++
					if out.sample == "" {
						out.sample = err.Error()
					}
				case got.Annotations[mutate.AnnotationBudget] != "":
					out.mutated++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	out.wall = last.Sub(start)
	if out.wall <= 0 {
		return out, fmt.Errorf("no creation started in the measured %s", d)
	}
	return out, ctx.Err()
}

// apiCalls are the API server's counts of its calls to each webhook, by
// HTTP code (apiserver_admission_webhook_request_total; code 200: an
// answer), keyed "webhook code".
func (v *heldVariant) apiCalls(ctx context.Context) (map[string]int, error) {
	fams, err := promscrape.APIServer(ctx, v.kube)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, m := range fams["apiserver_admission_webhook_request_total"].GetMetric() {
		out[label(m, "name")+" "+label(m, "code")] += int(m.GetCounter().GetValue())
	}
	return out, nil
}

// heldCounts are the webhook's own counts of reviews it shed (429), of
// those whose deadline passed before they were decided, and of TLS
// handshakes it cut off, and of the connections it accepted (-1: it
// does not count them).
type heldCounts struct{ shed, expired, aborted, accepted float64 }

func (v *heldVariant) counts(ctx context.Context) (heldCounts, error) {
	fams, err := promscrape.Get(ctx, v.metricsURL)
	if err != nil {
		return heldCounts{}, err
	}
	var n heldCounts
	for _, m := range fams["graceguard_admission_decisions_total"].GetMetric() {
		switch label(m, "reason") {
		case "overloaded":
			n.shed += m.GetCounter().GetValue()
		case "deadline-exceeded":
			n.expired += m.GetCounter().GetValue()
		}
	}
	for _, m := range fams["graceguard_webhook_tls_handshakes_aborted_total"].GetMetric() {
		n.aborted += m.GetCounter().GetValue()
	}
	n.accepted = -1
	if f, ok := fams[server.ConnectionsAcceptedName]; ok {
		n.accepted = 0
		for _, m := range f.GetMetric() {
			n.accepted += m.GetCounter().GetValue()
		}
	}
	return n, nil
}

// probeReadyz gets /readyz every period with the chart's probe timeout
// until ctx ends, as the kubelet's readiness probe does, and returns how
// many probes it made and how many failed.
func (v *heldVariant) probeReadyz(ctx context.Context) [2]int {
	period, timeout := time.Duration(max(v.probe.PeriodSeconds, 1))*time.Second, time.Duration(max(v.probe.TimeoutSeconds, 1))*time.Second
	hc := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	url := "http://127.0.0.1:" + strconv.Itoa(v.health) + "/readyz"
	var n, failed int
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return [2]int{n, failed}
		case <-t.C:
		}
		n++
		resp, err := hc.Get(url)
		if err != nil {
			failed++
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			failed++
		}
	}
}

// deletePods deletes the phase's Pods (no webhook sees a deletion) and
// waits until they are gone.
func (v *heldVariant) deletePods(ctx context.Context) error {
	zero := int64(0)
	pods := v.kube.CoreV1().Pods(heldNamespace)
	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		l, err := pods.List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return err
		}
		if len(l.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Pods of %s not deleted within 2 minutes", heldNamespace)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// settleAll waits (at most 10 s) until every kube-apiserver and etcd this
// process started (both variants') is nearly idle, under a fifth of a
// core over 300 ms, so that no cell starts while one of them still works
// off the cell before it (the deletions, etcd's compaction): on 2 CPUs
// that work would feed the webhook slower, not hold it to its quota.
func settleAll() {
	pids := map[string]int{}
	for _, c := range proc.AllChildren(procAPIServer, procEtcd) {
		pids[fmt.Sprintf("%s %d", c.Name, c.PID)] = c.PID
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		t0 := proc.CPUTimes(pids)
		time.Sleep(300 * time.Millisecond)
		var used time.Duration
		for name, t := range proc.CPUTimes(pids) {
			used += t - t0[name]
		}
		if used < 60*time.Millisecond {
			return
		}
	}
}
