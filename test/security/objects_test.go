package security

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// The dense objects: the shapes pkg/webhook's dense-shape generator
// (dense_test.go) found the costliest, each as dense as a request allows.
// Through the API server that is its 3 MiB request limit; a client posting
// to the webhook's port directly is held only by the webhook's own 7 MiB.

// apiServerLimit is the API server's limit on a request body
// (k8s.io/apiserver's MaxRequestBodyBytes default); denseFill what the
// dense part of one object is given, leaving room for the rest.
const (
	apiServerLimit = 3 << 20
	denseFill      = apiServerLimit - 8<<10
	// directFill is what one object of a review posted straight to the
	// webhook is given: a Pod review just under the webhook's limit
	// (webhook.MaxReviewBytes, 7 MiB), and each of an UPDATE's two objects
	// half of it.
	directFill = 7<<20 - 16<<10
)

// shape is one dense Pod: what it fills, and whether the API server's
// validation accepts it (then both of graceguard's Pod webhooks, and a
// workload's template, can carry it; otherwise only the mutating webhook,
// which runs before validation, sees it).
type shape struct {
	name  string
	valid bool
	// meta writes members of the Pod's metadata, spec members of its
	// spec, together about n bytes; variant changes what they hold, so
	// that an UPDATE's template differs from the stored one.
	meta func(b *bytes.Buffer, n int, variant byte)
	spec func(b *bytes.Buffer, n int, variant byte)
}

const image = "registry.example/app:1"

// shapes are the dense Pods, in the order the classes send them.
var shapes = []shape{
	{name: "command", valid: true, spec: func(b *bytes.Buffer, n int, v byte) {
		b.WriteString(`"containers":[{"name":"app","image":"` + image + `","command":`)
		list(b, n, `"`+string(v)+`"`)
		b.WriteString(`}]`)
	}},
	{name: "args", valid: true, spec: func(b *bytes.Buffer, n int, v byte) {
		b.WriteString(`"containers":[{"name":"app","image":"` + image + `","args":`)
		list(b, n, `"`+string(v)+`"`)
		b.WriteString(`}]`)
	}},
	{name: "preStop exec", valid: true, spec: func(b *bytes.Buffer, n int, v byte) {
		b.WriteString(`"containers":[{"name":"app","image":"` + image + `","lifecycle":{"preStop":{"exec":{"command":`)
		list(b, n, `"`+string(v)+`"`)
		b.WriteString(`}}}}]`)
	}},
	{name: "annotations, many keys", meta: func(b *bytes.Buffer, n int, v byte) {
		b.WriteString(`"annotations":{`)
		for i, start := 0, b.Len(); b.Len()-start < n; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"k` + strconv.Itoa(i) + `":"` + string(v) + `"`)
		}
		b.WriteString(`}`)
	}, spec: minimalSpec},
	{name: "ports: 256 containers of 256", valid: true, spec: func(b *bytes.Buffer, n int, v byte) {
		// The most ports graceguard reads, in the most containers it reads;
		// the first container's args fill the rest.
		const port = `{"containerPort":65535,"protocol":"TCP"},`
		b.WriteString(`"containers":[`)
		for c := range 256 {
			if c > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"name":"c` + strconv.Itoa(c) + `","image":"` + image + `"`)
			if c == 0 {
				b.WriteString(`,"args":`)
				list(b, n-256*(256*len(port)+64), `"`+string(v)+`"`)
			}
			b.WriteString(`,"ports":[`)
			for p := range 256 {
				if p > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(b, `{"containerPort":%d,"protocol":"TCP"}`, 1+p)
			}
			b.WriteString(`]}`)
		}
		b.WriteString(`]`)
	}},
	{name: "probe headers", valid: true, spec: func(b *bytes.Buffer, n int, v byte) {
		b.WriteString(`"containers":[{"name":"app","image":"` + image + `","readinessProbe":{"httpGet":{"path":"/","port":8080,"httpHeaders":`)
		list(b, n, `{"name":"X-`+string(v)+`","value":"`+string(v)+`"}`)
		b.WriteString(`}}}]`)
	}},
	{name: "256 containers with large probes", valid: true, spec: func(b *bytes.Buffer, n int, v byte) {
		// Three exec probes a container, four arguments each: all of it
		// is kept (the first arguments of an exec up to 4 KiB).
		arg := `"` + strings.Repeat(string(v), max((n/256-192)/12-3, 1)) + `"`
		exec := `{"exec":{"command":[` + strings.Repeat(arg+",", 3) + arg + `]}}`
		b.WriteString(`"containers":[`)
		for c := range 256 {
			if c > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"name":"c` + strconv.Itoa(c) + `","image":"` + image + `","readinessProbe":` + exec + `,"livenessProbe":` + exec + `,"startupProbe":` + exec + `}`)
		}
		b.WriteString(`]`)
	}},
}

func minimalSpec(b *bytes.Buffer, _ int, _ byte) {
	b.WriteString(`"containers":[{"name":"app","image":"` + image + `"}]`)
}

// list writes a JSON list of copies of elem, about n bytes long.
func list(b *bytes.Buffer, n int, elem string) {
	b.WriteByte('[')
	for i := range max(n/(len(elem)+1), 1) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(elem)
	}
	b.WriteByte(']')
}

// podJSON is the Pod of s, name in namespace, dense to about n bytes.
func (s shape) podJSON(name, namespace string, n int, variant byte) []byte {
	var b bytes.Buffer
	b.Grow(n + 4<<10)
	b.WriteString(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"` + name + `","namespace":"` + namespace + `"`)
	s.writeMeta(&b, n, variant)
	b.WriteString(`},"spec":{`)
	s.writeSpec(&b, n, variant)
	b.WriteString(`}}`)
	return b.Bytes()
}

