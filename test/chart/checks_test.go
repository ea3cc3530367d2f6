package chart_test

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"

	"github.com/graceguard/graceguard/pkg/budget"
)

// modes are values exercising each certificate mode, for lint and stability.
var modes = map[string]string{
	"self-managed (default)":     "",
	"cert-manager, own CA":       "certificates: {mode: cert-manager}",
	"cert-manager, given issuer": "certificates: {mode: cert-manager, certManager: {issuerRef: {name: corp, kind: ClusterIssuer}}}",
	"secret": "certificates: {mode: secret, secret: {name: my-tls, caBundle: " +
		base64.StdEncoding.EncodeToString([]byte(caPEM)) + "}}",
}

func TestLintPassesForEveryCertificateMode(t *testing.T) {
	for name, y := range modes {
		t.Run(name, func(t *testing.T) {
			l := action.NewLint()
			l.Strict = true
			l.Namespace = namespace
			res := l.Run([]string{chartDir}, values(t, y))
			for _, m := range res.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("lint: %s", m)
				}
			}
			for _, err := range res.Errors {
				t.Errorf("lint error: %v", err)
			}
			if res.TotalChartsLinted != 1 {
				t.Errorf("linted %d charts, want 1", res.TotalChartsLinted)
			}
		})
	}
}

func TestLintCatchesABrokenValue(t *testing.T) {
	// Proves the lint test can fail. Lint checks the schema, but renders
	// with `fail` and `required` turned into no-ops (Helm's LintMode), so
	// the cross-field checks are exercised by rendering, below.
	l := action.NewLint()
	l.Namespace = namespace
	res := l.Run([]string{chartDir}, values(t, "replicaCount: 0"))
	if len(res.Errors) == 0 {
		t.Fatal("lint passed replicaCount 0")
	}
	mustContain(t, "the lint error", fmt.Sprint(res.Errors), "/replicaCount")
}

func TestSchemaRejectsBadValuesReadably(t *testing.T) {
	for _, c := range []struct {
		name, values string
		want         []string
	}{
		{"no replicas", "replicaCount: 0", []string{"/replicaCount", "minimum: got 0, want 1"}},
		{"too many replicas", "replicaCount: 50", []string{"/replicaCount", "maximum: got 50, want 10"}},
		{"a failure policy that does not exist", "webhooks: {mutatePods: {failurePolicy: Sometimes}}", []string{"/webhooks/mutatePods/failurePolicy", "'Fail', 'Ignore'"}},
		{"a misspelt top-level key", "replicaz: 3", []string{"additional properties 'replicaz' not allowed"}},
		{"a misspelt nested key", "shutdown: {delayy: 3s}", []string{"/shutdown", "additional properties 'delayy' not allowed"}},
		{"a duration in words", "shutdown: {delay: 10 seconds}", []string{"/shutdown/delay", "'10 seconds' does not match pattern"}},
		{"a negative duration", "config: {defaultMaxWork: -5s}", []string{"/config/defaultMaxWork", "does not match pattern"}},
		{"a webhook timeout over the API's 30s", "webhooks: {validatePods: {timeoutSeconds: 31}}", []string{"/webhooks/validatePods/timeoutSeconds", "maximum: got 31, want 30"}},
		{"a webhook timeout of zero", "webhooks: {validateWorkloads: {timeoutSeconds: 0}}", []string{"/webhooks/validateWorkloads/timeoutSeconds", "minimum"}},
		{"an unknown certificate mode", "certificates: {mode: vault}", []string{"/certificates/mode", "'self-managed', 'cert-manager', 'secret'"}},
		{"a privileged port for a non-root process", "ports: {webhook: 443}", []string{"/ports/webhook", "minimum: got 443"}},
		{"an unknown prestop handler", "config: {prestopHandler: httpGet}", []string{"/config/prestopHandler", "'sleep', 'exec', 'none'"}},
		{"an excluded namespace that is no name", "config: {excludedNamespaces: [Kube_System]}", []string{"/config/excludedNamespaces/0", "does not match pattern"}},
		{"an unconfined seccomp profile", "podSecurityContext: {seccompProfile: {type: Unconfined}}", []string{"/podSecurityContext/seccompProfile/type", "'RuntimeDefault', 'Localhost'"}},
		{"a preStop sleep over 5 minutes", "shutdown: {preStopSleepSeconds: 400, terminationGracePeriodSeconds: 600}", []string{"/shutdown/preStopSleepSeconds", "maximum"}},
		{"a caBundle that is not base64", "certificates: {secret: {caBundle: 'not base64!'}}", []string{"/certificates/secret/caBundle", "does not match pattern"}},
		{"a bad image digest", "image: {digest: latest}", []string{"/image/digest", "does not match pattern"}},
		{"a routing profile name that is no DNS label", "config: {routingProfiles: {Corp_LB: {routingDelay: 5s}}}", []string{"invalid propertyName 'Corp_LB'", "does not match pattern"}},
		{"a routing profile without its routing delay", "config: {routingProfiles: {corp-lb: {graceFloor: 1m}}}", []string{"/config/routingProfiles/corp-lb", "missing property 'routingDelay'"}},
		{"a routing profile setting that does not exist", "config: {routingProfiles: {corp-lb: {routingDelay: 5s, floor: 1m}}}", []string{"/config/routingProfiles/corp-lb", "additional properties 'floor' not allowed"}},
		{"a routing delay in words", "config: {routingProfiles: {corp-lb: {routingDelay: a minute}}}", []string{"/config/routingProfiles/corp-lb/routingDelay", "does not match pattern"}},
		{"a ceiling action other than warn or deny", "config: {karpenterCeilingAction: block}", []string{"/config/karpenterCeilingAction", "'warn', 'deny'"}},
		{"a ceiling in words", "config: {nodeShutdownGracePeriod: half a minute}", []string{"/config/nodeShutdownGracePeriod", "does not match pattern"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := renderErr(t, c.values)
			mustContain(t, "the error", err, c.want...)
			mustContain(t, "the error", err, "values don't meet the specifications of the schema")
		})
	}
}

