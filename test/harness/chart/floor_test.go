package chart

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// The native floor (docs/admission.md#the-native-floor) is a
// ValidatingAdmissionPolicy the API server evaluates whether or not a
// webhook replica answers. These tests evaluate the chart's rendered policy
// with the API server's own validating-policy code and hold it to
// pkg/mutate.Validate both ways: the floor never refuses what the webhook
// admits, and refuses, in the webhook's words, every hook and stop signal
// the webhook refuses that CEL can read.

// floor is the API server's evaluator of the chart's floor policy.
type floor struct {
	v validating.Validator
}

func newFloor(t testing.TB, values map[string]any) floor {
	t.Helper()
	w, err := RenderWebhooks("graceguard", "graceguard-system", values)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Policies) != 1 {
		t.Fatalf("the chart rendered %d ValidatingAdmissionPolicies, want the floor", len(w.Policies))
	}
	v := compilePolicy(w.Policies[0])
	if err := v.CompileError(); err != nil {
		t.Fatalf("the floor does not compile: %v", err)
	}
	return floor{v}
}

// compilePolicy is the API server's compilePolicy (the validating policy
// plugin, k8s.io/apiserver v0.37), which it does not export.
func compilePolicy(p *admissionregv1.ValidatingAdmissionPolicy) validating.Validator {
	optionalVars := plugincel.OptionalVariableDeclarations{HasParams: false, HasAuthorizer: true}
	expressionOptionalVars := plugincel.OptionalVariableDeclarations{HasParams: false, HasAuthorizer: false}
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return validating.NewValidator(nil, nil, nil, nil, p.Spec.FailurePolicy, err)
	}
	vars := make([]plugincel.NamedExpressionAccessor, len(p.Spec.Variables))
	for i, v := range p.Spec.Variables {
		vars[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	compiler.CompileAndStoreVariables(vars, optionalVars, environment.StoredExpressions)
	var matcher matchconditions.Matcher
	if len(p.Spec.MatchConditions) > 0 {
		conds := make([]plugincel.ExpressionAccessor, len(p.Spec.MatchConditions))
		for i := range p.Spec.MatchConditions {
			conds[i] = (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i])
		}
		matcher = matchconditions.NewMatcher(compiler.CompileCondition(conds, optionalVars, environment.StoredExpressions), p.Spec.FailurePolicy, "policy", "validate", p.Name)
	}
	validations := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	messages := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	for i, v := range p.Spec.Validations {
		validations[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if v.MessageExpression != "" {
			messages[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	audits := make([]plugincel.ExpressionAccessor, len(p.Spec.AuditAnnotations))
	for i, a := range p.Spec.AuditAnnotations {
		audits[i] = &validating.AuditAnnotationCondition{Key: a.Key, ValueExpression: a.ValueExpression}
	}
	return validating.NewValidator(
		compiler.CompileCondition(validations, optionalVars, environment.StoredExpressions),
		matcher,
		compiler.CompileCondition(audits, optionalVars, environment.StoredExpressions),
		compiler.CompileCondition(messages, expressionOptionalVars, environment.StoredExpressions),
		p.Spec.FailurePolicy, nil)
}

// verdict is what the floor decided of one object.
type verdict struct {
	denied  bool
	message string
	reasons string
	// err is an evaluation error: under the floor's failurePolicy Ignore
	// it would admit the object unjudged.
	err string
}

// judge evaluates the floor on obj (a Pod or a workload), created (old
// nil) or updated, in namespace ns.
func (f floor) judge(obj, old runtime.Object, gvk schema.GroupVersionKind, resource string) verdict {
	op := admission.Create
	if old != nil {
		op = admission.Update
	}
	m := obj.(metav1.Object)
	attr := admission.NewAttributesRecord(obj, old, gvk, m.GetNamespace(), m.GetName(), schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: resource},
		"", op, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "alice"})
	va := &admission.VersionedAttributes{Attributes: attr, VersionedKind: gvk, VersionedObject: admission.NewLazyObject(obj)}
	if old != nil {
		va.VersionedOldObject = admission.NewLazyObject(old)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: m.GetNamespace(), Labels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}}}
	r := f.v.Validate(context.Background(), attr.GetResource(), va, nil, ns, celconfig.RuntimeCELCostBudget, nil)
	var out verdict
	for _, d := range r.Decisions {
		switch d.Evaluation {
		case validating.EvalError:
			out.err = d.Message
		case validating.EvalDeny:
			out.denied, out.message = true, d.Message
		}
	}
	for _, a := range r.AuditAnnotations {
		if a.Key == "reasons" {
			out.reasons = a.Value
		}
	}
	return out
}

