package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// writeTree writes files (path -> content) under a temporary directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func fixture(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A repository as people have it: a kustomize base and an overlay patch
// without a Pod template, a kustomization.yaml without apiVersion and kind,
// a CI workflow, and a file that is not YAML at all.
func TestRecursiveCheckOfARepositoryKeepsGoing(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"deploy/base/bookinfo.yaml":                fixture(t, "../manifest/testdata/bookinfo.yaml"),
		"deploy/overlays/prod/replicas.yaml":       fixture(t, "../manifest/testdata/kustomize-patch.yaml"),
		"deploy/overlays/prod/kustomization.yaml":  "resources:\n- ../../base\npatches:\n- path: replicas.yaml\n",
		"deploy/overlays/prod/cronjob-patch.yaml":  fixture(t, "../manifest/testdata/cronjob-patch.yaml"),
		".github/workflows/ci.yaml":                "name: ci\non: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n",
		"deploy/overlays/prod/zz-broken-helm.yaml": "image: {{ .Values.image }}\n",
	})
	code, out, stderr := run(t, "", "check", "-R", "-f", dir)
	for _, w := range []string{
		"Deployment default/details-v1 [enforce]: allowed (2 changes)",
		"Deployment default/productpage-v1 [enforce]: allowed (2 changes)",
		"Deployment default/web: skipped: no Pod template (spec.template): a patch or a fragment?",
		"CronJob billing/report: skipped: no Pod template (spec.jobTemplate.spec.template)",
		"kustomization.yaml#1: skipped: not a Kubernetes object: apiVersion and kind are required",
		"ci.yaml#1: skipped: not a Kubernetes object",
		"zz-broken-helm.yaml#1: error: not valid YAML or JSON: it holds template actions",
		"10 objects: 0 denied, 3 allowed, 6 skipped, 1 not evaluated (errors above)",
		"skipped: 2 not a Kubernetes object, 2 not a Pod or workload, 2 without a Pod template",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	// Everything is reported, and a file that is not YAML still fails the run.
	if code != ExitUsage || !strings.Contains(stderr, "1 object could not be evaluated") {
		t.Errorf("exit %d, stderr %q: a broken file must fail the run after the report", code, stderr)
	}

	// Without the broken file, the same tree passes.
	if err := os.Remove(filepath.Join(dir, "deploy/overlays/prod/zz-broken-helm.yaml")); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := run(t, "", "check", "-R", "-f", dir); code != ExitOK {
		t.Errorf("exit %d:\n%s", code, out)
	}
	// mutate prints the patches as they were.
	code, out, _ = run(t, "", "mutate", "-f", "../manifest/testdata/kustomize-patch.yaml", "-f", "../manifest/testdata/cronjob-patch.yaml")
	want := fixture(t, "../manifest/testdata/kustomize-patch.yaml") + "---\n" + fixture(t, "../manifest/testdata/cronjob-patch.yaml")
	if code != ExitOK || out != want {
		t.Errorf("exit %d; patches must come back byte for byte:\n%s", code, out)
	}
}

