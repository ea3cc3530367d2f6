package main

import (
	"fmt"
	"strconv"
	"strings"
)

// apiMaxBody is the largest request body the API server accepts (its
// --max-request-bytes default, 3 MiB). The dense bodies end just under it,
// so each reaches admission whole; etcd's own limit (1.5 MiB) then refuses
// to store most of them, after graceguard has seen them.
const apiMaxBody = 3 << 20

// denseLimit leaves room for nothing but rounding.
const denseLimit = apiMaxBody - 256

// storedLimit is what a workload's stored template may hold: under etcd's
// 1.5 MiB request limit once the API server has encoded it as protobuf.
const storedLimit = 1 << 20

// holdGate keeps every Pod the tenant creates off the node: admission, not
// the kubelet, is under attack.
const holdGate = "graceguard.io/e2e-hold"

// shape is one request body and how it was built.
type shape struct {
	name  string
	body  []byte
	items int // elements of its dense list
}

func (s shape) String() string {
	return fmt.Sprintf("%s (%s, %d elements)", s.name, size(len(s.body)), s.items)
}

// size is a byte count as KiB or MiB.
func size(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
}

// dense fills the "@@" of template with items, comma-separated, as many as
// keep the whole body within limit.
func dense(name, template string, limit int, item func(i int) string) shape {
	prefix, suffix, ok := strings.Cut(template, "@@")
	if !ok {
		panic("hostile: a dense template without @@: " + name)
	}
	b := make([]byte, 0, limit)
	b = append(b, prefix...)
	n := 0
	for {
		it := item(n)
		sep := 0
		if n > 0 {
			sep = 1
		}
		if len(b)+sep+len(it)+len(suffix) > limit {
			break
		}
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
		n++
	}
	b = append(b, suffix...)
	return shape{name: name, body: b, items: n}
}

// quoted is a JSON string of one character: the densest element of a
// string list.
func quoted(c string) func(int) string { return func(int) string { return `"` + c + `"` } }

// container templates: one container whose dense part is "@@".
var containerShapes = []struct {
	name, container string
	item            func(int) string
}{
	{"command of one-character strings", `{"name":"app","image":%q,"command":[@@]}`, quoted("a")},
	{"args of one-character strings", `{"name":"app","image":%q,"args":[@@]}`, quoted("a")},
	{"preStop exec of one-character strings", `{"name":"app","image":%q,"lifecycle":{"preStop":{"exec":{"command":[@@]}}}}`, quoted("a")},
	{"ports", `{"name":"app","image":%q,"ports":[@@]}`, func(i int) string { return `{"containerPort":` + strconv.Itoa(i%65535+1) + `}` }},
	{"readiness probe headers", `{"name":"app","image":%q,"readinessProbe":{"httpGet":{"path":"/","port":8080,"httpHeaders":[@@]}}}`,
		func(int) string { return `{"name":"a","value":"b"}` }},
}

