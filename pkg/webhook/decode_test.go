package webhook

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"

	"github.com/graceguard/graceguard/pkg/manifest"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// The webhook decodes only the part of a Pod that pkg/mutate reads. This
// guard fails the day pkg/mutate starts reading a field the lean decode
// leaves out: for every Pod of pkg/mutate's golden inputs (and their
// mutated forms), both decisions must come out the same from the lean
// decode as from the full one.
func TestLeanDecodeDecidesLikeTheFullDecode(t *testing.T) {
	n := 0
	for _, g := range goldenPods(t) {
		res, err := manifest.Process(g.doc, g.ns, mutate.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range [][]byte{g.doc.Raw, res.Object} {
			n++
			var full corev1.Pod
			if err := json.Unmarshal(raw, &full); err != nil {
				t.Fatal(err)
			}
			for _, decide := range []func(mutate.Target, mutate.Namespace, mutate.Options) *mutate.Report{mutate.Mutate, mutate.Validate} {
				// Mutate changes the Pod it is given: decode afresh.
				lean, _, err := decodeAdmissionPod(raw, &meter{})
				if err != nil {
					t.Fatalf("%s: lean decode: %v", g.name, err)
				}
				want := summary(decide(mutate.ForPod(full.DeepCopy()), g.ns, mutate.DefaultOptions()))
				got := summary(decide(mutate.ForPod(lean), g.ns, mutate.DefaultOptions()))
				if !reflect.DeepEqual(got, want) {
					t.Errorf("../mutate/testdata/%s: the lean decode decides differently\n got %+v\nwant %+v", g.name, got, want)
				}
			}
		}
	}
	if n < 40 {
		t.Fatalf("only %d Pods compared", n)
	}
}

type decision struct {
	Patch      string
	Warnings   []string
	Err        string
	Skip       mutate.Reason
	Grace      int64
	Violations int
}

func summary(r *mutate.Report) decision {
	p, _ := json.Marshal(r.Patch())
	d := decision{Patch: string(p), Warnings: r.AdmissionWarnings(), Skip: r.Skip, Grace: r.Grace, Violations: len(r.Violations)}
	if err := r.Err(); err != nil {
		d.Err = err.Error()
	}
	return d
}

func TestLeanDecodeRefusesWhatIsNotAPod(t *testing.T) {
	for _, raw := range []string{``, `{"apiVersion":"apps/v1","kind":"Deployment"}`, `{"spec":{"containers":"oops"}}`, `[1,2]`} {
		if _, _, err := decodeAdmissionPod([]byte(raw), &meter{}); err == nil {
			t.Errorf("decoded %q as a Pod", raw)
		}
	}
}

// project keeps of a fully decoded Pod what decodeAdmissionPod reads of
// one within its bounds (withinBounds).
func project(full *corev1.Pod) *corev1.Pod {
	p := &corev1.Pod{TypeMeta: full.TypeMeta}
	p.Name, p.GenerateName, p.Namespace = full.Name, full.GenerateName, full.Namespace
	p.Labels, p.Annotations = keys(full.Labels, mutate.PodLabel), keys(full.Annotations, mutate.PodAnnotation)
	if ref := metav1.GetControllerOf(full); ref != nil {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID, Controller: ref.Controller}}
	}
	p.Spec = projectSpec(full.Spec)
	return p
}

func projectSpec(full corev1.PodSpec) corev1.PodSpec {
	var s corev1.PodSpec
	s.TerminationGracePeriodSeconds = full.TerminationGracePeriodSeconds
	if full.OS != nil {
		s.OS = &corev1.PodOS{Name: full.OS.Name}
	}
	keep := func(cs []corev1.Container) []corev1.Container {
		if cs == nil {
			return nil
		}
		out := make([]corev1.Container, len(cs))
		for i, c := range cs {
			out[i] = corev1.Container{Name: c.Name, Command: c.Command, Args: c.Args, Ports: c.Ports,
				ReadinessProbe: projectProbe(c.ReadinessProbe), LivenessProbe: projectProbe(c.LivenessProbe), StartupProbe: projectProbe(c.StartupProbe),
				RestartPolicy: c.RestartPolicy}
			for _, e := range c.Env {
				if slices.Contains(mutate.EnvRead, e.Name) {
					out[i].Env = append(out[i].Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
				}
			}
			if n := len(out[i].Env); n > maxEnvRead {
				out[i].Env = out[i].Env[n-maxEnvRead:]
			}
			for j := range out[i].Ports {
				// What the reader keeps of a port.
				p := out[i].Ports[j]
				out[i].Ports[j] = corev1.ContainerPort{Name: p.Name, HostPort: p.HostPort, ContainerPort: p.ContainerPort, Protocol: p.Protocol, HostIP: p.HostIP}
			}
			if l := c.Lifecycle; l != nil {
				out[i].Lifecycle = &corev1.Lifecycle{StopSignal: l.StopSignal}
				if h := l.PreStop; h != nil {
					out[i].Lifecycle.PreStop = &corev1.LifecycleHandler{Exec: h.Exec, HTTPGet: h.HTTPGet, TCPSocket: h.TCPSocket, Sleep: h.Sleep}
				}
			}
		}
		return out
	}
	s.Containers, s.InitContainers = keep(full.Containers), keep(full.InitContainers)
	if full.EphemeralContainers != nil {
		s.EphemeralContainers = []corev1.EphemeralContainer{}
	}
	for _, e := range full.EphemeralContainers {
		s.EphemeralContainers = append(s.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: e.Name}})
	}
	return s
}

