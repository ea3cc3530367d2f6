package envtest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/graceguard/graceguard/pkg/manifest"
	"github.com/graceguard/graceguard/pkg/mutate"
)

var resources = map[string]schema.GroupVersionResource{
	"Pod":         {Version: "v1", Resource: "pods"},
	"Namespace":   {Version: "v1", Resource: "namespaces"},
	"Deployment":  {Group: "apps", Version: "v1", Resource: "deployments"},
	"StatefulSet": {Group: "apps", Version: "v1", Resource: "statefulsets"},
	"DaemonSet":   {Group: "apps", Version: "v1", Resource: "daemonsets"},
	"ReplicaSet":  {Group: "apps", Version: "v1", Resource: "replicasets"},
	"Job":         {Group: "batch", Version: "v1", Resource: "jobs"},
	"CronJob":     {Group: "batch", Version: "v1", Resource: "cronjobs"},
	"Rollout":     {Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"},
}

// goldenOutcome is the part of pkg/mutate's golden files this suite checks.
type goldenOutcome struct {
	Mutation struct {
		Patch    []mutate.Operation `json:"patch"`
		Warnings []string           `json:"warnings"`
	} `json:"mutation"`
	Validation struct {
		Allowed  bool     `json:"allowed"`
		Error    string   `json:"error"`
		Warnings []string `json:"warnings"`
	} `json:"validation"`
}

var _ = Describe("every golden input of pkg/mutate, through the real API server", func() {
	It("is admitted or denied as its golden file says, and what graceguard writes passes API validation", func(ctx SpecContext) {
		inputs, err := filepath.Glob("../../pkg/mutate/testdata/*.yaml")
		Expect(err).NotTo(HaveOccurred())
		n := 0
		for _, in := range inputs {
			if strings.HasSuffix(in, ".golden.yaml") {
				continue
			}
			n++
			By(filepath.Base(in))
			checkGolden(ctx, in)
		}
		Expect(n).To(BeNumerically(">=", 20))
	})
})

func checkGolden(ctx SpecContext, path string) {
	GinkgoHelper()
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	docs, err := manifest.Read(bytes.NewReader(data), path)
	Expect(err).NotTo(HaveOccurred())
	goldenData, err := os.ReadFile(strings.TrimSuffix(path, ".yaml") + ".golden.yaml")
	Expect(err).NotTo(HaveOccurred())
	var want goldenOutcome
	Expect(yaml.Unmarshal(goldenData, &want)).To(Succeed())

	wc := newWarningClient()
	cfg := rest.CopyConfig(cp.Config)
	cfg.WarningHandler = wc
	client, err := dynamic.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())

	for _, d := range docs {
		obj := &unstructured.Unstructured{}
		Expect(obj.UnmarshalJSON(d.Raw)).To(Succeed())
		gvr, ok := resources[d.Kind]
		Expect(ok).To(BeTrue(), "%s: no resource for kind %s", path, d.Kind)
		if d.Kind == "Namespace" {
			ensureNamespace(ctx, obj)
			continue
		}
		ns := d.Namespace
		if ns == "" {
			ns = "default"
		}
		got, err := client.Resource(gvr).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if !want.Validation.Allowed {
			Expect(err).To(HaveOccurred(), "%s: admitted, but its golden file says denied: %s", path, want.Validation.Error)
			if floor, ok := strings.CutPrefix(err.Error()[strings.Index(err.Error(), ": ")+2:], "ValidatingAdmissionPolicy 'graceguard-floor' with binding 'graceguard-floor' denied request: "); ok {
				// The native floor refused it first, with the webhook's
				// words after the API server's own prefix.
				_, words, _ := strings.Cut(want.Validation.Error, " is invalid: ")
				Expect(floor).To(Equal(words), "%s: the floor's words are not the webhook's", path)
				continue
			}
			Expect(err.Error()).To(ContainSubstring(want.Validation.Error), "%s", path)
			continue
		}
		Expect(err).NotTo(HaveOccurred(), "%s: golden file says admitted", path)
		if d.Kind == "Pod" {
			// Every value graceguard's patch writes is in the object the
			// API server returns (which adds its own defaults around it).
			for _, op := range want.Mutation.Patch {
				Expect(valueAt(got.Object, op.Path)).To(ContainSubset(op.Value), "%s: %s", path, op.Path)
			}
		}
		for _, w := range append(want.Mutation.Warnings, want.Validation.Warnings...) {
			Expect(wc.Warnings()).To(ContainElement(w), "%s: warning missing", path)
		}
	}
}

// ensureNamespace creates a golden input's namespace; inputs that share a
// namespace must agree on its labels and annotations.
func ensureNamespace(ctx SpecContext, obj *unstructured.Unstructured) {
	GinkgoHelper()
	api := dyn.Resource(resources["Namespace"])
	_, err := api.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, err := api.Get(ctx, obj.GetName(), metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		for k, v := range obj.GetLabels() {
			Expect(cur.GetLabels()).To(HaveKeyWithValue(k, v), "golden inputs disagree on namespace %s", obj.GetName())
		}
		Expect(cur.GetAnnotations()).To(Equal(obj.GetAnnotations()), "golden inputs disagree on namespace %s", obj.GetName())
		return
	}
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) { _ = api.Delete(ctx, obj.GetName(), metav1.DeleteOptions{}) })
}

// valueAt follows a JSON pointer into a decoded object.
func valueAt(obj any, pointer string) any {
	cur := obj
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch c := cur.(type) {
		case map[string]any:
			cur = c[tok]
		case []any:
			var i int
			if err := json.Unmarshal([]byte(tok), &i); err != nil || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

// ContainSubset matches when every field of want is in the actual value
// with the same value (numbers compared as JSON numbers).
func ContainSubset(want any) types.GomegaMatcher {
	return WithTransform(func(actual any) error { return subset(normalize(want), normalize(actual), "") }, Succeed())
}

func normalize(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

func subset(want, got any, at string) error {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want an object, got %v", at, got)
		}
		for k, v := range w {
			if err := subset(v, g[k], at+"/"+k); err != nil {
				return err
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: want %v, got %v", at, w, got)
		}
		for i := range w {
			if err := subset(w[i], g[i], fmt.Sprintf("%s/%d", at, i)); err != nil {
				return err
			}
		}
		return nil
	}
	if !reflect.DeepEqual(want, got) {
		return fmt.Errorf("%s: want %v, got %v", at, want, got)
	}
	return nil
}
