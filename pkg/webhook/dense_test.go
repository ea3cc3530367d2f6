package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// The bounds of docs/security.md hold for every shape of object, not only
// for the shapes someone thought of: the generator below walks the Go
// types the API server encodes (corev1.Pod and each workload kind) and,
// for every field that can grow (a string, a list, a map), builds the
// object where that one field is as dense as the API server's 3 MiB
// request limit allows, all else minimal. Lists are dense two ways: many
// minimal elements, and, down a list of structures, a few hundred
// elements that each carry the dense field below (300 containers with a
// 10 KiB probe each). Each is sent through the real handlers as a CREATE,
// and the workloads also as an UPDATE with a dense oldObject; the
// runtime's counters must show at most 16 MiB allocated and the answer
// must be under 64 KiB.

// fullDense is the JSON one dense field is given at full density: the
// API server's limit on a request (3 MiB), less room for the rest.
const fullDense = 3<<20 - 4<<10

// denseBudget is the density the test runs at: 512 KiB in make test (over
// 10,000 reviews), fullDense with GRACEGUARD_DENSE=full (make
// security-report). The bound it asserts holds at any density: a review
// allocates at most its body once, what it keeps (MaxKeptBytes) and a
// little more (denseSlack), which at 3 MiB is well under 16 MiB.
var denseBudget = func() int {
	if os.Getenv("GRACEGUARD_DENSE") == "full" {
		return fullDense
	}
	return 512 << 10
}()

// denseSlack is what a review allocates besides its body and what it
// keeps: the decoder, the decision, the answer.
const denseSlack = 1 << 20

// wideElements is how many elements a list gets in the wide shape.
const wideElements = 300

// shape is one dense object: the field's path (a "[]" step is the list
// that gets wideElements elements, a "[0]" step one element) and its type.
type shape struct {
	path []string
	wide bool
	leaf reflect.Type
	kind string
}

func (s shape) String() string { return strings.Join(s.path, ".") + " (" + s.kind + ")" }

// denseShapes returns every dense shape of objects of type t.
func denseShapes(t reflect.Type) []shape {
	var out []shape
	var walk func(t reflect.Type, path []string, wide bool, seen map[reflect.Type]int)
	walk = func(t reflect.Type, path []string, wide bool, seen map[reflect.Type]int) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if seen[t] > 1 {
			return // recursion (JSON schemas) goes no deeper
		}
		seen[t]++
		defer func() { seen[t]-- }()
		leaf := func(kind string) {
			out = append(out, shape{path: slices.Clone(path), wide: wide, leaf: t, kind: kind})
		}
		switch {
		case isScalarString(t):
			leaf("a long string")
		case t.Kind() == reflect.Map:
			leaf("many entries")
		case t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8:
			leaf("many elements")
			e := t.Elem()
			for e.Kind() == reflect.Pointer {
				e = e.Elem()
			}
			if e.Kind() == reflect.Struct {
				// One element, dense below.
				walk(e, append(slices.Clone(path), "[0]"), wide, seen)
				if !wide {
					// The wide shape: a few hundred elements, each dense below.
					walk(e, append(slices.Clone(path), "[]"), true, seen)
				}
			}
		case t.Kind() == reflect.Struct:
			for i := range t.NumField() {
				f := t.Field(i)
				name, inline := jsonName(f)
				switch {
				case name == "-":
				case inline:
					walk(f.Type, path, wide, seen)
				default:
					walk(f.Type, append(slices.Clone(path), name), wide, seen)
				}
			}
		}
	}
	walk(t, nil, false, map[reflect.Type]int{})
	return out
}

// write writes the object of shape s into b, after prefix (the object's
// first members, with their trailing comma).
func (s shape) write(b *bytes.Buffer, prefix string) {
	budget := denseBudget
	if s.wide {
		budget = denseBudget / wideElements
	}
	var inner bytes.Buffer
	at := len(s.path)
	if s.wide {
		at = slices.Index(s.path, "[]")
		// One element, dense below, written wideElements times.
		inner.WriteByte('{')
		nestInto(&inner, s.path[at+1:], func(b *bytes.Buffer) { denseValue(b, s.leaf, budget) })
		inner.WriteByte('}')
	}
	b.WriteString("{" + prefix)
	nestInto(b, s.path[:at], func(b *bytes.Buffer) {
		if !s.wide {
			denseValue(b, s.leaf, budget)
			return
		}
		b.WriteByte('[')
		for i := range wideElements {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(inner.Bytes())
		}
		b.WriteByte(']')
	})
	b.WriteByte('}')
}

// nestInto writes v at path inside an object the caller has opened:
// ["spec","containers","[0]","ports"] is written "spec":{"containers":[{"ports":v}]}.
func nestInto(b *bytes.Buffer, path []string, v func(*bytes.Buffer)) {
	var closing []string
	inObject := true
	for _, p := range path {
		if p == "[0]" {
			b.WriteByte('[')
			closing, inObject = append(closing, "]"), false
			continue
		}
		if !inObject {
			b.WriteByte('{')
			closing = append(closing, "}")
		}
		b.WriteString(`"` + p + `":`)
		inObject = false
	}
	v(b)
	for i := len(closing) - 1; i >= 0; i-- {
		b.WriteString(closing[i])
	}
}

