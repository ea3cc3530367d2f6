package security

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/graceguard/graceguard/internal/flood"
	"github.com/graceguard/graceguard/internal/freeport"
	"github.com/graceguard/graceguard/test/harness/apiserver"
	"github.com/graceguard/graceguard/test/harness/cgroup"
	"github.com/graceguard/graceguard/test/harness/chart"
)

// The report's settings: the file to write the table into (unset: the
// report does not run), the webhook binary (`make security-report` builds
// it as `make build` does), how long each class runs and how many rounds.
const (
	reportEnv  = "GRACEGUARD_BINARY_REPORT"
	classesEnv = "GRACEGUARD_REPORT_CLASSES" // a regexp: only the classes it matches
	binaryEnv  = "GRACEGUARD_WEBHOOK_BINARY"
	classEnv   = "GRACEGUARD_REPORT_CLASS_SECONDS"
	roundsEnv  = "GRACEGUARD_REPORT_ROUNDS"
	// argsEnv are flags after the chart's, to measure another setting
	// (the table's header lists them with the chart's).
	argsEnv    = "GRACEGUARD_REPORT_EXTRA_ARGS"
	releaseNS  = "graceguard-system"
	denseNS    = "dense"
	trickleNS  = "ordinary"
	floodConns = 10000
)

func TestMain(m *testing.M) {
	flood.MainIfChild()
	os.Exit(m.Run())
}

// TestBinaryUnderTheChartsMemoryLimit is the report: it runs only with
// GRACEGUARD_BINARY_REPORT set (make security-report), every class for
// GRACEGUARD_REPORT_CLASS_SECONDS (30), GRACEGUARD_REPORT_ROUNDS times (3),
// writes the table and then fails on what TestTheWorstAttacksStayUnderTheLimit
// fails on.
func TestBinaryUnderTheChartsMemoryLimit(t *testing.T) {
	report := os.Getenv(reportEnv)
	if report == "" {
		t.Skip("the long report: make security-report (TestTheWorstAttacksStayUnderTheLimit is its short form)")
	}
	bin := os.Getenv(binaryEnv)
	if bin == "" {
		t.Fatalf("%s: the webhook binary to measure (make security-report builds it)", binaryEnv)
	}
	classTime := time.Duration(envInt(classEnv, 30)) * time.Second
	rounds := envInt(roundsEnv, 3)
	var only *regexp.Regexp
	if s := os.Getenv(classesEnv); s != "" {
		re, err := regexp.Compile(s)
		if err != nil {
			t.Fatalf("%s: %v", classesEnv, err)
		}
		only = re
	}
	e, loadStart, results := run(t, bin, classTime, rounds, only)
	if err := writeReport(report, e, results, rounds, classTime, loadStart); err != nil {
		t.Fatal(err)
	}
	check(t, results)
}

// TestTheWorstAttacksStayUnderTheLimit is the report's short form, in
// make test: the webhook built from this tree, in the chart's memory
// limit, through the costliest class (the idle-headers flood with 3 MiB
// reviews) and every class at once, 10 s each. It fails when the webhook
// was OOM-killed or restarted, or an ordinary Pod was not admitted.
func TestTheWorstAttacksStayUnderTheLimit(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "webhook")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "github.com/graceguard/graceguard/cmd/webhook")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the webhook: %v\n%s", err, out)
	}
	_, _, results := run(t, bin, 10*time.Second, 1, regexp.MustCompile(`^(idle-headers flood and 3 MiB reviews at once|everything at once)$`))
	if len(results) != 2 {
		t.Fatalf("ran %d classes, want 2", len(results))
	}
	check(t, results)
}

// check fails for each class in which the webhook was OOM-killed,
// restarted or reached the cgroup's limit with anonymous memory, or an
// ordinary Pod was not admitted (or none was tried).
func check(t *testing.T, results []result) {
	t.Helper()
	for _, r := range results {
		if r.OOMKills > 0 || r.Restarts > 0 {
			t.Errorf("round %d, %s: %d OOM kills, %d restarts; want none", r.Round, r.Class, r.OOMKills, r.Restarts)
		}
		if r.Anon >= r.Limit {
			t.Errorf("round %d, %s: anonymous memory reached %.0f MiB, the limit %.0f MiB", r.Round, r.Class, mib(r.Anon), mib(r.Limit))
		}
		if r.Creates.n == 0 || r.Creates.ok < r.Creates.n {
			t.Errorf("round %d, %s: %d of %d ordinary Pods admitted; want all (%s)", r.Round, r.Class, r.Creates.ok, r.Creates.n, r.Creates.firstErr)
		}
	}
}