func (s shape) writeMeta(b *bytes.Buffer, n int, v byte) {
	if s.meta != nil {
		b.WriteByte(',')
		s.meta(b, n, v)
	}
}

func (s shape) writeSpec(b *bytes.Buffer, n int, v byte) {
	if s.meta != nil {
		minimalSpec(b, n, v)
		return
	}
	s.spec(b, n, v)
}

// template is a Pod template of s, labelled app=dense; restart is its
// restartPolicy ("" for the default, Never for a Job's).
func (s shape) template(b *bytes.Buffer, n int, variant byte, restart string) {
	b.WriteString(`{"metadata":{"labels":{"app":"dense"}`)
	s.writeMeta(b, n, variant)
	b.WriteString(`},"spec":{`)
	if restart != "" {
		b.WriteString(`"restartPolicy":"` + restart + `",`)
	}
	s.writeSpec(b, n, variant)
	b.WriteString(`}}`)
}

// workloadKind is a workload graceguard validates, and how its template
// sits in it.
type workloadKind struct {
	kind, apiVersion, resource string
}

var (
	deployment = workloadKind{"Deployment", "apps/v1", "deployments"}
	cronJob    = workloadKind{"CronJob", "batch/v1", "cronjobs"}
)

// workloadJSON is a workload of kind k named name, its template of shape
// s, at resourceVersion rv ("" to create it).
func (k workloadKind) workloadJSON(name, namespace, rv string, s shape, n int, variant byte) []byte {
	var b bytes.Buffer
	b.Grow(n + 4<<10)
	b.WriteString(`{"apiVersion":"` + k.apiVersion + `","kind":"` + k.kind + `","metadata":{"name":"` + name + `","namespace":"` + namespace + `"`)
	if rv != "" {
		b.WriteString(`,"resourceVersion":"` + rv + `"`)
	}
	b.WriteString(`},"spec":`)
	switch k.kind {
	case "CronJob":
		// Suspended: nothing would run it here anyway.
		b.WriteString(`{"schedule":"0 0 1 1 *","suspend":true,"jobTemplate":{"spec":{"template":`)
		s.template(&b, n, variant, "Never")
		b.WriteString(`}}}`)
	default:
		b.WriteString(`{"replicas":0,"selector":{"matchLabels":{"app":"dense"}},"template":`)
		s.template(&b, n, variant, "")
		b.WriteString(`}`)
	}
	b.WriteString(`}`)
	return b.Bytes()
}

// review is an AdmissionReview as the API server sends one, around
// objects already in JSON.
func review(op, group, kind, resource, namespace string, obj, old []byte) []byte {
	req := map[string]any{
		"uid":       "705ab4f5-6393-11e8-b7cc-42010a800002",
		"kind":      map[string]string{"group": group, "version": "v1", "kind": kind},
		"resource":  map[string]string{"group": group, "version": "v1", "resource": resource},
		"namespace": namespace, "name": "dense", "operation": op,
		"userInfo": map[string]any{"username": "mallory"},
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

// annotatedPods are Pods carrying every key graceguard reads on a Pod
// (mutate.Keys), each with a value of size bytes, as many keys a Pod as
// fit in the API server's limit.
func annotatedPods(namespace string, size int) [][]byte {
	perPod := max((apiServerLimit-8<<10)/(size+128), 1)
	var pods [][]byte
	var ann, labels map[string]string
	flush := func() {
		if len(ann)+len(labels) == 0 {
			return
		}
		meta, _ := json.Marshal(map[string]any{"name": "annotated-" + strconv.Itoa(len(pods)), "namespace": namespace, "annotations": ann, "labels": labels})
		pods = append(pods, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":`+string(meta)+`,"spec":{"containers":[{"name":"app","image":"`+image+`"}]}}`))
		ann, labels = map[string]string{}, map[string]string{}
	}
	ann, labels = map[string]string{}, map[string]string{}
	value := strings.Repeat("x", size)
	for _, k := range mutate.Keys {
		if k.Where&mutate.PodAnnotation != 0 {
			ann[k.Name] = value
		} else if k.Where&mutate.PodLabel != 0 {
			labels[k.Name] = value
		} else {
			continue
		}
		if len(ann)+len(labels) == perPod {
			flush()
		}
	}
	flush()
	return pods
}

// namespaceKeys are the annotations graceguard reads on a Namespace.
func namespaceKeys() []string {
	var keys []string
	for _, k := range mutate.Keys {
		if k.Where&mutate.NamespaceAnnotation != 0 {
			keys = append(keys, k.Name)
		}
	}
	return keys
}