// isScalarString: a type the API encodes as one JSON string (strings,
// quantities, times, int-or-strings).
func isScalarString(t reflect.Type) bool {
	if t.Kind() == reflect.String {
		return true
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	_, marshals := reflect.PointerTo(t).MethodByName("MarshalJSON")
	_, marshalsV := t.MethodByName("MarshalJSON")
	return marshals || marshalsV
}

func jsonName(f reflect.StructField) (string, bool) {
	tag := f.Tag.Get("json")
	name, opts, _ := strings.Cut(tag, ",")
	if strings.Contains(opts, "inline") || (f.Anonymous && name == "") {
		return "", true
	}
	if name == "" {
		name = f.Name
	}
	return name, false
}

// denseValue writes a JSON value of type t about budget bytes long.
func denseValue(b *bytes.Buffer, t reflect.Type, budget int) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case isScalarString(t):
		b.WriteByte('"')
		b.Write(bytes.Repeat([]byte{'a'}, max(budget-2, 1)))
		b.WriteByte('"')
	case t.Kind() == reflect.Map:
		b.WriteByte('{')
		el := minimal(t.Elem())
		for i, start := 0, b.Len(); b.Len()-start < budget; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"k` + strconv.Itoa(i) + `":` + el)
		}
		b.WriteByte('}')
	case t.Kind() == reflect.Slice:
		el := minimal(t.Elem())
		b.WriteByte('[')
		for i := range max(budget/(len(el)+1), 1) {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(el)
		}
		b.WriteByte(']')
	default:
		b.WriteString(minimal(t))
	}
}

// minimal is the shortest JSON value of type t.
func minimal(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case isScalarString(t):
		return `"a"`
	case t.Kind() == reflect.Bool:
		return "true"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Float64:
		return "1"
	case t.Kind() == reflect.Slice:
		return "[]"
	}
	return "{}"
}

// denseKind is one kind the generator builds objects of, and how its
// reviews are sent.
type denseKind struct {
	kind, group string
	typ         reflect.Type
	paths       []string
	update      bool
}

func TestEveryDenseShapeIsAnsweredWithinTheBounds(t *testing.T) {
	f := newFixture(t)
	mux := http.NewServeMux()
	for path, h := range Endpoints(Config{Options: f.opts, Namespaces: f.ns, Metrics: f.metrics, Log: logr.Discard()}) {
		mux.Handle(path, h)
	}
	kinds := []denseKind{
		{"Pod", "", reflect.TypeFor[corev1.Pod](), []string{PathMutatePod, PathValidatePod}, false},
		{"Deployment", "apps", reflect.TypeFor[appsv1.Deployment](), []string{PathValidateWorkloads}, true},
		{"StatefulSet", "apps", reflect.TypeFor[appsv1.StatefulSet](), []string{PathValidateWorkloads}, false},
		{"CronJob", "batch", reflect.TypeFor[batchv1.CronJob](), []string{PathValidateWorkloads}, true},
	}
	var worstAlloc, worstAnswer outcome
	var worstAllocAt, worstAnswerAt string
	n := 0
	for _, k := range kinds {
		shapes := denseShapes(k.typ)
		if len(shapes) < 100 {
			t.Fatalf("%s: only %d shapes generated", k.kind, len(shapes))
		}
		prefix := `"apiVersion":"` + strings.TrimPrefix(k.group+"/v1", "/") + `","kind":"` + k.kind + `",`
		var obj bytes.Buffer
		for _, s := range shapes {
			obj.Reset()
			s.write(&obj, prefix)
			reviews := [][]byte{denseReview(admissionv1.Create, k, obj.Bytes(), nil)}
			if k.update {
				reviews = append(reviews, denseReview(admissionv1.Update, k, obj.Bytes(), obj.Bytes()))
			}
			for _, body := range reviews {
				for _, path := range k.paths {
					n++
					o := serveCounted(mux, path, body)
					at := fmt.Sprintf("%s %s %s", k.kind, path, s)
					if o.status != http.StatusOK || o.resp == nil {
						t.Fatalf("%s: HTTP %d, want 200 with an AdmissionReview", at, o.status)
					}
					if bound := uint64(len(body) + MaxKeptBytes + denseSlack); o.alloc > bound || o.alloc > maxAllocBytes {
						t.Errorf("%s: allocated %.1f MiB for a %d-byte review, over the bound of %.1f MiB", at, float64(o.alloc)/(1<<20), len(body), float64(min(bound, maxAllocBytes))/(1<<20))
					}
					if o.size > maxAnswerBytes {
						t.Errorf("%s: answer of %d bytes, over the bound of %d", at, o.size, maxAnswerBytes)
					}
					if o.alloc > worstAlloc.alloc {
						worstAlloc, worstAllocAt = o, at
					}
					if o.size > worstAnswer.size {
						worstAnswer, worstAnswerAt = o, at
					}
				}
			}
		}
	}
	t.Logf("%d reviews at %d KiB of density; most allocated: %.1f MiB (%s); largest answer: %d bytes (%s)",
		n, denseBudget>>10, float64(worstAlloc.alloc)/(1<<20), worstAllocAt, worstAnswer.size, worstAnswerAt)
}

// serveCounted is serve without its garbage collection before each review:
// the runtime's count of bytes allocated needs none, and over 10,000
// reviews it would be most of the time.
func serveCounted(h http.Handler, path string, body []byte) outcome {
	req := httptest.NewRequest(http.MethodPost, path+"?timeout=5s", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	h.ServeHTTP(rec, req)
	runtime.ReadMemStats(&after)
	o := outcome{size: rec.Body.Len(), alloc: after.TotalAlloc - before.TotalAlloc, status: rec.Code}
	if rec.Code == http.StatusOK {
		var out admissionv1.AdmissionReview
		if json.Unmarshal(rec.Body.Bytes(), &out) == nil {
			o.resp = out.Response
		}
	}
	return o
}

// denseReview is an AdmissionReview as the API server sends one, around
// objects already in JSON (written, not encoded: they are megabytes).
func denseReview(op admissionv1.Operation, k denseKind, obj, old []byte) []byte {
	resource := strings.ToLower(k.kind) + "s"
	req := map[string]any{
		"uid":       "705ab4f5-6393-11e8-b7cc-42010a800002",
		"kind":      map[string]string{"group": k.group, "version": "v1", "kind": k.kind},
		"resource":  map[string]string{"group": k.group, "version": "v1", "resource": resource},
		"namespace": nsEnforce, "name": "web", "operation": string(op),
		"userInfo": map[string]any{"username": "alice"},
	}
	head, _ := json.Marshal(req)
	var b bytes.Buffer
	b.Grow(len(obj) + len(old) + 512)
	b.WriteString(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":`)
	b.Write(head[:len(head)-1])
	b.WriteString(`,"object":`)
	b.Write(obj)
	if old != nil {
		b.WriteString(`,"oldObject":`)
		b.Write(old)
	}
	b.WriteString("}}")
	return b.Bytes()
}