// run starts the webhook binary bin in the chart's memory limit and runs
// the classes only matches (nil: all), each for classTime, rounds times.
func run(t *testing.T, bin string, classTime time.Duration, rounds int, only *regexp.Regexp) (*env, string, []result) {
	t.Helper()
	if err := flood.RaiseFileLimit(floodConns + 2000); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Hour)
	t.Cleanup(cancel)

	e := start(ctx, t, bin)
	loadStart := loadAverage()
	classes := e.classes(classTime)
	if only != nil {
		classes = slices.DeleteFunc(classes, func(c class) bool { return !only.MatchString(c.name) })
	}
	var results []result
	for round := 1; round <= rounds; round++ {
		// Each round starts from the webhook at rest: the runtime returns
		// what the last round left (within two minutes, its periodic GC).
		if round > 1 {
			e.settle(ctx, e.baseline+8<<20, 150*time.Second)
		}
		for _, c := range classes {
			e.settle(ctx, 0, 20*time.Second)
			r := e.measure(ctx, t, c)
			r.Round = round
			t.Logf("round %d: %s", round, r)
			results = append(results, r)
		}
	}
	return e, loadStart, results
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// env is the webhook under measurement and what talks to it.
type env struct {
	api  *apiserver.APIServer
	kube kubernetes.Interface
	rest *rest.Config
	cg   *cgroup.Memory
	// container is the chart's webhook container; args what the webhook
	// runs with of it, beside the flags that connect it here.
	container corev1.Container
	args      []string
	envVars   []string
	// metricsURL serves the webhook's /metrics; webhookAddr is its port.
	metricsURL, webhookAddr string

	mu       sync.Mutex
	pid      int
	restarts []string // why each restart was needed
	// peakAnon and peakRSS are the most sampled since the class began,
	// peakHeap the most Go heap in use (scraped every second).
	peakAnon, peakRSS, peakHeap atomic.Int64
	// baseline is the cgroup's anonymous memory at rest, once set up.
	baseline int64

	trickle *trickle
	stored  map[workloadKind]string // the dense workloads' resourceVersions
}

// start renders the chart's webhook container, makes the memory cgroup,
// starts the API server with the binary in the cgroup, and the load's
// fixtures: the namespaces, the stored workloads and the ordinary Pods'
// trickle.
func start(ctx context.Context, t *testing.T, bin string) *env {
	t.Helper()
	c, err := chart.WebhookContainer("graceguard", releaseNS, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{container: c}
	limit := c.Resources.Limits.Memory().Value()
	if limit <= 0 {
		t.Fatal("the chart sets no memory limit on the webhook container")
	}
	if e.args, err = localArgs(c.Args); err != nil {
		t.Fatal(err)
	}
	e.args = append(e.args, strings.Fields(os.Getenv(argsEnv))...)
	if e.envVars, err = chart.Env(c, releaseNS); err != nil {
		t.Fatal(err)
	}
	if e.cg, err = cgroup.NewMemory("graceguard-security-report-"+strconv.Itoa(os.Getpid()), limit); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.cg.Remove(); err != nil {
			t.Error(err)
		}
	})

	dir := t.TempDir()
	wrapper := filepath.Join(dir, "webhook-in-cgroup")
	// The webhook enters the cgroup before it runs, with the chart's
	// environment and none of this process's Go settings.
	script := "#!/bin/sh\necho $$ > " + e.cg.ProcsFile() + " || exit 1\nexec env -u GOMEMLIMIT -u GOGC -u GODEBUG " +
		shellQuote(e.envVars...) + " " + shellQuote(bin) + ` "$@"` + "\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	metricsPort, err := freeport.Get()
	if err != nil {
		t.Fatal(err)
	}
	e.metricsURL = "http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics"
	e.api, err = apiserver.StartAPIServer(ctx, apiserver.APIServerOptions{
		ReleaseNamespace: releaseNS, Dir: dir, WebhookBinary: wrapper,
		// The chart's flags, then the metrics address this report scrapes.
		WebhookArgs: append(slices.Clone(e.args), "--metrics-bind-address=127.0.0.1:"+strconv.Itoa(metricsPort)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.api.Stop(); err != nil {
			t.Error(err)
		}
	})
	e.webhookAddr = strings.TrimPrefix(e.api.WebhookURL, "https://")
	e.pid = e.api.Webhook.PID()
	e.rest = rest.CopyConfig(e.api.Config)
	e.rest.QPS, e.rest.Burst = 5000, 5000
	e.rest.Timeout = time.Minute
	// The dense bodies are JSON, as kubectl sends them.
	e.rest.ContentType = "application/json"
	if e.kube, err = kubernetes.NewForConfig(e.rest); err != nil {
		t.Fatal(err)
	}
	if err := e.setUp(ctx); err != nil {
		t.Fatal(err)
	}
	// Stopped before the API server and the webhook are (Cleanup runs
	// last in, first out): the sampler would restart a webhook it saw
	// exit.
	sctx, stopSampling := context.WithCancel(ctx)
	var sampling sync.WaitGroup
	sampling.Add(2)
	go func() { defer sampling.Done(); e.sample(sctx) }()
	go func() { defer sampling.Done(); e.sampleHeap(sctx) }()
	t.Cleanup(func() { stopSampling(); sampling.Wait() })
	e.trickle = startTrickle(ctx, e.kube, trickleNS)
	t.Cleanup(e.trickle.stop)
	e.settle(ctx, 0, 30*time.Second)
	e.baseline = e.cg.Anon()
	return e
}

