package cli

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
)

// streamDoc is one document of a generated stream: a Deployment of about
// 1 KB, written as people write them (comments, a probe, a shell command),
// in a namespace the stream defines only at its end, so the decision of
// every document depends on the last one.
const streamDoc = `# web tier %[1]d: rolled out by the release pipeline
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web-%[1]d
  namespace: shop
  labels:
    app: web-%[1]d
    # team: payments
spec:
  replicas: 3
  selector:
    matchLabels:
      app: web-%[1]d
  template:
    metadata:
      labels:
        app: web-%[1]d
      annotations:
        graceguard.io/max-work: 20s
    spec:
      containers:
      - name: app
        image: registry.example/web:1.%[1]d
        command: ["sh", "-c", "exec /web --port=8080"]
        ports:
        - containerPort: 8080
          name: http
        readinessProbe:
          httpGet:
            path: /healthz
            port: http
          periodSeconds: 5
        resources:
          requests:
            cpu: 100m
            memory: 128Mi
          limits:
            memory: 256Mi
        env:
        - name: MODE
          value: production
        # - name: DEBUG
        #   value: "1"
      - name: log-shipper
        image: registry.example/shipper:2.%[1]d
        args: ["--from", "/var/log/web", "--to", "collector.example:4317"]
`

// streamTail defines the namespace every document is in, opted in.
const streamTail = `apiVersion: v1
kind: Namespace
metadata:
  name: shop
  labels:
    graceguard.io/inject: enabled
`

// streamPad is a ConfigMap whose data, a block scalar, makes it as long
// as one likes: cheap to read, so a stream of them is long without being
// slow to check.
const streamPad = `apiVersion: v1
kind: ConfigMap
metadata:
  name: assets-%[1]d
  namespace: shop
data:
  index.html: |
%[2]s`

// writeStream writes a multi-document stream of at least size bytes:
// Deployments (streamDoc), each followed by a ConfigMap of padKB
// kilobytes when padKB > 0, and last the Namespace they are all in. It
// returns its largest document's length.
func writeStream(w io.Writer, size, padKB int) (int, error) {
	bw := bufio.NewWriter(w)
	line := "    <p>" + strings.Repeat("graceguard ", 9) + "</p>\n" // 1 KB in 10 lines
	pad := strings.Repeat(line, 10*padKB)
	largest, n := len(streamTail), 0
	for i := 0; n < size; i++ {
		docs := []string{fmt.Sprintf(streamDoc, i)}
		if padKB > 0 {
			docs = append(docs, fmt.Sprintf(streamPad, i, pad))
		}
		for _, doc := range docs {
			largest = max(largest, len(doc))
			k, err := fmt.Fprintf(bw, "%s---\n", doc)
			if err != nil {
				return 0, err
			}
			n += k
		}
	}
	if _, err := bw.WriteString(streamTail); err != nil {
		return 0, err
	}
	return largest, bw.Flush()
}

// streamFile writes a generated stream (writeStream) to a file.
func streamFile(tb testing.TB, size, padKB int) (path string, largest int) {
	tb.Helper()
	path = filepath.Join(tb.TempDir(), fmt.Sprintf("stream-%dMiB.yaml", size>>20))
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if largest, err = writeStream(f, size, padKB); err != nil {
		tb.Fatal(err)
	}
	return path, largest
}

// peakLiveHeap runs f and returns the largest live heap any garbage
// collection found while it ran, minus the live heap before: what f holds
// at its peak, whatever the GC's pacing. GOGC is lowered meanwhile so
// collections come often (every 25% of growth) and the peak is not missed
// by more than that.
func peakLiveHeap(f func()) uint64 {
	old := debug.SetGCPercent(25)
	defer debug.SetGCPercent(old)
	runtime.GC()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	live := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	base := live()
	var mu sync.Mutex
	peak, done := base, false
	// A finalizer runs after each collection that finds its object
	// unreachable; it re-arms itself, so every cycle is sampled.
	type sentinel struct{ _ [64]byte }
	var arm func()
	arm = func() {
		runtime.SetFinalizer(new(sentinel), func(*sentinel) {
			mu.Lock()
			defer mu.Unlock()
			peak = max(peak, live())
			if !done {
				arm()
			}
		})
	}
	arm()
	f()
	runtime.GC()
	mu.Lock()
	done = true
	peak = max(peak, live())
	mu.Unlock()
	return peak - base
}