// podTemplate is a Pod of the tenant's with a class label; meta is more of
// its metadata (",..."), containers its container list.
func podTemplate(ns, class, meta, containers string) string {
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"%s-","namespace":%q,"labels":{"hostile":%q}%s},`+
		`"spec":{"automountServiceAccountToken":false,"schedulingGates":[{"name":%q}],"containers":[%s]}}`,
		class, ns, class, meta, holdGate, containers)
}

// densePods are the Pod CREATE bodies of the dense class: each just under
// the API server's limit, dense in one field. (Not 100,000 containers: the
// API server itself takes over 30 s on them, before admission.)
func densePods(ns, image string) []shape {
	var out []shape
	for _, c := range containerShapes {
		out = append(out, dense(c.name, podTemplate(ns, "dense", "", fmt.Sprintf(c.container, image)), denseLimit, c.item))
	}
	// Keys with 128-byte values: the most keys the API server's field
	// manager takes in well under a second (its key sets grow
	// quadratically: 160,000 one-character keys take it over 30 s, which
	// attacks the API server, not graceguard).
	value := strings.Repeat("v", 128)
	out = append(out, dense("annotation keys", podTemplate(ns, "dense", `,"annotations":{@@}`, fmt.Sprintf(`{"name":"app","image":%q}`, image)), denseLimit,
		func(i int) string { return `"k` + strconv.FormatInt(int64(i), 36) + `":"` + value + `"` }))
	return out
}

// The keys graceguard reads whose values the oversized class fills: its
// own, the Istio proxy config (16 KiB allowed) and a Linkerd one.
var oversizedKeys = []string{
	"graceguard.io/routing-profile",
	"proxy.istio.io/config",
	"graceguard.io/budget",
	"graceguard.io/max-work",
	"graceguard.io/routing-delay",
	"graceguard.io/readiness-path",
	"graceguard.io/max-work-ceiling",
	"config.linkerd.io/shutdown-grace-period",
}

// annotationLimit is the API server's bound on a Pod's annotations, keys
// and values together (256 KiB).
const annotationLimit = 256 << 10

// mutationRoom is what graceguard's mutating webhook may add to a Pod's
// annotations (its graceguard.io/budget record) and still have it stored.
const mutationRoom = 1 << 10

// oversizedValue fills an object's annotations to the API server's bound
// but mutationRoom, next to others (whose keys and values take others
// bytes): about the largest value a Pod can have and still reach the
// validating webhooks.
func oversizedValue(key string, others int) string {
	return strings.Repeat("9", annotationLimit-len(key)-others-mutationRoom)
}

// oversizedPods are the Pods of the oversized class: each key alone at the
// largest value a stored Pod may have (so the validating webhooks see it
// too), all keys at once at 256 KiB each (over the bound: only the mutating
// webhook sees it), and max-work: auto on a Pod whose controller is a
// ReplicaSet (graceguard reads the Deployment's report), with a 256 KiB
// ceiling.
func oversizedPods(ns, image string) []shape {
	container := fmt.Sprintf(`{"name":"app","image":%q}`, image)
	var out []shape
	for _, k := range oversizedKeys {
		meta := fmt.Sprintf(`,"annotations":{%q:%q}`, k, oversizedValue(k, 0))
		body := podTemplate(ns, "oversized", meta, container)
		out = append(out, shape{name: k + " at the bound", body: []byte(body), items: 1})
	}
	var all []string
	for _, k := range oversizedKeys {
		all = append(all, fmt.Sprintf("%q:%q", k, strings.Repeat("9", 256<<10)))
	}
	out = append(out, shape{name: "every key at 256 KiB", body: []byte(podTemplate(ns, "oversized", `,"annotations":{`+strings.Join(all, ",")+`}`, container)), items: len(all)})
	auto := fmt.Sprintf(`,"annotations":{"graceguard.io/max-work":"auto","graceguard.io/max-work-ceiling":%q},`+
		`"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-6d4cf56db6","uid":"6d4cf56d-b6b6-4b6b-8b6b-6d4cf56db6b6","controller":true}]`,
		oversizedValue("graceguard.io/max-work-ceiling", len("graceguard.io/max-work")+len("auto")))
	body := strings.Replace(podTemplate(ns, "oversized", auto, container), `"labels":{"hostile":"oversized"}`, `"labels":{"hostile":"oversized","pod-template-hash":"6d4cf56db6"}`, 1)
	out = append(out, shape{name: "max-work: auto under a ReplicaSet, ceiling at the bound", body: []byte(body), items: 2})
	return out
}

// Workloads: a Deployment and a CronJob stored with a megabyte template,
// then updated with three (the validating webhook gets object and
// oldObject). Paused and suspended: no ReplicaSet, Job or Pod follows.
const (
	deploymentName = "dense-deployment"
	cronJobName    = "dense-cronjob"
)

func deploymentTemplate(ns, container string) string {
	return fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":%q,"namespace":%q,"labels":{"hostile":"workloads"}},`+
		`"spec":{"replicas":0,"paused":true,"selector":{"matchLabels":{"app":%q}},"template":{"metadata":{"labels":{"app":%q}},`+
		`"spec":{"automountServiceAccountToken":false,"containers":[%s]}}}}`, deploymentName, ns, deploymentName, deploymentName, container)
}

