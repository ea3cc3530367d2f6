package chart

import (
	"context"
	"strconv"
	"strings"
	"testing"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// The API server evaluates a matchCondition under a cost limit (per
// expression celconfig.PerCallLimit, per webhook and object
// RuntimeCELCostBudgetMatchConditions); past it the evaluation errs, and
// under failurePolicy Fail the Pod is refused with an error nobody can act
// on. These tests evaluate the chart's conditions on the largest Pods the
// API could hand them and hold their cost well within the limit.

// chartConditions are the match conditions of every webhook the chart
// renders, with these values.
func chartConditions(t testing.TB, values map[string]any) map[string][]admissionregv1.MatchCondition {
	t.Helper()
	w, err := RenderWebhooks("graceguard", "graceguard-system", values)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]admissionregv1.MatchCondition{}
	for _, m := range w.Mutating {
		for _, h := range m.Webhooks {
			out[h.Name] = h.MatchConditions
		}
	}
	for _, v := range w.Validating {
		for _, h := range v.Webhooks {
			out[h.Name] = h.MatchConditions
		}
	}
	return out
}

// The API server accepts the chart's webhook configurations: it compiles
// each matchCondition as its validation does
// (k8s.io/kubernetes pkg/apis/admissionregistration/validation,
// validateMatchConditionsExpression: the strict stateless compiler, the
// NewExpressions environment, the authorizer declared). It estimates no
// static cost for a matchCondition (only the runtime limit applies,
// TestProvenConditionCost), so compiling is all it asks. test/envtest
// installs the same configurations into a real API server.
func TestMatchConditionsCompileAsTheAPIServerValidatesThem(t *testing.T) {
	compiler := plugincel.NewCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	for _, values := range []map[string]any{
		nil,
		{"config": map[string]any{"defaultMode": "warn"}},
		{"webhooks": map[string]any{"validatePods": map[string]any{"skipProven": false}}},
	} {
		for name, mcs := range chartConditions(t, values) {
			if len(mcs) > 64 {
				t.Errorf("%s: %d matchConditions, the API allows 64", name, len(mcs))
			}
			for _, mc := range mcs {
				res := compiler.CompileCELExpression(&matchconditions.MatchCondition{Name: mc.Name, Expression: strings.TrimSpace(mc.Expression)},
					plugincel.OptionalVariableDeclarations{HasAuthorizer: true}, environment.NewExpressions)
				if res.Error != nil {
					t.Errorf("%s: matchCondition %s does not compile: %v", name, mc.Name, res.Error)
				}
			}
		}
	}
}

// costOf evaluates the validate-pods webhook's conditions on the Pod as the
// API server's matcher does and returns what they cost, failing the test
// on an evaluation error.
func costOf(t testing.TB, ev plugincel.ConditionEvaluator, pod *corev1.Pod) (cost int64, matches bool) {
	t.Helper()
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	attr := admission.NewAttributesRecord(pod, nil, gvk, pod.Namespace, pod.Name, schema.GroupVersionResource{Version: "v1", Resource: "pods"},
		"", admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "alice"})
	va := &admission.VersionedAttributes{Attributes: attr, VersionedKind: gvk, VersionedObject: admission.NewLazyObject(pod)}
	const budget = celconfig.RuntimeCELCostBudgetMatchConditions
	results, remaining, err := ev.ForInput(context.Background(), va,
		plugincel.CreateAdmissionRequest(attr, metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, metav1.GroupVersionKind(gvk)),
		plugincel.OptionalVariableBindings{}, nil, budget)
	if err != nil {
		t.Fatalf("evaluating the matchConditions failed: %v", err)
	}
	matches = true
	for _, r := range results {
		if r.Error != nil {
			t.Fatalf("matchCondition %s errs (the Pod would be refused): %v", r.ExpressionAccessor.GetExpression()[:40], r.Error)
		}
		if r.EvalResult.Value() == false {
			matches = false
		}
	}
	return budget - remaining, matches
}

