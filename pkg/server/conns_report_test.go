package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/graceguard/graceguard/internal/flood"
	"github.com/graceguard/graceguard/pkg/webhook"
)

// The connection report: `make conns-report` floods a real server (Run,
// over loopback TLS) with each kind of hostile connection, without caps
// and with the defaults, each in a fresh process, and writes what the
// server held into docs/security.md.
const (
	connReportEnv  = "GRACEGUARD_CONN_REPORT"  // the file to write the table into
	connMeasureEnv = "GRACEGUARD_CONN_MEASURE" // kind,capped,count: one measurement, in a child
)

// chartMemoryLimit is the chart's container memory limit; the webhook sets
// its Go memory limit to 90% of it.
const chartMemoryLimit = 128 << 20

// connMeasurement is what one flood cost the server.
type connMeasurement struct {
	Kind     floodKind `json:"kind"`
	Capped   bool      `json:"capped"`
	Count    int       `json:"count"`
	Opened   int       `json:"opened"`
	Failed   int       `json:"failed"`
	Held     int       `json:"held"`    // connections the server tracked, once opened
	Pending  int       `json:"pending"` // of which pending
	Peak     int       `json:"peak"`    // most it tracked at once
	Heap     int64     `json:"heap"`    // HeapInuse after GC, minus before the flood
	Stack    int64     `json:"stack"`   // StackInuse, minus before
	RSS      int64     `json:"rss"`     // VmRSS, minus before
	Baseline int64     `json:"baseline"`
	HWM      int64     `json:"hwm"`      // VmHWM: the process's peak RSS
	PeakAnon int64     `json:"peakAnon"` // the most RssAnon sampled during the flood
	// BaselineAnon is RssAnon before the flood.
	BaselineAnon int64 `json:"baselineAnon"`
	// BigReviews is how many clients sent 3 MiB reviews during the
	// flood, one after another; BigAnswered how many were answered.
	BigReviews  int     `json:"bigReviews"`
	BigAnswered int     `json:"bigAnswered"`
	Seconds     float64 `json:"seconds"` // how long the flood took to open
}

// measureFlood runs Run, floods it with count connections of kind and
// measures what it holds once they are all open. Uncapped, the caps are
// above count and the handshake and header timeouts long enough to hold
// them all (what the server held before it had caps); capped, the server
// runs with the defaults.
func measureFlood(t *testing.T, kind floodKind, capped bool, count int) connMeasurement {
	return measureFloodWith(t, kind, capped, count, 0)
}

// measureFloodWith is measureFlood with big reviews sent all along, from
// that many clients at once.
func measureFloodWith(t *testing.T, kind floodKind, capped bool, count, bigReviews int) connMeasurement {
	var ws *webhookServer
	observe := withObserver(func(s *webhookServer) {
		ws = s
		if !capped {
			s.timeouts.readHeader = 10 * time.Minute
			s.conns.limits.handshakeTimeout = 10 * time.Minute
		}
	})
	h := startRunWith(t, []Option{observe}, 0, 10*time.Second, 0, func(c *Config) {
		if !capped {
			c.MaxConnections, c.MaxPendingConnections = count+100, count+99
		}
	})
	m := connMeasurement{Kind: kind, Capped: capped, Count: count, BigReviews: bigReviews}
	seen := ws.conns.seenCount()
	before := memNow(t)
	m.Baseline = before.rss
	m.BaselineAnon = procStatus("RssAnon")
	stopSampling := sampleAnon(&m.PeakAnon)
	stopReviews := sendBigReviews(t, h, bigReviews, &m.BigAnswered)
	start := time.Now()
	f := startFlood(t, kind, h.webhookAddr(), count, 0)
	c := f.wait(t)
	m.Seconds = time.Since(start).Seconds()
	m.Opened, m.Failed = c.opened, c.failed
	ws.conns.waitSeen(t, seen+c.opened)
	after := memNow(t)
	m.Held, m.Pending, m.Peak = ws.conns.counts()
	m.Heap, m.Stack, m.RSS = after.heap-before.heap, after.stack-before.stack, after.rss-before.rss
	m.HWM = after.hwm
	stopReviews()
	stopSampling()
	f.stop()
	return m
}