func cronJobTemplate(ns, container string) string {
	return fmt.Sprintf(`{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":%q,"namespace":%q,"labels":{"hostile":"workloads"}},`+
		`"spec":{"schedule":"0 0 1 1 *","suspend":true,"jobTemplate":{"spec":{"template":{"spec":{"automountServiceAccountToken":false,"restartPolicy":"Never","containers":[%s]}}}}}}`,
		cronJobName, ns, container)
}

// workload is one kind of workload the tenant updates.
type workload struct {
	kind, path string // path of the collection
	name       string
	base       shape   // stored first: the oldObject
	plain      shape   // the base if the dense one is refused
	updates    []shape // the dense UPDATE bodies, cycled
}

func workloads(ns, image string) []*workload {
	mk := func(kind, path, name string, tmpl func(ns, container string) string) *workload {
		w := &workload{kind: kind, path: path, name: name}
		w.base = dense(kind+" stored with args of one-character strings", tmpl(ns, fmt.Sprintf(`{"name":"app","image":%q,"args":[@@]}`, image)), storedLimit, quoted("s"))
		w.plain = shape{name: kind + " stored plain", body: []byte(tmpl(ns, fmt.Sprintf(`{"name":"app","image":%q}`, image)))}
		// Each shape at the API server's limit, then at a third of it: on a
		// loaded node the API server itself can spend its whole request
		// timeout on a 3 MiB workload before admission; the smaller one
		// reaches graceguard.
		for _, c := range containerShapes {
			for _, limit := range []int{denseLimit, storedLimit} {
				w.updates = append(w.updates, dense(kind+" template: "+c.name, tmpl(ns, fmt.Sprintf(c.container, image)), limit, c.item))
			}
		}
		return w
	}
	return []*workload{
		mk("Deployment", "/apis/apps/v1/namespaces/"+ns+"/deployments", deploymentName, deploymentTemplate),
		mk("CronJob", "/apis/batch/v1/namespaces/"+ns+"/cronjobs", cronJobName, cronJobTemplate),
	}
}

// outsideFinalizer keeps a deleted Pod of the outside class terminating
// until the tenant releases it.
const outsideFinalizer = "hostile.example/hold"

// treatedPod is a Pod labelled graceguard.io/treated=true in a namespace
// that did not opt in, with a megabyte preStop exec; held by a finalizer
// when hold is set.
func treatedPod(ns, name, image string, hold bool) shape {
	fin := ""
	if hold {
		fin = fmt.Sprintf(`,"finalizers":[%q]`, outsideFinalizer)
	}
	tmpl := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":%q,"labels":{"graceguard.io/treated":"true","hostile":"outside"}%s},`+
		`"spec":{"automountServiceAccountToken":false,"schedulingGates":[{"name":%q}],"terminationGracePeriodSeconds":30,`+
		`"containers":[{"name":"app","image":%q,"lifecycle":{"preStop":{"exec":{"command":[@@]}}}}]}}`, name, ns, fin, holdGate, image)
	return dense("treated Pod with a megabyte preStop exec", tmpl, storedLimit, quoted("a"))
}

// review is a small Pod review, what the idle connections send once.
func review(ns string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"hostile","kind":{"group":"","version":"v1","kind":"Pod"},`+
		`"resource":{"group":"","version":"v1","resource":"pods"},"namespace":%q,"operation":"CREATE","userInfo":{"username":"hostile"},`+
		`"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"h","namespace":%q},"spec":{"containers":[{"name":"a","image":"a"}]}}}}`, ns, ns)
}