func projectProbe(p *corev1.Probe) *corev1.Probe {
	if p == nil {
		return nil
	}
	out := *p
	out.ProbeHandler = corev1.ProbeHandler{Exec: p.Exec, HTTPGet: p.HTTPGet, TCPSocket: p.TCPSocket, GRPC: p.GRPC}
	return &out
}

// keys is what the reader keeps of labels or annotations: the keys
// graceguard reads there.
func keys(m map[string]string, where mutate.Where) map[string]string {
	if m == nil {
		return nil
	}
	out := map[string]string{}
	for k, v := range m {
		if _, ok := mutate.LookupKey(k, where); ok {
			out[k] = v
		}
	}
	return out
}

// withinBounds reports whether the reader keeps all of what pkg/mutate
// reads of pod: no list and no string past its limit.
func withinBounds(pod *corev1.Pod) bool {
	ok := len(pod.Name) <= maxNameBytes && len(pod.GenerateName) <= maxNameBytes && len(pod.Namespace) <= maxNameBytes
	for k, v := range pod.Labels {
		if _, read := mutate.LookupKey(k, mutate.PodLabel); read && len(v) > mutate.MaxLabelValueLength {
			ok = false
		}
	}
	for k, v := range pod.Annotations {
		if key, read := mutate.LookupKey(k, mutate.PodAnnotation); read && len(v) > key.MaxLength {
			ok = false
		}
	}
	for _, r := range pod.OwnerReferences {
		ok = ok && len(r.APIVersion) <= maxNameBytes && len(r.Kind) <= maxNameBytes && len(r.Name) <= maxNameBytes && len(r.UID) <= maxNameBytes
	}
	s := pod.Spec
	ok = ok && len(s.Containers) <= MaxContainersRead && len(s.InitContainers) <= MaxContainersRead && len(s.EphemeralContainers) <= MaxContainersRead
	if s.OS != nil {
		ok = ok && len(s.OS.Name) <= maxNameBytes
	}
	for _, e := range s.EphemeralContainers {
		ok = ok && len(e.Name) <= maxNameBytes
	}
	strs := func(l []string, n int, limit func(int) int) {
		ok = ok && len(l) <= n
		for i, a := range l {
			ok = ok && len(a) <= limit(i)
		}
	}
	short := func(vs ...string) {
		for _, v := range vs {
			ok = ok && len(v) <= maxShortBytes
		}
	}
	http := func(h *corev1.HTTPGetAction) {
		if h == nil {
			return
		}
		short(h.Path, h.Host, string(h.Scheme), h.Port.StrVal)
		ok = ok && len(h.HTTPHeaders) <= maxHeadersRead
		for _, hd := range h.HTTPHeaders {
			short(hd.Name, hd.Value)
		}
	}
	handler := func(exec *corev1.ExecAction, h *corev1.HTTPGetAction, tcp *corev1.TCPSocketAction) {
		if exec != nil {
			strs(exec.Command, maxExecRead, execLimit)
		}
		http(h)
		if tcp != nil {
			short(tcp.Host, tcp.Port.StrVal)
		}
	}
	for _, c := range append(append([]corev1.Container{}, s.Containers...), s.InitContainers...) {
		ok = ok && len(c.Name) <= maxNameBytes && len(c.Ports) <= MaxPortsRead
		strs(c.Command, maxArgsRead, argLimit)
		strs(c.Args, maxArgsRead, argLimit)
		if c.RestartPolicy != nil {
			short(string(*c.RestartPolicy))
		}
		for _, p := range c.Ports {
			short(p.Name, string(p.Protocol), p.HostIP)
		}
		for _, e := range c.Env {
			ok = ok && len(e.Value) <= mutate.MaxIstioProxyConfigLength
		}
		if l := c.Lifecycle; l != nil {
			if l.StopSignal != nil {
				short(string(*l.StopSignal))
			}
			if h := l.PreStop; h != nil {
				handler(h.Exec, h.HTTPGet, h.TCPSocket)
			}
		}
		for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe, c.StartupProbe} {
			if p == nil {
				continue
			}
			handler(p.Exec, p.HTTPGet, p.TCPSocket)
			if p.GRPC != nil && p.GRPC.Service != nil {
				short(*p.GRPC.Service)
			}
		}
	}
	return ok
}

