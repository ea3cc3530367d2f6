package mutate_test

import (
	"encoding/json"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/manifest"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// FuzzMutate builds Pods from arbitrary annotations and hooks and checks the
// invariants users rely on: no panic; the patch only adds and, applied to
// the raw Pod, gives exactly the mutated Pod; mutating again changes
// nothing; and a Pod mutated in enforce mode has a grace period that covers
// its budget, which Validate confirms.
func FuzzMutate(f *testing.F) {
	f.Add("5s", "20s", "", "sleep", uint8(1), int64(0), int64(30), "", false)
	f.Add("8", "30s", "5s", "exec", uint8(2), int64(15), int64(20), "/ready", true)
	f.Add("1500ms", "0", "0", "none", uint8(3), int64(-1), int64(1), "/", false)
	f.Add("banana", "1h", "2h", "wait", uint8(0), int64(40), int64(30), "x", true)
	f.Add("5s", "auto", "3s", "sleep", uint8(2), int64(-1), int64(30), "/ready", false)
	f.Fuzz(func(t *testing.T, routing, work, margin, prestop string, nContainers uint8, hook, grace int64, readiness string, namedPorts bool) {
		pod := &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Annotations: map[string]string{}},
		}
		for k, v := range map[string]string{
			mutate.AnnotationRoutingDelay: routing, mutate.AnnotationMaxWork: work,
			mutate.AnnotationSafetyMargin: margin, mutate.AnnotationPreStop: prestop,
			mutate.AnnotationReadinessPath: readiness,
		} {
			if v != "" {
				pod.Annotations[k] = v
			}
		}
		if grace >= 0 {
			g := grace % 4000
			pod.Spec.TerminationGracePeriodSeconds = &g
		}
		for i := 0; i < int(nContainers%5); i++ {
			c := corev1.Container{Name: "c" + strconv.Itoa(i), Image: "img"}
			if i%2 == 0 {
				p := corev1.ContainerPort{ContainerPort: int32(8080 + i)}
				if namedPorts {
					p.Name = "http" + strconv.Itoa(i)
				}
				c.Ports = []corev1.ContainerPort{p}
			}
			if i == 1 && hook >= 0 {
				c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "sleep " + strconv.FormatInt(hook%5000, 10)}}}}
			}
			pod.Spec.Containers = append(pod.Spec.Containers, c)
		}
		if n := len(pod.Spec.Containers); namedPorts && n >= 2 {
			// The last container is a sidecar the app needs to the end.
			pod.Annotations[mutate.AnnotationSidecars] = pod.Spec.Containers[n-1].Name
		}
		raw, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		// Start from what the API server would decode (JSON replaces invalid
		// UTF-8), so the patched raw and the typed Pod can be compared.
		pod = &corev1.Pod{}
		if err := json.Unmarshal(raw, pod); err != nil {
			t.Fatal(err)
		}
		ns := mutate.Namespace{Name: "ns", Labels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}}
		opts := mutate.DefaultOptions()

		r := mutate.Mutate(mutate.ForPod(pod), ns, opts)
		ops := r.Patch()
		for _, op := range ops {
			if op.Operation != "add" {
				t.Fatalf("non-add operation %+v", op)
			}
		}
		for _, f := range r.Warnings {
			if len(f.Message()) > mutate.MaxWarningLength {
				t.Fatalf("warning too long: %q", f.Message())
			}
		}
		patched := raw
		if len(ops) > 0 {
			if patched, err = manifest.ApplyPatch(raw, ops); err != nil {
				t.Fatalf("patch does not apply: %v\nops: %+v", err, ops)
			}
		}
		var fromPatch corev1.Pod
		if err := json.Unmarshal(patched, &fromPatch); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(&fromPatch, pod) {
			t.Fatalf("patch result differs from the mutated Pod:\npatch: %s\npod: %+v", patched, pod.Spec)
		}

		again := mutate.Mutate(mutate.ForPod(pod), ns, opts)
		if len(again.Changes) > 0 {
			t.Fatalf("not idempotent: second pass changed %v", again.Changes)
		}
		if !r.Applied {
			return
		}
		// Unset, the grace is the API's default, which may cover the budget.
		grace = 30
		if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
			grace = *g
		}
		if want := r.Budget.Grace(); grace < want {
			t.Fatalf("grace %d below budget %d (%s)", grace, want, r.Budget.Arithmetic())
		}
		tl := budget.NewTimeline(r.Budget, r.Hook, grace)
		if !tl.Fits() {
			t.Fatalf("timeline of a mutated Pod does not fit: %+v", tl)
		}
		v := mutate.Validate(mutate.ForPod(pod), ns, opts)
		for _, f := range v.Violations {
			if f.Reason == mutate.DenyBudgetExceedsGrace || f.Reason == mutate.DenyBudgetOverCap {
				t.Fatalf("mutated Pod fails its own budget check: %v", v.Err())
			}
		}
	})
}