func validatePodsEvaluator(t testing.TB) plugincel.ConditionEvaluator {
	t.Helper()
	mcs := chartConditions(t, nil)["validate-pods.graceguard.io"]
	exprs := make([]plugincel.ExpressionAccessor, len(mcs))
	for i, mc := range mcs {
		exprs[i] = &matchconditions.MatchCondition{Name: mc.Name, Expression: mc.Expression}
	}
	// As the webhook accessor compiles them (GetCompiledMatcher).
	ev := plugincel.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())).CompileCondition(exprs,
		plugincel.OptionalVariableDeclarations{HasAuthorizer: true}, environment.StoredExpressions)
	if errs := ev.CompilationErrors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	return ev
}

// huge is a value of 256 KiB, what the API allows all of a Pod's
// annotations together.
var huge = strings.Repeat("9", 256<<10)

// graceguardKeys are every annotation graceguard reads or writes.
var graceguardKeys = []string{
	mutate.AnnotationRoutingDelay, mutate.AnnotationMaxWork, mutate.AnnotationCleanup, mutate.AnnotationSafetyMargin, mutate.AnnotationPreStop,
	mutate.AnnotationContainers, mutate.AnnotationReadinessPath, mutate.AnnotationLivenessPath, mutate.AnnotationProbePort, mutate.AnnotationInject,
	mutate.AnnotationBudget, mutate.AnnotationMaxWorkFloor, mutate.AnnotationMaxWorkCeiling, mutate.AnnotationRoutingProfile,
}

