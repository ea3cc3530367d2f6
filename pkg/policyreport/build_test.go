package policyreport

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/manifest"
	"github.com/graceguard/graceguard/pkg/mutate"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// deployment is a Deployment "web" in namespace shop whose template holds
// the given containers (YAML), with annotations.
func deployment(annotations, containers string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, uid: 0f6ad2c4-8b0e-4b6e-9d55-7b1f0e0c1a2b}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      annotations: {` + annotations + `}
    spec:
      terminationGracePeriodSeconds: 30
      os: {name: linux}
      containers:
` + containers
}

// A container run through sh -c (a warning), serving a port without a
// readiness probe (another); with badAnnotation, a denial.
const badContainer = `      - name: app
        image: registry.example/web:1
        command: ["sh", "-c", "/web --port=8080"]
        ports: [{containerPort: 8080}]
        lifecycle: {stopSignal: SIGKILL}
`

const badAnnotation = ``

const goodContainer = `      - name: app
        image: registry.example/web:1
        ports: [{containerPort: 8080}]
        readinessProbe: {httpGet: {path: /readyz, port: 8080}}
`

func ns(mode mutate.Mode) mutate.Namespace {
	labels := map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}
	if mode != "" {
		labels[mutate.LabelMode] = string(mode)
	}
	return mutate.Namespace{Name: "shop", Labels: labels}
}

// input evaluates one object as check does (manifest.Process).
func input(t *testing.T, doc string, n mutate.Namespace) Input {
	t.Helper()
	docs, err := manifest.Read(strings.NewReader(doc), "test.yaml")
	if err != nil || len(docs) != 1 {
		t.Fatalf("reading %d documents: %v", len(docs), err)
	}
	var meta struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(docs[0].Raw, &meta); err != nil {
		t.Fatal(err)
	}
	res, err := manifest.Process(docs[0], n, mutate.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	d := docs[0]
	return Input{Workload: Workload{APIVersion: d.APIVersion, Kind: d.Kind, Namespace: d.Namespace, Name: d.Name, UID: meta.Metadata.UID},
		Mutation: res.Mutation, Validation: res.Validation}
}

type seen struct {
	rule, result, severity, message string
}

func of(r *openreports.Report, result openreports.Result) []seen {
	var out []seen
	for _, res := range r.Results {
		if res.Result == result {
			out = append(out, seen{res.Rule, string(res.Result), string(res.Severity), res.Description})
		}
	}
	return out
}

func TestResultsAreWhatCheckSays(t *testing.T) {
	kill := `spec.template.spec.containers[0].lifecycle.stopSignal: Invalid value: "SIGKILL": container "app" gets SIGKILL, which no process can catch: it dies at once, its admitted work lost; remove it or use a signal the app drains on (SIGTERM, SIGINT, SIGQUIT)`
	shell := "spec.template.spec.containers[0].command: shell form may not forward SIGTERM; use exec form or exec in the script"
	ready := "spec.template.spec.containers[0].readinessProbe: serving container has none; set graceguard.io/readiness-path"
	for _, tc := range []struct {
		name       string
		mode       mutate.Mode
		fail, warn []seen
	}{
		{name: "enforce: a stop signal that kills is a fail with check's message; the advice is warns", mode: mutate.ModeEnforce,
			fail: []seen{{"stop-signal-kills", "fail", "high", kill}},
			warn: []seen{{"shell-form-command", "warn", "medium", shell}, {"no-readiness-probe", "warn", "medium", ready}}},
		{name: "warn mode: what enforce mode would deny is a warn of high severity, what it would set one of low, in check's words", mode: mutate.ModeWarn,
			warn: []seen{{"shell-form-command", "warn", "medium", shell}, {"no-readiness-probe", "warn", "medium", ready},
				{"prestop-added", "warn", "low", "enforce would set spec.template.spec.containers[0].lifecycle.preStop: sleep 5s"},
				{"stop-signal-kills", "warn", "high", "enforce would deny: " + kill}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := input(t, deployment(badAnnotation, badContainer), ns(tc.mode))
			r := Build(in, DefaultBounds(), now)
			if got := of(r, resultFail); !slices.Equal(got, tc.fail) {
				t.Errorf("fails:\n%q\nwant\n%q", got, tc.fail)
			}
			if got := of(r, resultWarn); !slices.Equal(got, tc.warn) {
				t.Errorf("warns:\n%q\nwant\n%q", got, tc.warn)
			}
			// Every other rule passes, once.
			var passed []mutate.Reason
			for _, p := range of(r, resultPass) {
				passed = append(passed, mutate.Reason(p.rule))
			}
			want := slices.DeleteFunc(Rules(), func(r mutate.Reason) bool {
				return r == mutate.DenyStopSignalKills || r == mutate.WarnShellForm || r == mutate.WarnNoReadiness
			})
			if !slices.Equal(passed, want) {
				t.Errorf("passes %v, want %v", passed, want)
			}
			if s := r.Summary; s.Fail != len(tc.fail) || s.Warn != len(tc.warn) || s.Pass != len(want) || s.Error != 0 {
				t.Errorf("summary %+v", s)
			}
			for _, res := range r.Results {
				if res.Source != Source || res.Policy != Policy || res.Category != CategoryAdmission || res.Timestamp.Seconds != now.Unix() ||
					res.Properties["mode"] != string(tc.mode) {
					t.Errorf("result %+v: want source and policy graceguard, category admission, the mode and time", res)
				}
			}
		})
	}
}

func TestAReportNamesAndIsOwnedByItsWorkload(t *testing.T) {
	r := Build(input(t, deployment("", goodContainer), ns("")), DefaultBounds(), now)
	if r.Name != "graceguard-deployment-web" || r.Namespace != "shop" || r.Labels[LabelManagedBy] != "graceguard" || r.Source != "graceguard" {
		t.Errorf("report %s/%s, labels %v, source %q", r.Namespace, r.Name, r.Labels, r.Source)
	}
	if s := r.Scope; s == nil || s.APIVersion != "apps/v1" || s.Kind != "Deployment" || s.Name != "web" || s.Namespace != "shop" || s.UID == "" {
		t.Errorf("scope %+v", s)
	}
	if o := r.OwnerReferences; len(o) != 1 || o[0].Kind != "Deployment" || o[0].Name != "web" || o[0].UID != r.Scope.UID || o[0].Controller != nil {
		t.Errorf("owner references %+v: want the workload, not as controller", o)
	}
	if s := r.Summary; s.Pass != len(Rules()) || s.Fail+s.Warn+s.Error+s.Skip != 0 || len(r.Results) != len(Rules()) {
		t.Errorf("a clean workload: summary %+v, %d results; want a pass per rule (%d)", s, len(r.Results), len(Rules()))
	}
	long := strings.Repeat("w", 253)
	if n := Name("Deployment", long); len(n) > 253 || n == Name("Deployment", long[:252]+"x") {
		t.Errorf("a name at Kubernetes' limit: %q (%d bytes)", n, len(n))
	}
	in := Input{Workload: Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}}
	if r := Build(in, DefaultBounds(), now); len(r.OwnerReferences) != 0 {
		t.Errorf("no UID, yet owner references %+v", r.OwnerReferences)
	}
}

func TestManyFindingsAreBounded(t *testing.T) {
	// 40 containers, each with two warnings: 80 warns, over 50 results.
	var cs strings.Builder
	for i := range 40 {
		fmt.Fprintf(&cs, "      - {name: c%d, image: x, command: [sh, -c, run], ports: [{containerPort: %d}]}\n", i, 8000+i)
	}
	in := input(t, deployment(`graceguard.io/containers: "`+names(40)+`"`, cs.String()), ns(mutate.ModeEnforce))
	denials, warnings := mutate.Findings(in.Mutation, in.Validation)
	all := Build(in, Bounds{MaxResults: 200, MaxMessageLength: 2048}, now)
	r := Build(in, Bounds{MaxResults: 10, MaxMessageLength: 2048}, now)
	if len(r.Results) != 10 {
		t.Fatalf("%d results, want the bound 10", len(r.Results))
	}
	if got, want := r.Annotations[AnnotationUnlisted], fmt.Sprint(len(all.Results)-10); got != want {
		t.Errorf("unlisted annotation %q, want %s", got, want)
	}
	if r.Summary != all.Summary || r.Summary.Fail != len(denials) || r.Summary.Warn != len(warnings) {
		t.Errorf("summary %+v: want every result counted, listed or not (%+v; %d denials, %d warnings)", r.Summary, all.Summary, len(denials), len(warnings))
	}
	// Fails are kept first, then warns: passes are the first left out.
	for i, res := range r.Results {
		if want := all.Results[i]; res.Rule != want.Rule || res.Description != want.Description {
			t.Errorf("result %d is %s %q, want the first ones of the whole list, %s %q", i, res.Rule, res.Description, want.Rule, want.Description)
		}
		if i > 0 && rank(res.Result) < rank(r.Results[i-1].Result) {
			t.Errorf("result %d (%s) after a %s", i, res.Result, r.Results[i-1].Result)
		}
	}
	if len(denials) == 0 || r.Results[0].Result != resultFail {
		t.Errorf("the first result %+v, want a fail (%d denials)", r.Results[0], len(denials))
	}
	if _, ok := all.Annotations[AnnotationUnlisted]; ok {
		t.Errorf("every result listed, yet the annotation says %q", all.Annotations[AnnotationUnlisted])
	}
}

func names(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("c%d", i)
	}
	return strings.Join(s, ",")
}

func rank(r openreports.Result) int {
	return slices.Index([]openreports.Result{resultFail, resultWarn, resultError, resultPass, resultSkip}, r)
}

func TestALongMessageIsCutWithAMarker(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 64, "short"},
		{strings.Repeat("a", 64), 64, strings.Repeat("a", 64)},
		{strings.Repeat("a", 100), 64, strings.Repeat("a", 41) + "...[cut from 100 bytes]"},
		// Never inside a character: é is 2 bytes.
		{strings.Repeat("é", 50), 64, strings.Repeat("é", 20) + "...[cut from 100 bytes]"},
		{strings.Repeat("é", 50), 65, strings.Repeat("é", 21) + "...[cut from 100 bytes]"},
	} {
		if got := cut(tc.in, tc.n); got != tc.want || len(got) > tc.n {
			t.Errorf("cut(%d bytes, %d) = %q (%d bytes), want %q", len(tc.in), tc.n, got, len(got), tc.want)
		}
	}
	// Through Build: an error of 5000 bytes at the smallest bound.
	r := Build(Input{Workload: Workload{Kind: "Deployment", Name: "web"}, Err: errors.New(strings.Repeat("x", 5000))}, Bounds{MaxResults: 1, MaxMessageLength: 1}, now)
	if m := r.Results[0].Description; len(m) != 64 || !strings.HasSuffix(m, "...[cut from 5000 bytes]") {
		t.Errorf("a bound under the least (64) is the least: %q (%d bytes)", m, len(m))
	}
}

func TestAnObjectThatCannotBeEvaluatedIsAnError(t *testing.T) {
	r := Build(Input{Workload: Workload{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
		Err: errors.New("decoding Deployment web: json: cannot unmarshal string into Go struct field")}, DefaultBounds(), now)
	if len(r.Results) != 1 || r.Results[0].Result != resultError || r.Results[0].Rule != string(RuleNotEvaluated) ||
		!strings.Contains(r.Results[0].Description, "cannot unmarshal") || r.Summary.Error != 1 {
		t.Errorf("results %+v, summary %+v", r.Results, r.Summary)
	}
}

func TestObservedShutdownsAreResults(t *testing.T) {
	in := input(t, deployment("", goodContainer), ns(""))
	sample := func(pod string, outcome v1alpha1.Outcome, hookFailed bool) v1alpha1.Sample {
		return v1alpha1.Sample{Pod: pod, Container: "app", Outcome: outcome, HookFailed: hookFailed, GraceSeconds: 45, PreStopSeconds: 5,
			DrainSeconds: 40, Budget: "routing=5s work=30s cleanup=5s margin=5s grace=45s"}
	}
	in.Observed = Observe(in.Workload, &v1alpha1.ShutdownReportStatus{
		Samples:        []v1alpha1.Sample{sample("web-1", v1alpha1.OutcomeExited, false), sample("web-2", v1alpha1.OutcomeKilled, false), sample("web-3", v1alpha1.OutcomeExited, false)},
		Recommendation: &v1alpha1.Recommendation{MaxWork: "1m20s"},
	})
	r := Build(in, DefaultBounds(), now)
	want := []seen{{string(RuleKilled), "fail", "high", "In the last 3 shutdowns observed: 1 Pod SIGKILLed at the end of 45s grace after draining 40s (web-2 container app); " +
		"budget routing=5s work=30s cleanup=5s margin=5s grace=45s; recommended max-work 1m20s: kubectl graceguard recommend -n shop"}}
	if got := of(r, resultFail); !slices.Equal(got, want) {
		t.Errorf("fails:\n%q\nwant\n%q", got, want)
	}
	if res := r.Results[0]; res.Category != CategoryObserved || res.Properties["shutdownReport"] != "deployment-web" || res.Properties["samples"] != "3" || res.Properties["matching"] != "1" {
		t.Errorf("the kill's result %+v", res)
	}
	var hook *openreports.ReportResult
	for i, res := range r.Results {
		if res.Rule == string(RuleHookFailed) {
			hook = &r.Results[i]
		}
	}
	if hook == nil || hook.Result != resultPass || hook.Description != "none of the last 3 shutdowns observed had a preStop hook fail" {
		t.Errorf("no failed hook: %+v, want a pass saying so", hook)
	}

	failed := &v1alpha1.ShutdownReportStatus{Samples: []v1alpha1.Sample{sample("web-4", v1alpha1.OutcomeExited, true)}}
	in.Observed = Observe(in.Workload, failed)
	r = Build(in, DefaultBounds(), now)
	want = []seen{{string(RuleHookFailed), "fail", "high", "In the last shutdown observed: preStop hook failed in 1 Pod (web-4 container app): SIGTERM came at once, before the routing delay; " +
		"budget routing=5s work=30s cleanup=5s margin=5s grace=45s; fix the hook (graceguard.io/prestop: sleep needs no binary in the image): kubectl graceguard recommend -n shop"}}
	if got := of(r, resultFail); !slices.Equal(got, want) {
		t.Errorf("fails:\n%q\nwant\n%q", got, want)
	}
	// Evidence is kept before predictions when the bound bites.
	r = Build(input(t, deployment(badAnnotation, badContainer), ns("")), Bounds{MaxResults: 1}, now)
	if r.Results[0].Category != CategoryAdmission {
		t.Fatalf("without evidence the first result is %+v", r.Results[0])
	}
	bad := input(t, deployment(badAnnotation, badContainer), ns(""))
	bad.Observed = in.Observed
	if r = Build(bad, Bounds{MaxResults: 1}, now); r.Results[0].Rule != string(RuleHookFailed) {
		t.Errorf("with one result to keep, %+v; want the failed hook observed", r.Results[0])
	}
	if in.Observed = Observe(in.Workload, &v1alpha1.ShutdownReportStatus{}); in.Observed != nil {
		t.Errorf("a report without samples observes %+v", in.Observed)
	}
	for _, res := range Build(in, DefaultBounds(), now).Results {
		if res.Category == CategoryObserved {
			t.Errorf("no sample, yet %+v", res)
		}
	}
}

func TestTheDigestChangesWithWhatTheReportSaysOnly(t *testing.T) {
	good, bad := input(t, deployment("", goodContainer), ns("")), input(t, deployment(badAnnotation, badContainer), ns(""))
	a, b := Build(good, DefaultBounds(), now), Build(good, DefaultBounds(), now.Add(time.Hour))
	if a.Annotations[AnnotationDigest] != b.Annotations[AnnotationDigest] || len(a.Annotations[AnnotationDigest]) != 16 {
		t.Errorf("the same findings an hour later: digests %q and %q", a.Annotations[AnnotationDigest], b.Annotations[AnnotationDigest])
	}
	if c := Build(bad, DefaultBounds(), now); c.Annotations[AnnotationDigest] == a.Annotations[AnnotationDigest] {
		t.Error("other findings, the same digest")
	}
	warn := input(t, deployment(badAnnotation, badContainer), ns(mutate.ModeWarn))
	if c, d := Build(bad, DefaultBounds(), now), Build(warn, DefaultBounds(), now); c.Annotations[AnnotationDigest] == d.Annotations[AnnotationDigest] {
		t.Error("enforce and warn mode, the same digest")
	}
}

func TestPolicyReportIsTheReportInV1alpha2(t *testing.T) {
	r := Build(input(t, deployment(badAnnotation, badContainer), ns("")), DefaultBounds(), now)
	for _, tc := range []struct {
		kind       Kind
		apiVersion string
		kindName   string
		source     bool
	}{
		{OpenReports, "openreports.io/v1alpha1", "Report", true},
		{PolicyReport, "wgpolicyk8s.io/v1alpha2", "PolicyReport", false},
	} {
		u, err := Object(tc.kind, r)
		if err != nil {
			t.Fatal(err)
		}
		if u.GetAPIVersion() != tc.apiVersion || u.GetKind() != tc.kindName || u.GetName() != r.Name {
			t.Errorf("%s: %s %s %s", tc.kind, u.GetAPIVersion(), u.GetKind(), u.GetName())
		}
		if _, ok := u.Object["source"]; ok != tc.source {
			t.Errorf("%s: top-level source present %v, want %v (v1alpha2 has none: kubectl apply would refuse it)", tc.kind, ok, tc.source)
		}
		if _, ok := u.Object["metadata"].(map[string]any)["creationTimestamp"]; ok {
			t.Errorf("%s: metadata.creationTimestamp: null printed", tc.kind)
		}
		results, _ := u.Object["results"].([]any)
		if len(results) != len(r.Results) || results[0].(map[string]any)["message"] != r.Results[0].Description {
			t.Errorf("%s: results differ from the report's", tc.kind)
		}
	}
	if _, err := ParseKind("policyreports"); err == nil || err.Error() != `unknown report kind "policyreports": want openreports or policyreport` {
		t.Errorf("ParseKind: %v", err)
	}
}

// TestTheLargestReportIsBounded: at the largest bounds, every message at
// its bound and every name at Kubernetes' limit, a report stays far under
// the API server's 1.5 MiB request limit.
func TestTheLargestReportIsBounded(t *testing.T) {
	b := Bounds{MaxResults: int(flags.ReportsMaxResults.Max), MaxMessageLength: int(flags.ReportsMaxMessageLength.Max)}
	long := strings.Repeat("x", 10000)
	var violations []mutate.Finding
	for range b.MaxResults {
		violations = append(violations, mutate.Finding{Reason: mutate.DenyTooLarge, Err: field.Invalid(field.NewPath(long), long, long)})
	}
	v := &mutate.Report{Stage: mutate.StageValidate, Mode: mutate.ModeEnforce, Violations: violations}
	in := Input{Workload: Workload{APIVersion: strings.Repeat("g", 253) + "/" + strings.Repeat("v", 63), Kind: strings.Repeat("K", 63),
		Namespace: strings.Repeat("n", 63), Name: strings.Repeat("w", 253), UID: "0f6ad2c4-8b0e-4b6e-9d55-7b1f0e0c1a2b"},
		Mutation: &mutate.Report{Stage: mutate.StageMutate, Mode: mutate.ModeEnforce}, Validation: v}
	for _, k := range Kinds {
		u, err := Object(k, Build(in, b, now))
		if err != nil {
			t.Fatal(err)
		}
		out, err := yaml.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("the largest %s: %d bytes of YAML", k, len(out))
		if len(out) > 600<<10 {
			t.Errorf("the largest %s has %d bytes, more than 600 KiB", k, len(out))
		}
	}
}
