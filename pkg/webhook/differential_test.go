package webhook

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/randfill"

	"github.com/graceguard/graceguard/pkg/manifest"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// FuzzGeneratedPodsDecideAlike: the webhook (its lean decoder) and the
// plugin (the API machinery's full decode) decide alike on Pods generated
// from the golden inputs by changing random fields, not only on the
// goldens (TestLeanDecodeDecidesLikeTheFullDecode). Most changes set a
// field pkg/mutate reads (mutateReads) somewhere in the Pod to a value
// from the vocabulary its rules test (mesh container names, graceguard's
// keys, sleep commands, signals); the rest fill a whole field of the spec
// or of a container at random, for what the decisions read through a
// whole struct. Within the reader's bounds, Mutate and Validate must give
// the same patch, warnings, error, skip, grace and violations.
func FuzzGeneratedPodsDecideAlike(f *testing.F) {
	pods := goldenPods(f)
	for i := range pods {
		for seed := range int64(3) {
			f.Add(uint16(i), seed)
		}
	}
	f.Fuzz(func(t *testing.T, which uint16, seed int64) {
		g := pods[int(which)%len(pods)]
		pod := g.pod.DeepCopy()
		r := rand.New(rand.NewPCG(uint64(seed), uint64(which)))
		vary(pod, r)
		raw, err := json.Marshal(pod)
		if err != nil {
			return // not a Pod the API server could send (randfill's IntOrString)
		}
		var full corev1.Pod
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &full); err != nil {
			t.Fatal(err)
		}
		if !withinBounds(&full) {
			return
		}
		for _, decide := range []func(mutate.Target, mutate.Namespace, mutate.Options) *mutate.Report{mutate.Mutate, mutate.Validate} {
			lean, _, err := decodeAdmissionPod(raw, &meter{})
			if err != nil {
				t.Fatalf("%s: lean decode: %v", raw, err)
			}
			want := summary(decide(mutate.ForPod(full.DeepCopy()), g.ns, mutate.DefaultOptions()))
			got := summary(decide(mutate.ForPod(lean), g.ns, mutate.DefaultOptions()))
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("from %s: the webhook and the plugin decide differently on\n%s\n webhook %+v\n plugin  %+v", g.name, raw, got, want)
			}
		}
	})
}

type goldenPod struct {
	name string
	doc  manifest.Document
	pod  corev1.Pod
	ns   mutate.Namespace
}

// goldenPods are the Pods of pkg/mutate's golden inputs, each with its
// document and namespace.
func goldenPods(f testing.TB) []goldenPod {
	inputs, err := filepath.Glob("../mutate/testdata/*.yaml")
	if err != nil {
		f.Fatal(err)
	}
	var out []goldenPod
	for _, in := range inputs {
		if strings.HasSuffix(in, ".golden.yaml") {
			continue
		}
		data, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		docs, err := manifest.Read(bytes.NewReader(data), in)
		if err != nil {
			f.Fatal(err)
		}
		for _, d := range docs {
			if d.Kind != "Pod" {
				continue
			}
			var p corev1.Pod
			if err := json.Unmarshal(d.Raw, &p); err != nil {
				f.Fatal(err)
			}
			out = append(out, goldenPod{name: filepath.Base(in), doc: d, pod: p, ns: namespaceFor(d.Namespace, docs)})
		}
	}
	if len(out) < 20 {
		f.Fatalf("only %d golden Pods", len(out))
	}
	return out
}

// vary makes one to four changes to pod.
func vary(pod *corev1.Pod, r *rand.Rand) {
	root := reflect.TypeFor[corev1.Pod]()
	for range 1 + r.IntN(4) {
		if r.IntN(10) < 7 {
			f := mutateReads[r.IntN(len(mutateReads))]
			paths := pathsTo(root, f.pkg, f.typ, nil, map[reflect.Type]bool{})
			if len(paths) == 0 {
				continue
			}
			owner := paths[r.IntN(len(paths))].walkAt(reflect.ValueOf(pod).Elem(), r)
			word(owner.FieldByName(f.field), f.typ+"."+f.field, r, 0)
			continue
		}
		// A whole field, at random.
		v := reflect.ValueOf(&pod.Spec).Elem()
		if len(pod.Spec.Containers) > 0 && r.IntN(2) == 0 {
			v = reflect.ValueOf(&pod.Spec.Containers[r.IntN(len(pod.Spec.Containers))]).Elem()
		}
		fv := v.Field(r.IntN(v.NumField()))
		if !fv.CanSet() || fv.Type() == reflect.TypeFor[metav1.ObjectMeta]() {
			continue
		}
		p := reflect.New(fv.Type())
		randfill.NewWithSeed(r.Int64()).NilChance(.3).NumElements(1, 2).MaxDepth(4).Fill(p.Interface())
		fv.Set(p.Elem())
	}
}

