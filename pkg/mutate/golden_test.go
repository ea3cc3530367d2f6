package mutate_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/graceguard/graceguard/pkg/manifest"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// Golden files: every testdata/NAME.yaml (an optional Namespace, then one Pod
// or workload) is run through both webhooks' decisions; the outcome is
// compared with testdata/NAME.golden.yaml. UPDATE_GOLDEN=1 rewrites them.
// The first line of each input says, as a comment, what the case shows.

// Outcome is what a golden file records.
type Outcome struct {
	Case string `json:"case"`
	// Skip and SkipDetail: why the plugin evaluated nothing (a Rollout
	// with spec.workloadRef).
	Skip       mutate.Reason `json:"skip,omitempty"`
	SkipDetail string        `json:"skipDetail,omitempty"`
	Mutation   Mutation      `json:"mutation"`
	Validation Validation    `json:"validation"`
	// Object is the input with the mutating webhook's patch applied.
	Object json.RawMessage `json:"object"`
}

type Mutation struct {
	Skip     mutate.Reason      `json:"skip,omitempty"`
	Patch    []mutate.Operation `json:"patch,omitempty"`
	Warnings []string           `json:"warnings,omitempty"`
}

type Validation struct {
	Allowed  bool     `json:"allowed"`
	Reasons  []string `json:"reasons,omitempty"`
	Error    string   `json:"error,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, in := range inputs {
		if strings.HasSuffix(in, ".golden.yaml") {
			continue
		}
		n++
		name := strings.TrimSuffix(filepath.Base(in), ".yaml")
		t.Run(name, func(t *testing.T) {
			res, what := processGolden(t, in)
			got := outcome(t, what, res)
			goldenPath := strings.TrimSuffix(in, ".yaml") + ".golden.yaml"
			gotYAML, err := yaml.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if os.Getenv("UPDATE_GOLDEN") != "" {
				if err := os.WriteFile(goldenPath, gotYAML, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(goldenPath)
			if err != nil {
				t.Fatalf("%v (run with UPDATE_GOLDEN=1 to create it)", err)
			}
			if diff := cmp.Diff(string(want), string(gotYAML)); diff != "" {
				t.Errorf("outcome differs from %s (-want +got):\n%s", goldenPath, diff)
			}
			assertInvariants(t, in, res)
		})
	}
	if n < 20 {
		t.Fatalf("only %d golden inputs: the suite lost cases", n)
	}
}

// processGolden reads a golden input and runs it.
func processGolden(t *testing.T, path string) (manifest.Result, string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	what := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(string(data), "\n", 2)[0], "#"))
	docs, err := manifest.Read(bytes.NewReader(data), path)
	if err != nil {
		t.Fatal(err)
	}
	var obj *manifest.Document
	for i := range docs {
		if docs[i].Supported() {
			if obj != nil {
				t.Fatalf("%s: one object per golden input", path)
			}
			obj = &docs[i]
		}
	}
	if obj == nil {
		t.Fatalf("%s: no Pod or workload", path)
	}
	ns := namespaceFor(namespaceOf(*obj), docs)
	res, err := manifest.Process(*obj, ns, mutate.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return res, what
}

func namespaceOf(d manifest.Document) string {
	if d.Namespace == "" {
		return "default"
	}
	return d.Namespace
}

func outcome(t *testing.T, what string, res manifest.Result) Outcome {
	m, v := res.Mutation, res.Validation
	o := Outcome{Case: what, Object: res.Object}
	if res.Skip != "" {
		o.Skip, o.SkipDetail = res.Skip, res.SkipDetail
		o.Validation.Allowed = true
		m, v = &mutate.Report{}, &mutate.Report{}
	}
	o.Mutation.Skip = m.Skip
	o.Mutation.Patch = m.Patch()
	o.Mutation.Warnings = m.AdmissionWarnings()
	o.Validation.Allowed = !v.Denied()
	if err := v.Err(); err != nil {
		o.Validation.Error = err.Error()
	}
	for _, f := range v.Violations {
		o.Validation.Reasons = append(o.Validation.Reasons, string(f.Reason))
	}
	o.Validation.Warnings = v.AdmissionWarnings()
	// Re-marshal the object so the golden file shows it as YAML, not a string.
	var anyObj any
	if err := json.Unmarshal(res.Object, &anyObj); err != nil {
		t.Fatal(err)
	}
	o.Object, _ = json.Marshal(anyObj)
	return o
}

// assertInvariants checks what must hold for every input, whatever the
// golden file says.
func assertInvariants(t *testing.T, path string, res manifest.Result) {
	t.Helper()
	if res.Skip != "" {
		return
	}
	for _, op := range res.Mutation.Patch() {
		if op.Operation != "add" {
			t.Errorf("patch has a %q operation at %s: graceguard only adds", op.Operation, op.Path)
		}
	}
	for _, r := range []*mutate.Report{res.Mutation, res.Validation} {
		for _, f := range r.Warnings {
			if w := f.Message(); len(w) > mutate.MaxWarningLength || strings.HasSuffix(w, "...") {
				t.Errorf("advice must fit %d characters whole: %q", mutate.MaxWarningLength, w)
			}
		}
		for _, w := range r.AdmissionWarnings() {
			if len(w) > mutate.MaxDenialWarningLength {
				t.Errorf("warning longer than the API server keeps: %q", w)
			}
		}
	}
	// Idempotence: what graceguard wrote, it does not write again.
	again := res.Doc
	again.Raw = res.Object
	docs, _ := manifest.Read(bytes.NewReader(mustRead(t, path)), path)
	ns := namespaceFor(namespaceOf(res.Doc), docs)
	res2, err := manifest.Process(again, ns, mutate.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if p := res2.Mutation.Patch(); len(p) > 0 {
		t.Errorf("mutating the result again changes it: %+v", p)
	}
	// A Pod graceguard changed in enforce mode has a budget that fits, and
	// preStop hooks that end inside its grace (a probe's own shorter grace
	// is the user's to fix).
	if res.Mutation.Applied && res.Doc.Kind == "Pod" {
		for _, v := range res.Validation.Violations {
			hookPastGrace := v.Reason == mutate.DenyHookExceedsGrace && strings.HasSuffix(v.Err.Field, ".lifecycle.preStop")
			if v.Reason == mutate.DenyBudgetExceedsGrace || v.Reason == mutate.DenyBudgetOverCap || hookPastGrace {
				t.Errorf("graceguard mutated the Pod and then found its budget does not fit: %v", res.Validation.Err())
			}
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// namespaceFor is the last Namespace of that name in docs (what kubectl
// apply ends with), else one opted in.
func namespaceFor(name string, docs []manifest.Document) mutate.Namespace {
	for i := len(docs) - 1; i >= 0; i-- {
		if ns, ok := manifest.NamespaceOf(docs[i]); ok && ns.Name == name {
			return ns
		}
	}
	return mutate.Namespace{Name: name, Labels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}}
}