// FuzzReaderReadsLikeTheAPIMachinery: for every Pod the API machinery's
// decoder (sigs.k8s.io/json, case-sensitive, as the API server and
// controller-runtime use it) reads, the reader reads the same values for
// every field pkg/mutate uses, from the JSON the API server sends of it
// (encoding/json's encoding of the typed object), whenever the Pod is
// within the reader's bounds; past them, it reads without failing. The
// seeds are shapes the API server sends.
func FuzzReaderReadsLikeTheAPIMachinery(f *testing.F) {
	for _, seed := range []string{
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","annotations":{"graceguard.io/max-work":"30s"}},"spec":{"terminationGracePeriodSeconds":30,"containers":[{"name":"app","ports":[{"name":"http","containerPort":8080}],"lifecycle":{"preStop":{"sleep":{"seconds":5}}}}]}}`,
		`{"spec":{"containers":[{"name":"c","readinessProbe":{"httpGet":{"path":"/r","port":"http"},"periodSeconds":2},"livenessProbe":{"tcpSocket":{"port":8080}},"lifecycle":{"preStop":{"exec":{"command":["sh","-c","sleep 5"]}}}}]}}`,
		`{"metadata":{"annotations":null},"spec":{"containers":null,"initContainers":[],"terminationGracePeriodSeconds":null}}`,
		"{\"metadata\":{\"name\":\"\xff\xfe\",\"future\":{\"x\":[1,2,{}]}},\"spec\":{\"containers\":[{\"name\":\"c\",\"resizePolicy\":[{}],\"env\":[{\"name\":\"A\",\"value\":\"\\u00e9\"}]}],\"status\":true}}",
		`{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d9f","uid":"u1","controller":true}]},"spec":{"containers":[{"name":"c"}]}}`,
		`{"metadata":{"labels":{"app":"web","graceguard.io/treated":"true","sidecar.istio.io/inject":"false"},"annotations":{}},"spec":{"containers":[{"name":"c"}]}}`,
		// a key that is a label on Namespaces and an annotation on Pods
		`{"metadata":{"labels":{"graceguard.io/inject":"enabled"},"annotations":{"graceguard.io/inject":"false","a":"b"}},"spec":{"containers":[{"name":"c"}]}}`,
		`{"spec":{"initContainers":[{"name":"s","restartPolicy":"Always","command":["proxy"]}],"ephemeralContainers":[{"name":"debug","image":"busybox"}]}}`,
		`{"spec":{"os":{"name":"linux"},"containers":[{"name":"istio-proxy","env":[{"name":"PROXY_CONFIG","value":"{\"terminationDrainDuration\":\"10s\"}"},{"name":"X","value":"y"}],"lifecycle":{"stopSignal":"SIGQUIT","postStart":{"exec":{"command":["a"]}}}}]}}`,
		`{"spec":{"containers":[{"name":"c","livenessProbe":{"grpc":{"port":9000,"service":"s"},"terminationGracePeriodSeconds":5},"readinessProbe":{"httpGet":{"path":"/\u003c","port":80,"httpHeaders":[{"name":"a","value":"b"}]}}}]}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var full corev1.Pod
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &full); err != nil {
			return // the API server would not have sent it
		}
		if (full.APIVersion != "" && full.APIVersion != "v1") || (full.Kind != "" && full.Kind != "Pod") {
			return
		}
		// What the API server sends: the typed object, encoded.
		sent, err := json.Marshal(&full)
		if err != nil {
			return
		}
		lean, unread, err := decodeAdmissionPod(sent, &meter{})
		if err != nil {
			t.Fatalf("the API machinery reads %q, the reader fails: %v", sent, err)
		}
		// And as the API machinery reads what it sent (empty lists and maps
		// are left out of it).
		full = corev1.Pod{}
		if err := kjson.UnmarshalCaseSensitivePreserveInts(sent, &full); err != nil {
			t.Fatal(err)
		}
		if !withinBounds(&full) {
			return
		}
		if len(unread) > 0 {
			t.Fatalf("%q: within bounds, yet unread %+v", sent, unread)
		}
		if want := project(&full); !reflect.DeepEqual(lean, want) {
			t.Fatalf("%q:\n lean %#v\n want %#v", sent, lean, want)
		}
	})
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

// FuzzWorkloadReaderReadsLikeThePodReader: a workload's Pod template is
// read as a Pod is, labels and annotations alike (Istio's label decides
// injection, on templates as on Pods), for every kind and wherever the
// kind keeps its template: what the reader keeps of a Deployment's or a
// CronJob's template is what it keeps of a Pod of the same metadata and
// spec, as the API machinery reads them.
func FuzzWorkloadReaderReadsLikeThePodReader(f *testing.F) {
	for _, seed := range []string{
		`{"metadata":{"name":"web"},"spec":{"template":{"metadata":{"labels":{"sidecar.istio.io/inject":"true","app":"web"},"annotations":{"graceguard.io/max-work":"30s"}},"spec":{"containers":[{"name":"app","ports":[{"containerPort":8080}]}]}}}}`,
		`{"spec":{"template":{"metadata":{"labels":{"istio.io/rev":"canary"}},"spec":{"initContainers":[{"name":"istio-proxy","restartPolicy":"Always"}],"containers":[{"name":"app"}]}}}}`,
		`{"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"labels":{"sidecar.istio.io/inject":"false"}},"spec":{"containers":[{"name":"c","lifecycle":{"preStop":{"sleep":{"seconds":5}}}}]}}}}}}`,
		`{"spec":{"strategy":{"canary":{"scaleDownDelaySeconds":5,"trafficRouting":{"nginx":{}}},"blueGreen":{"scaleDownDelaySeconds":null}},"template":{"spec":{"containers":[{"name":"app"}]}}}}`,
		`{"spec":{"strategy":{"canary":{"trafficRouting":null},"blueGreen":{}},"strategy":{"blueGreen":{"scaleDownDelaySeconds":3}},"template":{"spec":{"containers":[{"name":"app"}]}}}}`,
	} {
		f.Add([]byte(seed), uint8(0))
		f.Add([]byte(seed), uint8(5))
		f.Add([]byte(seed), uint8(6)) // Rollout
	}
	f.Fuzz(func(t *testing.T, raw []byte, pick uint8) {
		w := mutate.Workloads[int(pick)%len(mutate.Workloads)]
		if !w.Reviewed {
			return
		}
		obj := w.New()
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, obj); err != nil {
			return
		}
		sent, err := json.Marshal(obj)
		if err != nil {
			return
		}
		// As the API machinery reads what it sent (empty lists and maps
		// are left out of it).
		obj = w.New()
		if err := kjson.UnmarshalCaseSensitivePreserveInts(sent, obj); err != nil {
			t.Fatal(err)
		}
		typed, err := mutate.ForWorkload(obj)
		if err != nil {
			return
		}
		lw, err := decodeAdmissionWorkload(w, sent, &meter{})
		if err != nil {
			t.Fatalf("%s %q: %v", w.Kind, sent, err)
		}
		// The template, read as a Pod of the same metadata and spec.
		pod := &corev1.Pod{ObjectMeta: *typed.Meta, Spec: *typed.Spec}
		podJSON, _ := json.Marshal(pod)
		asPod, _, err := decodeAdmissionPod(podJSON, &meter{})
		if err != nil {
			t.Fatal(err)
		}
		got := lw.target
		if !reflect.DeepEqual(got.Meta.Labels, asPod.Labels) || !reflect.DeepEqual(got.Meta.Annotations, asPod.Annotations) {
			t.Fatalf("%s %q: template metadata read as labels %v annotations %v; as a Pod: %v %v", w.Kind, sent, got.Meta.Labels, got.Meta.Annotations, asPod.Labels, asPod.Annotations)
		}
		if !reflect.DeepEqual(*got.Spec, asPod.Spec) {
			t.Fatalf("%s %q: the template's spec is read differently from a Pod's", w.Kind, sent)
		}
		if !reflect.DeepEqual(got.ScaleDown, typed.ScaleDown) {
			t.Fatalf("%s %q: scale-down delays read as %+v, want %+v", w.Kind, sent, got.ScaleDown, typed.ScaleDown)
		}
		if full := (&corev1.Pod{ObjectMeta: *typed.Meta, Spec: *typed.Spec}); withinBounds(full) {
			if want := project(full); !reflect.DeepEqual(got.Meta.Labels, want.Labels) || !reflect.DeepEqual(*got.Spec, want.Spec) {
				t.Fatalf("%s %q: the template is not read as the API machinery reads it", w.Kind, sent)
			}
		}
	})
}