func TestANamedFileThatIsNotAnObjectIsAnInputError(t *testing.T) {
	dir := writeTree(t, map[string]string{"values.yaml": "replicaCount: 2\n"})
	code, out, stderr := run(t, "", "check", "-f", filepath.Join(dir, "values.yaml"))
	if code != ExitUsage || out != "" || !strings.Contains(stderr, "apiVersion and kind are required") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

func TestNamespacesInTheInput(t *testing.T) {
	const nginx = "../manifest/testdata/ingress-nginx.yaml"
	t.Run("a Namespace that is not opted in skips its workloads, says so, and says how to evaluate them", func(t *testing.T) {
		code, out, _ := run(t, "", "check", "-f", nginx)
		for _, w := range []string{
			"Deployment ingress-nginx/ingress-nginx-controller: skipped: namespace ingress-nginx is not opted in (label graceguard.io/inject=enabled) [namespace-not-opted-in]; --assume-opted-in evaluates it as if it were",
			"skipped: 6 not a Pod or workload, 2 in namespace ingress-nginx not opted in (--assume-opted-in evaluates them as if it were)",
		} {
			if code != ExitOK || !strings.Contains(out, w) {
				t.Errorf("exit %d; output lacks %q:\n%s", code, w, out)
			}
		}
	})
	t.Run("--assume-opted-in evaluates them, with --mode and --namespace-annotations over the Namespace's own", func(t *testing.T) {
		code, out, stderr := run(t, "", "check", "-f", nginx, "--assume-opted-in", "--namespace-annotations", "graceguard.io/max-work=5m")
		if code != ExitOK || !strings.Contains(out, "Deployment ingress-nginx/ingress-nginx-controller [enforce]: allowed (2 changes; namespace ingress-nginx not opted in: as if it were)") ||
			strings.Contains(stderr, "note:") {
			t.Errorf("exit %d:\n%s%s", code, out, stderr)
		}
		_, out, _ = run(t, "", "mutate", "-f", nginx, "--assume-opted-in", "--namespace-annotations", "graceguard.io/max-work=5m")
		want := strings.Replace(fixture(t, nginx), "      terminationGracePeriodSeconds: 300\n", "      terminationGracePeriodSeconds: 310\n", 1)
		if _, ok := additionsOnly(want, out); !ok || !strings.Contains(out, "grace=310s") {
			t.Errorf("the controller's grace must be raised from 300 to 310 (5s + 5m + 2s + 3s):\n%s", out)
		}
	})
	t.Run("the Namespace's own annotations apply too", func(t *testing.T) {
		in := strings.Replace(fixture(t, nginx), "  name: ingress-nginx\n  labels:\n", "  name: ingress-nginx\n  annotations:\n    graceguard.io/max-work: 1m\n  labels:\n", 1)
		_, out, _ := run(t, in, "explain", "-f", "-", "--assume-opted-in")
		if !strings.Contains(out, "1m  namespace ingress-nginx annotation graceguard.io/max-work") {
			t.Errorf("output:\n%s", out)
		}
	})
	t.Run("without --assume-opted-in, flags a Namespace in the input overrides are noted", func(t *testing.T) {
		_, _, stderr := run(t, "", "check", "-f", nginx, "--mode", "warn")
		if !strings.Contains(stderr, "note: namespace ingress-nginx is defined in the input and used as written: --mode and --namespace-annotations do not apply to it (--assume-opted-in applies them over its own)") {
			t.Errorf("stderr:\n%s", stderr)
		}
	})
	t.Run("-n that applies to no object is noted", func(t *testing.T) {
		_, _, stderr := run(t, "", "check", "-f", nginx, "-n", "shop")
		if !strings.Contains(stderr, "note: -n shop applies to no object: every Pod and workload sets metadata.namespace") {
			t.Errorf("stderr:\n%s", stderr)
		}
		_, out, stderr := run(t, "", "check", "-f", "../manifest/testdata/bookinfo.yaml", "-n", "shop")
		if strings.Contains(stderr, "-n shop") || !strings.Contains(out, "Deployment shop/details-v1") {
			t.Errorf("-n names the namespace of objects that set none:\n%s%s", out, stderr)
		}
	})
	t.Run("--help says what the flag does", func(t *testing.T) {
		_, out, _ := run(t, "", "check", "--help")
		for _, w := range []string{"--assume-opted-in", "as if labelled graceguard.io/inject=enabled", "by default they are used as written"} {
			if !strings.Contains(out, w) {
				t.Errorf("help lacks %q:\n%s", w, out)
			}
		}
	})
}

func TestFindingsAreShownInFull(t *testing.T) {
	// The API server keeps 120 characters of a warning (256 of a warn-mode
	// denial); a terminal has room for all of it.
	_, out, _ := run(t, "", "check", "-f", "../manifest/testdata/legacy-versions.yaml", "--mode", "warn", "--namespace-annotations", "graceguard.io/max-work=5m")
	want := "warning: enforce would set spec.jobTemplate.spec.template.spec.terminationGracePeriodSeconds: 30 -> 310 (routing 5s + work 5m + cleanup 2s + margin 3s)\n"
	if len(want) < 130 || !strings.Contains(out, want) || strings.Contains(out, "...") {
		t.Errorf("want the whole warning %q:\n%s", want, out)
	}
	// A probe port no container declares is one finding, not also advice to
	// set the readiness path that is set.
	_, out, _ = run(t, "", "check", "-f", "../mutate/testdata/pod-probe-port-undeclared.yaml")
	if !strings.Contains(out, `warning: metadata.annotations[graceguard.io/readiness-path]: no container declares port "metrics"; no probe added`) ||
		strings.Contains(out, "set graceguard.io/readiness-path") || strings.Count(out, "warning:") != 1 {
		t.Errorf("want one coherent warning:\n%s", out)
	}
	_, out, _ = run(t, "", "check", "-f", "testdata/check.yaml", "--mode", "warn")
	if !strings.Contains(out, "shorten the hook or raise terminationGracePeriodSeconds\n") {
		t.Errorf("a warn-mode denial is cut:\n%s", out)
	}
}

func TestFailOnAndExitCodes(t *testing.T) {
	warnOnly := "../manifest/testdata/bookinfo.yaml" // allowed, with warnings
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"check", "-f", "testdata/check.yaml"}, ExitFindings},
		{[]string{"check", "-f", "testdata/check.yaml", "--fail-on", "none"}, ExitOK},
		{[]string{"check", "-f", "testdata/check.yaml", "--fail-on", "none", "-o", "json"}, ExitOK},
		{[]string{"check", "-f", warnOnly}, ExitOK},
		{[]string{"check", "-f", warnOnly, "--fail-on", "warning"}, ExitFindings},
		{[]string{"check", "-f", warnOnly, "--fail-on", "warning", "-o", "sarif"}, ExitFindings},
		{[]string{"check", "-f", "testdata/check.yaml", "--mode", "warn"}, ExitOK},
		{[]string{"check", "-f", "testdata/check.yaml", "--mode", "warn", "--fail-on", "warning"}, ExitFindings},
		{[]string{"check", "-f", "../manifest/testdata/kustomize-patch.yaml", "--fail-on", "warning"}, ExitOK},
		{[]string{"check", "-f", warnOnly, "--fail-on", "warnings"}, ExitUsage},
		{[]string{"check", "-f", warnOnly, "-o", "xml"}, ExitUsage},
	} {
		if code, out, stderr := run(t, "", tc.args...); code != tc.want {
			t.Errorf("%v: exit %d, want %d\n%s%s", tc.args, code, tc.want, out, stderr)
		}
	}
}

