package webhook

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
	inputs, err := filepath.Glob("../mutate/testdata/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, in := range inputs {
		if strings.HasSuffix(in, ".golden.yaml") {
			continue
		}
		data, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := manifest.Read(bytes.NewReader(data), in)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			if d.Kind != "Pod" {
				continue
			}
			ns := manifest.NamespaceFor(d.Namespace, docs, nil, nil)
			res, err := manifest.Process(d, ns, mutate.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			for _, raw := range [][]byte{d.Raw, res.Object} {
				n++
				var full corev1.Pod
				if err := json.Unmarshal(raw, &full); err != nil {
					t.Fatal(err)
				}
				for _, decide := range []func(mutate.Target, mutate.Namespace, mutate.Options) *mutate.Report{mutate.Mutate, mutate.Validate} {
					// Mutate changes the Pod it is given: decode afresh.
					lean, err := decodeAdmissionPod(runtime.RawExtension{Raw: raw})
					if err != nil {
						t.Fatalf("%s: lean decode: %v", in, err)
					}
					want := summary(decide(mutate.ForPod(full.DeepCopy()), ns, mutate.DefaultOptions()))
					got := summary(decide(mutate.ForPod(lean), ns, mutate.DefaultOptions()))
					if !reflect.DeepEqual(got, want) {
						t.Errorf("%s: the lean decode decides differently\n got %+v\nwant %+v", in, got, want)
					}
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
		if _, err := decodeAdmissionPod(runtime.RawExtension{Raw: []byte(raw)}); err == nil {
			t.Errorf("decoded %q as a Pod", raw)
		}
	}
}

// project keeps of a fully decoded Pod what decodeAdmissionPod reads.
func project(full *corev1.Pod) *corev1.Pod {
	p := &corev1.Pod{TypeMeta: full.TypeMeta}
	p.Name, p.GenerateName, p.Namespace, p.Labels, p.Annotations = full.Name, full.GenerateName, full.Namespace, full.Labels, full.Annotations
	p.OwnerReferences = full.OwnerReferences
	p.Spec.TerminationGracePeriodSeconds = full.Spec.TerminationGracePeriodSeconds
	keep := func(cs []corev1.Container) []corev1.Container {
		if len(cs) == 0 {
			return nil
		}
		out := make([]corev1.Container, len(cs))
		for i, c := range cs {
			out[i] = corev1.Container{Name: c.Name, Command: c.Command, Args: c.Args, Ports: c.Ports, Lifecycle: c.Lifecycle,
				ReadinessProbe: c.ReadinessProbe, LivenessProbe: c.LivenessProbe, StartupProbe: c.StartupProbe, RestartPolicy: c.RestartPolicy}
		}
		return out
	}
	p.Spec.Containers, p.Spec.InitContainers = keep(full.Spec.Containers), keep(full.Spec.InitContainers)
	for _, e := range full.Spec.EphemeralContainers {
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: e.Name}})
	}
	return p
}

// FuzzLeanDecodeReadsLikeTheAPIMachinery: wherever the API machinery's
// decoder (sigs.k8s.io/json, case-sensitive, as the API server and
// controller-runtime use it) reads a Pod, the lean decode (encoding/json/v2)
// reads the same values for every field pkg/mutate uses. The seeds are the
// places v1 and v2 are known to differ by default.
func FuzzLeanDecodeReadsLikeTheAPIMachinery(f *testing.F) {
	for _, seed := range []string{
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","annotations":{"graceguard.io/max-work":"30s"}},"spec":{"terminationGracePeriodSeconds":30,"containers":[{"name":"app","ports":[{"name":"http","containerPort":8080}],"lifecycle":{"preStop":{"sleep":{"seconds":5}}}}]}}`,
		// a repeated name: the last value wins
		`{"spec":{"terminationGracePeriodSeconds":10,"terminationGracePeriodSeconds":60,"containers":[{"name":"a","name":"b"}]}}`,
		// names differing only in case are not the field
		`{"Spec":{"terminationGracePeriodSeconds":99},"spec":{"TerminationGracePeriodSeconds":7,"containers":[{"Name":"x","name":"y"}]},"METADATA":{"name":"no"}}`,
		// IntOrString ports as number and as name; probes with the inline handler
		`{"spec":{"containers":[{"name":"c","readinessProbe":{"httpGet":{"path":"/r","port":"http"},"periodSeconds":2},"livenessProbe":{"tcpSocket":{"port":8080}},"lifecycle":{"preStop":{"exec":{"command":["sh","-c","sleep 5"]}}}}]}}`,
		// nulls and empty collections
		`{"metadata":{"annotations":null},"spec":{"containers":null,"initContainers":[],"terminationGracePeriodSeconds":null}}`,
		// invalid UTF-8 in a string, unknown fields of every type
		"{\"metadata\":{\"name\":\"\xff\xfe\",\"future\":{\"x\":[1,2,{}]}},\"spec\":{\"containers\":[{\"name\":\"c\",\"resizePolicy\":[{}],\"env\":[{\"name\":\"A\",\"value\":\"\\u00e9\"}]}],\"status\":true}}",
		// owner references (max-work auto reads the workload's report)
		`{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d9f","uid":"u1","controller":true}]},"spec":{"containers":[{"name":"c"}]}}`,
		// labels beside annotations, a repeated label key
		`{"metadata":{"labels":{"app":"web","graceguard.io/treated":"true","app":"api"},"annotations":{}},"spec":{"containers":[{"name":"c"}]}}`,
		// sidecars and ephemeral containers
		`{"spec":{"initContainers":[{"name":"s","restartPolicy":"Always","command":["proxy"]}],"ephemeralContainers":[{"name":"debug","image":"busybox"}]}}`,
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
		lean, err := decodeAdmissionPod(runtime.RawExtension{Raw: raw})
		if err != nil {
			t.Fatalf("the API machinery reads %q, the lean decode fails: %v", raw, err)
		}
		if want := project(&full); !reflect.DeepEqual(lean, want) {
			t.Fatalf("%q:\n lean %#v\n want %#v", raw, lean, want)
		}
	})
}