func TestGraceMustCoverOwnShutdown(t *testing.T) {
	for _, c := range []struct {
		name, values string
		want         string // "" means it renders
	}{
		{"defaults: 5 + 10 + 15 + 5 = 35 <= 40", "", ""},
		{"exactly the sum", "shutdown: {terminationGracePeriodSeconds: 35}", ""},
		{"one second short", "shutdown: {terminationGracePeriodSeconds: 34}",
			"shutdown.terminationGracePeriodSeconds: 34 is too short: graceguard's own shutdown needs at least 35 (preStopSleepSeconds 5s + delay 10s + drainTimeout 15s + margin 5s); raise it to 35"},
		{"the Kubernetes default of 30", "shutdown: {terminationGracePeriodSeconds: 30}",
			"needs at least 35 (preStopSleepSeconds 5s + delay 10s + drainTimeout 15s + margin 5s)"},
		{"milliseconds round up, minutes count 60", "shutdown: {preStopSleepSeconds: 0, delay: 1500ms, drainTimeout: 1m, terminationGracePeriodSeconds: 66}",
			"needs at least 67 (preStopSleepSeconds 0s + delay 2s + drainTimeout 60s + margin 5s)"},
		{"the same, long enough", "shutdown: {preStopSleepSeconds: 0, delay: 1500ms, drainTimeout: 1m, terminationGracePeriodSeconds: 67}", ""},
		{"bare seconds and compound durations", "shutdown: {preStopSleepSeconds: 10, delay: 20, drainTimeout: 1m30s, terminationGracePeriodSeconds: 120}",
			"needs at least 125 (preStopSleepSeconds 10s + delay 20s + drainTimeout 90s + margin 5s)"},
		{"fractional hours", "shutdown: {preStopSleepSeconds: 0, delay: 0, drainTimeout: 0.05h, terminationGracePeriodSeconds: 180}",
			"needs at least 185 (preStopSleepSeconds 0s + delay 0s + drainTimeout 180s + margin 5s)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.want == "" {
				render(t, c.values)
				return
			}
			mustContain(t, "the error", renderErr(t, c.values), c.want)
		})
	}
}