func TestJSONReport(t *testing.T) {
	code, out, _ := run(t, "", "check", "-f", "../manifest/testdata/ingress-nginx.yaml", "-f", "testdata/check.yaml", "-o", "json", "--assume-opted-in")
	var r jsonReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if code != ExitFindings || !r.Summary.Failed || r.Summary.Denied != 1 || r.Summary.Objects != 11 {
		t.Errorf("exit %d, summary %+v", code, r.Summary)
	}
	var ctrl *jsonObject
	for i, o := range r.Objects {
		if o.Name == "ingress-nginx-controller" && o.Kind == "Deployment" {
			ctrl = &r.Objects[i]
		}
	}
	if ctrl == nil || ctrl.Verdict != "allowed" || ctrl.NamespaceOptedIn == nil || *ctrl.NamespaceOptedIn ||
		ctrl.Grace == nil || ctrl.Grace.Before != 300 || ctrl.Line != 105 || len(ctrl.Findings) != 2 {
		t.Fatalf("controller: %+v", ctrl)
	}
	f := ctrl.Findings[0]
	if f.Reason != "prestop-unknown-length" || f.Level != "warning" || f.File != "../manifest/testdata/ingress-nginx.yaml" || f.Line != 139 || f.Column != 13 {
		t.Errorf("finding %+v: want the preStop hook's line 139, column 13", f)
	}
}

