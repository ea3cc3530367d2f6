package mutate_test

import (
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
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

// A floor of max-work: auto above its ceiling is reported at the bound set
// closest to the Pod, as that place's finding: a namespace's setting is the
// namespace's (invalid-namespace-setting), never the Pod's annotation.
func TestAutoWorkBoundsAreReportedWhereTheyAreSet(t *testing.T) {
	shop := mutate.Namespace{Name: "shop", Labels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}}
	const nsPath = "Namespace[shop].metadata.annotations"
	for _, tc := range []struct {
		name        string
		pod, ns     map[string]string
		reason      mutate.Reason
		field, text string
	}{
		{"the namespace's floor over the default ceiling", map[string]string{mutate.AnnotationMaxWork: mutate.MaxWorkAuto},
			map[string]string{mutate.AnnotationMaxWorkFloor: "3m"},
			mutate.DenyInvalidNamespace, nsPath + "[graceguard.io/max-work-floor]", "must be at most its ceiling (2m, the default)"},
		{"the namespace's floor over its ceiling", map[string]string{mutate.AnnotationMaxWork: mutate.MaxWorkAuto},
			map[string]string{mutate.AnnotationMaxWorkFloor: "1m", mutate.AnnotationMaxWorkCeiling: "30s"},
			mutate.DenyInvalidNamespace, nsPath + "[graceguard.io/max-work-ceiling]", "must be at least its floor (1m)"},
		{"the namespace's ceiling under the default floor", nil,
			map[string]string{mutate.AnnotationMaxWork: mutate.MaxWorkAuto, mutate.AnnotationMaxWorkCeiling: "10s"},
			mutate.DenyInvalidNamespace, nsPath + "[graceguard.io/max-work-ceiling]", "must be at least its floor (20s)"},
		{"the Pod's floor over the namespace's ceiling", map[string]string{mutate.AnnotationMaxWork: mutate.MaxWorkAuto, mutate.AnnotationMaxWorkFloor: "1m"},
			map[string]string{mutate.AnnotationMaxWorkCeiling: "30s"},
			mutate.DenyInvalidAnnotation, "metadata.annotations[graceguard.io/max-work-floor]", "must be at most its ceiling (30s)"},
		{"the Pod's ceiling under the namespace's floor", map[string]string{mutate.AnnotationMaxWorkCeiling: "30s"},
			map[string]string{mutate.AnnotationMaxWork: mutate.MaxWorkAuto, mutate.AnnotationMaxWorkFloor: "1m"},
			mutate.DenyInvalidAnnotation, "metadata.annotations[graceguard.io/max-work-ceiling]", "must be at least its floor (1m)"},
		{"the Pod's floor over the default ceiling", map[string]string{mutate.AnnotationMaxWork: mutate.MaxWorkAuto, mutate.AnnotationMaxWorkFloor: "3m"}, nil,
			mutate.DenyInvalidAnnotation, "metadata.annotations[graceguard.io/max-work-floor]", "must be at most its ceiling (2m, the default)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := shop
			ns.Annotations = tc.ns
			v := mutate.Validate(mutate.ForPod(autoPod(tc.pod)), ns, mutate.DefaultOptions())
			if len(v.Violations) != 1 {
				t.Fatalf("violations %v, want one", v.Violations)
			}
			f := v.Violations[0]
			if f.Reason != tc.reason || f.Err.Field != tc.field || !strings.Contains(f.Err.Detail, tc.text) {
				t.Errorf("got %s at %s: %s\nwant %s at %s: ...%s", f.Reason, f.Err.Field, f.Err.Detail, tc.reason, tc.field, tc.text)
			}
		})
	}
}

// Every finding about a namespace's setting is at the namespace's path and
// every finding about a Pod annotation at the Pod's, each with the reason
// of its place, whatever the two carry: the metrics, the docs and the CEL
// proof's contract (which excuses only the namespace's) rely on it.
func TestFindingsAreAttributedToWhereTheValueIsSet(t *testing.T) {
	values := []string{"auto", "5s", "3m", "1h", "2h", "x", "true", "false", "sleep", "/readyz", "http", "ingress-nginx", "bogus", "enabled", "20", "-1"}
	keys := append(slices.Clone(mutate.NamespaceDefaultKeys), mutate.AnnotationInject, mutate.AnnotationContainers,
		"linkerd.io/inject", "config.alpha.linkerd.io/proxy-wait-before-exit-seconds", "config.linkerd.io/shutdown-grace-period",
		"config.linkerd.io/proxy-enable-native-sidecar", "proxy.istio.io/config")
	shop := mutate.Namespace{Name: "shop", Labels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}}
	rnd := rand.New(rand.NewPCG(19, 4960)) // the same walk every run
	for range 20000 {
		pod, ns := map[string]string{}, map[string]string{}
		for _, k := range keys {
			if rnd.IntN(3) == 0 {
				pod[k] = values[rnd.IntN(len(values))]
			}
			if rnd.IntN(3) == 0 {
				ns[k] = values[rnd.IntN(len(values))]
			}
		}
		n := shop
		n.Annotations = ns
		if rnd.IntN(5) == 0 {
			n.Labels = map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled, mutate.LabelMode: values[rnd.IntN(len(values))]}
		}
		v := mutate.Validate(mutate.ForPod(autoPod(pod)), n, mutate.DefaultOptions())
		for _, f := range v.Violations {
			onNS := strings.HasPrefix(f.Err.Field, "Namespace[")
			switch f.Reason {
			case mutate.DenyInvalidNamespace:
				if !onNS {
					t.Fatalf("%s at the Pod's %s (Pod %v, namespace %v)", f.Reason, f.Err.Field, pod, ns)
				}
			case mutate.DenyInvalidAnnotation:
				if onNS {
					t.Fatalf("%s at the namespace's %s (Pod %v, namespace %v)", f.Reason, f.Err.Field, pod, ns)
				}
			}
			if onNS {
				continue
			}
			// A finding at one of the Pod's annotations names one it carries.
			if k, ok := strings.CutPrefix(f.Err.Field, "metadata.annotations["); ok {
				if _, set := pod[strings.TrimSuffix(k, "]")]; !set {
					t.Fatalf("%s at %s, which the Pod does not set (Pod %v, namespace %v): %v", f.Reason, f.Err.Field, pod, ns, f.Err)
				}
			}
		}
	}
}
