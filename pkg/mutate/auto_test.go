package mutate_test

import (
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/mutate"
)

func autoPod(annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-7d9f-abcde", Namespace: "shop", Annotations: maps.Clone(annotations)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1"}}},
	}
}

func TestMaxWorkAuto(t *testing.T) {
	shop := mutate.Namespace{Name: "shop", Labels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}}
	auto := map[string]string{mutate.AnnotationMaxWork: mutate.MaxWorkAuto}
	enough := func(work time.Duration) *mutate.Observed {
		return &mutate.Observed{Report: "deployment-web", Work: work, Enough: true, Samples: 9}
	}
	for _, tc := range []struct {
		name     string
		pod      map[string]string
		ns       map[string]string
		observed *mutate.Observed
		maxGrace time.Duration
		budget   string
		warning  string
	}{
		{
			name: "the report's recommendation, with enough samples", pod: auto, observed: enough(21 * time.Second),
			budget:  "routing=5s work=21s cleanup=2s margin=3s grace=31s",
			warning: "metadata.annotations[graceguard.io/max-work]: auto is 21s: observed in 9 shutdowns (floor 20s, ceiling 2m)",
		},
		{
			name: "too few samples: the floor, the cluster default", pod: auto,
			observed: &mutate.Observed{Report: "deployment-web", Work: 13 * time.Second, Samples: 2},
			budget:   "routing=5s work=20s cleanup=2s margin=3s grace=30s",
			warning:  "metadata.annotations[graceguard.io/max-work]: auto is 20s: the floor, 2 samples are too few (ceiling 2m)",
		},
		{
			name: "no report: the floor", pod: auto,
			budget:  "routing=5s work=20s cleanup=2s margin=3s grace=30s",
			warning: "metadata.annotations[graceguard.io/max-work]: auto is 20s: the floor, no shutdown report yet (ceiling 2m)",
		},
		{
			name: "a recommendation under the floor does not lower the budget below it", pod: auto, observed: enough(4 * time.Second),
			budget:  "routing=5s work=20s cleanup=2s margin=3s grace=30s",
			warning: "metadata.annotations[graceguard.io/max-work]: auto is 20s: the floor; observed: 4s",
		},
		{
			name:     "a recommendation over the ceiling stops at it",
			pod:      map[string]string{mutate.AnnotationMaxWork: mutate.MaxWorkAuto, mutate.AnnotationMaxWorkFloor: "5s", mutate.AnnotationMaxWorkCeiling: "45s"},
			observed: enough(3 * time.Minute),
			budget:   "routing=5s work=45s cleanup=2s margin=3s grace=55s",
			warning:  "metadata.annotations[graceguard.io/max-work]: auto is 45s: the ceiling; observed: 3m",
		},
		{
			name: "never so much that the budget exceeds --max-grace-period: that would deny every Pod",
			pod:  auto, observed: enough(110 * time.Second), maxGrace: time.Minute,
			budget:  "routing=5s work=50s cleanup=2s margin=3s grace=60s",
			warning: "metadata.annotations[graceguard.io/max-work]: auto is 50s: cut to fit --max-grace-period and the platform ceilings",
		},
		{
			name: "auto on the namespace, with its floor", ns: map[string]string{mutate.AnnotationMaxWork: mutate.MaxWorkAuto, mutate.AnnotationMaxWorkFloor: "30s"},
			observed: enough(21 * time.Second),
			budget:   "routing=5s work=30s cleanup=2s margin=3s grace=40s",
			warning:  "Namespace[shop].metadata.annotations[graceguard.io/max-work]: auto is 30s: the floor; observed: 21s",
		},
		{
			name: "a Pod's own duration overrides its namespace's auto", pod: map[string]string{mutate.AnnotationMaxWork: "7s"},
			ns: map[string]string{mutate.AnnotationMaxWork: mutate.MaxWorkAuto}, observed: enough(21 * time.Second),
			budget: "routing=5s work=7s cleanup=2s margin=3s grace=30s",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := mutate.DefaultOptions()
			if tc.maxGrace > 0 {
				opts.MaxGrace = tc.maxGrace
			}
			ns := shop
			ns.Annotations = tc.ns
			pod := autoPod(tc.pod)
			target := mutate.ForPod(pod)
			target.Observed = tc.observed
			r := mutate.Mutate(target, ns, opts)
			if len(r.Violations) > 0 {
				t.Fatalf("violations: %v", r.Violations)
			}
			if got := pod.Annotations[mutate.AnnotationBudget]; got != tc.budget {
				t.Errorf("budget %q, want %q", got, tc.budget)
			}
			var warnings []string
			for _, f := range r.Warnings {
				if f.Reason == mutate.WarnAutoWork {
					warnings = append(warnings, f.Message())
				}
			}
			switch {
			case tc.warning == "" && len(warnings) > 0:
				t.Errorf("unexpected warnings %q", warnings)
			case tc.warning != "" && (len(warnings) != 1 || warnings[0] != tc.warning):
				t.Errorf("warnings %q\nwant %q", warnings, tc.warning)
			}

			// The webhooks are called again (reinvocation) and then the
			// validating one, with the report changed meanwhile: the work
			// recorded stands, nothing changes, and the Pod is admitted.
			again := mutate.ForPod(pod)
			again.Observed = enough(40 * time.Second)
			if r := mutate.Mutate(again, ns, opts); len(r.Changes) > 0 {
				t.Errorf("mutating the mutated Pod changed %v", r.Changes)
			}
			if v := mutate.Validate(again, ns, opts); v.Err() != nil {
				t.Errorf("the mutated Pod is denied: %v", v.Err())
			}
		})
	}
}

func TestWantsAutoWork(t *testing.T) {
	for _, tc := range []struct {
		pod, ns map[string]string
		want    bool
	}{
		{map[string]string{mutate.AnnotationMaxWork: "auto"}, nil, true},
		{nil, map[string]string{mutate.AnnotationMaxWork: "auto"}, true},
		{map[string]string{mutate.AnnotationMaxWork: "30s"}, map[string]string{mutate.AnnotationMaxWork: "auto"}, false},
		{nil, map[string]string{mutate.AnnotationMaxWork: "30s"}, false},
		{map[string]string{mutate.AnnotationMaxWork: "Auto"}, nil, false},
	} {
		if got := mutate.WantsAutoWork(tc.pod, tc.ns); got != tc.want {
			t.Errorf("WantsAutoWork(%v, %v) = %v, want %v", tc.pod, tc.ns, got, tc.want)
		}
	}
}