// runDiscarding runs the plugin with stdout and stderr thrown away and
// returns its exit code.
func runDiscarding(args ...string) int {
	return Execute(args, strings.NewReader(""), io.Discard, io.Discard)
}

// BenchmarkStream measures what check, mutate and explain hold at their
// peak and allocate in all for a 16 MiB stream of 1 KB documents, per
// byte of input:
//
//	go test ./pkg/cli -run '^$' -bench Stream -benchtime 1x
func BenchmarkStream(b *testing.B) {
	const size = 16 << 20
	path, _ := streamFile(b, size, 0)
	info, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	for _, args := range [][]string{
		{"check", "-f", path},
		{"check", "-f", path, "-o", "json"},
		{"check", "-f", path, "-o", "sarif"},
		{"mutate", "-f", path},
		{"mutate", "-f", path, "-o", "json"},
		{"explain", "-f", path},
	} {
		b.Run(strings.Join(append([]string{args[0]}, args[3:]...), "_"), func(b *testing.B) {
			var peak uint64
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for b.Loop() {
				peak = max(peak, peakLiveHeap(func() {
					if code := runDiscarding(args...); code > ExitFindings {
						b.Fatalf("exit %d", code)
					}
				}))
			}
			runtime.ReadMemStats(&after)
			in := float64(info.Size())
			b.ReportMetric(float64(peak)/in, "peak-heap/input-byte")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/in/float64(b.N), "alloc/input-byte")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		})
	}
}

// The plugin reads, decides and writes one document at a time: what it
// holds at its peak follows the largest document, not the stream. Here an
// 8 MiB stream of 1 KB Deployments, each followed by a 32 KB ConfigMap,
// and last the Namespace they are in (so every decision depends on the
// end of the stream). Held whole, its text alone is 8 MiB, and the plugin
// once held some times that; read document by document, what it keeps
// is a few documents and its own tables, whatever the stream's length.
func TestMemoryFollowsTheLargestDocumentNotTheStream(t *testing.T) {
	if testing.Short() {
		t.Skip("reads an 8 MiB stream five times")
	}
	const size = 8 << 20
	path, largest := streamFile(t, size, 32)
	// Generous: a document's parse trees and decisions take some tens of
	// times its text; the plugin's own tables some MiB.
	limit := uint64(4<<20 + 64*largest)
	if limit >= size {
		t.Fatalf("the limit, %d bytes, would not tell a stream held whole from one read document by document", limit)
	}
	for _, tc := range []struct {
		args  []string
		stdin bool
	}{
		{[]string{"check", "-f", path}, false},
		{[]string{"check", "-f", "-", "-o", "sarif"}, true},
		{[]string{"check", "-f", path, "-o", "json"}, false},
		{[]string{"mutate", "-f", path}, false},
		{[]string{"mutate", "-f", "-", "-o", "json"}, true},
	} {
		name := strings.Join(tc.args, " ")
		var code int
		peak := peakLiveHeap(func() {
			var stdin io.Reader = strings.NewReader("")
			if tc.stdin {
				f, err := os.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				stdin = f
			}
			code = Execute(tc.args, stdin, io.Discard, io.Discard)
		})
		if code != ExitOK {
			t.Errorf("%s: exit %d", name, code)
		}
		if peak > limit {
			t.Errorf("%s: the live heap peaked at %.1f MiB for a %d MiB stream whose largest document is %d bytes; want at most %.1f MiB (4 MiB + 64 x the largest document)",
				name, float64(peak)/(1<<20), size>>20, largest, float64(limit)/(1<<20))
		} else {
			t.Logf("%s: peak live heap %.1f MiB", name, float64(peak)/(1<<20))
		}
	}
}