func TestOtherCrossFieldChecks(t *testing.T) {
	for _, c := range []struct{ name, values, want string }{
		{"a budget that can never be met blocks drains", "replicaCount: 2\npodDisruptionBudget: {minAvailable: 2}",
			"podDisruptionBudget.minAvailable: 2 must be less than replicaCount 2"},
		{"one replica with the default budget", "replicaCount: 1",
			"raise replicaCount or set podDisruptionBudget.enabled=false"},
		{"a cap below the default budget", "config: {maxGracePeriod: 20s}",
			"config.maxGracePeriod: 20s (20s) is less than the default budget 30s (defaultRoutingDelay 5s + defaultMaxWork 20s + defaultCleanup 2s + defaultSafetyMargin 3s)"},
		{"a shutdown delay over 5m", "shutdown: {delay: 6m, terminationGracePeriodSeconds: 600}",
			"shutdown.delay: 6m is out of range; want 0s to 5m (--shutdown-delay)"},
		{"no drain at all", "shutdown: {drainTimeout: 0}",
			"shutdown.drainTimeout: 0 is out of range; want 1s to 5m (--drain-timeout)"},
		{"a default over 1h", "config: {defaultMaxWork: 2h}",
			"config.defaultMaxWork: 2h is out of range; want 0s to 1h (--default-max-work)"},
		{"renewing before issuing", "certificates: {mode: cert-manager, certManager: {renewBefore: 3000h}}",
			"certificates.certManager.renewBefore: 3000h must be shorter than duration 2160h"},
		{"as many pending connections as open ones", "config: {maxConnections: 200, maxPendingConnections: 200}",
			"config.maxPendingConnections: 200 must be fewer than config.maxConnections 200, so that kept-alive connections always have room"},
		{"two servers on one port", "ports: {health: 9443}",
			"ports.health: 9443 is also ports.webhook"},
		{"a default routing profile that does not exist", "config: {defaultRoutingProfile: aws-nlb}",
			`config.defaultRoutingProfile: "aws-nlb" is no routing profile; want one of ` + builtinNames() + ` (built in) or a key of config.routingProfiles`},
		{"a default routing profile whose Pods need more than the cap", "config: {defaultRoutingProfile: aws-nlb-ip, maxGracePeriod: 2m}",
			"config.defaultRoutingProfile: aws-nlb-ip needs 145s for Pods without annotations (routing 2m + defaultMaxWork 20s + defaultCleanup 2s + defaultSafetyMargin 3s, grace floor 0s), over config.maxGracePeriod 2m"},
		{"a routing profile over 1h", "config: {routingProfiles: {corp-lb: {routingDelay: 2h}}}",
			"config.routingProfiles.corp-lb.routingDelay: 2h is out of range; want 0s to 1h (--routing-profile)"},
		{"a routing profile's grace floor over 1h", "config: {routingProfiles: {corp-lb: {routingDelay: 5s, graceFloor: 61m}}}",
			"config.routingProfiles.corp-lb.graceFloor: 61m is out of range; want 0s to 1h (--routing-profile)"},
		{"a graceful node shutdown that leaves regular Pods nothing", "config: {nodeShutdownGracePeriod: 30s, nodeShutdownGracePeriodCriticalPods: 30s}",
			"config.nodeShutdownGracePeriodCriticalPods: 30s must be shorter than config.nodeShutdownGracePeriod 30s: regular Pods get the difference"},
		{"a Karpenter ceiling over 720h", "config: {karpenterTerminationGracePeriod: 1000h}",
			"config.karpenterTerminationGracePeriod: 1000h is out of range; want 0s to 720h (--karpenter-termination-grace-period)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mustContain(t, "the error", renderErr(t, c.values), c.want)
		})
	}
}

func TestRenderingIsStableAcrossUpgrades(t *testing.T) {
	for name, y := range modes {
		t.Run(name, func(t *testing.T) {
			var out []string
			for _, upgrade := range []bool{false, false, true} {
				rel, err := renderChart(values(t, y), renderOpts{upgrade: upgrade})
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, rel.Manifest)
			}
			if out[0] != out[1] {
				t.Errorf("two installs render differently (random data in a template?):\n%s", firstDiff(out[0], out[1]))
			}
			if out[0] != out[2] {
				t.Errorf("an upgrade renders differently from an install:\n%s", firstDiff(out[0], out[2]))
			}
		})
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d lines", len(al), len(bl))
}

// Functions whose output depends on the time, chance or the cluster. Two
// offline renders cannot catch lookup: it returns nothing offline and the
// live object during `helm upgrade`.
var unstableFuncs = regexp.MustCompile(`\b(lookup|genCA|genPrivateKey|genSelfSignedCert|genSignedCert|randAlphaNum|randAlpha|randNumeric|randAscii|randBytes|uuidv4|now|date|dateInZone|htmlDate)\b`)

