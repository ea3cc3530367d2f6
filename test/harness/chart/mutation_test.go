package chart

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/optionflags"
)

// The mutating floor (docs/admission.md#the-mutating-floor) gives a Pod
// graceguard's budget inside the API server before the webhooks run. These
// tests evaluate the chart's rendered MutatingAdmissionPolicy with the API
// server's own code (its CEL compiler and JSON patcher) and hold it to
// pkg/mutate in both orders: the floor, then graceguard's mutating webhook,
// stores the Pod the webhook alone stores; and the floor leaves a Pod the
// webhook treated as it is.

// mutatingFloor is the API server's evaluator of the chart's mutating floor
// rendered with some values, and the options the chart gives the webhook
// with the same values.
type mutatingFloor struct {
	// compiler holds the policy's variables: each evaluation gets a
	// context of them (CreateContext), as the API server's dispatcher does.
	compiler *plugincel.CompositedCompiler
	matcher  matchconditions.Matcher
	patcher  patch.Patcher
	opts     mutate.Options
}

func newMutatingFloor(t testing.TB, values map[string]any) mutatingFloor {
	t.Helper()
	// The mutating floor is opt-in: values with it turned on.
	values = maps.Clone(values)
	if values == nil {
		values = map[string]any{}
	}
	values["nativeFloor"] = map[string]any{"mutate": true}
	manifest, err := Render("graceguard", "graceguard-system", values)
	if err != nil {
		t.Fatal(err)
	}
	var p *admissionregv1.MutatingAdmissionPolicy
	for _, doc := range strings.Split(manifest, "\n---") {
		if strings.Contains(doc, "\nkind: MutatingAdmissionPolicy\n") {
			p = &admissionregv1.MutatingAdmissionPolicy{}
			if err := yamlStrict(doc, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	if p == nil {
		t.Fatalf("the chart rendered no MutatingAdmissionPolicy with values %v", values)
	}
	c, err := Container("graceguard", "graceguard-system", values, "webhook")
	if err != nil {
		t.Fatal(err)
	}
	compiler := mutationCompiler(p)
	return mutatingFloor{compiler: compiler, matcher: mutationMatcher(compiler, p), patcher: mutationPatcher(compiler, p), opts: webhookOptions(t, c.Args)}
}

// webhookOptions are the cluster options the webhook takes from args, as
// cmd/webhook binds them (pkg/optionflags), other flags ignored.
func webhookOptions(t testing.TB, args []string) mutate.Options {
	t.Helper()
	o := mutate.DefaultOptions()
	fs := pflag.NewFlagSet("webhook", pflag.ContinueOnError)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	optionflags.Bind(fs, &o)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	return o
}

// mutationMatcher and mutationPatcher are the API server's compilePolicy
// (the mutating policy plugin, k8s.io/apiserver v0.37), which it does not
// export, for a policy of JSON patches.
func mutationCompiler(p *admissionregv1.MutatingAdmissionPolicy) *plugincel.CompositedCompiler {
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		panic(err)
	}
	vars := make([]plugincel.NamedExpressionAccessor, len(p.Spec.Variables))
	for i, v := range p.Spec.Variables {
		vars[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	compiler.CompileAndStoreVariables(vars, plugincel.OptionalVariableDeclarations{HasAuthorizer: true}, environment.StoredExpressions)
	return compiler
}

func mutationMatcher(compiler *plugincel.CompositedCompiler, p *admissionregv1.MutatingAdmissionPolicy) matchconditions.Matcher {
	conds := make([]plugincel.ExpressionAccessor, len(p.Spec.MatchConditions))
	for i := range p.Spec.MatchConditions {
		conds[i] = (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i])
	}
	return matchconditions.NewMatcher(compiler.CompileCondition(conds, plugincel.OptionalVariableDeclarations{HasAuthorizer: true}, environment.StoredExpressions),
		p.Spec.FailurePolicy, "policy", "mutate", p.Name)
}

func mutationPatcher(compiler *plugincel.CompositedCompiler, p *admissionregv1.MutatingAdmissionPolicy) patch.Patcher {
	if len(p.Spec.Mutations) != 1 || p.Spec.Mutations[0].JSONPatch == nil {
		panic("the mutating floor is one JSON patch")
	}
	opts := plugincel.OptionalVariableDeclarations{HasAuthorizer: true, HasPatchTypes: true}
	eval := compiler.CompileMutatingEvaluator(&patch.JSONPatchCondition{Expression: p.Spec.Mutations[0].JSONPatch.Expression}, opts, environment.StoredExpressions)
	return patch.NewJSONPatcher(eval)
}

// apply is what the API server does with the floor on a Pod created in
// ns: the Pod it hands on (pod itself when the floor does not match), or
// the evaluation error, which failurePolicy Ignore would swallow.
func (f mutatingFloor) apply(pod *corev1.Pod, ns mutate.Namespace) (*corev1.Pod, error) {
	pod = pod.DeepCopy()
	pod.APIVersion, pod.Kind = "v1", "Pod"
	gvk := corev1.SchemeGroupVersion.WithKind("Pod")
	attr := admission.NewAttributesRecord(pod, nil, gvk, pod.Namespace, pod.Name, corev1.SchemeGroupVersion.WithResource("pods"),
		"", admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "alice"})
	va := &admission.VersionedAttributes{Attributes: attr, VersionedKind: gvk, VersionedObject: admission.NewLazyObject(pod)}
	ctx := f.compiler.CreateContext(context.Background())
	m := f.matcher.Match(ctx, va, nil, nil)
	if m.Error != nil {
		return nil, m.Error
	}
	if !m.Matches {
		return pod, nil
	}
	obj, err := f.patcher.Patch(ctx, patch.Request{
		MatchedResource:     attr.GetResource(),
		VersionedAttributes: va,
		ObjectInterfaces:    admission.NewObjectInterfacesFromScheme(scheme.Scheme),
		Namespace:           &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name, Labels: ns.Labels, Annotations: ns.Annotations}},
	}, celconfig.RuntimeCELCostBudget)
	if err != nil {
		return nil, err
	}
	out, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("the floor returned a %T", obj)
	}
	return out, nil
}

