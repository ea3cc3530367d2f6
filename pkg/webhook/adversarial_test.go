package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// Bounds every answer in the adversarial corpus keeps, whatever the input
// (docs/security.md).
const (
	// MaxAnswerBytes bounds an AdmissionReview answer.
	maxAnswerBytes = 64 << 10
	// maxAllocBytes bounds what one review allocates, body included.
	maxAllocBytes = 16 << 20
)

// attack is one adversarial review and the answer a user must get.
type attack struct {
	name string
	path string
	body func(t testing.TB) []byte
	// The answer: allowed or not, the status code of a refusal (422 for a
	// denial, 400 for a review graceguard cannot read), substrings its
	// message must have, the number of field causes (-1: any) and of patch
	// operations (-1: any).
	allowed  bool
	code     int32
	contains []string
	causes   int
	patchOps int
	// warningsHas are substrings some warning must have.
	warningsHas []string
}

// corpus is what a user with only "create Pod" rights (or any client that
// can reach the webhook's port) can send. Every entry is answered within
// the bounds above: one finding per bad annotation with the value clipped,
// at most mutate.MaxListedViolations causes and a count of the rest.
func corpus() []attack {
	names := func(n int, f func(i int) string) string {
		out := make([]string, n)
		for i := range out {
			out[i] = f(i)
		}
		return strings.Join(out, ",")
	}
	podWith := func(ann map[string]string, containers string, grace int64) string {
		meta, _ := json.Marshal(map[string]any{"name": "web", "annotations": ann})
		return fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":%s,"spec":{"terminationGracePeriodSeconds":%d,"containers":[%s]}}`, meta, grace, containers)
	}
	manyContainers := func(n int, extra string) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"name":"c%d","image":"registry.example/app:1"%s}`, i, extra)
		}
		return b.String()
	}
	create := func(path, kind, obj string) func(testing.TB) []byte {
		return func(t testing.TB) []byte {
			return review{op: admissionv1.Create, kind: kind, group: groupOf(kind), namespace: nsEnforce, object: obj}.body(t)
		}
	}
	app := `{"name":"app","image":"registry.example/app:1"}`
	mib := strings.Repeat("a", 1<<20)
	ghosts := names(2000, func(i int) string { return fmt.Sprintf("a%d", i) })
	deep := func(depth int) string {
		return `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[` + app + `],"x":` +
			strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}}`
	}
	probePath := "/" + strings.Repeat("p", mutate.MaxProbePathLength-1)

	return []attack{
		{
			name: "2,000 container names that do not exist (11 KiB), validating: one finding, value clipped",
			path: PathValidatePod, body: create(PathValidatePod, "Pod", podWith(map[string]string{mutate.AnnotationContainers: ghosts}, app, 30)),
			code: 422, causes: 1, contains: []string{`"a0,a1,a2,a3,`, `... (10889 bytes)": longer than 4096 bytes`},
		},
		{
			name: "2,000 container names that do not exist, mutating: refused as validation would",
			path: PathMutatePod, body: create(PathMutatePod, "Pod", podWith(map[string]string{mutate.AnnotationContainers: ghosts}, app, 30)),
			code: 422, causes: 1, contains: []string{`... (10889 bytes)": longer than 4096 bytes`},
		},
		{
			name: "500 container names that do not exist (under the length bound): a few named, the rest counted",
			path: PathValidatePod, body: create(PathValidatePod, "Pod", podWith(map[string]string{mutate.AnnotationContainers: ghosts[:strings.Index(ghosts, ",a500,")]}, app, 30)),
			code: 422, causes: 1, contains: []string{`no containers named "a0", "a1", "a2", "a3", "a4" and 495 more; treatable containers: "app"`},
		},
		{
			name: "500 container names that do not exist, in a Deployment's template",
			path: PathValidateWorkloads, body: create(PathValidateWorkloads, "Deployment",
				workload("Deployment", 1, template(map[string]string{mutate.AnnotationContainers: ghosts[:strings.Index(ghosts, ",a500,")]}, ""))),
			code: 422, causes: 1, contains: []string{`spec.template.metadata.annotations[graceguard.io/containers]`, `and 495 more`},
		},
		{
			name: "800 copies of one missing name",
			path: PathValidatePod, body: create(PathValidatePod, "Pod", podWith(map[string]string{mutate.AnnotationContainers: names(800, func(int) string { return "gone" })}, app, 30)),
			code: 422, causes: 1, contains: []string{`no container named "gone"; treatable containers: "app"`},
		},
		{
			name: "a 1 MiB container list",
			path: PathValidatePod, body: create(PathValidatePod, "Pod", podWith(map[string]string{mutate.AnnotationContainers: mib}, app, 30)),
			code: 422, causes: 1, contains: []string{"(1048576 bytes)", "longer than 4096 bytes"},
		},
		{
			name: "a 1 MiB container list, mutating",
			path: PathMutatePod, body: create(PathMutatePod, "Pod", podWith(map[string]string{mutate.AnnotationContainers: mib}, app, 30)),
			code: 422, causes: 1, contains: []string{"(1048576 bytes)", "longer than 4096 bytes"},
		},
		{
			name: "a 1 MiB routing delay, a 1 MiB readiness path and a 1 MiB opt-out value: each reported",
			path: PathValidatePod, body: create(PathValidatePod, "Pod", podWith(map[string]string{
				mutate.AnnotationRoutingDelay: mib, mutate.AnnotationReadinessPath: "/" + mib, mutate.AnnotationInject: mib}, app, 30)),
			code: 422, causes: 3, contains: []string{"graceguard.io/routing-delay", "graceguard.io/readiness-path", "graceguard.io/inject"},
		},
		{
			name: "a 1 MiB annotation graceguard does not read: treated as usual",
			path: PathMutatePod, body: create(PathMutatePod, "Pod", podWith(map[string]string{"example.com/blob": mib}, app, 30)),
			allowed: true, patchOps: 3,
		},
		{
			name: "10,000 containers, mutating: refused as validation would",
			path: PathMutatePod, body: create(PathMutatePod, "Pod", podWith(nil, manyContainers(10000, ""), 30)),
			code: 422, causes: 1, contains: []string{"spec.containers: Too many: 10000: has 10000 containers; graceguard reads at most 256"},
		},
		{
			name: "10,000 containers, validating: one denial saying how many",
			path: PathValidatePod, body: create(PathValidatePod, "Pod", podWith(nil, manyContainers(10000, ""), 30)),
			code: 422, causes: 1, contains: []string{"spec.containers: Too many: 10000: has 10000 containers; graceguard reads at most 256"},
		},
		{
			name: "10,000 containers in a Deployment",
			path: PathValidateWorkloads, body: create(PathValidateWorkloads, "Deployment",
				workload("Deployment", 1, `{"spec":{"containers":[`+manyContainers(10000, "")+`]}}`)),
			code: 422, causes: 1, contains: []string{"Too many: 10000"},
		},
		{
			name: "10,000 containers each with a preStop longer than grace, opted out: the unread counted, 9 hooks listed, the rest counted",
			path: PathValidatePod, body: create(PathValidatePod, "Pod", podWith(map[string]string{mutate.AnnotationInject: "false"},
				manyContainers(10000, `,"lifecycle":{"preStop":{"sleep":{"seconds":40}}}`), 30)),
			code: 422, causes: mutate.MaxListedViolations + 1, contains: []string{"has 10000 containers", "spec.containers[9].lifecycle.preStop: Too many: 247"},
		},
		{
			name: "32 containers with probes on 256-character paths: the largest patch",
			path: PathMutatePod, body: create(PathMutatePod, "Pod", podWith(map[string]string{
				mutate.AnnotationReadinessPath: probePath, mutate.AnnotationLivenessPath: probePath, mutate.AnnotationMaxWork: "5m"},
				manyContainers(mutate.MaxTreatedContainers, `,"ports":[{"containerPort":8080}]`), 30)),
			allowed: true, patchOps: 3*mutate.MaxTreatedContainers + 3,
			warningsHas: []string{"same check as readinessProbe", "more warnings not listed"},
		},
		{
			name: "5,000 environment variables",
			path: PathMutatePod, body: create(PathMutatePod, "Pod", podWith(nil, `{"name":"app","image":"x","env":[`+
				strings.TrimSuffix(strings.Repeat(`{"name":"VAR","value":"some value"},`, 5000), ",")+`]}`, 30)),
			allowed: true, patchOps: 3,
		},
		{
			name: "3 MiB of environment variables (the API server's largest object)",
			path: PathValidatePod, body: create(PathValidatePod, "Pod", podWith(nil, `{"name":"app","image":"x","lifecycle":{"preStop":{"sleep":{"seconds":5}}},"env":[`+
				strings.TrimSuffix(strings.Repeat(`{"name":"VAR","value":"`+strings.Repeat("v", 64)+`"},`, 3<<20/84), ",")+`]}`, 30)),
			allowed: true, patchOps: 0,
		},
		{
			name: "a Deployment UPDATE of 6.5 MB (object and oldObject of 3 MiB each, the template changed)",
			path: PathValidateWorkloads, body: func(t testing.TB) []byte {
				env := func(v string) string {
					return template(nil, `"env":[`+strings.TrimSuffix(strings.Repeat(`{"name":"VAR","value":"`+strings.Repeat(v, 64)+`"},`, 3<<20/84), ",")+`]`)
				}
				return review{op: admissionv1.Update, kind: "Deployment", group: "apps", namespace: nsEnforce,
					object: workload("Deployment", 3, env("v")), oldObject: workload("Deployment", 3, env("w"))}.body(t)
			},
			allowed: true, patchOps: 0,
		},
		{
			name: "nesting 9,000 deep in a field graceguard does not read",
			path: PathMutatePod, body: create(PathMutatePod, "Pod", deep(9000)),
			allowed: true, patchOps: 3,
		},
		{
			name: "nesting 100,000 deep: refused as unreadable",
			path: PathValidatePod, body: func(t testing.TB) []byte {
				b := create(PathValidatePod, "Pod", deep(1))(t)
				return bytes.Replace(b, []byte(`"x":[]`), []byte(`"x":`+strings.Repeat("[", 100000)+strings.Repeat("]", 100000)), 1)
			},
			code: 400, contains: []string{"exceeded max depth"},
		},
		{
			name: "invalid UTF-8 in a duration and a container name",
			path: PathValidatePod, body: func(t testing.TB) []byte {
				b := create(PathValidatePod, "Pod", podWith(map[string]string{mutate.AnnotationMaxWork: "MAXWORK", mutate.AnnotationContainers: "app,NAME"}, app, 30))(t)
				b = bytes.Replace(b, []byte("MAXWORK"), []byte("5\xffs"), 1)
				return bytes.Replace(b, []byte("NAME"), []byte("\xc3\x28"), 1)
			},
			code: 422, causes: 2, contains: []string{"graceguard.io/max-work", "graceguard.io/containers", "is not valid"},
		},
		{
			name: "overflowing and odd durations, one per term: all four reported",
			path: PathValidatePod, body: create(PathValidatePod, "Pod", podWith(map[string]string{
				mutate.AnnotationRoutingDelay: "9223372036854775807s", mutate.AnnotationMaxWork: "-5s",
				mutate.AnnotationCleanup: "1e9", mutate.AnnotationSafetyMargin: "NaN"}, app, 30)),
			code: 422, causes: 4, contains: []string{`"9223372036854775807s": longer than 1h`, `"-5s": negative`, `"1e9": not a duration`, `"NaN": not a duration`},
		},
		{
			name: "non-ASCII digits",
			path: PathValidatePod, body: create(PathValidatePod, "Pod", podWith(map[string]string{mutate.AnnotationMaxWork: "٣٠s"}, app, 30)),
			code: 422, causes: 1, contains: []string{`not a duration`},
		},
		{
			name: "a preStop sleep of 9223372037 s in a grace as long: no overflow, refused",
			path: PathValidatePod, body: create(PathValidatePod, "Pod", podWith(map[string]string{mutate.AnnotationInject: "false"},
				`{"name":"app","image":"x","lifecycle":{"preStop":{"sleep":{"seconds":9223372037}}}}`, 9223372037)),
			code: 422, causes: 1, contains: []string{"sleep 9223372037s", "must be shorter than terminationGracePeriodSeconds"},
		},
		{
			name: "a preStop sleep of 9223372037 s, treated: over the cap",
			path: PathValidatePod, body: create(PathValidatePod, "Pod", podWith(nil,
				`{"name":"app","image":"x","lifecycle":{"preStop":{"sleep":{"seconds":9223372037}}}}`, 9223372037)),
			code: 422, contains: []string{"sleep 9223372037s"},
		},
		{
			name: "a Service sent to the Pod webhook",
			path: PathMutatePod, body: create(PathMutatePod, "Service", `{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"}}`),
			code: 400, contains: []string{"unsupported kind v1 Service"},
		},
		{
			name: "a Pod sent to the workload webhook",
			path: PathValidateWorkloads, body: create(PathValidateWorkloads, "Pod", podWith(nil, app, 30)),
			code: 400, contains: []string{"unsupported kind v1 Pod"},
		},
		{
			name: "an empty object",
			path: PathValidatePod, body: create(PathValidatePod, "Pod", `{}`),
			allowed: true, patchOps: 0,
		},
		{
			name: "a null object",
			path: PathMutatePod, body: create(PathMutatePod, "Pod", `null`),
			code: 400, contains: []string{"decoding Pod"},
		},
		{
			name: "a null review",
			path: PathValidatePod, body: func(testing.TB) []byte { return []byte(`null`) },
			code: 400, contains: []string{"the AdmissionReview has no request"},
		},
		{
			name: "a review without a request",
			path: PathMutatePod, body: func(testing.TB) []byte {
				return []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`)
			},
			code: 400, contains: []string{"the AdmissionReview has no request"},
		},
		{
			name: "a dry run is answered like the real request",
			path: PathValidatePod, body: func(t testing.TB) []byte {
				return review{op: admissionv1.Create, kind: "Pod", namespace: nsEnforce, dryRun: true,
					object: podWith(map[string]string{mutate.AnnotationContainers: ghosts}, app, 30)}.body(t)
			},
			code: 422, causes: 1, contains: []string{"longer than 4096 bytes"},
		},
	}
}

// operations: every operation the API server can send, on every endpoint,
// is answered (allowed, unchanged) unless graceguard acts on it.
func operationAttacks() []attack {
	var out []attack
	obj := pod("web", 30, map[string]string{mutate.AnnotationContainers: "ghost"}, "")
	for _, path := range []string{PathMutatePod, PathValidatePod} {
		for _, op := range []admissionv1.Operation{admissionv1.Update, admissionv1.Delete, admissionv1.Connect} {
			out = append(out, attack{
				name: fmt.Sprintf("Pod %s on %s passes", op, path), path: path,
				body: func(t testing.TB) []byte {
					return review{op: op, kind: "Pod", namespace: nsEnforce, object: obj, oldObject: obj}.body(t)
				},
				allowed: true, patchOps: 0,
			})
		}
	}
	out = append(out, attack{
		name: "Deployment DELETE passes", path: PathValidateWorkloads,
		body: func(t testing.TB) []byte {
			return review{op: admissionv1.Delete, kind: "Deployment", group: "apps", namespace: nsEnforce,
				oldObject: workload("Deployment", 1, template(nil, ""))}.body(t)
		},
		allowed: true, patchOps: 0,
	})
	return out
}

// outcome is one answer and what it cost.
type outcome struct {
	resp   *admissionv1.AdmissionResponse
	size   int
	alloc  uint64
	took   time.Duration
	status int
}

// serve sends body to the endpoint at path on h in this goroutine and
// measures the bytes allocated while answering it (the process's total:
// the test runs nothing else meanwhile).
func serve(t testing.TB, h http.Handler, path string, body []byte) outcome {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path+"?timeout=5s", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	h.ServeHTTP(rec, req)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	o := outcome{size: rec.Body.Len(), alloc: after.TotalAlloc - before.TotalAlloc, took: took, status: rec.Code}
	if rec.Code == http.StatusOK {
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("the answer is not an AdmissionReview: %v", err)
		}
		o.resp = out.Response
	}
	return o
}

// TestAdversarialCorpus sends every attack to the real handlers and checks
// the answer a user gets, its size and the memory it cost. Time is not
// asserted (this is a test, not a benchmark): `make security-report` runs
// it with GRACEGUARD_SECURITY_REPORT set and writes the measured times and
// allocations into docs/security.md.
func TestAdversarialCorpus(t *testing.T) {
	f := newFixture(t)
	mux := http.NewServeMux()
	for path, h := range Endpoints(Config{Options: f.opts, Namespaces: f.ns, Metrics: f.metrics}) {
		mux.Handle(path, h)
	}
	report := os.Getenv("GRACEGUARD_SECURITY_REPORT")
	runs := 3
	if report != "" {
		runs = 25
	}
	var rows []reportRow
	for _, a := range append(corpus(), operationAttacks()...) {
		t.Run(a.name, func(t *testing.T) {
			body := a.body(t)
			var worst outcome
			var times []time.Duration
			for range runs {
				o := serve(t, mux, a.path, body)
				times = append(times, o.took)
				if o.alloc > worst.alloc || worst.resp == nil {
					took := worst.took
					worst = o
					worst.took = max(took, o.took)
				}
			}
			o := worst
			if o.status != http.StatusOK || o.resp == nil {
				t.Fatalf("HTTP %d, want 200 with an AdmissionReview", o.status)
			}
			checkAnswer(t, a, o.resp)
			if o.size > maxAnswerBytes {
				t.Errorf("answer of %d bytes, over the bound of %d", o.size, maxAnswerBytes)
			}
			if o.alloc > maxAllocBytes {
				t.Errorf("allocated %.1f MiB answering, over the bound of %d MiB", float64(o.alloc)/(1<<20), maxAllocBytes>>20)
			}
			slices.Sort(times)
			rows = append(rows, reportRow{a: a, bodyBytes: len(body), o: o, p50: times[len(times)/2], p100: times[len(times)-1]})
		})
	}
	if report != "" && !t.Failed() {
		if err := writeSecurityReport(report, rows, runs); err != nil {
			t.Fatal(err)
		}
	}
}

func checkAnswer(t *testing.T, a attack, r *admissionv1.AdmissionResponse) {
	t.Helper()
	if r.Allowed != a.allowed {
		msg := ""
		if r.Result != nil {
			msg = r.Result.Message
		}
		t.Fatalf("allowed = %v (%s), want %v", r.Allowed, msg, a.allowed)
	}
	if !a.allowed {
		if r.Result == nil || r.Result.Code != a.code {
			t.Fatalf("result %+v, want code %d", r.Result, a.code)
		}
		for _, s := range a.contains {
			if !strings.Contains(r.Result.Message, s) {
				t.Errorf("message %q\nwant it to contain %q", r.Result.Message, s)
			}
		}
		if a.causes > 0 {
			if r.Result.Details == nil || len(r.Result.Details.Causes) != a.causes {
				t.Errorf("details %+v, want %d causes", r.Result.Details, a.causes)
			}
		}
	}
	if a.patchOps >= 0 && a.allowed {
		n := 0
		if len(r.Patch) > 0 {
			var ops []any
			if err := json.Unmarshal(r.Patch, &ops); err != nil {
				t.Fatal(err)
			}
			n = len(ops)
		}
		if n != a.patchOps {
			t.Errorf("%d patch operations, want %d", n, a.patchOps)
		}
	}
	for _, w := range a.warningsHas {
		if !slices.ContainsFunc(r.Warnings, func(s string) bool { return strings.Contains(s, w) }) {
			t.Errorf("warnings %q, want one containing %q", r.Warnings, w)
		}
	}
	if len(r.Warnings) > mutate.MaxListedWarnings+1 {
		t.Errorf("%d warnings, want at most %d", len(r.Warnings), mutate.MaxListedWarnings+1)
	}
}

type reportRow struct {
	a         attack
	bodyBytes int
	o         outcome
	p50, p100 time.Duration
}

// writeSecurityReport replaces the measured table in docs/security.md.
func writeSecurityReport(path string, rows []reportRow, runs int) error {
	var b strings.Builder
	load := "unknown"
	if l, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(l))[:3], " ")
	}
	fmt.Fprintf(&b, "Measured by `make security-report` (%d runs of each review, one at a time, through the real handlers; Go %s, %d CPUs, load average %s at the end of the run).\n\n",
		runs, runtime.Version(), runtime.NumCPU(), load)
	b.WriteString("| review | endpoint | request | answer | answer size | allocated (max) | p50 | p100 |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		answer := "allowed"
		if !r.o.resp.Allowed {
			answer = fmt.Sprintf("refused %d", r.o.resp.Result.Code)
		} else if len(r.o.resp.Patch) > 0 {
			answer = "allowed, patched"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %s | %.1f MiB | %s | %s |\n", r.a.name, r.a.path, size(r.bodyBytes), answer,
			size(r.o.size), float64(r.o.alloc)/(1<<20), r.p50.Round(10*time.Microsecond), r.p100.Round(10*time.Microsecond))
	}
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	const begin, end = "<!-- corpus:begin -->\n", "<!-- corpus:end -->"
	i, j := bytes.Index(doc, []byte(begin)), bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %q ... %q section", path, begin, end)
	}
	out := append(append(append([]byte{}, doc[:i+len(begin)]...), b.String()...), doc[j:]...)
	return os.WriteFile(path, out, 0o644)
}

func size(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// FuzzHandlers feeds arbitrary Pods to the three webhooks (the Pod as is
// to both Pod webhooks, its spec as a Deployment's template to the
// workload webhook) and fails on any answer that is not an AdmissionReview
// or is over the size bound. The seeds are the corpus's objects.
func FuzzHandlers(f *testing.F) {
	for _, seed := range []string{
		pod("web", 30, map[string]string{mutate.AnnotationContainers: "app,ghost,ghost,init"}, ""),
		pod("web", 9223372037, map[string]string{mutate.AnnotationInject: "false"}, `"lifecycle":{"preStop":{"sleep":{"seconds":9223372037}}}`),
		pod("web", 30, map[string]string{mutate.AnnotationRoutingDelay: "9223372036854775807s", mutate.AnnotationMaxWork: "-5s",
			mutate.AnnotationCleanup: "1e9", mutate.AnnotationSafetyMargin: "NaN", mutate.AnnotationProbePort: "٣٠"}, ""),
		pod("web", 30, map[string]string{mutate.AnnotationReadinessPath: "/r", mutate.AnnotationLivenessPath: "/r"}, `"ports":[{"name":"http","containerPort":8080}]`),
		`{"spec":{"initContainers":[{"name":"s","restartPolicy":"Always","lifecycle":{"preStop":{"exec":{"command":["sh","-c","sleep 5; sleep infinity"]}}}}],"containers":[{"name":"a"},{"name":"b"}]}}`,
		`{}`, `null`, `{"spec":{"containers":[{"name":"a","x":[[[[]]]]}]}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Add([]byte(pod("web", 30, map[string]string{mutate.AnnotationContainers: "app,ghost", mutate.AnnotationMaxWork: "1m"}, `"lifecycle":{"preStop":{"sleep":{"seconds":90}}}`)))
	fx := newFixture(f)
	mux := http.NewServeMux()
	for path, h := range Endpoints(Config{Options: fx.opts, Namespaces: fx.ns, Metrics: fx.metrics}) {
		mux.Handle(path, h)
	}
	f.Fuzz(func(t *testing.T, obj []byte) {
		if !json.Valid(obj) {
			return // the API server sends JSON
		}
		var spec struct {
			Metadata json.RawMessage `json:"metadata"`
			Spec     json.RawMessage `json:"spec"`
		}
		reviews := map[string][]byte{
			PathMutatePod:   review{op: admissionv1.Create, kind: "Pod", namespace: nsEnforce, object: string(obj)}.body(t),
			PathValidatePod: review{op: admissionv1.Create, kind: "Pod", namespace: nsEnforce, object: string(obj)}.body(t),
		}
		if json.Unmarshal(obj, &spec) == nil && len(spec.Spec) > 0 {
			tpl, _ := json.Marshal(map[string]json.RawMessage{"metadata": orNull(spec.Metadata), "spec": spec.Spec})
			reviews[PathValidateWorkloads] = review{op: admissionv1.Create, kind: "Deployment", group: "apps", namespace: nsEnforce,
				object: workload("Deployment", 1, string(tpl))}.body(t)
		}
		for path, body := range reviews {
			req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				t.Fatalf("%s: HTTP %d %s", path, rec.Code, rec.Body.Bytes())
			}
			if rec.Body.Len() > maxAnswerBytes {
				t.Fatalf("%s: answer of %d bytes, over the bound of %d", path, rec.Body.Len(), maxAnswerBytes)
			}
			var out admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
				t.Fatalf("%s: the answer is not an AdmissionReview: %v", path, err)
			}
		}
	})
}

func orNull(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage("null")
	}
	return r
}
