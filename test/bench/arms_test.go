package bench

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	"github.com/graceguard/graceguard/internal/fixture"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/test/bench/policy"
)

// The one-mutation policy is the two-mutation policy without its second
// mutation, bound to its own arm: the two policies' figures differ by the
// probe mutation and nothing else.
func TestTheOneMutationPolicyIsTheFirstMutationAlone(t *testing.T) {
	two, twoBinding, err := policy.Parse(nativePolicyYAML)
	if err != nil {
		t.Fatalf("policy/graceguard-in-cel.yaml: %v", err)
	}
	one, oneBinding, err := policy.Parse(oneMutationPolicyYAML)
	if err != nil {
		t.Fatalf("policy/graceguard-in-cel-one-mutation.yaml: %v", err)
	}
	if len(two.Spec.Mutations) != 2 || len(one.Spec.Mutations) != 1 {
		t.Fatalf("mutations: two-mutation policy %d, one-mutation policy %d; want 2 and 1", len(two.Spec.Mutations), len(one.Spec.Mutations))
	}
	if !equality.Semantic.DeepEqual(one.Spec.Mutations[0], two.Spec.Mutations[0]) {
		t.Errorf("the one-mutation policy's mutation is not the two-mutation policy's first:\n%+v\nvs\n%+v", one.Spec.Mutations[0], two.Spec.Mutations[0])
	}
	// Every variable the first mutation reads, as the two-mutation policy
	// defines it; the probe's variable is left out.
	var want []string
	for _, v := range two.Spec.Variables {
		if v.Name != "readiness" {
			want = append(want, v.Name+"="+v.Expression)
		}
	}
	var got []string
	for _, v := range one.Spec.Variables {
		got = append(got, v.Name+"="+v.Expression)
	}
	if !slices.Equal(got, want) {
		t.Errorf("variables of the one-mutation policy:\n%q\nwant the two-mutation policy's without readiness:\n%q", got, want)
	}
	if !equality.Semantic.DeepEqual(one.Spec.MatchConstraints, two.Spec.MatchConstraints) || *one.Spec.FailurePolicy != *two.Spec.FailurePolicy ||
		one.Spec.ReinvocationPolicy != two.Spec.ReinvocationPolicy {
		t.Errorf("the one-mutation policy matches or fails unlike the two-mutation policy")
	}
	if one.Name == two.Name {
		t.Errorf("both policies are named %q: the second would not be created", one.Name)
	}
	for _, b := range []struct {
		policy, bound, arm string
		labels             map[string]string
	}{
		{two.Name, twoBinding.Spec.PolicyName, ArmNativePolicy, twoBinding.Spec.MatchResources.NamespaceSelector.MatchLabels},
		{one.Name, oneBinding.Spec.PolicyName, ArmNativeOneMutation, oneBinding.Spec.MatchResources.NamespaceSelector.MatchLabels},
	} {
		if b.bound != b.policy || len(b.labels) != 1 || b.labels[armLabel] != b.arm {
			t.Errorf("the binding of %s binds %q to namespaces %v; want %s to {%s: %s}", b.policy, b.bound, b.labels, b.policy, armLabel, b.arm)
		}
	}
}