// mutatingWebhook is graceguard's mutating webhook on pod: the Pod it stores
// (mutated in place), that it refuses it, and the warnings it answers with.
func mutatingWebhook(pod *corev1.Pod, ns mutate.Namespace, o mutate.Options) (refused bool, warnings []string) {
	t := mutate.ForPod(pod)
	r := mutate.Mutate(t, ns, o)
	return r.Mode != mutate.ModeWarn && mutate.ValidateMutated(t, ns, o).Denied(), r.AdmissionWarnings()
}

// mutationOutcome is what mutationDisagreement checked.
const (
	floorLeftAlone = iota
	// floorGaveBudget: the floor acted and the webhook would admit the Pod.
	floorGaveBudget
)

// mutationDisagreement holds the floor to the webhook for the Pod the bytes
// make, in namespace ns, under f's values: "" when they agree.
func mutationDisagreement(f mutatingFloor, b []byte) (string, int) {
	p := &picker{b: b}
	var ns mutate.Namespace
	var pod *corev1.Pod
	if p.n(6) == 0 {
		// Anything at all: the generator of the proof's fuzz.
		ns, pod = p.namespace(), p.pod()
		delete(pod.Annotations, mutate.AnnotationBudget)
	} else {
		// Mostly what the floor reads, now and then what it does not.
		ns, pod = p.floorNamespace(), p.floorPod()
	}
	floored, err := f.apply(pod, ns)
	if err != nil {
		return fmt.Sprintf("the floor errs: %v\nPod: %s\nnamespace: %+v", err, show(pod), ns), floorLeftAlone
	}
	outcome := floorLeftAlone
	if !cmp.Equal(normal(floored), normal(pod)) {
		outcome = floorGaveBudget
	}
	// Order 1: the webhook alone; order 2: the floor, then the webhook.
	alone, after := pod.DeepCopy(), floored.DeepCopy()
	refusedAlone, warnAlone := mutatingWebhook(alone, ns, f.opts)
	refusedAfter, warnAfter := mutatingWebhook(after, ns, f.opts)
	if refusedAlone != refusedAfter {
		return fmt.Sprintf("the webhook refuses the Pod %t, and after the floor %t\nPod: %s\nafter the floor: %s\nnamespace: %+v", refusedAlone, refusedAfter, show(pod), show(floored), ns), outcome
	}
	if refusedAlone {
		return "", floorLeftAlone
	}
	if d := cmp.Diff(normal(alone), normal(after)); d != "" {
		return fmt.Sprintf("the webhook stores another Pod after the floor (-alone +after the floor):\n%s\nPod: %s\nnamespace: %+v", d, show(pod), ns), outcome
	}
	if d := cmp.Diff(warnAlone, warnAfter); d != "" {
		return fmt.Sprintf("the webhook warns otherwise after the floor (-alone +after the floor):\n%s\nPod: %s\nnamespace: %+v", d, show(pod), ns), outcome
	}
	if outcome == floorGaveBudget && floored.Annotations[mutate.AnnotationBudget] != alone.Annotations[mutate.AnnotationBudget] {
		return fmt.Sprintf("the floor records %q, the webhook %q", floored.Annotations[mutate.AnnotationBudget], alone.Annotations[mutate.AnnotationBudget]), outcome
	}
	// Reinvoked after the webhook, the floor leaves its Pod as it is.
	again, err := f.apply(alone, ns)
	if err != nil {
		return fmt.Sprintf("the floor errs on the webhook's Pod: %v", err), outcome
	}
	if d := cmp.Diff(normal(alone), normal(again)); d != "" {
		return fmt.Sprintf("the floor changes a Pod the webhook treated:\n%s", d), outcome
	}
	return "", outcome
}