// The not-proven-by-cel condition never errs, and stays well within the
// API server's cost limit, whatever the Pod carries: 256 KiB in any
// graceguard annotation or in the record (with a record and annotations
// that pass every other check, so each value is actually read), as many
// annotations as 256 KiB holds, 32 containers and 32 native sidecars with
// huge commands, names, stop signals and hooks, and the heaviest Pod it
// proves.
func TestProvenConditionCost(t *testing.T) {
	ev := validatePodsEvaluator(t)
	ns := optedIn(nil)
	// A Pod graceguard mutated: every check but the one a case breaks holds.
	base := func(ann map[string]string) *corev1.Pod {
		p := newPod(ann, 30)
		if admit(p, ns) {
			t.Fatalf("graceguard refuses %+v", p)
		}
		return p
	}
	sidecar := corev1.ContainerRestartPolicyAlways
	wide := func(p *corev1.Pod, c func(i int) corev1.Container) *corev1.Pod {
		p.Spec.Containers, p.Spec.InitContainers = nil, nil
		for i := range 32 {
			p.Spec.Containers = append(p.Spec.Containers, c(i))
			s := c(i + 32)
			s.RestartPolicy = &sidecar
			p.Spec.InitContainers = append(p.Spec.InitContainers, s)
		}
		return p
	}
	hooked := func(i int) corev1.Container {
		return corev1.Container{Name: "c" + strconv.Itoa(i), Image: "registry.local/app:1", Lifecycle: sleepHook(5)}
	}
	type tc struct {
		name  string
		pod   func() *corev1.Pod
		prove bool
	}
	cases := []tc{
		{"a Pod graceguard mutated", func() *corev1.Pod { return base(nil) }, true},
		{"the record 256 KiB", func() *corev1.Pod {
			p := base(nil)
			p.Annotations[mutate.AnnotationBudget] += " " + huge
			return p
		}, false},
		{"every graceguard annotation 256 KiB", func() *corev1.Pod {
			p := base(nil)
			for _, k := range graceguardKeys {
				p.Annotations[k] = huge
			}
			return p
		}, false},
		{"as many annotations as 256 KiB holds", func() *corev1.Pod {
			p := base(nil)
			for i := range 256 << 10 / 8 {
				p.Annotations["k"+strconv.Itoa(i)] = ""
			}
			return p
		}, false},
		{"64 annotations of 4 KiB, and 64 keys of 317 bytes", func() *corev1.Pod {
			p := base(nil)
			for i := range 62 {
				p.Annotations[strings.Repeat("a", 253)+"/"+strings.Repeat("k", 60)+strconv.Itoa(100+i)] = strings.Repeat("v", 4096)
			}
			return p
		}, true},
		{"32 containers and 32 sidecars with huge commands", func() *corev1.Pod {
			return wide(base(nil), func(i int) corev1.Container {
				c := hooked(i)
				c.Command = []string{huge}
				c.Lifecycle = execHook(huge, huge)
				return c
			})
		}, false},
		{"32 containers and 32 sidecars with huge sleep commands", func() *corev1.Pod {
			return wide(base(nil), func(i int) corev1.Container {
				c := hooked(i)
				c.Lifecycle = execHook("sleep", huge)
				return c
			})
		}, false},
		{"32 containers and 32 sidecars with huge names and stop signals", func() *corev1.Pod {
			return wide(base(nil), func(i int) corev1.Container {
				c := hooked(i)
				c.Name = huge + strconv.Itoa(i)
				sig := corev1.Signal(huge)
				c.Lifecycle.StopSignal = &sig
				return c
			})
		}, false},
		{"32 containers and 32 sidecars with hooks it reads, the most it proves", func() *corev1.Pod {
			p := wide(base(nil), func(i int) corev1.Container {
				c := hooked(i)
				c.Lifecycle = execHook("/usr/local/bin/sleep", "5")
				g := int64(700)
				c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}, TerminationGracePeriodSeconds: &g}
				c.StartupProbe = c.LivenessProbe
				return c
			})
			// And every annotation it reads, each with the longest value it accepts.
			for k, v := range map[string]string{
				mutate.AnnotationRoutingDelay: "4s999ms999us999ns", mutate.AnnotationMaxWork: "20s", mutate.AnnotationCleanup: "2s", mutate.AnnotationSafetyMargin: "3s",
				mutate.AnnotationReadinessPath: "/" + strings.Repeat("r", 255), mutate.AnnotationLivenessPath: "/" + strings.Repeat("l", 255),
				mutate.AnnotationProbePort: "65535", mutate.AnnotationPreStop: "sleep", mutate.AnnotationInject: "true",
			} {
				p.Annotations[k] = v
			}
			for i := range 64 - len(p.Annotations) {
				p.Annotations["example.com/"+strings.Repeat("k", 200)+strconv.Itoa(i)] = strings.Repeat("v", 4096)
			}
			return p
		}, true},
		{"10,000 containers", func() *corev1.Pod {
			p := base(nil)
			for i := range 10000 {
				p.Spec.Containers = append(p.Spec.Containers, hooked(i+1))
			}
			return p
		}, false},
		{"opted out, 32 containers and 32 sidecars with huge hooks", func() *corev1.Pod {
			return wide(newPod(map[string]string{mutate.AnnotationInject: "false", mutate.AnnotationBudget: huge}, 30), func(i int) corev1.Container {
				c := hooked(i)
				c.Lifecycle = execHook("sleep", huge)
				return c
			})
		}, false},
		{"opted out, hooks of the most seconds", func() *corev1.Pod {
			return wide(newPod(map[string]string{mutate.AnnotationInject: "false"}, 1<<63-1), func(i int) corev1.Container {
				c := hooked(i)
				c.Lifecycle = sleepHook(1<<63 - 1)
				g := int64(1<<63 - 1)
				c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}, TerminationGracePeriodSeconds: &g}
				return c
			})
		}, false},
	}
	var most int64
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cost, matches := costOf(t, ev, c.pod())
			t.Logf("cost %d", cost)
			most = max(most, cost)
			if proven := !matches; proven != c.prove {
				t.Errorf("proven: %t, want %t", proven, c.prove)
			}
			// A tenth of the limit: room for what a later Kubernetes
			// charges more for.
			if cost > celconfig.PerCallLimit/10 {
				t.Errorf("costs %d, over a tenth of the API server's limit of %d", cost, celconfig.PerCallLimit)
			}
		})
	}
	t.Logf("the most any case cost: %d (limit per expression %d, per webhook %d)", most, celconfig.PerCallLimit, celconfig.RuntimeCELCostBudgetMatchConditions)
}