// A policy file that lacks its binding, or holds another kind, is refused
// with what it holds and what is accepted.
func TestPolicyFilesNeedAPolicyAndABinding(t *testing.T) {
	policyOnly, _, _ := strings.Cut(string(oneMutationPolicyYAML), "\n---\n")
	if _, _, err := policy.Parse([]byte(policyOnly)); err == nil || !strings.Contains(err.Error(), "binding found: false") {
		t.Errorf("a file without a binding: %v", err)
	}
	if _, _, err := policy.Parse([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")); err == nil ||
		!strings.Contains(err.Error(), `"ConfigMap"`) || !strings.Contains(err.Error(), "accepted: MutatingAdmissionPolicy") {
		t.Errorf("a ConfigMap: %v", err)
	}
}

// The one-mutation pair creates the typical Pod without a probe path, on
// which graceguard's whole injection is the one mutation (hooks, grace,
// the record, and its treated label); every other arm creates the typical
// Pod, on which graceguard also adds a probe.
func TestTheOneMutationPairCreatesPodsOnWhichGraceguardAddsNoProbe(t *testing.T) {
	reasons := func(p *corev1.Pod) []string {
		r := mutate.Mutate(mutate.ForPod(p), fixture.OptedIn(), mutate.DefaultOptions())
		var out []string
		for _, c := range r.Changes {
			if !slices.Contains(out, string(c.Reason)) {
				out = append(out, string(c.Reason))
			}
		}
		slices.Sort(out)
		return out
	}
	oneMutation := []string{string(mutate.ChangeBudget), string(mutate.ChangeGrace), string(mutate.ChangePreStop), string(mutate.ChangeTreated)}
	for _, a := range arms() {
		p := a.pod("x")
		if p.Namespace != armNamespace(a.name) || p.Name != "x" {
			t.Errorf("arm %s creates %s/%s, want %s/x", a.name, p.Namespace, p.Name, armNamespace(a.name))
		}
		_, hasPath := p.Annotations[mutate.AnnotationReadinessPath]
		pair := a.name == ArmNativeOneMutation || a.name == ArmGraceguardNoProbe
		if hasPath == pair {
			t.Errorf("arm %s: the Pod carries %s: %t, want %t", a.name, mutate.AnnotationReadinessPath, hasPath, !pair)
		}
		got := reasons(p)
		if pair && !slices.Equal(got, oneMutation) {
			t.Errorf("arm %s: graceguard's changes to its Pod are %q, want %q alone", a.name, got, oneMutation)
		}
		if !pair && !slices.Contains(got, string(mutate.ChangeReadiness)) {
			t.Errorf("arm %s: graceguard's changes to its Pod are %q, want a readiness probe among them", a.name, got)
		}
	}
	plain, typical := noProbePathPod("ns", "x"), benchPod("ns", "x")
	delete(typical.Annotations, mutate.AnnotationReadinessPath)
	if !equality.Semantic.DeepEqual(plain, typical) {
		t.Errorf("the Pod without a probe path differs from the typical Pod by more than the annotation")
	}
}

// samePods holds a native policy's Pod to graceguard's field by field and
// then as a whole, graceguard's treated label aside.
func TestSamePodsFindsWhatThePolicyDidNotDo(t *testing.T) {
	sent := noProbePathPod("ns", "compare")
	inject := func(p *corev1.Pod) *corev1.Pod {
		p = p.DeepCopy()
		p.Annotations[mutate.AnnotationBudget] = "routing=5s work=40s cleanup=2s margin=3s grace=50s"
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](50)
		for i := range p.Spec.Containers {
			p.Spec.Containers[i].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}
		}
		return p
	}
	graceguard := func() *corev1.Pod {
		p := inject(sent)
		p.Labels[mutate.LabelTreated] = mutate.LabelTreatedValue
		p.UID, p.Namespace = "uid-1", "bench-arm-graceguard-no-probe-pods"
		return p
	}
	for _, tc := range []struct {
		name   string
		policy func(*corev1.Pod)
		want   []string
	}{
		{"the policy makes graceguard's Pod but for the treated label", func(*corev1.Pod) {},
			[]string{"the same (routing=5s work=40s cleanup=2s margin=3s grace=50s; a 5s preStop sleep on each of 3 containers, no readiness probe added"}},
		{"the policy records another budget", func(p *corev1.Pod) { p.Annotations[mutate.AnnotationBudget] = "routing=5s work=20s" },
			[]string{"differ: ", `budget "routing=5s work=40s cleanup=2s margin=3s grace=50s" vs "routing=5s work=20s"`}},
		{"the policy leaves the grace", func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = nil }, []string{"differ: ", "grace 50 vs unset"}},
		{"the policy adds a probe graceguard does not", func(p *corev1.Pod) {
			p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 2}
		}, []string{"differ: ", "app readinessProbe differs"}},
		{"the policy changes a field no check names", func(p *corev1.Pod) { p.Spec.Containers[1].Image = "other:1" },
			[]string{"differ: ", "spec.containers[1].image differs"}},
		{"the policy adds a label", func(p *corev1.Pod) { p.Labels["extra"] = "x" }, []string{"differ: ", "metadata.labels.extra differs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := inject(sent)
			n.UID, n.Namespace = "uid-2", "bench-arm-native-one-mutation"
			tc.policy(n)
			got, err := samePods(sent, graceguard(), n)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("samePods = %q, want it to say %q", got, w)
				}
			}
			if same := strings.HasPrefix(got, samePodsPrefix); same != (len(tc.want) == 1) {
				t.Errorf("samePods = %q: same %t", got, same)
			}
		})
	}
	// On the typical Pod the probe graceguard adds is named.
	typical := benchPod("ns", "compare")
	g, n := inject(typical), inject(typical)
	probe := &corev1.Probe{PeriodSeconds: 2}
	g.Spec.Containers[0].ReadinessProbe, n.Spec.Containers[0].ReadinessProbe = probe, probe
	if got, err := samePods(typical, g, n); err != nil || !strings.Contains(got, "a readiness probe on app;") {
		t.Errorf("samePods on the typical Pod = %q, %v; want it to name the probe on app", got, err)
	}
}

