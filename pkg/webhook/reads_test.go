package webhook

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// TestLeanDecodeKeepsWhatMutateReads holds the lean decoder to what the
// decisions read, by construction rather than by example: every field of a
// Pod's API types that pkg/mutate selects (mutateReads, generated from its
// source by make generate) is set in a Pod, at each place in a Pod where
// its type occurs, and must come out of decodeAdmissionPod set at one of
// them at least. A new read in pkg/mutate without a decoder case fails
// here; before, the plugin (full decode) and the webhook (lean decode)
// answered such a Pod differently (spec.hostNetwork with a Linkerd proxy,
// issue 44).
func TestLeanDecodeKeepsWhatMutateReads(t *testing.T) {
	if len(mutateReads) < 20 {
		t.Fatalf("only %d fields in mutateReads: run make generate", len(mutateReads))
	}
	pod := reflect.TypeFor[corev1.Pod]()
	var workloads []string
	for _, f := range mutateReads {
		name := f.typ + "." + f.field
		paths := pathsTo(pod, f.pkg, f.typ, nil, map[reflect.Type]bool{})
		if len(paths) == 0 {
			// A workload's own types (ReplicationController,
			// PodTemplateSpec): the workload decoder's.
			workloads = append(workloads, name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			var tried []string
			for _, p := range paths {
				in := &corev1.Pod{}
				owner := p.walk(reflect.ValueOf(in).Elem(), true)
				fv := owner.FieldByName(f.field)
				if !fv.IsValid() {
					t.Fatalf("%s has no field %s: run make generate", f.typ, f.field)
				}
				for sib, v := range siblings[f.typ] {
					owner.FieldByName(sib).Set(reflect.ValueOf(v))
				}
				sample(fv, name, 0)
				raw, err := json.Marshal(in)
				if err != nil {
					t.Fatal(err)
				}
				lean, _, err := decodeAdmissionPod(raw, &meter{})
				if err != nil {
					t.Fatalf("%s: lean decode of %s: %v", p, raw, err)
				}
				if got := p.walk(reflect.ValueOf(lean).Elem(), false); got.IsValid() && !got.FieldByName(f.field).IsZero() {
					return
				}
				tried = append(tried, p.String())
			}
			t.Errorf("pkg/mutate reads %s.%s, but the webhook's lean decoder drops it everywhere in a Pod (tried %s): add a case to pkg/webhook/decode.go",
				f.typ, f.field, strings.Join(tried, ", "))
		})
	}
	t.Logf("not part of a Pod (the workload decoder's): %s", strings.Join(workloads, ", "))
}

// apiPath is a way down from a Pod to a value of some type: struct fields
// by index; a slice or a pointer on the way is entered at its first element.
type apiPath []fieldStep

type fieldStep struct {
	index int
	name  string
}

func (p apiPath) String() string {
	var names []string
	for _, s := range p {
		names = append(names, s.name)
	}
	return strings.Join(names, ".")
}

// walk follows p from v. With alloc it makes what is missing (pointers,
// the first element of slices); without, it returns the invalid Value
// where something on the way is missing.
func (p apiPath) walk(v reflect.Value, alloc bool) reflect.Value {
	for _, s := range p {
		v = enter(v, alloc)
		if !v.IsValid() {
			return v
		}
		v = v.Field(s.index)
	}
	return enter(v, alloc)
}

// enter goes through pointers and into the first element of slices.
func enter(v reflect.Value, alloc bool) reflect.Value {
	for {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				if !alloc {
					return reflect.Value{}
				}
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		case reflect.Slice:
			if v.Len() == 0 {
				if !alloc {
					return reflect.Value{}
				}
				v.Set(reflect.MakeSlice(v.Type(), 1, 1))
			}
			v = v.Index(0)
		default:
			return v
		}
	}
}

// pathsTo lists every path from t down to the struct type pkg.name, not
// through maps and not through a type twice.
func pathsTo(t reflect.Type, pkg, name string, at apiPath, seen map[reflect.Type]bool) []apiPath {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return nil
	}
	if t.PkgPath() == pkg && t.Name() == name {
		return []apiPath{append(apiPath(nil), at...)}
	}
	seen[t] = true
	defer delete(seen, t)
	var out []apiPath
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		out = append(out, pathsTo(f.Type, pkg, name, append(at, fieldStep{i, f.Name}), seen)...)
	}
	return out
}

// samples are values graceguard keeps only when they are ones it reads:
// the labels and annotations it owns, the node selector's OS, the Istio
// environment that shapes the proxy's exit.
var samples = map[string]any{
	"ObjectMeta.Labels":      map[string]string{mutate.LabelIstioDataplaneMode: "ambient"},
	"ObjectMeta.Annotations": map[string]string{mutate.AnnotationLinkerdInject: "enabled"},
	"PodSpec.NodeSelector":   map[string]string{corev1.LabelOSStable: "windows"},
	"EnvVar.Name":            mutate.IstioExitEnv[0],
	"Lifecycle.StopSignal":   corev1.SIGINT,
	"PodOS.Name":             corev1.Windows,
}

// siblings are the fields that make graceguard read another field of the
// same object: an environment entry's value only under a name it reads.
var siblings = map[string]map[string]any{
	"EnvVar": {"Name": mutate.IstioExitEnv[0]},
}

// sample sets v, of the field named name, to a value that is not zero:
// samples' when it has one, else one of its kind, structs filled field by
// field (a few levels deep).
func sample(v reflect.Value, name string, depth int) {
	if s, ok := samples[name]; ok {
		sv := reflect.ValueOf(s)
		if v.Kind() == reflect.Pointer {
			v.Set(reflect.New(v.Type().Elem()))
			v = v.Elem()
		}
		v.Set(sv.Convert(v.Type()))
		return
	}
	switch v.Interface().(type) {
	case intstr.IntOrString, *intstr.IntOrString:
		is := intstr.FromInt32(8080)
		if v.Kind() == reflect.Pointer {
			v.Set(reflect.ValueOf(&is))
		} else {
			v.Set(reflect.ValueOf(is))
		}
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(7)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		sample(v.Elem(), name, depth)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		sample(v.Index(0), name, depth)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		sample(k, name, depth+1)
		sample(e, name, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		if depth > 4 || v.Type().PkgPath() == "k8s.io/apimachinery/pkg/api/resource" || v.Type() == reflect.TypeFor[metav1.Time]() ||
			v.Type() == reflect.TypeFor[metav1.FieldsV1]() {
			return
		}
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				sample(v.Field(i), v.Type().Name()+"."+f.Name, depth+1)
			}
		}
	default:
		panic(fmt.Sprintf("no sample for %s (%s)", name, v.Type()))
	}
}