// GitHub code scanning needs, per result: ruleId, message.text, an
// artifact URI relative to the repository and a region's startLine.
func TestSARIFAnnotatesTheLine(t *testing.T) {
	_, out, _ := run(t, "", "check", "-f", "../mutate/testdata/pod-every-problem-at-once.yaml", "-o", "sarif")
	var log struct {
		Version string `json:"version"`
		Schema  string `json:"$schema"`
		Runs    []struct {
			Tool struct {
				Driver struct {
					Name  string `json:"name"`
					Rules []struct {
						ID string `json:"id"`
					} `json:"rules"`
				} `json:"driver"`
			} `json:"tool"`
			Results []struct {
				RuleID    string `json:"ruleId"`
				RuleIndex int    `json:"ruleIndex"`
				Level     string `json:"level"`
				Message   struct {
					Text string `json:"text"`
				} `json:"message"`
				Locations []struct {
					Physical struct {
						Artifact struct {
							URI  string `json:"uri"`
							Base string `json:"uriBaseId"`
						} `json:"artifactLocation"`
						Region struct {
							StartLine int `json:"startLine"`
						} `json:"region"`
					} `json:"physicalLocation"`
				} `json:"locations"`
			} `json:"results"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &log); err != nil {
		t.Fatal(err)
	}
	if log.Version != "2.1.0" || !strings.Contains(log.Schema, "sarif-2.1.0") || len(log.Runs) != 1 || log.Runs[0].Tool.Driver.Name != "graceguard" {
		t.Fatalf("not a SARIF 2.1.0 log:\n%s", out)
	}
	lines := strings.Split(fixture(t, "../mutate/testdata/pod-every-problem-at-once.yaml"), "\n")
	want := map[string]string{ // message fragment -> the line it must point at
		`"30 seconds"`:       "    graceguard.io/max-work: 30 seconds",
		`"soon"`:             "    graceguard.io/cleanup: soon",
		`no container named`: "    graceguard.io/containers: app,proxy",
		`"exec sleep 25"`:    "      preStop:",
	}
	run := log.Runs[0]
	if len(run.Results) != len(want) {
		t.Fatalf("%d results, want %d", len(run.Results), len(want))
	}
	for _, r := range run.Results {
		if r.RuleID == "" || run.Tool.Driver.Rules[r.RuleIndex].ID != r.RuleID || r.Level != "error" || len(r.Locations) != 1 {
			t.Errorf("result %+v", r)
			continue
		}
		loc := r.Locations[0].Physical
		if loc.Artifact.URI != "../mutate/testdata/pod-every-problem-at-once.yaml" || loc.Artifact.Base != "%SRCROOT%" {
			t.Errorf("artifact %+v", loc.Artifact)
		}
		matched := false
		for frag, line := range want {
			if strings.Contains(r.Message.Text, frag) {
				matched = true
				if got := lines[loc.Region.StartLine-1]; got != line {
					t.Errorf("%s: line %d is %q, want %q", frag, loc.Region.StartLine, got, line)
				}
			}
		}
		if !matched {
			t.Errorf("unexpected result %q", r.Message.Text)
		}
	}
}

func TestReadsURLs(t *testing.T) {
	body := fixture(t, "../manifest/testdata/istio-injected.yaml")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/samples/ratings.yaml" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, body)
	}))
	defer srv.Close()
	code, out, _ := run(t, "", "check", "-f", srv.URL+"/samples/ratings.yaml", "-o", "sarif")
	if code != ExitOK || !strings.Contains(out, `"uri": "`+srv.URL+`/samples/ratings.yaml"`) {
		t.Errorf("exit %d:\n%s", code, out)
	}
	code, out, _ = run(t, "", "mutate", "-f", srv.URL+"/samples/ratings.yaml")
	if code != ExitOK || !strings.HasPrefix(out, body[:200]) {
		t.Errorf("exit %d:\n%s", code, out)
	}
	code, out, stderr := run(t, "", "check", "-f", srv.URL+"/nope.yaml")
	if code != ExitUsage || out != "" || !strings.Contains(stderr, "/nope.yaml: GET answered 404 Not Found, want 200 OK") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

func TestFlagTyposGetSuggestions(t *testing.T) {
	for typo, want := range map[string]string{
		"--defualt-max-work=1m": "--default-max-work",
		"--mdoe=warn":           "--mode",
		"--assume-opted":        "--assume-opted-in",
		"--fail-on-warning":     "--fail-on",
	} {
		code, _, stderr := run(t, "", "check", "-f", "testdata/check.yaml", typo)
		if code != ExitUsage || !strings.Contains(stderr, "Did you mean this?\n\t"+want+"\n") {
			t.Errorf("%s: exit %d, stderr:\n%s", typo, code, stderr)
		}
	}
	if _, _, stderr := run(t, "", "chek"); !strings.Contains(stderr, "Did you mean this?\n\tcheck") {
		t.Errorf("a command typo gets cobra's suggestion:\n%s", stderr)
	}
}

func TestVersionFlag(t *testing.T) {
	code, out, _ := run(t, "", "--version")
	_, cmd, _ := run(t, "", "version")
	if code != ExitOK || out != cmd || !strings.HasPrefix(out, "kubectl-graceguard ") {
		t.Errorf("exit %d: %q, version says %q", code, out, cmd)
	}
}

// additionsOnly reports whether b is a with whole lines inserted, and
// returns the inserted lines.
func additionsOnly(a, b string) ([]string, bool) {
	al, bl := strings.SplitAfter(a, "\n"), strings.SplitAfter(b, "\n")
	var added []string
	i := 0
	for _, l := range bl {
		if i < len(al) && al[i] == l {
			i++
			continue
		}
		added = append(added, l)
	}
	return added, i == len(al)
}

func TestAuditWithoutACluster(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "kubeconfig")
	code, out, stderr := run(t, "", "audit", "--kubeconfig", missing, "-A")
	if code != ExitUsage || out != "" || !strings.Contains(stderr, "reading the kubeconfig") || !strings.Contains(stderr, missing) {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	code, _, stderr = run(t, "", "audit", "-f", "x.yaml")
	if code != ExitUsage || !strings.Contains(stderr, "unknown shorthand flag: 'f'") {
		t.Errorf("audit reads a cluster, not files: exit %d, %q", code, stderr)
	}
}

// SARIF rules are errors exactly for the reasons docs/annotations.md lists
// as denials.
func TestSARIFRuleLevelsFollowTheReasonKinds(t *testing.T) {
	for _, r := range mutate.AllReasons {
		want := "warning"
		if mutate.KindOf(r) == "denial" {
			want = "error"
		}
		if got := ruleLevel(r); got != want {
			t.Errorf("%s: level %s, want %s", r, got, want)
		}
	}
}

// Every command, with and without the namespace flags, on every manifest
// the tests hold: a verdict for each, never a crash.
func TestEveryCommandOnEveryFixture(t *testing.T) {
	var files []string
	for _, g := range []string{"testdata/*.yaml", "testdata/*.json", "../manifest/testdata/*.yaml", "../mutate/testdata/*.yaml"} {
		m, _ := filepath.Glob(g)
		for _, f := range m {
			if !strings.HasSuffix(f, ".golden.yaml") {
				files = append(files, f)
			}
		}
	}
	for _, f := range files {
		for _, cmd := range []string{"mutate", "check", "explain"} {
			for _, extra := range [][]string{nil, {"--assume-opted-in", "--mode", "warn"}, {"-o", "json"}, {"-o", "sarif"}} {
				if cmd != "check" && len(extra) > 0 && extra[0] == "-o" {
					continue
				}
				args := append([]string{cmd, "-f", f}, extra...)
				code, out, stderr := run(t, "", args...)
				want := []int{ExitOK, ExitFindings}
				if strings.HasPrefix(filepath.Base(f), "bad") { // bad.yaml, bad-helm.yaml: not YAML
					want = []int{ExitUsage}
				}
				if !slices.Contains(want, code) || (code != ExitUsage && out == "") {
					t.Errorf("%v: exit %d\n%s%s", args, code, out, stderr)
				}
			}
		}
	}
}

func TestViolationsBeyondWhatTheReportKeepsAreCounted(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Pod\nmetadata:\n  name: wide\n  annotations: {graceguard.io/inject: \"false\"}\nspec:\n  containers:\n")
	for i := range mutate.MaxRecordedViolations + 7 {
		fmt.Fprintf(&b, "  - {name: c%d, image: x, lifecycle: {preStop: {sleep: {seconds: 40}}}}\n", i)
	}
	code, out, _ := run(t, b.String(), "check", "-f", "-")
	if code != ExitFindings || strings.Count(out, "  error: spec.containers[") != mutate.MaxRecordedViolations ||
		!strings.Contains(out, "  error: 7 more violations, not recorded (graceguard keeps the first 100)") {
		t.Errorf("exit %d:\n%s", code, out[max(0, len(out)-600):])
	}
	_, out, _ = run(t, b.String(), "check", "-f", "-", "-o", "json")
	if !strings.Contains(out, `"unlistedViolations": 7`) {
		t.Errorf("the JSON report must count them")
	}
}