func (f floor) pod(p *corev1.Pod) verdict {
	p = p.DeepCopy()
	p.APIVersion, p.Kind = "v1", "Pod"
	return f.judge(p, nil, corev1.SchemeGroupVersion.WithKind("Pod"), "pods")
}

// validated is the webhook's decision on a Pod as it is stored (the
// validating webhook's, with the chart's --untreated-pods=admit): its
// message without the "Pod "name" is invalid: " the API server's floor
// message replaces, and its reasons.
func validated(t mutate.Target, ns mutate.Namespace, o mutate.Options) (*mutate.Report, string) {
	o.Untreated = mutate.UntreatedAdmit
	r := mutate.Validate(t, ns, o)
	err := r.Err()
	if err == nil {
		return r, ""
	}
	_, msg, _ := strings.Cut(err.Error(), " is invalid: ")
	return r, msg
}

// The cases: what the floor refuses while graceguard is down, in
// graceguard's words, and what it leaves alone.
func TestFloorRefusesWhatGraceguardRefuses(t *testing.T) {
	f := newFloor(t, nil)
	ns := optedIn(nil)
	app := func(l *corev1.Lifecycle) corev1.Container {
		return corev1.Container{Name: "app", Image: "registry.local/app:1", Lifecycle: l}
	}
	out := map[string]string{mutate.AnnotationInject: "false"}
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		denied bool
		// webhookOnly: the webhook refuses it for a hook CEL does not read.
		webhookOnly bool
	}{
		{"an ordinary Pod", newPod(nil, 30), false, false},
		{"a Pod with max-work: 40s", newPod(map[string]string{mutate.AnnotationMaxWork: "40s"}, 30), false, false},
		{"a Pod with sleep 10, grace 30", newPod(nil, 30, app(sleepHook(10))), false, false},
		{`exec ["sleep","60"], grace 30`, newPod(nil, 30, app(execHook("sleep", "60"))), true, false},
		{`sh -c "sleep 45", grace 30`, newPod(nil, 30, app(execHook("sh", "-c", "sleep 45"))), true, false},
		{"preStop sleep: 60, grace 30", newPod(nil, 30, app(sleepHook(60))), true, false},
		{"opted out, exec sleep 40", newPod(out, 30, app(execHook("sleep", "40"))), true, false},
		{"opted out, a hook as long as its grace", newPod(out, 40, app(execHook("/bin/sleep", "40s"))), true, false},
		{"opted out, a hook that fits", newPod(out, 41, app(execHook("/bin/sleep", "40s"))), false, false},
		{"a hook CEL does not read (the webhook reads at least 45s)", newPod(out, 30, app(execHook("sh", "-c", "sleep 45; curl -s localhost/drain"))), false, true},
		{"an httpGet hook", newPod(out, 30, app(&corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/drain"}}})), false, false},
		{"a liveness probe's grace shorter than the hook", func() *corev1.Pod {
			c := app(sleepHook(10))
			g := int64(5)
			c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}, TerminationGracePeriodSeconds: &g}
			return newPod(nil, 30, c)
		}(), true, false},
		{"SIGKILL as the stop signal", newPod(nil, 30, app(withStopSignal(sleepHook(5), corev1.SIGKILL))), true, false},
		{"SIGQUIT as the stop signal", newPod(nil, 30, app(withStopSignal(sleepHook(5), corev1.SIGQUIT))), false, false},
		{"a native sidecar whose hook outlasts the grace", func() *corev1.Pod {
			always := corev1.ContainerRestartPolicyAlways
			p := newPod(out, 30)
			p.Spec.InitContainers = []corev1.Container{{Name: "proxy", Image: "registry.local/proxy:1", RestartPolicy: &always, Lifecycle: sleepHook(31)}}
			return p
		}(), true, false},
		{"an init container's hook, which never runs at deletion", func() *corev1.Pod {
			p := newPod(out, 30)
			p.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "registry.local/setup:1", Lifecycle: sleepHook(31)}}
			return p
		}(), false, false},
		{"a mirror Pod", func() *corev1.Pod {
			return newPod(map[string]string{mutate.AnnotationMirror: "x"}, 30, app(execHook("sleep", "60")))
		}(), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := f.pod(tc.pod)
			if got.err != "" {
				t.Fatalf("the floor errs: %s", got.err)
			}
			r, want := validated(mutate.ForPod(tc.pod), ns, opts)
			if tc.pod.Annotations[mutate.AnnotationMirror] != "" {
				want = ""
			}
			if got.denied != tc.denied || (want != "") != (tc.denied || tc.webhookOnly) {
				t.Fatalf("floor denied %t (%s), webhook denied %t (%s); want %t", got.denied, got.message, want != "", want, tc.denied)
			}
			if got.message != want && !tc.webhookOnly {
				t.Errorf("the floor says\n  %s\nthe webhook says\n  %s", got.message, want)
			}
			if tc.denied {
				var reasons []string
				for _, v := range r.Violations {
					if !slices.Contains(reasons, string(v.Reason)) {
						reasons = append(reasons, string(v.Reason))
					}
				}
				if got.reasons != strings.Join(reasons, ",") {
					t.Errorf("audit annotation reasons=%q, want %q", got.reasons, strings.Join(reasons, ","))
				}
			}
		})
	}
}

