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