// sendBigReviews sends 3 MiB Pod reviews (the API server's largest
// object), from n clients at once, until the returned func is called; it
// counts those answered with an AdmissionReview.
func sendBigReviews(t *testing.T, h *harness, n int, answered *int) func() {
	env := strings.TrimSuffix(strings.Repeat(`{"name":"VAR","value":"`+strings.Repeat("v", 64)+`"},`, 3<<20/84), ",")
	body := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"b","kind":{"group":"","version":"v1","kind":"Pod"},` +
		`"resource":{"group":"","version":"v1","resource":"pods"},"namespace":"shop","operation":"CREATE","userInfo":{"username":"big"},` +
		`"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"big","namespace":"shop"},"spec":{"containers":[{"name":"app","image":"x","env":[` + env + `]}]}}}}`)
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := h.client(false)
			for {
				select {
				case <-done:
					return
				default:
				}
				resp, err := c.Post("https://"+h.webhookAddr()+webhook.PathValidatePod, "application/json", bytes.NewReader(body))
				if err != nil {
					continue
				}
				var ar admissionv1.AdmissionReview
				err = json.NewDecoder(resp.Body).Decode(&ar)
				resp.Body.Close()
				if err == nil && ar.Response != nil {
					mu.Lock()
					*answered++
					mu.Unlock()
				}
			}
		}()
	}
	return func() { close(done); wg.Wait() }
}