// Workloads: an opted-out template is judged as it is; a template
// graceguard treats would get the budget's grace, so the floor leaves it to
// the webhook. Scaling (an UPDATE that keeps the template) is not judged.
func TestFloorJudgesOptedOutTemplates(t *testing.T) {
	f := newFloor(t, nil)
	tmpl := func(ann map[string]string, grace int64, l *corev1.Lifecycle) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: ann, Labels: map[string]string{"app": "db"}},
			Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace,
				Containers: []corev1.Container{{Name: "db", Image: "registry.local/db:1", Lifecycle: l}}},
		}
	}
	out := map[string]string{mutate.AnnotationInject: "false"}
	sts := func(t corev1.PodTemplateSpec) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"}, ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "shop"},
			Spec: appsv1.StatefulSetSpec{Template: t, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}
	}
	cron := func(t corev1.PodTemplateSpec) *batchv1.CronJob {
		return &batchv1.CronJob{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"}, ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "shop"},
			Spec: batchv1.CronJobSpec{Schedule: "* * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: t}}}}
	}
	stsGVK, cronGVK := appsv1.SchemeGroupVersion.WithKind("StatefulSet"), batchv1.SchemeGroupVersion.WithKind("CronJob")
	ns := optedIn(nil)
	for _, tc := range []struct {
		name     string
		obj, old runtime.Object
		gvk      schema.GroupVersionKind
		resource string
		target   mutate.Target
		denied   bool
	}{
		{"an opted-out StatefulSet whose hook outlasts its grace", sts(tmpl(out, 10, execHook("sh", "-c", "sleep 10"))), nil, stsGVK, "statefulsets", mutate.Target{}, true},
		{"a StatefulSet graceguard treats, with the same hook", sts(tmpl(nil, 10, execHook("sh", "-c", "sleep 10"))), nil, stsGVK, "statefulsets", mutate.Target{}, false},
		{"an opted-out CronJob whose hook outlasts its grace", cron(tmpl(out, 30, sleepHook(45))), nil, cronGVK, "cronjobs", mutate.Target{}, true},
		{"an opted-out StatefulSet scaled, its template unchanged", sts(tmpl(out, 10, execHook("sh", "-c", "sleep 10"))), sts(tmpl(out, 10, execHook("sh", "-c", "sleep 10"))), stsGVK, "statefulsets", mutate.Target{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := f.judge(tc.obj, tc.old, tc.gvk, tc.resource)
			if got.err != "" {
				t.Fatalf("the floor errs: %s", got.err)
			}
			if got.denied != tc.denied {
				t.Fatalf("floor denied %t (%s), want %t", got.denied, got.message, tc.denied)
			}
			if tc.old != nil {
				return
			}
			target, err := mutate.ForWorkload(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			_, want := validated(target, ns, opts)
			if tc.denied && got.message != want {
				t.Errorf("the floor says\n  %s\nthe webhook says\n  %s", got.message, want)
			}
			if !tc.denied && want != "" && !strings.Contains(want, "preStop") {
				return
			}
			if !tc.denied && want != "" {
				t.Errorf("the webhook refuses what the floor admits: %s", want)
			}
		})
	}
}

// FuzzFloorAgreesWithValidate: for any Pod as it is about to be stored
// (graceguard's mutation made or not, changed after by any other webhook),
// in an opted-in namespace in enforce mode, under any cluster options:
//   - the floor never errs;
//   - the floor refuses only what the validating webhook refuses, for the
//     same reasons;
//   - when every violation the webhook finds is a hook or a stop signal
//     the floor can read, the floor refuses with the webhook's very
//     message.
func FuzzFloorAgreesWithValidate(f *testing.F) {
	fl := newFloor(f, nil)
	for _, seed := range [][]byte{
		{}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4},
		[]byte("the floor holds while graceguard is down"), []byte{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4, 3, 3, 8, 3, 2, 7, 9, 5},
		[]byte{2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if why, _ := floorDisagreement(fl, b); why != "" {
			t.Fatal(why)
		}
	})
}

// The fuzz reaches what it holds: over pseudo-random inputs, the floor
// refuses often, and often where its message is compared with the
// webhook's.
func TestFloorFuzzReachesItsCases(t *testing.T) {
	fl := newFloor(t, nil)
	rng := rand.New(rand.NewPCG(41, 41))
	var n [3]int
	for range 3000 {
		b := make([]byte, 64)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		why, c := floorDisagreement(fl, b)
		if why != "" {
			t.Fatal(why)
		}
		n[c]++
	}
	t.Logf("of 3000 inputs: floor admitted %d, refused %d (with the webhook's message compared: %d)", n[floorAdmitted], n[floorRefused]+n[messageCompared], n[messageCompared])
	if n[floorRefused]+n[messageCompared] < 500 || n[messageCompared] < 50 {
		t.Errorf("of 3000 inputs the floor refused %d and its message was compared %d times; want at least 500 and 50", n[floorRefused]+n[messageCompared], n[messageCompared])
	}
}

// What floorDisagreement checked.
const (
	floorAdmitted = iota
	floorRefused
	// messageCompared: the floor refused, with the webhook's message.
	messageCompared
)

// floorReasons are the reasons the floor refuses for.
var floorReasons = []mutate.Reason{mutate.DenyHookExceedsGrace, mutate.DenyStopSignalKills}

func floorDisagreement(fl floor, b []byte) (string, int) {
	p := &picker{b: b}
	ns := p.namespace()
	ns.Labels[mutate.LabelMode] = string(mutate.ModeEnforce)
	o := p.options()
	o.Mode = mutate.ModeEnforce
	pod := p.pod()
	if p.n(3) != 0 && pod.Annotations[mutate.AnnotationInject] != "false" {
		if admitWith(pod, ns, o, nil) {
			return "", floorAdmitted // graceguard's mutating webhook refuses it
		}
	}
	p.lateChange(pod)
	got := fl.pod(pod)
	if got.err != "" {
		return fmt.Sprintf("the floor errs: %s\nPod: %+v", got.err, pod), floorAdmitted
	}
	r, want := validated(mutate.ForPod(pod), ns, o)
	if _, mirror := pod.Annotations[mutate.AnnotationMirror]; mirror {
		if got.denied {
			return fmt.Sprintf("the floor refuses a mirror Pod: %s", got.message), floorRefused
		}
		return "", floorAdmitted
	}
	outcome := floorAdmitted
	if got.denied {
		outcome = floorRefused
		if want == "" {
			return fmt.Sprintf("the floor refuses what the webhook admits: %s\nPod: %+v", got.message, pod), outcome
		}
		for _, reason := range strings.Split(got.reasons, ",") {
			if !slices.ContainsFunc(r.Violations, func(v mutate.Finding) bool { return string(v.Reason) == reason }) {
				return fmt.Sprintf("the floor refuses for %s, the webhook not: floor %s\nwebhook %s\nPod: %+v", reason, got.message, want, pod), outcome
			}
		}
	}
	readable := r.Denied() && r.Unlisted == 0
	for _, v := range r.Violations {
		readable = readable && slices.Contains(floorReasons, v.Reason) && !strings.HasPrefix(v.Err.Field, "Namespace[")
	}
	if readable && celReads(pod) {
		if got.message != want {
			return fmt.Sprintf("the webhook refuses only for hooks and stop signals the floor reads, and the floor says otherwise:\nfloor   %s\nwebhook %s\nPod: %+v", got.message, want, pod), outcome
		}
		outcome = messageCompared
	}
	return "", outcome
}

// celReads reports whether every preStop hook of the Pod's containers and
// native sidecars is one of the shapes the floor reads, as pkg/cel
// documents them (the sleep action, exec sleep N, sh -c "sleep N"), with
// at most 64 containers in each list.
func celReads(pod *corev1.Pod) bool {
	if len(pod.Spec.Containers) > 64 || len(pod.Spec.InitContainers) > 64 {
		return false
	}
	for _, c := range append(slices.Clone(pod.Spec.Containers), pod.Spec.InitContainers...) {
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep != nil {
			continue
		}
		e := c.Lifecycle.PreStop.Exec
		if e == nil || !(readsSleep(e.Command) || readsShell(e.Command)) {
			return false
		}
	}
	return true
}

func readsSleep(cmd []string) bool {
	return len(cmd) == 2 && celWord(cmd[0]) && (cmd[0] == "sleep" || strings.HasSuffix(cmd[0], "/sleep")) && secondsWord(cmd[1])
}

func readsShell(cmd []string) bool {
	if len(cmd) != 3 || !celWord(cmd[0]) || !slices.Contains(mutate.Shells, cmd[0][strings.LastIndex(cmd[0], "/")+1:]) || cmd[1] != "-c" {
		return false
	}
	f := strings.Fields(cmd[2])
	return len(cmd[2]) <= 64 && !strings.ContainsAny(cmd[2], "\t\n;&") && len(f) == 2 && f[0] == "sleep" && secondsWord(f[1])
}

func celWord(s string) bool {
	return len(s) <= 256 && strings.Trim(s, "-ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._/+=:@,") == ""
}

func secondsWord(s string) bool {
	d := strings.TrimSuffix(s, "s")
	return len(d) >= 1 && len(d) <= 6 && strings.Trim(d, "0123456789") == ""
}

// The floor never errs, and stays within a tenth of the API server's
// runtime budget for a policy (celconfig.RuntimeCELCostBudget; past it the
// evaluation errs and, under failurePolicy Ignore, admits unjudged),
// whatever the Pod: 64 containers and 64 native sidecars with huge
// commands, with the longest hooks it reads and every violation at once,
// hooks of the most seconds, 256 KiB annotations, 10,000 containers.
func TestFloorCost(t *testing.T) {
	f := newFloor(t, nil)
	always := corev1.ContainerRestartPolicyAlways
	wide := func(grace int64, ann map[string]string, c func(i int) corev1.Container) *corev1.Pod {
		p := newPod(ann, grace)
		p.Spec.Containers = nil
		for i := range 64 {
			p.Spec.Containers = append(p.Spec.Containers, c(i))
			s := c(i + 64)
			s.RestartPolicy = &always
			p.Spec.InitContainers = append(p.Spec.InitContainers, s)
		}
		return p
	}
	named := func(i int, l *corev1.Lifecycle) corev1.Container {
		return corev1.Container{Name: fmt.Sprintf("%s%03d", strings.Repeat("c", 60), i), Image: "registry.local/app:1", Lifecycle: l}
	}
	probeGrace := int64(1)
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		denied bool
	}{
		{"huge commands", wide(30, nil, func(i int) corev1.Container { return named(i, execHook(huge, huge)) }), false},
		{"huge sleep operands", wide(30, nil, func(i int) corev1.Container { return named(i, execHook("sleep", huge)) }), false},
		{"huge scripts", wide(30, nil, func(i int) corev1.Container { return named(i, execHook("sh", "-c", "sleep 5"+huge)) }), false},
		{"every violation it reads, with the longest words", wide(30, nil, func(i int) corev1.Container {
			c := named(i, withStopSignal(execHook(strings.Repeat("p", 250)+"/sleep", "999999s"), corev1.SIGKILL))
			c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}, TerminationGracePeriodSeconds: &probeGrace}
			c.StartupProbe = c.LivenessProbe
			return c
		}), true},
		{"shell hooks with the longest words", wide(30, nil, func(i int) corev1.Container {
			return named(i, execHook(strings.Repeat("p", 250)+"/bash", "-exc", " exec "+strings.Repeat("b", 40)+"/sleep 999999s "))
		}), true},
		{"hooks of the most seconds", wide(1<<63-1, map[string]string{mutate.AnnotationInject: "false"}, func(i int) corev1.Container {
			c := named(i, sleepHook(1<<63-1))
			g := int64(1<<63 - 1)
			c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}, TerminationGracePeriodSeconds: &g}
			return c
		}), true},
		{"256 KiB in graceguard.io/inject", newPod(map[string]string{mutate.AnnotationInject: huge}, 30, named(0, sleepHook(31))), true},
		{"10,000 containers", func() *corev1.Pod {
			p := newPod(nil, 30)
			for i := range 10000 {
				p.Spec.Containers = append(p.Spec.Containers, named(i, sleepHook(31)))
			}
			return p
		}(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.pod.DeepCopy()
			p.APIVersion, p.Kind = "v1", "Pod"
			attr := admission.NewAttributesRecord(p, nil, corev1.SchemeGroupVersion.WithKind("Pod"), p.Namespace, p.Name, corev1.SchemeGroupVersion.WithResource("pods"),
				"", admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "alice"})
			va := &admission.VersionedAttributes{Attributes: attr, VersionedKind: corev1.SchemeGroupVersion.WithKind("Pod"), VersionedObject: admission.NewLazyObject(p)}
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}}
			r := f.v.Validate(context.Background(), attr.GetResource(), va, nil, ns, celconfig.RuntimeCELCostBudget/10, nil)
			denied := false
			for _, d := range r.Decisions {
				switch d.Evaluation {
				case validating.EvalError:
					t.Fatalf("the floor errs within a tenth of the API server's budget: %s", d.Message)
				case validating.EvalDeny:
					denied = true
					if len(d.Message) > celconfig.MaxEvaluatedMessageExpressionSizeBytes {
						t.Errorf("message of %d bytes, over the API server's %d (it would fall back to the static message)", len(d.Message), celconfig.MaxEvaluatedMessageExpressionSizeBytes)
					}
				}
			}
			if denied != tc.denied {
				t.Errorf("denied %t, want %t", denied, tc.denied)
			}
		})
	}
}

