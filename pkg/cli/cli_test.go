package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/config"
	"github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/observer"
	"github.com/spf13/pflag"
)

// run drives the plugin in-process, as a person would from a shell.
func run(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Execute(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestBadInputIsAUsageErrorThatSaysWhatIsAccepted(t *testing.T) {
	tests := []struct {
		name string
		args []string
		// want are fragments the message must hold: the problem, the
		// value and what is accepted.
		want []string
	}{
		{"no -f at all", []string{"check"},
			[]string{"no input", "-f FILE", "-f - for stdin"}},
		{"a file that does not exist", []string{"mutate", "-f", "testdata/nope.yaml"},
			[]string{"-f testdata/nope.yaml: no such file or directory", "want a YAML or JSON file"}},
		{"a document that is not YAML", []string{"explain", "-f", "testdata/bad.yaml"},
			[]string{"testdata/bad.yaml#1", "not valid YAML or JSON"}},
		{"a Helm template not rendered", []string{"check", "-f", "testdata/bad-helm.yaml"},
			[]string{"testdata/bad-helm.yaml#1", "template actions ({{ ... }})", "helm template CHART | kubectl graceguard check -f -"}},
		{"a Helm template not rendered, given to mutate", []string{"mutate", "-f", "testdata/bad-helm.yaml"},
			[]string{"testdata/bad-helm.yaml#1", "template actions ({{ ... }})", "helm template CHART | kubectl graceguard mutate -f -"}},
		{"a Helm template not rendered, given to explain", []string{"explain", "-f", "testdata/bad-helm.yaml"},
			[]string{"helm template CHART | kubectl graceguard explain -f -"}},
		{"a budget flag that is not a duration", []string{"check", "-f", "testdata/check.yaml", "--default-max-work=banana"},
			[]string{`"banana"`, `"--default-max-work"`, budget.AcceptedForms}},
		{"a budget flag over an hour", []string{"explain", "-f", "testdata/check.yaml", "--default-cleanup", "2h"},
			[]string{`"2h"`, `"--default-cleanup"`, "longer than 1h"}},
		{"a preStop handler that does not exist", []string{"mutate", "-f", "testdata/check.yaml", "--prestop-handler=wait"},
			[]string{`"wait"`, `"--prestop-handler"`, "sleep, exec, none"}},
		{"a mode that does not exist", []string{"check", "-f", "testdata/check.yaml", "--mode=audit"},
			[]string{`"audit"`, `"--mode"`, `is not one of enforce, warn`}},
		{"a namespace annotation graceguard does not read from namespaces", []string{"check", "-f", "testdata/check.yaml",
			"--namespace-annotations", "graceguard.io/max-work=30s,graceguard.io/containers=app"},
			[]string{`unknown key "graceguard.io/containers"`, "--namespace-annotations", "graceguard.io/routing-delay", "graceguard.io/probe-port"}},
		{"a namespace annotation without a value", []string{"check", "-f", "testdata/check.yaml", "--namespace-annotations", "graceguard.io/max-work"},
			[]string{`"graceguard.io/max-work" is not key=value`}},
		{"a namespace annotation value graceguard cannot parse", []string{"check", "-f", "testdata/check.yaml", "--namespace-annotations", "graceguard.io/max-work=soon"},
			[]string{`graceguard.io/max-work="soon"`, "--namespace-annotations", budget.AcceptedForms}},
		{"a namespace preStop value that does not exist", []string{"check", "-f", "testdata/check.yaml", "--namespace-annotations", "graceguard.io/prestop=wait"},
			[]string{`graceguard.io/prestop="wait"`, `"sleep"`, `"none"`}},
		{"a cap below the default budget", []string{"check", "-f", "testdata/check.yaml", "--max-grace-period=20s"},
			[]string{"--max-grace-period=20s", "the default budget alone needs 30s"}},
		{"a namespace name that is not a DNS label", []string{"check", "-f", "testdata/check.yaml", "-n", "Shop_1"},
			[]string{`"Shop_1"`, "--namespace", "RFC 1123"}},
		{"an output format that does not exist", []string{"mutate", "-f", "testdata/check.yaml", "-o", "xml"},
			[]string{`"xml"`, "--output", "yaml, json"}},
		{"a file name without -f", []string{"check", "testdata/check.yaml"},
			[]string{`unexpected argument "testdata/check.yaml"`, "-f testdata/check.yaml"}},
		{"stdin twice", []string{"check", "-f", "-", "-f", "-"},
			[]string{"-f - given twice"}},
		{"an unknown command", []string{"lint"},
			[]string{`unknown command "lint"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, "", tt.args...)
			if code != ExitUsage {
				t.Errorf("exit code = %d, want %d (usage)", code, ExitUsage)
			}
			if stdout != "" {
				t.Errorf("a usage error must print nothing on stdout, got:\n%s", stdout)
			}
			if !strings.HasPrefix(stderr, "error: ") || !strings.Contains(stderr, "--help' for usage") {
				t.Errorf("stderr must start with \"error: \" and point at --help, got:\n%s", stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
}

func TestCheckExitsOneOnlyWhenSomethingIsDenied(t *testing.T) {
	t.Run("an opted-out Pod whose exec sleep outlasts its grace is denied", func(t *testing.T) {
		code, out, _ := run(t, "", "check", "-f", "testdata/check.yaml")
		if code != ExitDenied {
			t.Fatalf("exit code = %d, want %d", code, ExitDenied)
		}
		for _, w := range []string{
			"Pod default/legacy [enforce]: DENIED",
			`error: spec.containers[0].lifecycle.preStop: Invalid value: "exec sleep 40": must be shorter than terminationGracePeriodSeconds (30s)`,
			"warning: spec.containers[0].command: shell form may not forward SIGTERM",
			"ConfigMap api-config: skipped:",
		} {
			if !strings.Contains(out, w) {
				t.Errorf("output lacks %q:\n%s", w, out)
			}
		}
	})
	t.Run("in warn mode nothing is denied but what enforce would deny is printed", func(t *testing.T) {
		code, out, _ := run(t, "", "check", "-f", "testdata/check.yaml", "--mode", "warn")
		if code != ExitOK {
			t.Fatalf("exit code = %d, want %d", code, ExitOK)
		}
		if !strings.Contains(out, `warning: enforce would deny: spec.containers[0].lifecycle.preStop: Invalid value: "exec sleep 40"`) {
			t.Errorf("warn mode must print what enforce would deny:\n%s", out)
		}
		if strings.Contains(out, "DENIED") {
			t.Errorf("warn mode denies nothing:\n%s", out)
		}
	})
	t.Run("--default-mode warn is honoured when --mode is not given", func(t *testing.T) {
		if code, _, _ := run(t, "", "check", "-f", "testdata/check.yaml", "--default-mode=warn"); code != ExitOK {
			t.Fatalf("exit code = %d, want %d", code, ExitOK)
		}
	})
	t.Run("objects that only get warnings pass", func(t *testing.T) {
		code, out, _ := run(t, "", "check", "-f", "testdata/explain-nohook.yaml")
		if code != ExitOK || !strings.Contains(out, "Pod batch/worker [enforce]: allowed") {
			t.Fatalf("exit code = %d, output:\n%s", code, out)
		}
	})
	t.Run("a simulated namespace default is named as the source of its term and raises the grace", func(t *testing.T) {
		code, out, _ := run(t, "", "explain", "-f", "testdata/explain-default.yaml", "--namespace-annotations", "graceguard.io/max-work=1m")
		if code != ExitOK || !strings.Contains(out, "1m  namespace shop annotation graceguard.io/max-work") ||
			!strings.Contains(out, "grace 30s -> 70s") {
			t.Fatalf("exit code = %d, output:\n%s", code, out)
		}
	})
}

func TestSkippedObjectsAreListedAsSuch(t *testing.T) {
	in := `apiVersion: v1
kind: Namespace
metadata:
  name: legacy
---
apiVersion: v1
kind: Pod
metadata:
  name: old
  namespace: legacy
spec:
  containers: [{name: app, image: app:1}]
---
apiVersion: v1
kind: Pod
metadata:
  name: static-web
  annotations:
    kubernetes.io/config.mirror: abc
spec:
  containers: [{name: app, image: app:1}]
---
apiVersion: v1
kind: Pod
metadata:
  name: dns
  namespace: kube-system
spec:
  containers: [{name: app, image: app:1}]
`
	code, out, stderr := run(t, in, "check", "-f", "-", "--mode=warn")
	if code != ExitOK {
		t.Fatalf("exit code = %d\n%s%s", code, out, stderr)
	}
	for _, w := range []string{
		"Namespace legacy: skipped: not a Pod or workload",
		"Pod legacy/old: skipped: namespace legacy is not opted in (label graceguard.io/inject=enabled)",
		"Pod default/static-web: skipped: mirror pod",
		"Pod kube-system/dns: skipped: namespace kube-system is excluded",
		"4 objects: 0 denied, 0 allowed, 4 skipped",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if !strings.Contains(stderr, "note: namespace legacy is defined in the input and used as written") {
		t.Errorf("a --mode that a Namespace in the input overrides must be noted, stderr:\n%s", stderr)
	}
}

func TestMutateKeepsWhatItDoesNotKnow(t *testing.T) {
	code, out, _ := run(t, "", "mutate", "-f", "testdata/mutate-multi.yaml")
	if code != ExitOK {
		t.Fatalf("exit code = %d", code)
	}
	docs := strings.Split(out, "\n---\n")
	if len(docs) != 4 {
		t.Fatalf("want the input's 4 documents (Deployment, the List of a Pod and a Service, a comment, ConfigMap), got %d:\n%s", len(docs), out)
	}
	var deploy struct {
		Spec struct {
			Template struct {
				Spec map[string]any `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(docs[0]), &deploy); err != nil {
		t.Fatal(err)
	}
	spec := deploy.Spec.Template.Spec
	if spec["futureSchedulingHint"] != "spread-wide" {
		t.Errorf("an unknown pod spec field was lost: %v", spec)
	}
	if spec["terminationGracePeriodSeconds"] != float64(50) {
		t.Errorf("the template's grace must be raised to the 50s budget: %v", spec["terminationGracePeriodSeconds"])
	}
	if !strings.Contains(docs[1], "xCustomField: kept") {
		t.Errorf("an unknown container field of a List item was lost:\n%s", docs[1])
	}
}

func TestMutateIsIdempotent(t *testing.T) {
	// The webhook may be called again on its own output
	// (reinvocationPolicy: IfNeeded); mutating twice must change nothing.
	for _, f := range []string{"mutate-multi.yaml", "mutate-list.json", "explain-raise.yaml", "check.yaml"} {
		t.Run(f, func(t *testing.T) {
			_, once, _ := run(t, "", "mutate", "-f", filepath.Join("testdata", f))
			code, twice, _ := run(t, once, "mutate", "-f", "-")
			if code != ExitOK || once != twice {
				t.Fatalf("exit %d; second pass differs:\n--- once\n%s\n--- twice\n%s", code, once, twice)
			}
		})
	}
}

func TestMutateWarnsOnStderr(t *testing.T) {
	code, out, stderr := run(t, "", "mutate", "-f", "testdata/check.yaml")
	if code != ExitOK {
		t.Fatalf("mutate prints objects even when one would be denied; exit code = %d", code)
	}
	if strings.Contains(out, "Warning") || strings.Contains(out, "Denied") {
		t.Errorf("stdout must hold only objects:\n%s", out)
	}
	for _, w := range []string{
		"Warning: Pod default/api: spec.containers[0].readinessProbe: serving container has none",
		`Denied: Pod default/legacy: spec.containers[0].lifecycle.preStop: Invalid value: "exec sleep 40"`,
	} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
}

func TestReadsDirectories(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]string{
		filepath.Join(dir, "a.yaml"):    "testdata/explain-default.yaml",
		filepath.Join(dir, "README.md"): "testdata/bad.yaml", // not a manifest name: never read
		filepath.Join(sub, "b.yml"):     "testdata/explain-nohook.yaml",
	} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, flat, _ := run(t, "", "check", "-f", dir)
	if !strings.Contains(flat, "Pod shop/web") || strings.Contains(flat, "Pod batch/worker") {
		t.Errorf("without -R only the directory's own files are read:\n%s", flat)
	}
	code, deep, stderr := run(t, "", "check", "-R", "-f", dir)
	if code != ExitOK || !strings.Contains(deep, "Pod shop/web") || !strings.Contains(deep, "Pod batch/worker") {
		t.Errorf("with -R subdirectories are read; exit %d:\n%s%s", code, deep, stderr)
	}
	empty := t.TempDir()
	if code, _, stderr := run(t, "", "check", "-f", empty); code != ExitUsage || !strings.Contains(stderr, "holds no .yaml, .yml, .json files") {
		t.Errorf("an empty directory is an input error; exit %d: %s", code, stderr)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := run(t, "", "version")
	if code != ExitOK || !strings.HasPrefix(out, "kubectl-graceguard "+Version+" (go") {
		t.Fatalf("exit %d: %q", code, out)
	}
}

func TestChartStaysReadable(t *testing.T) {
	def := budget.Budget{Routing: 5 * time.Second, Work: 20 * time.Second, Cleanup: 2 * time.Second, Margin: 3 * time.Second}
	long := budget.Budget{Routing: 59*time.Minute + 59500*time.Millisecond, Work: time.Hour, Cleanup: time.Hour, Margin: time.Hour}
	infinite := time.Duration(1<<63 - 1)
	withProxy := def
	withProxy.Proxy = 5 * time.Second
	for _, tt := range []struct {
		name     string
		tl       budget.Timeline
		fits     bool
		marks    string // what the chart must show
		ceilings []budget.Ceiling
	}{
		{"the default budget fits to the second", budget.NewTimeline(def, 5*time.Second, 30), true, "SIGKILL 30s", nil},
		{"a hook longer than grace is cut", budget.NewTimeline(def, 40*time.Second, 30), false, "<- cut at 30s", nil},
		{"a grace too short for the work kills the drain", budget.NewTimeline(def, 5*time.Second, 20), false, "<- killed at 20s", nil},
		{"a grace that eats the margin says by how much", budget.NewTimeline(def, 5*time.Second, 28), false, "<- short by 2s", nil},
		{"sleep infinity is cut", budget.NewTimeline(def, infinite, 30), false, "<- cut at 30s", nil},
		{"hour-long terms keep the lines short", budget.NewTimeline(long, time.Hour, 4*3600+1), true, "SIGKILL", nil},
		{"a sub-second budget", budget.NewTimeline(budget.Budget{Routing: 500 * time.Millisecond, Work: 300 * time.Millisecond}, 0, 1), true, "SIGKILL 1s", nil},
		{"no budget and no grace", budget.NewTimeline(budget.Budget{}, 0, 0), false, "nothing to draw", nil},
		{"a mesh proxy draining after the app", budget.NewTimeline(withProxy, 5*time.Second, 35), true, "<- mesh proxy", nil},
		{"a mesh proxy cut by SIGKILL", budget.NewTimeline(withProxy, 5*time.Second, 30), false, "<- killed at 30s", nil},
		{"a ceiling under the deadline", budget.NewTimeline(def, 5*time.Second, 30), true, "!                           | <- node-shutdown SIGKILL",
			[]budget.Ceiling{{Name: "node-shutdown", Event: "a graceful node shutdown", Limit: 15 * time.Second}}},
		{"a ceiling past the chart", budget.NewTimeline(def, 5*time.Second, 30), true, "<- karpenter: off chart",
			[]budget.Ceiling{{Name: "karpenter", Event: "a Karpenter disruption", Limit: 10 * time.Minute}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lines := chart(tt.tl, tt.ceilings)
			text := strings.Join(lines, "\n")
			for _, l := range lines {
				if n := len("    ") + len(l); n > 100 {
					t.Errorf("line of %d columns:\n%s", n, l)
				}
			}
			if !strings.Contains(text, tt.marks) {
				t.Errorf("chart lacks %q:\n%s", tt.marks, text)
			}
			if again := strings.Join(chart(tt.tl, tt.ceilings), "\n"); again != text {
				t.Errorf("chart is not deterministic")
			}
			if tt.fits != strings.HasPrefix(verdict(tt.tl), "fits") && tt.tl.Deadline > 0 {
				t.Errorf("verdict %q, want fits=%v", verdict(tt.tl), tt.fits)
			}
			if strings.ContainsRune(text, '\x1b') {
				t.Errorf("no colour codes")
			}
		})
	}
}

// Help and messages name flags: the plugin's (explain names the ceiling
// flags and where each default comes from), and the webhook's (a denial
// names the flag that caps the grace). Each must be a flag of its program,
// so a renamed flag fails here until the texts follow.
func TestFlagsTheTextsNameExist(t *testing.T) {
	plugin := map[string]bool{"help": true, "version": true}
	root := newRoot(nil, nil, nil)
	for _, cmd := range append(root.Commands(), root) {
		cmd.Flags().VisitAll(func(f *pflag.Flag) { plugin[f.Name] = true })
	}
	webhook := map[string]bool{}
	cfg, obs := config.Default(), observer.Default()
	for _, fl := range []flags.Flags{config.Flags(&cfg), config.ObserverFlags(&obs)} {
		fs := pflag.NewFlagSet("webhook", pflag.ContinueOnError)
		fl.Bind(fs)
		fs.VisitAll(func(f *pflag.Flag) { webhook[f.Name] = true })
	}
	// Other programs' flags, quoted as such: kubectl's (measure-routing
	// prints `kubectl create ingress` and `kubectl expose` lines), git's,
	// ingress-nginx's, pilot-agent's (Istio's drain hook).
	for _, names := range []map[string]bool{plugin, webhook} {
		for _, other := range []string{"server-side", "force-conflicts", "field-manager", "type", "no-index", "dry-run", "show-managed-fields", "sync-rate-limit", "debug-port",
			"class", "rule", "name", "port", "target-port"} {
			names[other] = true
		}
	}
	// measure-routing's probe Pods run `webhook probe`.
	probe := config.DefaultProbe()
	probeFlags := pflag.NewFlagSet("probe", pflag.ContinueOnError)
	config.ProbeFlags(&probe).Bind(probeFlags)
	probeFlags.VisitAll(func(f *pflag.Flag) { plugin[f.Name] = true })
	flagRef := regexp.MustCompile("[ (`'\"]--([a-z][a-z0-9-]+)")
	for glob, names := range map[string]map[string]bool{
		"*.go": plugin, "../mutate/*.go": webhook, "../budget/*.go": webhook, "../webhook/*.go": webhook,
		"../server/*.go": webhook, "../certs/*.go": webhook, "../observer/*.go": webhook,
	} {
		files, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") || f == "suggest.go" {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range flagRef.FindAllStringSubmatch(string(b), -1) {
				if !names[m[1]] {
					t.Errorf("%s names --%s, which is no flag of its program", f, m[1])
				}
			}
		}
	}
}