// sampleAnon records the most anonymous memory (RssAnon: what the kernel
// cannot reclaim but by killing the process) the process holds, every 20ms
// until the returned func is called.
func sampleAnon(peak *int64) func() {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if a := procStatus("RssAnon"); a > *peak {
				*peak = a
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// procStatus is a size field of /proc/self/status, in bytes.
func procStatus(field string) int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if k, v, _ := strings.Cut(line, ":"); k == field {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

type memSample struct{ heap, stack, rss, hwm int64 }

// memNow collects garbage and samples the process's memory.
func memNow(t *testing.T) memSample {
	t.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSample{heap: int64(ms.HeapInuse), stack: int64(ms.StackInuse), rss: procStatus("VmRSS"), hwm: procStatus("VmHWM")}
}

// TestConnectionReport measures floods for docs/security.md; it runs only
// with GRACEGUARD_CONN_REPORT (the file to write) set, each measurement in a
// fresh process of its own (GRACEGUARD_CONN_MEASURE) so that peak RSS is
// that measurement's.
func TestConnectionReport(t *testing.T) {
	if spec := os.Getenv(connMeasureEnv); spec != "" {
		f := strings.Split(spec, ",")
		debug.SetMemoryLimit(chartMemoryLimit * 9 / 10)
		big := 0
		if len(f) > 3 {
			big = atoi(f[3])
		}
		m := measureFloodWith(t, floodKind(f[0]), f[1] == "capped", atoi(f[2]), big)
		b, _ := json.Marshal(m)
		fmt.Printf("measurement %s\n", b)
		return
	}
	report := os.Getenv(connReportEnv)
	if report == "" {
		return // measurements, not a test: make conns-report
	}
	var ms []connMeasurement
	for _, kind := range floodKinds {
		uncapped, capped := 3000, floodConns
		if kind == floodActive {
			// Each holds a review's slot until its deadline or is refused:
			// a slow flood, and a small one shows it.
			uncapped, capped = 1000, 1000
		}
		for _, run := range []struct {
			capped bool
			count  int
		}{{false, uncapped}, {true, capped}} {
			ms = append(ms, measureInChild(t, kind, run.capped, run.count))
			t.Logf("%+v", ms[len(ms)-1])
		}
	}
	// The worst flood and the worst reviews at once: what the caps and the
	// in-flight budget allow together.
	worst := measureInChildWith(t, floodIdleHeaders, true, floodConns, 5)
	t.Logf("%+v", worst)
	if err := writeConnReport(report, ms, worst); err != nil {
		t.Fatal(err)
	}
}

func writeConnReport(path string, ms []connMeasurement, worst connMeasurement) error {
	d := DefaultConfig()
	var b strings.Builder
	fmt.Fprintf(&b, "Measured by `make conns-report` (%s, %d CPUs, load average %s at the end): a real server (`Run`, loopback TLS, "+
		"the Go memory limit at 90%% of 128 MiB as in the chart), flooded from another process, each row in a fresh process. "+
		"Uncapped: caps above the flood and the handshake and header timeouts 10 minutes, so that every connection is held "+
		"(the byte bounds on handshakes and headers are in place). Capped: the defaults, --max-connections=%d and "+
		"--max-pending-connections=%d. Heap is HeapInuse after a GC, stack StackInuse, both minus their values before the flood; "+
		"RSS is VmRSS after the flood minus before; peak is VmHWM, the process's most resident memory (%.0f MiB before any flood, "+
		"including the test binary's code), and anon the most RssAnon sampled every 20 ms.\n\n",
		runtime.Version(), runtime.NumCPU(), loadAverage(), d.MaxConnections, d.MaxPendingConnections, mib(minBaseline(ms)))
	b.WriteString("| connections | uncapped: held | heap / conn | stack / conn | RSS / conn | peak RSS | capped: opened | held (most at once) | heap | peak RSS | peak anon |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i := 0; i+1 < len(ms); i += 2 {
		u, c := ms[i], ms[i+1]
		per := func(n int64) string {
			if u.Held == 0 {
				return "-"
			}
			return fmt.Sprintf("%.1f KB", float64(n)/float64(u.Held)/1000)
		}
		fmt.Fprintf(&b, "| %s: %s | %d of %d | %s | %s | %s | %.0f MiB | %d of %d | %d (%d) | %.1f MiB | %.0f MiB | %.0f MiB |\n",
			u.Kind, flood.Descriptions[u.Kind], u.Held, u.Count, per(u.Heap), per(u.Stack), per(u.RSS), mib(u.HWM),
			c.Opened, c.Count, c.Held, c.Peak, mib(c.Heap), mib(c.HWM), mib(c.PeakAnon))
	}
	fmt.Fprintf(&b, "\nThe worst flood with the review budget in use: %d `%s` connections, capped, while %d clients sent 3 MiB "+
		"Pod reviews one after another (%d answered; five fill 15 of the 16 MiB budget): heap after a GC +%.1f MiB (the "+
		"connections' and the reviews in flight), peak RSS %.0f MiB (code pages included), peak anon %.0f MiB (%.0f MiB before).\n",
		worst.Opened, worst.Kind, worst.BigReviews, worst.BigAnswered, mib(worst.Heap), mib(worst.HWM), mib(worst.PeakAnon), mib(worst.BaselineAnon))
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	const begin, end = "<!-- conns:begin -->\n", "<!-- conns:end -->"
	i, j := bytes.Index(doc, []byte(begin)), bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %q ... %q section", path, begin, end)
	}
	out := append(append(append([]byte{}, doc[:i+len(begin)]...), b.String()...), doc[j:]...)
	return os.WriteFile(path, out, 0o644)
}

func minBaseline(ms []connMeasurement) int64 {
	lo := ms[0].Baseline
	for _, m := range ms {
		lo = min(lo, m.Baseline)
	}
	return lo
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func measureInChild(t *testing.T, kind floodKind, capped bool, count int) connMeasurement {
	t.Helper()
	return measureInChildWith(t, kind, capped, count, 0)
}

func measureInChildWith(t *testing.T, kind floodKind, capped bool, count, bigReviews int) connMeasurement {
	t.Helper()
	mode := "uncapped"
	if capped {
		mode = "capped"
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestConnectionReport$", "-test.count=1")
	cmd.Env = append(os.Environ(), connMeasureEnv+"="+string(kind)+","+mode+","+strconv.Itoa(count)+","+strconv.Itoa(bigReviews), connReportEnv+"=")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("measuring %s %s: %v\n%s", kind, mode, err, out)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "measurement "); ok {
			var m connMeasurement
			if err := json.Unmarshal([]byte(rest), &m); err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	t.Fatalf("measuring %s %s: no measurement in\n%s", kind, mode, out)
	return connMeasurement{}
}