// Argo Rollouts' Rollouts, as the API server hands the floor a custom
// resource (unstructured): an opted-out template whose hook outlasts its
// grace is refused with the webhook's words, under spec.template; a Rollout
// with spec.workloadRef has no template, and neither its creation nor its
// update errs or is refused.
func TestFloorJudgesRollouts(t *testing.T) {
	f := newFloor(t, map[string]any{"webhooks": map[string]any{"validateWorkloads": map[string]any{"argoRollouts": "always"}}})
	gvk := schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Rollout"}
	obj := func(spec string) (*unstructured.Unstructured, *mutate.Rollout) {
		raw := `{"apiVersion":"argoproj.io/v1alpha1","kind":"Rollout","metadata":{"name":"web","namespace":"shop"},"spec":` + spec + `}`
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(raw)); err != nil {
			t.Fatal(err)
		}
		var r mutate.Rollout
		if err := json.Unmarshal([]byte(raw), &r); err != nil {
			t.Fatal(err)
		}
		return u, &r
	}
	long, typed := obj(`{"strategy":{"canary":{}},"template":{"metadata":{"annotations":{"graceguard.io/inject":"false"}},"spec":{"terminationGracePeriodSeconds":30,"containers":[{"name":"app","image":"app:1","lifecycle":{"preStop":{"exec":{"command":["sleep","60"]}}}}]}}}`)
	got := f.judge(long, nil, gvk, "rollouts")
	target, err := mutate.ForWorkload(typed)
	if err != nil {
		t.Fatal(err)
	}
	_, want := validated(target, optedIn(nil), opts)
	if got.err != "" || !got.denied || got.message != want || !strings.HasPrefix(want, "spec.template.spec.containers[0].lifecycle.preStop: ") {
		t.Errorf("floor on a Rollout whose hook outlasts its grace: denied %t, err %q, message\n  %s\nthe webhook says\n  %s", got.denied, got.err, got.message, want)
	}
	ref, _ := obj(`{"workloadRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"strategy":{"blueGreen":{"activeService":"web"}}}`)
	ref2, _ := obj(`{"workloadRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"strategy":{"blueGreen":{"activeService":"web","scaleDownDelaySeconds":60}}}`)
	for name, v := range map[string]verdict{
		"creating a workloadRef Rollout": f.judge(ref, nil, gvk, "rollouts"),
		"updating a workloadRef Rollout": f.judge(ref2, ref, gvk, "rollouts"),
	} {
		if v.err != "" || v.denied {
			t.Errorf("%s: denied %t (%s), err %q; want admitted", name, v.denied, v.message, v.err)
		}
	}
}