// normal is the Pod as the API server stores it, through JSON (an empty
// map and none are the same), with its kind.
func normal(p *corev1.Pod) map[string]any {
	b, err := json.Marshal(withKind(p))
	if err != nil {
		panic(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

// show prints a Pod for a failure, its long lines clipped.
func show(p *corev1.Pod) string {
	b, _ := yaml.Marshal(withKind(p))
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if len(l) > 160 {
			lines[i] = l[:160] + "..."
		}
	}
	return "\n" + strings.Join(lines, "\n")
}

// floorNamespace is an opted-in namespace in enforce mode with settings the
// mutating floor reads, and now and then one it does not.
func (p *picker) floorNamespace() mutate.Namespace {
	ns := optedIn(map[string]string{})
	for _, kv := range []struct {
		k  string
		vs []string
	}{
		{mutate.AnnotationRoutingDelay, []string{"", "", "", "8", "10s", "1m", "0"}},
		{mutate.AnnotationMaxWork, []string{"", "", "", "40s", "2m", "10"}},
		{mutate.AnnotationCleanup, []string{"", "", "", "", "1s", "0"}},
		{mutate.AnnotationSafetyMargin, []string{"", "", "", "", "10s"}},
		{mutate.AnnotationPreStop, []string{"", "", "", "exec", "none"}},
		{mutate.AnnotationRoutingProfile, []string{"", "", "", "", "ingress-nginx", "gke-neg", "traefik", "corp-lb"}},
		{mutate.AnnotationReadinessPath, []string{"", "", "", "/ready"}},
	} {
		if v := p.of(kv.vs...); v != "" {
			ns.Annotations[kv.k] = v
		}
	}
	switch p.n(16) {
	case 1:
		ns.Labels[mutate.LabelMode] = p.of("enforce", "audit")
	case 2:
		ns.Annotations[mutate.AnnotationMaxWork] = p.of(mutate.MaxWorkAuto, "1500ms", "x")
	case 3:
		ns.Annotations[mutate.AnnotationLinkerdInject] = "enabled"
	case 4:
		ns.Labels[mutate.LabelIstioInjection] = "enabled"
	}
	return ns
}

// floorPod is a Pod with hooks and settings the mutating floor reads, and
// now and then ones it does not.
func (p *picker) floorPod() *corev1.Pod {
	ann := map[string]string{}
	for _, kv := range []struct {
		k  string
		vs []string
	}{
		{mutate.AnnotationRoutingDelay, []string{"", "", "", "3s", "15", "2m", "0s", "1h"}},
		{mutate.AnnotationMaxWork, []string{"", "", "", "40s", "5", "1m30s", "1h"}},
		{mutate.AnnotationCleanup, []string{"", "", "", "", "0", "5s"}},
		{mutate.AnnotationSafetyMargin, []string{"", "", "", "", "1s", "0"}},
		{mutate.AnnotationPreStop, []string{"", "", "", "sleep", "exec", "none"}},
		{mutate.AnnotationRoutingProfile, []string{"", "", "", "", "", "", "", "aws-alb-ip", "azure-agic", "kube-proxy", "corp-lb", "bogus"}},
		{mutate.AnnotationReadinessPath, []string{"", "", "", "", "/ready", "/ready", "ready"}},
		{mutate.AnnotationProbePort, []string{"", "", "", "", "", "http", "8080", "0"}},
		{mutate.AnnotationInject, []string{"", "", "", "", "", "true", "false"}},
	} {
		if v := p.of(kv.vs...); v != "" {
			ann[kv.k] = v
		}
	}
	switch p.n(16) {
	case 1:
		ann[mutate.AnnotationContainers] = "c0"
	case 2:
		ann[mutate.AnnotationMaxWork] = p.of(mutate.MaxWorkAuto, "2.5s", "thirty")
	case 3:
		ann[mutate.AnnotationBudget] = "routing=5s work=20s cleanup=2s margin=3s grace=30s"
	case 4:
		ann["sidecar.istio.io/proxyCPU"] = "100m"
	}
	var cs []corev1.Container
	for i := range 1 + p.n(3) {
		c := corev1.Container{Name: "c" + strconv.Itoa(i), Image: "registry.local/x:1"}
		if p.n(2) == 0 {
			c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
		}
		switch s := p.secs(); p.n(8) {
		case 1:
			c.Lifecycle = sleepHook(s)
		case 2:
			c.Lifecycle = execHook("sleep", strconv.FormatInt(s, 10))
		case 3:
			c.Lifecycle = execHook("/bin/sh", "-c", "sleep "+strconv.FormatInt(s, 10))
		case 4:
			c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/drain"}}}
		case 5:
			c.Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
		}
		cs = append(cs, c)
	}
	pod := newPod(ann, []int64{30, 30, 30, 1, 0, 60, 600, 3600}[p.n(8)], cs...)
	if p.n(5) == 0 {
		always := corev1.ContainerRestartPolicyAlways
		pod.Spec.InitContainers = []corev1.Container{{Name: "sidecar", Image: "registry.local/x:1", RestartPolicy: &always, Lifecycle: p.hook()}}
	}
	switch p.n(6) {
	case 1:
		pod.Spec.OS = &corev1.PodOS{Name: corev1.Windows}
	case 2:
		pod.Spec.NodeSelector = map[string]string{corev1.LabelOSStable: "windows"}
	}
	if len(ann) == 0 && p.n(2) == 0 {
		pod.Annotations = nil
	}
	return pod
}

func withKind(p *corev1.Pod) *corev1.Pod {
	p = p.DeepCopy()
	p.APIVersion, p.Kind = "v1", "Pod"
	return p
}

// mutationValues are chart values the differential runs under: the
// defaults, and cluster settings the floor reads (handlers, a default
// profile, an operator's profile, a cap, a denying ceiling).
var mutationValues = []map[string]any{
	nil,
	{"config": map[string]any{"prestopHandler": "exec", "defaultRoutingProfile": "gke-neg"}},
	{"config": map[string]any{"prestopHandler": "none", "defaultMaxWork": "1m", "maxGracePeriod": "2m",
		"routingProfiles": map[string]any{"corp-lb": map[string]any{"routingDelay": "25s", "graceFloor": "90s"}}}},
	{"config": map[string]any{"defaultRoutingDelay": 0, "karpenterTerminationGracePeriod": "90s", "karpenterCeilingAction": "deny"}},
}

// FuzzMutatingFloorAgreesWithTheWebhook: for any Pod created in an opted-in
// namespace in enforce mode, under each of mutationValues, the webhook
// stores the same Pod (or refuses it alike) whether the mutating floor ran
// before it or not; where the floor acted, its record is the webhook's; and
// the floor leaves the Pod the webhook stored as it is.
func FuzzMutatingFloorAgreesWithTheWebhook(f *testing.F) {
	floors := make([]mutatingFloor, len(mutationValues))
	for i, v := range mutationValues {
		floors[i] = newMutatingFloor(f, v)
	}
	for _, seed := range [][]byte{{}, {1, 2, 3, 4, 5, 6, 7, 8, 9}, {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}, []byte("the floor gives the budget"), {3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		if why, _ := mutationDisagreement(floors[int(b[0])%len(floors)], b[1:]); why != "" {
			t.Fatal(why)
		}
	})
}

// The fuzz reaches what it holds: the floor gives Pods their budget under
// every set of values, often.
func TestMutatingFloorFuzzReachesItsCases(t *testing.T) {
	rng := rand.New(rand.NewPCG(36, 37))
	for i, v := range mutationValues {
		fl := newMutatingFloor(t, v)
		gave := 0
		for range 300 {
			b := make([]byte, 64)
			for j := range b {
				b[j] = byte(rng.UintN(256))
			}
			why, c := mutationDisagreement(fl, b)
			if why != "" {
				t.Fatalf("values %d: %s", i, why)
			}
			if c == floorGaveBudget {
				gave++
			}
		}
		t.Logf("values %d: the floor gave the budget to %d of 300 Pods", i, gave)
		if gave < 10 {
			t.Errorf("values %d: the floor gave the budget to %d of 300 Pods; want at least 10", i, gave)
		}
	}
}

// What the issue asks of the floor, on the chart's defaults: an ordinary
// Pod, one with max-work: 40s and one with its own sleep 10 get the budget
// graceguard gives them; a Pod with graceguard's record, a mesh or
// max-work: auto is left to the webhook.
func TestMutatingFloorGivesTheBudget(t *testing.T) {
	f := newMutatingFloor(t, nil)
	ns := optedIn(nil)
	app := func(l *corev1.Lifecycle) corev1.Container {
		return corev1.Container{Name: "app", Image: "registry.local/app:1", Lifecycle: l}
	}
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		record string
	}{
		{"an ordinary Pod", newPod(nil, 30), "routing=5s work=20s cleanup=2s margin=3s grace=30s"},
		{"max-work: 40s", newPod(map[string]string{mutate.AnnotationMaxWork: "40s"}, 30), "routing=5s work=40s cleanup=2s margin=3s grace=50s"},
		{"its own sleep 10, grace 30", newPod(nil, 30, app(sleepHook(10))), "routing=10s work=20s cleanup=2s margin=3s grace=35s"},
		{"a routing profile", newPod(map[string]string{mutate.AnnotationRoutingProfile: "aws-nlb-ip"}, 30), "routing=2m work=20s cleanup=2s margin=3s grace=145s"},
		{"graceguard's record", newPod(map[string]string{mutate.AnnotationBudget: "routing=5s work=20s cleanup=2s margin=3s grace=30s"}, 30), ""},
		{"max-work: auto", newPod(map[string]string{mutate.AnnotationMaxWork: mutate.MaxWorkAuto}, 30), ""},
		{"an Istio Pod", newPod(map[string]string{"sidecar.istio.io/proxyCPU": "100m"}, 30), ""},
		{"a fraction of a second", newPod(map[string]string{mutate.AnnotationCleanup: "1500ms"}, 30), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := f.apply(tc.pod, ns)
			if err != nil {
				t.Fatal(err)
			}
			if tc.record == "" {
				if d := cmp.Diff(withKind(tc.pod), got); d != "" {
					t.Fatalf("the floor changed the Pod:\n%s", d)
				}
				return
			}
			if got.Annotations[mutate.AnnotationBudget] != tc.record {
				t.Errorf("record %q, want %q", got.Annotations[mutate.AnnotationBudget], tc.record)
			}
			if got.Labels[mutate.LabelTreated] != mutate.LabelTreatedByFloor {
				t.Errorf("label %s=%q, want %q", mutate.LabelTreated, got.Labels[mutate.LabelTreated], mutate.LabelTreatedByFloor)
			}
			for _, c := range got.Spec.Containers {
				if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
					t.Errorf("container %s has no preStop hook", c.Name)
				}
			}
			// The webhook, answering after it, stores the Pod it stores alone,
			// the label set to "true".
			alone, after := tc.pod.DeepCopy(), got.DeepCopy()
			refusedAlone, _ := mutatingWebhook(alone, ns, f.opts)
			refusedAfter, _ := mutatingWebhook(after, ns, f.opts)
			if refusedAlone || refusedAfter {
				t.Fatal("the webhook refuses it")
			}
			if d := cmp.Diff(withKind(alone), withKind(after)); d != "" {
				t.Errorf("-webhook alone +floor then webhook:\n%s", d)
			}
		})
	}
}

func yamlStrict(doc string, into runtime.Object) error {
	return yaml.UnmarshalStrict([]byte(doc), into)
}