// The creation section states what the native floors cost against issue
// 41's goal, from the two arms' own figures.
func TestFloorsCostIsStatedAgainstTheGoal(t *testing.T) {
	arm := func(name string, rate, p99 float64) ArmRun {
		return ArmRun{Arm: name, PodsPerSec: rate, RoundPodsPerSec: []float64{rate, rate}, Latency: Percentile{P99: p99}}
	}
	for _, tc := range []struct {
		g, w ArmRun
		want string
	}{
		{arm(ArmGraceguard, 95, 200), arm(ArmWebhookOnly, 100, 210), "with its native floor (the chart's default) graceguard creates Pods at 0.950× its webhooks' rate alone (95.0 vs 100 Pods/s), p99 200 vs 210 ms (0.952×); rounds 0.950×–0.950×: within the goal"},
		{arm(ArmGraceguard, 80, 200), arm(ArmWebhookOnly, 100, 210), ": not within the goal"},
		{arm(ArmGraceguard, 99, 250), arm(ArmWebhookOnly, 100, 210), ": not within the goal"},
	} {
		got := floorsCost(&Creation{Arms: []ArmRun{tc.g, tc.w}})
		if !strings.Contains(got, tc.want) {
			t.Errorf("floorsCost = %q, want it to contain %q", got, tc.want)
		}
	}
	both := floorsCost(&Creation{Arms: []ArmRun{arm(ArmGraceguard, 95, 200), arm(ArmWebhookOnly, 100, 210), arm(ArmMutatingFloor, 80, 260)}})
	if !strings.Contains(both, "within the goal") || !strings.Contains(both, "With the mutating floor too (`nativeFloor.mutate=true`) graceguard creates Pods at 0.800×") ||
		!strings.HasSuffix(both, "(1.24×); rounds 0.800×–0.800×: not within the goal of at least 0.9× the rate and a p99 no worse.") {
		t.Errorf("with the mutating floor arm: %q", both)
	}
	if got := floorsCost(&Creation{Arms: []ArmRun{arm(ArmGraceguard, 1, 1)}}); got != "" {
		t.Errorf("without the webhook-only arm: %q, want nothing", got)
	}
}

// With three rounds or more, the floors' goal is judged on the medians of
// the rounds' paired ratios, as section 6's goodput: the arms' totals
// differ by less than one round differs from the next.
func TestFloorsCostIsJudgedOnTheRoundsMedians(t *testing.T) {
	arm := func(name string, rates, p99s []float64) ArmRun {
		a := ArmRun{Arm: name, RoundPodsPerSec: rates, RoundP99: p99s}
		a.PodsPerSec, a.Latency.P99 = median(rates), slices.Max(p99s)
		return a
	}
	w := arm(ArmWebhookOnly, []float64{100, 200, 150}, []float64{200, 100, 300})
	for _, tc := range []struct {
		name string
		g    ArmRun
		want string
	}{
		{"one round's p99 above, the median round's the same", arm(ArmGraceguard, []float64{95, 190, 150}, []float64{190, 100, 310}),
			"judged on the rounds' paired ratios, medians: rate 0.950×, p99 1.00× (each round's p99: 0.950×, 1.00×, 1.03×): within the goal"},
		{"the median round's p99 worse", arm(ArmGraceguard, []float64{95, 190, 150}, []float64{190, 110, 310}), "p99 1.03×"},
		{"the median round's rate under 0.9×", arm(ArmGraceguard, []float64{85, 170, 150}, []float64{190, 100, 290}), "rate 0.850×"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := floorsCost(&Creation{Arms: []ArmRun{tc.g, w}})
			within := strings.HasSuffix(got, ": within the goal of at least 0.9× the rate and a p99 no worse.")
			if !strings.Contains(got, tc.want) || within != strings.HasSuffix(tc.want, "within the goal") {
				t.Errorf("floorsCost = %q, want it to contain %q", got, tc.want)
			}
		})
	}
}