// The flags the report sets itself: where the webhook listens, its
// certificate, its namespace and its shutdown ((*apiserver.APIServer).StartWebhook),
// and the self-managed certificate's, which the API server's serving
// certificate replaces here. Every other flag is the chart's.
var connectingFlags = []string{
	"--port", "--health-probe-bind-address", "--metrics-bind-address", "--cert-dir", "--namespace",
	"--shutdown-delay", "--drain-timeout",
	"--cert-mode", "--cert-secret-name", "--service-name", "--mutating-webhook-configuration", "--validating-webhook-configuration",
}

// localArgs are the chart's arguments less connectingFlags.
func localArgs(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		name, _, ok := strings.Cut(a, "=")
		if !ok || !strings.HasPrefix(name, "--") {
			return nil, fmt.Errorf("chart argument %q is not --flag=value", a)
		}
		if !slices.Contains(connectingFlags, name) {
			out = append(out, a)
		}
	}
	return out, nil
}

// webhookPID is the running webhook's process id.
func (e *env) webhookPID() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pid
}

// sample records the most anonymous memory of the cgroup and the most
// RSS of the webhook every 10ms, and restarts the webhook when it died
// (as the kubelet would), noting why.
func (e *env) sample(ctx context.Context) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if a := e.cg.Anon(); a > e.peakAnon.Load() {
			e.peakAnon.Store(a)
		}
		if r := procStatus(e.webhookPID(), "VmRSS"); r > e.peakRSS.Load() {
			e.peakRSS.Store(r)
		}
		if err := e.api.Webhook.Exited(); err != nil {
			e.restart(ctx, err)
		}
	}
}

// sampleHeap records the most Go heap in use every second.
func (e *env) sampleHeap(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if c, err := e.scrape(ctx); err == nil && int64(c.heap) > e.peakHeap.Load() {
			e.peakHeap.Store(int64(c.heap))
		}
	}
}

// settle waits until the cgroup's anonymous memory is under below (0:
// until it stops falling, a MiB in 5s), at most max.
func (e *env) settle(ctx context.Context, below int64, maxWait time.Duration) {
	deadline := time.Now().Add(maxWait)
	last := e.cg.Anon()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(5 * time.Second)
		now := e.cg.Anon()
		if (below > 0 && now < below) || (below == 0 && last-now < 1<<20) {
			return
		}
		last = now
	}
}

func (e *env) restart(ctx context.Context, why error) {
	e.mu.Lock()
	e.restarts = append(e.restarts, fmt.Sprintf("%v (cgroup oom_kill %d)", why, e.cg.OOMKills()))
	e.mu.Unlock()
	if err := e.api.Webhook.Start(); err != nil {
		e.mu.Lock()
		e.restarts = append(e.restarts, "restarting: "+err.Error())
		e.mu.Unlock()
		return
	}
	e.mu.Lock()
	e.pid = e.api.Webhook.PID()
	e.mu.Unlock()
	_ = e.api.WaitMutating(ctx, time.Minute)
}

func (e *env) restartCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.restarts)
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// machine says what the report ran on.
func machine() string {
	var uts []string
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		uts = append(uts, "Linux "+strings.TrimSpace(string(b)))
	}
	mem := procMeminfo("MemTotal")
	return fmt.Sprintf("%s, %d CPUs, %.0f GiB, %s", strings.Join(uts, ""), runtime.NumCPU(), float64(mem)/(1<<30), runtime.Version())
}

func procMeminfo(field string) int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, _ := strings.Cut(line, ":"); k == field {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// shellQuote quotes each word for sh.
func shellQuote(words ...string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
