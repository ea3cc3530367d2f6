package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/policyreport"
)

// auditNow is the time the golden reports are stamped with.
var auditNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeCluster serves the objects of a YAML file through a fake dynamic
// client, as audit lists them.
func fakeCluster(t *testing.T, path string) connector {
	t.Helper()
	listKinds := map[schema.GroupVersionResource]string{
		{Version: "v1", Resource: "namespaces"}:                                    "NamespaceList",
		{Version: "v1", Resource: "pods"}:                                          "PodList",
		{Group: "graceguard.io", Version: "v1alpha1", Resource: "shutdownreports"}: "ShutdownReportList",
	}
	for _, w := range mutate.Workloads {
		listKinds[schema.GroupVersionResource{Group: w.Group, Version: w.Version, Resource: w.Resource}] = w.Kind + "List"
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var objs []runtime.Object
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	c := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objs...)
	return func(*genericclioptions.ConfigFlags) (dynamic.Interface, error) { return c, nil }
}

// runAudit runs audit against the fake cluster as Execute runs commands.
func runAudit(t *testing.T, connect connector, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRoot(strings.NewReader(""), &out, &errOut)
	for _, c := range root.Commands() {
		if c.Name() == "audit" {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(auditCommand(connect, func() time.Time { return auditNow }))
	root.SetArgs(args)
	_, err := root.ExecuteContextC(context.Background())
	switch {
	case err == nil:
	case errors.Is(err, errFindings):
		code = ExitFindings
	default:
		code = ExitUsage
		fmt.Fprintf(&errOut, "error: %v\n", err)
	}
	return code, out.String(), errOut.String()
}

// TestAuditGolden: what a person sees of `audit` on testdata/audit-cluster.yaml,
// as text and as the policy reports (UPDATE_GOLDEN=1 regenerates).
func TestAuditGolden(t *testing.T) {
	cluster := fakeCluster(t, "testdata/audit-cluster.yaml")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"audit-text", []string{"audit", "-A"}},
		{"audit-openreports", []string{"audit", "-A", "-o", "openreports"}},
		{"audit-policyreport", []string{"audit", "-n", "shop", "-o", "policyreport", "--fail-on", "none"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runAudit(t, cluster, tc.args...)
			got := fmt.Sprintf("$ kubectl graceguard %s   # testdata/audit-cluster.yaml\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(tc.args, " "), code, stdout, stderr)
			path := filepath.Join("testdata", "golden", tc.name+".golden")
			if os.Getenv("UPDATE_GOLDEN") != "" {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with UPDATE_GOLDEN=1 to create it)", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s (UPDATE_GOLDEN=1 regenerates it):\n%s", path, diff(string(want), got))
			}
		})
	}
}

// reportResult is what a result says, as a person compares it with check.
type reportResult struct{ Rule, Result, Message string }

// decodeReports reads the YAML stream -o openreports prints, by scope
// ("Deployment shop/web").
func decodeReports(t *testing.T, out string) map[string][]reportResult {
	t.Helper()
	got := map[string][]reportResult{}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		var r struct {
			Kind  string `json:"kind"`
			Scope struct{ Kind, Namespace, Name string }
			// Results as the CRD names their fields.
			Results []struct {
				Rule, Result, Message string
			} `json:"results"`
		}
		if err := dec.Decode(&r); err != nil {
			break
		}
		key := r.Scope.Kind + " " + r.Scope.Namespace + "/" + r.Scope.Name
		got[key] = []reportResult{}
		for _, res := range r.Results {
			got[key] = append(got[key], reportResult{res.Rule, res.Result, res.Message})
		}
	}
	return got
}

// The reports say what check says of the same objects: each denial a
// fail and each warning a warn, with its rule (reason code) and message;
// every other rule passes.
func TestAuditReportsSayWhatCheckSays(t *testing.T) {
	cluster := fakeCluster(t, "testdata/audit-cluster.yaml")
	_, jsonOut, _ := runAudit(t, cluster, "audit", "-A", "-o", "json")
	var checked jsonReport
	if err := json.Unmarshal([]byte(jsonOut), &checked); err != nil {
		t.Fatal(err)
	}
	_, out, _ := runAudit(t, cluster, "audit", "-A", "-o", "openreports")
	reports := decodeReports(t, out)
	n := 0
	for _, o := range checked.Objects {
		key := o.Kind + " " + o.Namespace + "/" + o.Name
		results, ok := reports[key]
		if o.Verdict == verdictSkipped || o.Name == "web-5d8f7-x2x9q" /* a Pod of web */ {
			if ok {
				t.Errorf("%s (%s) has a report", key, o.Verdict)
			}
			continue
		}
		if !ok {
			t.Errorf("%s (%s) has no report", key, o.Verdict)
			continue
		}
		n++
		var want, found []reportResult
		rules := map[string]bool{}
		for _, f := range o.Findings {
			result := "warn"
			if f.Level == levelDenial {
				result = "fail"
			}
			want = append(want, reportResult{string(f.Reason), result, f.Message})
			rules[string(f.Reason)] = true
		}
		var passed []string
		for _, r := range results {
			switch {
			case r.Result == "pass" && strings.HasPrefix(r.Rule, "observed-"):
			case r.Result == "pass":
				passed = append(passed, r.Rule)
			case !strings.HasPrefix(r.Rule, "observed-"):
				found = append(found, r)
			}
		}
		if !slices.Equal(found, want) {
			t.Errorf("%s: report's findings\n%q\ncheck's\n%q", key, found, want)
		}
		for _, r := range policyreport.Rules() {
			if !rules[string(r)] && !slices.Contains(passed, string(r)) {
				t.Errorf("%s: rule %s found nothing, yet does not pass", key, r)
			}
		}
	}
	if n != 4 {
		t.Errorf("%d reports compared, want 4 (web, api, debug, db): %v", n, reports)
	}
	if web := reports["Deployment shop/web"]; len(web) == 0 || web[0].Rule != string(policyreport.RuleKilled) || web[0].Result != "fail" {
		t.Errorf("web's first result %v: want the SIGKILL its ShutdownReport records", web)
	}
}
