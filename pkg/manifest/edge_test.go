package manifest

import (
	"strings"
	"testing"

	"github.com/graceguard/graceguard/pkg/mutate"
)

func renderString(t *testing.T, in string) (string, *File) {
	t.Helper()
	f, err := ReadFile(strings.NewReader(in), "in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := mutateAll(t, f)
	out, err := f.Render(p)
	if err != nil {
		t.Fatal(err)
	}
	want, err := f.PatchedJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ReadFile(strings.NewReader(string(out)), "out.yaml")
	if err != nil {
		t.Fatalf("output does not read back: %v\n%s", err, out)
	}
	var n int
	for _, c := range again.Chunks {
		if c.raw == nil {
			continue
		}
		if n >= len(want) || !sameJSON(c.raw, want[n]) {
			t.Fatalf("document %d does not read as the patched object:\n%s", c.N, out)
		}
		n++
	}
	if n != len(want) {
		t.Fatalf("%d documents, want %d:\n%s", n, len(want), out)
	}
	return string(out), f
}

const pod = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: app
    image: app:1
`

func TestRenderEdgeCases(t *testing.T) {
	t.Run("CRLF line endings are kept, added lines included", func(t *testing.T) {
		out, f := renderString(t, strings.ReplaceAll("# windows\n"+pod, "\n", "\r\n"))
		if f.fallbacks != 0 || strings.Count(out, "\n") != strings.Count(out, "\r\n") {
			t.Errorf("fallbacks %d; lines must all end in CRLF:\n%q", f.fallbacks, out)
		}
	})
	t.Run("a last line without a newline", func(t *testing.T) {
		in := strings.TrimSuffix(pod, "\n")
		out, f := renderString(t, in)
		if _, ok := additions(in, out); f.fallbacks != 0 || !ok || !strings.HasSuffix(out, "seconds: 5\n") {
			t.Errorf("fallbacks %d:\n%s", f.fallbacks, out)
		}
	})
	t.Run("a stale budget annotation and a short grace are replaced in place", func(t *testing.T) {
		in := strings.Replace(pod, "  name: web\n", "  name: web # the shop\n  annotations:\n    graceguard.io/budget: \"routing=1s work=1s cleanup=1s margin=1s grace=4s\" # stale\n", 1)
		in = strings.Replace(in, "spec:\n", "spec:\n  terminationGracePeriodSeconds: 10   # too short\n", 1)
		out, f := renderString(t, in)
		want := strings.NewReplacer(`"routing=1s work=1s cleanup=1s margin=1s grace=4s" # stale`+"\n",
			"routing=5s work=20s cleanup=2s margin=3s grace=30s # stale\n  labels:\n    graceguard.io/treated: \"true\"\n",
			"Seconds: 10 ", "Seconds: 30 ").Replace(in)
		if f.fallbacks != 0 || !strings.HasPrefix(out, want[:strings.Index(want, "    image: app:1")]) {
			t.Errorf("fallbacks %d:\n%s", f.fallbacks, out)
		}
	})
	t.Run("an empty template metadata: {} is written into in flow, as lifecycle: {} is", func(t *testing.T) {
		in := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n" +
			"    metadata: {}   # empty\n    spec:\n      containers:\n      - name: app\n        image: app:1\n        lifecycle: {}\n"
		out, f := renderString(t, in)
		if _, ok := additions(in, out); f.fallbacks != 0 || !ok ||
			!strings.Contains(out, "    metadata: {annotations: {graceguard.io/budget: routing=5s work=20s cleanup=2s margin=3s grace=30s}}   # empty\n") ||
			!strings.Contains(out, "        lifecycle: {preStop: {sleep: {seconds: 5}}}\n") {
			t.Errorf("fallbacks %d:\n%s", f.fallbacks, out)
		}
	})
	t.Run("a mapping the patch would drop a key of is re-encoded, not spliced", func(t *testing.T) {
		// metadata: {creationTimestamp: null} is an empty ObjectMeta: the
		// patch replaces it whole, without the null.
		in := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n" +
			"    metadata: {creationTimestamp: null}\n    spec:\n      containers:\n      - name: app\n        image: app:1\n"
		out, f := renderString(t, in)
		if f.fallbacks != 1 || strings.Contains(out, "creationTimestamp") {
			t.Errorf("fallbacks %d:\n%s", f.fallbacks, out)
		}
	})
	t.Run("a null member replaced by a mapping is re-encoded, comments kept", func(t *testing.T) {
		in := strings.Replace(pod, "  name: web\n", "  name: web # the shop\n  annotations:\n", 1)
		out, f := renderString(t, in)
		if f.fallbacks != 1 || !strings.Contains(out, "# the shop") {
			t.Errorf("fallbacks %d:\n%s", f.fallbacks, out)
		}
	})
	t.Run("a block scalar that keeps its trailing blank lines is not cut", func(t *testing.T) {
		in := pod + "    command:\n    - sh\n    - -c\n    - |+\n      exec app\n\n  - name: b\n    image: b:1\n"
		out, f := renderString(t, in)
		if f.fallbacks != 1 {
			t.Errorf("the splice would change the script; it must fall back (fallbacks %d):\n%s", f.fallbacks, out)
		}
	})
	t.Run("a JSON document stays JSON on one line, comments around it kept", func(t *testing.T) {
		in := "# json below\n" + `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"app","image":"a"}]}}` + "\n# after\n"
		out, _ := renderString(t, in)
		// The objects' key order is kept where JSON patch keeps it (a
		// patched list element comes back with sorted keys).
		want := "# json below\n" + `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j","annotations":{"graceguard.io/budget":"routing=5s work=20s cleanup=2s margin=3s grace=30s"},"labels":{"graceguard.io/treated":"true"}},"spec":{"containers":[{"image":"a","name":"app","lifecycle":{"preStop":{"sleep":{"seconds":5}}}}]}}` + "\n# after\n"
		if out != want {
			t.Errorf("got:\n%s\nwant:\n%s", out, want)
		}
	})
	t.Run("an indented JSON document stays JSON in its indentation and key order", func(t *testing.T) {
		in := "{\n    \"kind\": \"Pod\",\n    \"apiVersion\": \"v1\",\n    \"metadata\": {\"name\": \"j\"},\n    \"spec\": {\"containers\": [{\"name\": \"app\", \"image\": \"a\"}]}\n}\n"
		out, _ := renderString(t, in)
		if !strings.HasPrefix(out, "{\n    \"kind\": \"Pod\",\n    \"apiVersion\": \"v1\",\n    \"metadata\": {\n        \"name\": \"j\",") || !strings.Contains(out, "\"seconds\": 5") {
			t.Errorf("got:\n%s", out)
		}
	})
	t.Run("documents graceguard does not change are copied, separators and all", func(t *testing.T) {
		in := "---\n# only a comment\n---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}   # trailing\n...\n---\n" + pod
		out, _ := renderString(t, in)
		if !strings.HasPrefix(out, strings.TrimSuffix(in, pod)) {
			t.Errorf("got:\n%s", out)
		}
	})
	t.Run("a changed document keeps its ... end marker and what follows it", func(t *testing.T) {
		in := pod + "... # end\n# about the next\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"
		out, _ := renderString(t, in)
		if !strings.Contains(out, "seconds: 5\n... # end\n# about the next\n---\n") {
			t.Errorf("the marker moved or went:\n%s", out)
		}
	})
}