func TestTemplatesUseNothingThatChangesBetweenRenders(t *testing.T) {
	var files []string
	err := filepath.WalkDir(filepath.Join(chartDir, "templates"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, path)
		}
		return err
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("no templates (%v)", err)
	}
	actions := regexp.MustCompile(`(?s)\{\{.*?\}\}`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range actions.FindAllString(string(b), -1) {
			if strings.HasPrefix(a, "{{/*") || strings.HasPrefix(a, "{{- /*") {
				continue
			}
			if m := unstableFuncs.FindString(a); m != "" {
				t.Errorf("%s: %s calls %s", filepath.Base(f), a, m)
			}
		}
	}
}

// kubeVersion admits the minors graceguard is tested on, 1.35 (the oldest,
// ENVTEST_K8S_VERSION=1.35.4) to 1.37 (k8s.io/api's), vendors' builds of
// them included, and nothing older.
func TestKubernetesVersion(t *testing.T) {
	for _, v := range []string{"v1.29.9", "v1.34.5", "v1.34.9-gke.1245000"} {
		if _, err := renderChart(values(t, ""), renderOpts{kubeVersion: v}); err == nil || !strings.Contains(err.Error(), "kubeVersion") {
			t.Errorf("rendering for %s = %v, want a kubeVersion error: 1.35 is the oldest minor graceguard is tested on", v, err)
		}
	}
	for _, v := range []string{"v1.35.0", "v1.35.4", "v1.36.1-eks-1a2b3c", "v1.37.2", "v1.35.4-gke.1245000"} {
		if _, err := renderChart(values(t, ""), renderOpts{kubeVersion: v}); err != nil {
			t.Errorf("rendering for %s: %v", v, err)
		}
	}
}

// TestSchemaIsClosedAndBounded walks values.schema.json: every object that
// lists properties refuses others, every integer has a minimum and a
// maximum, and every string with an enum or pattern is one the defaults meet.
func TestSchemaIsClosedAndBounded(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	var walk func(path string, n any)
	walk = func(path string, n any) {
		switch v := n.(type) {
		case map[string]any:
			if _, ok := v["properties"]; ok {
				if ap, ok := v["additionalProperties"]; !ok || ap != false {
					t.Errorf("%s: object with properties allows others (additionalProperties %v)", path, ap)
				}
			}
			if v["type"] == "integer" || (isList(v["type"]) && contains(v["type"], "integer")) {
				if _, ok := v["minimum"]; !ok {
					t.Errorf("%s: integer without minimum", path)
				}
				if _, ok := v["maximum"]; !ok {
					t.Errorf("%s: integer without maximum", path)
				}
			}
			for k, c := range v {
				walk(path+"/"+k, c)
			}
		case []any:
			for i, c := range v {
				walk(fmt.Sprintf("%s/%d", path, i), c)
			}
		}
	}
	walk("#", schema)
}

func isList(v any) bool { _, ok := v.([]any); return ok }

func contains(list any, s string) bool {
	for _, x := range list.([]any) {
		if x == s {
			return true
		}
	}
	return false
}

// TestEveryValueIsDocumented checks values.yaml the way helm-docs reads it:
// every key carries a `# --` comment, or sits under a key that does.
func TestEveryValueIsDocumented(t *testing.T) {
	f, err := os.Open(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keyLine := regexp.MustCompile(`^(\s*)([A-Za-z][\w./-]*):(.*)$`)
	type frame struct {
		indent     int
		documented bool
	}
	var stack []frame
	var comment []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "#"):
			comment = append(comment, trimmed)
			continue
		case trimmed == "":
			comment = nil
			continue
		}
		m := keyLine.FindStringSubmatch(line)
		if m == nil { // a list item or a block scalar line
			comment = nil
			continue
		}
		indent := len(m[1])
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		inherited := len(stack) > 0 && stack[len(stack)-1].documented
		own := len(comment) > 0 && strings.HasPrefix(comment[0], "# --")
		for _, c := range comment {
			own = own || strings.HasPrefix(c, "# --")
		}
		leaf := strings.TrimSpace(m[3]) != ""
		if leaf && !own && !inherited {
			t.Errorf("values.yaml:%d: %s has no `# --` comment", n, strings.TrimSpace(m[2]))
		}
		stack = append(stack, frame{indent, own || inherited})
		comment = nil
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// builtinNames are the built-in routing profiles as the chart lists them:
// sorted, comma-separated.
func builtinNames() string {
	return strings.Join(slices.Sorted(slices.Values(budget.ProfileNames(budget.BuiltinProfiles()))), ", ")
}