// Every key graceguard reads, with a value far past its bound, on the Pod,
// the template and the namespace: one finding each, quoted clipped, and
// every answer within the bounds. The keys come from mutate.Keys, so a new
// key is tested the day it is added.
func TestEveryReadKeyIsBounded(t *testing.T) {
	f := newFixture(t)
	mux := http.NewServeMux()
	for path, h := range Endpoints(Config{Options: f.opts, Namespaces: f.ns, Metrics: f.metrics, Log: logr.Discard()}) {
		mux.Handle(path, h)
	}
	huge := strings.Repeat("x", 256<<10)
	app := `{"name":"app","image":"registry.example/app:1"}`
	for _, k := range mutate.Keys {
		if k.Where&(mutate.PodAnnotation|mutate.PodLabel) == 0 {
			continue
		}
		meta := map[string]any{"name": "web"}
		if k.Where&mutate.PodAnnotation != 0 {
			meta["annotations"] = map[string]string{k.Name: huge}
		} else {
			meta["labels"] = map[string]string{k.Name: huge}
		}
		m, _ := json.Marshal(meta)
		pod := `{"apiVersion":"v1","kind":"Pod","metadata":` + string(m) + `,"spec":{"containers":[` + app + `]}}`
		deploy := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"template":{"metadata":` + string(m) + `,"spec":{"containers":[` + app + `]}}}}`
		for _, c := range []struct {
			path string
			body []byte
		}{
			{PathMutatePod, denseReview(admissionv1.Create, denseKind{kind: "Pod"}, []byte(pod), nil)},
			{PathValidatePod, denseReview(admissionv1.Create, denseKind{kind: "Pod"}, []byte(pod), nil)},
			{PathValidateWorkloads, denseReview(admissionv1.Create, denseKind{kind: "Deployment", group: "apps"}, []byte(deploy), nil)},
		} {
			o := serve(t, mux, c.path, c.body)
			at := k.Name + " at " + c.path
			if o.resp == nil {
				t.Fatalf("%s: HTTP %d", at, o.status)
			}
			if o.size > maxAnswerBytes || o.alloc > maxAllocBytes {
				t.Errorf("%s: answer %d bytes, %.1f MiB allocated", at, o.size, float64(o.alloc)/(1<<20))
			}
			if o.resp.Result != nil && strings.Contains(o.resp.Result.Message, strings.Repeat("x", 100)) {
				t.Errorf("%s: the value is quoted unclipped: %.300s", at, o.resp.Result.Message)
			}
			for _, w := range o.resp.Warnings {
				if strings.Contains(w, strings.Repeat("x", 100)) {
					t.Errorf("%s: a warning quotes the value unclipped: %.300s", at, w)
				}
			}
			if k.Where&mutate.PodAnnotation != 0 && k.MaxLength < len(huge) && o.resp.Allowed && k.Owner == "graceguard" {
				t.Errorf("%s: a value past its bound of %d bytes is admitted", at, k.MaxLength)
			}
		}
	}
}