func TestDocumentNumbersAreKubectls(t *testing.T) {
	// kubectl's reader skips empty documents but counts comment-only ones
	// between separators.
	in := "---\n---\n# comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n"
	docs, err := Read(strings.NewReader(in), "f")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 || docs[0].Source != "f#2" || docs[1].Source != "f#4" {
		t.Fatalf("got %+v", docs)
	}
	if docs[0].Line != 5 || docs[1].Line != 11 {
		t.Errorf("lines %d and %d, want 5 and 11", docs[0].Line, docs[1].Line)
	}
	// A comment block before the first --- is the stream's prefix (a
	// licence header), not a document: the first object is #1.
	docs, err = Read(strings.NewReader("# Copyright\n\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"), "f")
	if err != nil || len(docs) != 1 || docs[0].Source != "f#1" || docs[0].Line != 4 {
		t.Errorf("after a header comment: got %+v, %v; want f#1 on line 4", docs, err)
	}
	if _, err := Read(strings.NewReader("--- apiVersion: v1\n"), "f"); err == nil || !strings.Contains(err.Error(), "only a comment may follow ---") {
		t.Errorf("content after --- must be refused as kubectl does, got %v", err)
	}
}

func TestLocate(t *testing.T) {
	f := readTestFile(t, "testdata/istio-injected.yaml")
	d := f.Documents()[0]
	for _, tc := range []struct {
		path       string
		line, col  int
		whatItIsAt string
	}{
		{"spec.template.spec.containers[0].lifecycle.preStop", 42, 11, "the existing hook"},
		{"spec.template.spec.containers[1].lifecycle.preStop", 49, 9, "the second container: the hook would be added there"},
		{"spec.template.metadata.annotations[sidecar.istio.io/status]", 29, 9, "an annotation key with dots and slashes"},
		{"spec.template.metadata.annotations[graceguard.io/max-work]", 22, 7, "the annotations that would hold a missing key"},
		{"spec.template.spec.terminationGracePeriodSeconds", 37, 5, "the Pod spec"},
	} {
		if l, c := d.Locate(tc.path); l != tc.line || c != tc.col {
			t.Errorf("%s (%s): %d:%d, want %d:%d", tc.path, tc.whatItIsAt, l, c, tc.line, tc.col)
		}
	}
}

// Locate finds a List item's fields in the List's text, and answers for
// each document of a stream in turn (its parse is not kept by the read).
func TestLocateInAListAndAcrossDocuments(t *testing.T) {
	list := readTestFile(t, "testdata/list.yaml").Documents()
	istio := readTestFile(t, "testdata/istio-injected.yaml").Documents()[0]
	for _, tc := range []struct {
		d         Document
		path      string
		line, col int
	}{
		{list[1], "spec.template.spec.containers[0].ports", 78, 11},
		{list[0], "spec.template.spec.containers[0].readinessProbe", 43, 11},
		{istio, "spec.template.spec.containers[0].lifecycle.preStop", 42, 11},
		{list[1], "spec.template.spec.containers[0].image", 77, 11},
	} {
		if l, c := tc.d.Locate(tc.path); l != tc.line || c != tc.col {
			t.Errorf("%s %s: %d:%d, want %d:%d", tc.d.Source, tc.path, l, c, tc.line, tc.col)
		}
	}
}

func TestMissingTemplateIsASkipNotAnError(t *testing.T) {
	for _, path := range []string{"testdata/kustomize-patch.yaml", "testdata/cronjob-patch.yaml"} {
		d := readTestFile(t, path).Documents()[0]
		res, err := Process(d, mutate.Namespace{Name: "x", Labels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}}, mutate.DefaultOptions())
		if err != nil || res.Skip != SkipNoTemplate || !strings.Contains(res.SkipDetail, "kustomize build") {
			t.Errorf("%s: skip %q (%s), err %v", path, res.Skip, res.SkipDetail, err)
		}
	}
}
