package mutate_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/graceguard/graceguard/internal/fixture"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// The pure engine's cost, without HTTP or JSON: make bench runs these and
// puts them in docs/benchmarks.md. They measure; they assert nothing about
// time. Each benchmark checks once that the Pod really is mutated, so a
// change that made graceguard skip the Pod would not pass for a speed-up.

// BenchmarkMutate measures Mutate plus Report.Patch, the whole decision of
// the mutating webhook, on a fresh copy of the Pod each time (Mutate
// changes the Pod it is given).
func BenchmarkMutate(b *testing.B) {
	for _, tc := range fixture.Pods {
		pod := tc.Pod()
		b.Run("pod="+tc.Name, func(b *testing.B) { benchMutate(b, pod) })
	}
}

// BenchmarkValidate measures Validate on the mutated Pod, as the validating
// webhook receives it.
func BenchmarkValidate(b *testing.B) {
	for _, tc := range fixture.Pods {
		pod := tc.Pod()
		opts, ns := mutate.DefaultOptions(), fixture.OptedIn()
		mutate.Mutate(mutate.ForPod(pod), ns, opts)
		b.Run("pod="+tc.Name, func(b *testing.B) {
			if r := mutate.Validate(mutate.ForPod(pod), ns, opts); r.Denied() || r.Skip != "" {
				b.Fatalf("the mutated %s Pod is not validated as admitted: skip %q, violations %v", tc.Name, r.Skip, r.Violations)
			}
			b.ReportAllocs()
			for b.Loop() {
				sinkReport = mutate.Validate(mutate.ForPod(pod), ns, opts)
			}
			// After the loop: starting it deletes reported metrics.
			b.ReportMetric(float64(len(fixture.JSON(pod))), "pod-bytes")
		})
	}
}

// Pod-size sweeps: the cost must grow linearly with containers and with
// environment variables (istio#34799: 1500 env vars, 15s per patch), up to
// the most containers graceguard treats.
var (
	sweepContainers = []int{1, 4, 8, 16, mutate.MaxTreatedContainers}
	sweepEnvVars    = []int{0, 100, 500, 1500, 5000}
)

// BenchmarkMutateScaling sweeps containers (no env vars) and env vars (one
// container).
func BenchmarkMutateScaling(b *testing.B) {
	for _, n := range sweepContainers {
		pod := fixture.SizedPod(n, 0)
		b.Run("containers="+strconv.Itoa(n), func(b *testing.B) { benchMutate(b, pod) })
	}
	for _, n := range sweepEnvVars {
		pod := fixture.SizedPod(1, n)
		b.Run("env="+strconv.Itoa(n), func(b *testing.B) { benchMutate(b, pod) })
	}
}

var (
	sinkOps    []mutate.Operation
	sinkReport *mutate.Report
)

func benchMutate(b *testing.B, pod *corev1.Pod) {
	opts, ns := mutate.DefaultOptions(), fixture.OptedIn()
	want := mutate.Mutate(mutate.ForPod(pod.DeepCopy()), ns, opts).Patch()
	if len(want) == 0 {
		b.Fatalf("Pod %s is not mutated: the benchmark would measure nothing", pod.Name)
	}
	// A fresh copy must be mutated exactly like a deep copy, and leave the
	// original alone; else the copies below would change what is measured.
	before := fixture.JSON(pod)
	if got := mutate.Mutate(mutate.ForPod(freshCopy(pod)), ns, opts).Patch(); !equalJSON(b, got, want) {
		b.Fatalf("a fresh copy of %s is patched differently from a deep copy", pod.Name)
	}
	if !bytes.Equal(fixture.JSON(pod), before) {
		b.Fatalf("mutating a fresh copy of %s changed the original", pod.Name)
	}
	c := &copies{pod: pod}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := mutate.Mutate(mutate.ForPod(c.next(b)), ns, opts)
		sinkOps = r.Patch()
	}
	// After ResetTimer, which deletes reported metrics.
	b.ReportMetric(float64(len(before)), "pod-bytes")
}

// freshCopy copies what Mutate writes to (the Pod, its annotations, its
// containers and their lifecycles, the grace period pointer) and shares the
// rest (env vars, ports, volumes), which Mutate only reads: a deep copy of
// a 5000-env-var Pod would cost more than the mutation it prepares.
func freshCopy(p *corev1.Pod) *corev1.Pod {
	c := *p
	c.Labels, c.Annotations = maps.Clone(p.Labels), maps.Clone(p.Annotations)
	c.Spec.Containers = slices.Clone(p.Spec.Containers)
	c.Spec.InitContainers = slices.Clone(p.Spec.InitContainers)
	for _, cs := range [][]corev1.Container{c.Spec.Containers, c.Spec.InitContainers} {
		for i := range cs {
			if cs[i].Lifecycle != nil {
				cs[i].Lifecycle = cs[i].Lifecycle.DeepCopy()
			}
		}
	}
	return &c
}

func equalJSON(b *testing.B, x, y any) bool {
	b.Helper()
	jx, err := json.Marshal(x)
	if err != nil {
		b.Fatal(err)
	}
	jy, err := json.Marshal(y)
	if err != nil {
		b.Fatal(err)
	}
	return bytes.Equal(jx, jy)
}

// copies hands out fresh copies of a Pod made in batches with the timer
// stopped, so neither their time nor their allocations are measured.
type copies struct {
	pod   *corev1.Pod
	batch []*corev1.Pod
}

func (c *copies) next(b *testing.B) *corev1.Pod {
	if len(c.batch) == 0 {
		b.StopTimer()
		c.batch = make([]*corev1.Pod, 1024)
		for i := range c.batch {
			c.batch[i] = freshCopy(c.pod)
		}
		b.StartTimer()
	}
	p := c.batch[0]
	c.batch[0] = nil
	c.batch = c.batch[1:]
	return p
}