// walkAt follows p from v as walk does, making what is missing, but into a
// random element of each list on the way.
func (p apiPath) walkAt(v reflect.Value, r *rand.Rand) reflect.Value {
	for _, s := range p {
		v = enterAt(v, r)
		v = v.Field(s.index)
	}
	return enterAt(v, r)
}

func enterAt(v reflect.Value, r *rand.Rand) reflect.Value {
	for {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		case reflect.Slice:
			if v.Len() == 0 || r.IntN(4) == 0 {
				v.Set(reflect.Append(v, reflect.New(v.Type().Elem()).Elem()))
			}
			v = v.Index(r.IntN(v.Len()))
		default:
			return v
		}
	}
}

// words are the strings graceguard's rules compare against, and a few
// they do not.
var words = []string{"", "app", "web", "istio-proxy", "linkerd-proxy", "sleep", "/bin/sleep", "sh", "/bin/sh", "-c",
	"sleep 5", "sleep 45", "exec sleep 10; drain", "5", "10", "30", "45", "5s", "30s", "1m", "auto", "none", "exec",
	"enabled", "disabled", "true", "false", "ambient", "SIGTERM", "SIGQUIT", "SIGKILL", "windows", "linux", "http",
	"/healthz", "Always", "IfNotPresent", "traefik", "kube-proxy", "é", "a b"}

// keysOf are the label and annotation names graceguard reads, and others.
func keysOf() []string {
	out := []string{"app", "example.com/x"}
	for _, k := range mutate.Keys {
		out = append(out, k.Name)
	}
	out = append(out, mutate.EnvRead...)
	return out
}

// word sets v to a value its rules might test: words, small numbers,
// sleep commands, graceguard's keys; structs field by field.
func word(v reflect.Value, name string, r *rand.Rand, depth int) {
	switch v.Kind() {
	case reflect.String:
		if strings.HasSuffix(name, ".Name") && r.IntN(2) == 0 {
			keys := keysOf()
			v.SetString(keys[r.IntN(len(keys))])
			return
		}
		v.SetString(words[r.IntN(len(words))])
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	case reflect.Int, reflect.Int32, reflect.Int64:
		n := []int64{0, 1, 2, 5, 10, 30, 45, 60, 3600, -1}
		v.SetInt(n[r.IntN(len(n))])
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(r.IntN(100)))
	case reflect.Pointer:
		if r.IntN(5) == 0 {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		word(v.Elem(), name, r, depth)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.String && r.IntN(2) == 0 {
			cmds := [][]string{{"sleep", "10"}, {"/bin/sleep", "45"}, {"sh", "-c", "sleep 5"}, {"/bin/sh", "-c", "exec sleep 30"}, {"sleep", "1", "2"}}
			c := cmds[r.IntN(len(cmds))]
			s := reflect.MakeSlice(v.Type(), len(c), len(c))
			for i, w := range c {
				s.Index(i).SetString(w)
			}
			v.Set(s)
			return
		}
		n := r.IntN(3)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			word(s.Index(i), name, r, depth+1)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		keys := keysOf()
		for range 1 + r.IntN(3) {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			if k.Kind() == reflect.String {
				k.SetString(keys[r.IntN(len(keys))])
			}
			word(e, name, r, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		if depth > 3 || v.Type().PkgPath() == "k8s.io/apimachinery/pkg/api/resource" || v.Type() == reflect.TypeFor[metav1.Time]() ||
			v.Type() == reflect.TypeFor[metav1.FieldsV1]() || v.Type() == reflect.TypeFor[metav1.ObjectMeta]() {
			return
		}
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() && r.IntN(2) == 0 {
				word(v.Field(i), v.Type().Name()+"."+f.Name, r, depth+1)
			}
		}
	}
}
