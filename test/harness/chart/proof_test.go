package chart

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// The Pod validating webhook is skipped for Pods its not-proven-by-cel
// condition proves valid (docs/admission.md). These tests evaluate the
// chart's webhooks' matchConditions with the API server's own code
// (k8s.io/apiserver's CEL compiler and matcher, the version of the API
// server graceguard is built against) and hold the proof to
// pkg/mutate.Validate, the validating webhook's decision.

// podMatcher is the API server's matcher of one of the chart's webhooks.
type podMatcher struct {
	name    string
	matcher matchconditions.Matcher
}

func validatingMatcher(t testing.TB, values map[string]any, name string) podMatcher {
	t.Helper()
	w, err := RenderWebhooks("graceguard", "graceguard-system", values)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range w.Validating {
		for i := range v.Webhooks {
			if h := &v.Webhooks[i]; h.Name == name {
				return podMatcher{name, compile(webhook.NewValidatingWebhookAccessor("uid", v.Name, h))}
			}
		}
	}
	t.Fatalf("no validating webhook %s", name)
	return podMatcher{}
}

func mutatingMatcher(t testing.TB) podMatcher {
	t.Helper()
	w, err := RenderWebhooks("graceguard", "graceguard-system", nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &w.Mutating[0].Webhooks[0]
	return podMatcher{h.Name, compile(webhook.NewMutatingWebhookAccessor("uid", w.Mutating[0].Name, h))}
}

func compile(a webhook.WebhookAccessor) matchconditions.Matcher {
	// As the API server's webhook admission plugin builds its compiler.
	return a.GetCompiledMatcher(plugincel.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())))
}

// calls reports whether the API server would call the webhook for the Pod
// on CREATE. An evaluation error fails the test: under failurePolicy Fail
// it would refuse the Pod with an error nobody can act on.
func (m podMatcher) calls(t testing.TB, pod *corev1.Pod) bool {
	t.Helper()
	called, err := m.match(pod)
	if err != nil {
		t.Fatalf("%s: %v\nPod: %+v", m.name, err, pod)
	}
	return called
}

// match is calls without a test: whether the webhook is called, or the
// evaluation error that would refuse the Pod.
func (m podMatcher) match(pod *corev1.Pod) (bool, error) {
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	attr := admission.NewAttributesRecord(pod, nil, gvk, pod.Namespace, pod.Name, schema.GroupVersionResource{Version: "v1", Resource: "pods"},
		"", admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "alice"})
	r := m.matcher.Match(context.Background(), &admission.VersionedAttributes{Attributes: attr, VersionedKind: gvk, VersionedObject: admission.NewLazyObject(pod)}, nil, nil)
	if r.Error != nil {
		return false, fmt.Errorf("evaluating its matchConditions failed (the Pod would be refused with this error): %w", r.Error)
	}
	return r.Matches, nil
}

// opts and optedIn are the cluster defaults and an opted-in namespace in
// enforce mode, the namespaces validate-pods.graceguard.io is for.
var opts = func() mutate.Options {
	o := mutate.DefaultOptions()
	o.ExcludedNamespaces = append(o.ExcludedNamespaces, "graceguard-system")
	return o
}()

func optedIn(ann map[string]string) mutate.Namespace {
	return mutate.Namespace{Name: "shop", Labels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}, Annotations: ann}
}

// admit is what graceguard's mutating webhook does with a Pod: mutate it
// (in place) or refuse it, as pkg/webhook's PodMutator decides.
func admit(pod *corev1.Pod, ns mutate.Namespace) (refused bool) {
	return admitWith(pod, ns, opts, nil)
}

// admitWith is admit with options and what the shutdown observer reports
// for graceguard.io/max-work: auto, which the webhook reads for a Pod that
// asks for it and records no budget yet.
func admitWith(pod *corev1.Pod, ns mutate.Namespace, o mutate.Options, observed *mutate.Observed) (refused bool) {
	t := mutate.ForPod(pod)
	if mutate.WantsAutoWork(pod.Annotations, ns.Annotations) && pod.Annotations[mutate.AnnotationBudget] == "" {
		t.Observed = observed
	}
	r := mutate.Mutate(t, ns, o)
	return r.Mode != mutate.ModeWarn && mutate.Validate(t, ns, o).Denied()
}

func sleepHook(s int64) *corev1.Lifecycle {
	return &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: s}}}
}

func execHook(cmd ...string) *corev1.Lifecycle {
	return &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: cmd}}}
}

// withStopSignal returns l (a copy, or a new lifecycle) with its stop signal.
func withStopSignal(l *corev1.Lifecycle, sig corev1.Signal) *corev1.Lifecycle {
	if l == nil {
		l = &corev1.Lifecycle{}
	} else {
		l = l.DeepCopy()
	}
	l.StopSignal = &sig
	return l
}

func newPod(ann map[string]string, grace int64, containers ...corev1.Container) *corev1.Pod {
	if len(containers) == 0 {
		containers = []corev1.Container{{Name: "app", Image: "registry.local/app:1", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Annotations: ann},
		// As the API server has defaulted it before admission.
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: containers},
	}
}

// The common case costs one call: a Pod graceguard mutated, as stored.
// Everything that breaks a guarantee after graceguard's last call (a later
// webhook, or the mutating call never made) sends it to the validating
// webhook, which refuses it.
func TestProvenCondition(t *testing.T) {
	vp := validatingMatcher(t, nil, "validate-pods.graceguard.io")
	ns := optedIn(nil)
	mutated := func(ann map[string]string, containers ...corev1.Container) *corev1.Pod {
		t.Helper()
		p := newPod(ann, 30, containers...)
		if admit(p, ns) {
			t.Fatalf("graceguard refuses %+v", p)
		}
		return p
	}
	app := func(name string, l *corev1.Lifecycle) corev1.Container {
		return corev1.Container{Name: name, Image: "registry.local/app:1", Lifecycle: l}
	}
	for _, tc := range []struct {
		name string
		pod  func() *corev1.Pod
		// call: the validating webhook is called; denied: it refuses.
		call, denied bool
		// ns, when set, is the namespace the Pod is validated in;
		// reasons, when set, every reason it is refused for.
		ns      *mutate.Namespace
		reasons []mutate.Reason
	}{
		{"a Pod graceguard mutated", func() *corev1.Pod { return mutated(nil) }, false, false, nil, nil},
		{"with per-Pod settings graceguard applied", func() *corev1.Pod {
			return mutated(map[string]string{mutate.AnnotationMaxWork: "40s", mutate.AnnotationRoutingDelay: "8", mutate.AnnotationCleanup: "1500ms",
				mutate.AnnotationReadinessPath: "/readyz", mutate.AnnotationProbePort: "http", mutate.AnnotationPreStop: "exec", mutate.AnnotationInject: "true"})
		}, false, false, nil, nil},
		{"with its own longer hook, counted", func() *corev1.Pod { return mutated(nil, app("app", execHook("/bin/sleep", "20"))) }, false, false, nil, nil},
		{"the mutating call never made (failurePolicy Ignore)", func() *corev1.Pod { return newPod(nil, 30) }, true, true, nil, nil},
		{"a later webhook adds a container without a hook", func() *corev1.Pod {
			p := mutated(nil)
			p.Spec.Containers = append(p.Spec.Containers, app("proxy", nil))
			return p
		}, true, true, nil, nil},
		{"a later webhook adds a container with a hook longer than graceguard counted", func() *corev1.Pod {
			p := mutated(nil)
			p.Spec.Containers = append(p.Spec.Containers, app("proxy", sleepHook(15)))
			return p
		}, true, true, nil, nil},
		{"a later webhook adds a container with a hook graceguard's budget covers", func() *corev1.Pod {
			p := mutated(nil)
			p.Spec.Containers = append(p.Spec.Containers, app("proxy", sleepHook(5)))
			return p
		}, false, false, nil, nil},
		{"a later webhook lowers the grace", func() *corev1.Pod {
			p := mutated(nil)
			g := int64(20)
			p.Spec.TerminationGracePeriodSeconds = &g
			return p
		}, true, true, nil, nil},
		{"a later webhook raises max-work", func() *corev1.Pod {
			p := mutated(nil)
			p.Annotations[mutate.AnnotationMaxWork] = "60s"
			return p
		}, true, true, nil, nil},
		{"a later webhook breaks an annotation", func() *corev1.Pod {
			p := mutated(map[string]string{mutate.AnnotationReadinessPath: "/readyz"})
			p.Annotations[mutate.AnnotationReadinessPath] = "readyz"
			return p
		}, true, true, nil, nil},
		{"an opted-out Pod whose hooks fit", func() *corev1.Pod {
			return newPod(map[string]string{mutate.AnnotationInject: "false"}, 30, app("app", sleepHook(29)))
		}, false, false, nil, nil},
		{"an opted-out Pod whose hook outlasts its grace", func() *corev1.Pod {
			return newPod(map[string]string{mutate.AnnotationInject: "false"}, 30, app("app", sleepHook(30)))
		}, true, true, nil, nil},
		{"an opted-out Pod whose hook outlasts its liveness probe's grace", func() *corev1.Pod {
			c := app("app", sleepHook(10))
			g := int64(10)
			c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}, TerminationGracePeriodSeconds: &g}
			return newPod(map[string]string{mutate.AnnotationInject: "false"}, 30, c)
		}, true, true, nil, nil},
		{"a hook whose length CEL does not read", func() *corev1.Pod {
			return newPod(map[string]string{mutate.AnnotationInject: "false"}, 30, app("app", execHook("sh", "-c", "sleep 5; true")))
		}, true, false, nil, nil},
		{"a container list", func() *corev1.Pod { return mutated(map[string]string{mutate.AnnotationContainers: "app"}) }, true, false, nil, nil},
		{"max-work: auto, recorded", func() *corev1.Pod { return mutated(map[string]string{mutate.AnnotationMaxWork: mutate.MaxWorkAuto}) }, false, false, nil, nil},
		{"a later webhook raises the grace (a ceiling may refuse it)", func() *corev1.Pod {
			p := mutated(nil)
			g := int64(90)
			p.Spec.TerminationGracePeriodSeconds = &g
			return p
		}, true, false, nil, nil},
		{"a mesh proxy: the webhook decides", func() *corev1.Pod {
			return mutated(nil, app("app", nil), app(mutate.ContainerIstioProxy, nil))
		}, true, false, nil, nil},
		{"a mesh setting on the Pod: the webhook decides", func() *corev1.Pod {
			return mutated(map[string]string{"linkerd.io/inject": "disabled"})
		}, true, false, nil, nil},
		// Saturation: past 9,223,372,036 s graceguard reads a hook as longer
		// than any grace, which CEL's integers would not.
		{"an opted-out Pod whose hook is 9,223,372,037 s, in a grace even longer", func() *corev1.Pod {
			return newPod(map[string]string{mutate.AnnotationInject: "false"}, math.MaxInt64, app("app", sleepHook(9223372037)))
		}, true, true, nil, nil},
		{"an opted-out Pod whose hook is 9,223,372,036 s, in a grace and a probe grace even longer", func() *corev1.Pod {
			c := app("app", sleepHook(9223372036))
			g := int64(math.MaxInt64)
			c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}, TerminationGracePeriodSeconds: &g}
			return newPod(map[string]string{mutate.AnnotationInject: "false"}, math.MaxInt64, c)
		}, false, false, nil, nil},
		{"an opted-out Pod whose hook of MaxInt64 s outlasts a probe's grace of MaxInt64 s", func() *corev1.Pod {
			c := app("app", sleepHook(math.MaxInt64))
			g := int64(math.MaxInt64)
			c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}, TerminationGracePeriodSeconds: &g}
			return newPod(map[string]string{mutate.AnnotationInject: "false"}, 30, c)
		}, true, true, nil, nil},
		// Size: 256 KiB anywhere costs what 257 bytes cost, and never errs.
		{"a later webhook makes the record 256 KiB", func() *corev1.Pod {
			p := mutated(nil)
			p.Annotations[mutate.AnnotationBudget] += strings.Repeat(" ", 256<<10)
			return p
		}, true, true, nil, nil},
		{"a later webhook makes a probe path 256 KiB", func() *corev1.Pod {
			p := mutated(map[string]string{mutate.AnnotationReadinessPath: "/readyz"})
			p.Annotations[mutate.AnnotationReadinessPath] = "/" + strings.Repeat("r", 256<<10)
			return p
		}, true, true, nil, nil},
		{"a later webhook makes max-work 256 KiB of digits", func() *corev1.Pod {
			p := mutated(nil)
			p.Annotations[mutate.AnnotationMaxWork] = strings.Repeat("9", 256<<10)
			return p
		}, true, true, nil, nil},
		{"a hook of exec sleep with 256 KiB of digits", func() *corev1.Pod {
			return newPod(map[string]string{mutate.AnnotationInject: "false"}, 30, app("app", execHook("sleep", strings.Repeat("9", 256<<10))))
		}, true, true, nil, nil},
		// Stop signals: SIGTERM is proven; any other goes to the webhook,
		// which refuses SIGKILL and SIGSTOP, even opted out.
		{"a Pod graceguard mutated, whose stop signal is SIGTERM", func() *corev1.Pod {
			p := mutated(nil, app("app", withStopSignal(nil, corev1.SIGTERM)))
			p.Spec.OS = &corev1.PodOS{Name: corev1.Linux}
			return p
		}, false, false, nil, nil},
		{"a later webhook sets the stop signal SIGKILL", func() *corev1.Pod {
			p := mutated(nil)
			p.Spec.OS = &corev1.PodOS{Name: corev1.Linux}
			p.Spec.Containers[0].Lifecycle = withStopSignal(p.Spec.Containers[0].Lifecycle, corev1.SIGKILL)
			return p
		}, true, true, nil, []mutate.Reason{mutate.DenyStopSignalKills}},
		{"a stop signal the app drains on (SIGQUIT): the webhook decides, and admits", func() *corev1.Pod {
			p := mutated(nil, app("nginx", withStopSignal(nil, corev1.SIGQUIT)))
			p.Spec.OS = &corev1.PodOS{Name: corev1.Linux}
			return p
		}, true, false, nil, nil},
		{"an opted-out Pod whose sidecar stops with SIGSTOP", func() *corev1.Pod {
			p := newPod(map[string]string{mutate.AnnotationInject: "false"}, 30)
			p.Spec.OS = &corev1.PodOS{Name: corev1.Linux}
			always := corev1.ContainerRestartPolicyAlways
			p.Spec.InitContainers = []corev1.Container{{Name: "shipper", Image: "registry.local/shipper:1", RestartPolicy: &always, Lifecycle: withStopSignal(nil, corev1.SIGSTOP)}}
			return p
		}, true, true, nil, []mutate.Reason{mutate.DenyStopSignalKills}},
		// A namespace's setting CEL cannot read: its finding is the
		// namespace's (what the proof trusts, docs/admission.md), never the
		// Pod's own.
		{"no mutating call, the author's record, max-work: auto and a namespace floor over the default ceiling", func() *corev1.Pod {
			p := mutated(map[string]string{mutate.AnnotationMaxWork: mutate.MaxWorkAuto})
			return p
		}, false, true, &mutate.Namespace{Name: "shop", Labels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled},
			Annotations: map[string]string{mutate.AnnotationMaxWorkFloor: "3m"}}, []mutate.Reason{mutate.DenyInvalidNamespace}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.pod()
			if got := vp.calls(t, p); got != tc.call {
				t.Fatalf("validating webhook called: %t, want %t (Pod %+v)", got, tc.call, p)
			}
			in := ns
			if tc.ns != nil {
				in = *tc.ns
			}
			v := mutate.Validate(mutate.ForPod(p), in, opts)
			if got := v.Denied(); got != tc.denied {
				t.Fatalf("validation denies: %t, want %t (%v)", got, tc.denied, v.Err())
			}
			if tc.reasons != nil {
				for _, f := range v.Violations {
					if !slices.Contains(tc.reasons, f.Reason) {
						t.Errorf("refused for %s, want only %v: %v", f.Reason, tc.reasons, f.Err)
					}
				}
			}
		})
	}
}

// Warn-mode namespaces get a webhook of their own, called for every Pod
// (the warnings of what enforce would deny); with skipProven false the chart
// registers one webhook for every Pod, as before.
func TestWarnModeAndSkipProvenOffCallEveryPod(t *testing.T) {
	p := newPod(nil, 30)
	p.Spec.Containers[0].Lifecycle = sleepHook(5)
	if admit(p, optedIn(nil)) {
		t.Fatal("refused")
	}
	for _, m := range []podMatcher{
		validatingMatcher(t, nil, "validate-pods-warn.graceguard.io"),
		validatingMatcher(t, map[string]any{"webhooks": map[string]any{"validatePods": map[string]any{"skipProven": false}}}, "validate-pods.graceguard.io"),
	} {
		if !m.calls(t, p) {
			t.Errorf("%s skips a mutated Pod", m.name)
		}
	}
	w, err := RenderWebhooks("graceguard", "graceguard-system", map[string]any{"webhooks": map[string]any{"validatePods": map[string]any{"skipProven": false}}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, h := range w.Validating[0].Webhooks {
		names = append(names, h.Name)
	}
	if !slices.Equal(names, []string{"validate-pods.graceguard.io", "validate-workloads.graceguard.io"}) {
		t.Errorf("skipProven false registers %v", names)
	}
}

// Every namespace meets exactly one of the two Pod validating webhooks,
// whatever its mode label and the cluster's default mode.
func TestModeSelectorsPartitionNamespaces(t *testing.T) {
	for _, def := range []string{"enforce", "warn"} {
		w, err := RenderWebhooks("graceguard", "graceguard-system", map[string]any{"config": map[string]any{"defaultMode": def}})
		if err != nil {
			t.Fatal(err)
		}
		var hooks []admissionregv1.ValidatingWebhook
		for _, h := range w.Validating[0].Webhooks {
			if strings.HasPrefix(h.Name, "validate-pods") {
				hooks = append(hooks, h)
			}
		}
		if len(hooks) != 2 {
			t.Fatalf("default %s: %d Pod validating webhooks", def, len(hooks))
		}
		for _, mode := range []string{"", "enforce", "warn", "audit"} {
			labels := map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled, "kubernetes.io/metadata.name": "shop"}
			if mode != "" {
				labels[mutate.LabelMode] = mode
			}
			var matched []string
			for _, h := range hooks {
				sel, err := metav1.LabelSelectorAsSelector(h.NamespaceSelector)
				if err != nil {
					t.Fatal(err)
				}
				if sel.Matches(labelSet(labels)) {
					matched = append(matched, h.Name)
				}
			}
			effective := mode
			if effective == "" {
				effective = def
			}
			want := "validate-pods.graceguard.io"
			if effective == "warn" || (def == "warn" && mode != "enforce") {
				// Under default warn, a label graceguard refuses leaves the
				// namespace in warn mode (pkg/mutate resolve), so it warns.
				want = "validate-pods-warn.graceguard.io"
			}
			if len(matched) != 1 || matched[0] != want {
				t.Errorf("default %s, label %q: matched %v, want %s", def, mode, matched, want)
			}
		}
	}
}

type labelSet map[string]string

func (l labelSet) Has(k string) bool              { _, ok := l[k]; return ok }
func (l labelSet) Get(k string) string            { return l[k] }
func (l labelSet) Lookup(k string) (string, bool) { v, ok := l[k]; return v, ok }

// Opted-out Pods are not sent to the mutating webhook: graceguard changes
// nothing in them.
func TestOptedOutPodsSkipTheMutatingCall(t *testing.T) {
	m := mutatingMatcher(t)
	for _, tc := range []struct {
		ann  map[string]string
		call bool
	}{
		{nil, true},
		{map[string]string{mutate.AnnotationInject: "true"}, true},
		{map[string]string{mutate.AnnotationInject: "False"}, true},
		{map[string]string{mutate.AnnotationInject: "false"}, false},
	} {
		p := newPod(tc.ann, 30)
		if got := m.calls(t, p); got != tc.call {
			t.Errorf("annotations %v: called %t, want %t", tc.ann, got, tc.call)
		}
		if !tc.call {
			if r := mutate.Mutate(mutate.ForPod(p), optedIn(nil), opts); len(r.Changes) > 0 || len(r.Warnings) > 0 {
				t.Errorf("graceguard would have changed or said something: %+v", r)
			}
		}
	}
}

// picker turns fuzz bytes into choices. Past the bytes every choice is the
// first, the common case.
type picker struct {
	b []byte
	i int
}

func (p *picker) n(k int) int {
	if p.i >= len(p.b) {
		return 0
	}
	v := int(p.b[p.i]) % k
	p.i++
	return v
}

func (p *picker) of(vs ...string) string { return vs[p.n(len(vs))] }

var seconds = []int64{0, 1, 3, 5, 8, 10, 25, 29, 30, 31, 45, 60, 120, 700}

func (p *picker) secs() int64 { return seconds[p.n(len(seconds))] }

// wideSeconds adds what saturates: past 9,223,372,036 s pkg/mutate reads a
// count of seconds as longer than any grace.
var wideSeconds = append(slices.Clone(seconds), 3599, 3600, 3601, 86400, 1<<31, 9223372036, 9223372037, 1<<62, math.MaxInt64-1, math.MaxInt64)

// wide is a count of seconds for a hook, a grace or a probe's grace: one
// of seconds, and now and then one of the widest.
func (p *picker) wide() int64 {
	if p.n(4) != 0 {
		return p.secs()
	}
	return wideSeconds[p.n(len(wideSeconds))]
}

// plus1 is s+1 short of overflow (a grace longer than a hook of s).
func plus1(s int64) int64 {
	if s == math.MaxInt64 {
		return s
	}
	return s + 1
}

// sleepWord is an operand of exec sleep: whole seconds mostly, and every
// form GNU sleep and CEL might read apart.
func (p *picker) sleepWord(s int64) string {
	n := strconv.FormatInt(s, 10)
	switch p.n(12) {
	case 1:
		return n + "s"
	case 2:
		return "000" + n
	case 3:
		return "1e3"
	case 4:
		return "infinity"
	case 5:
		return strings.Repeat("9", 400)
	case 6:
		return n + ".5"
	case 7:
		return "+" + n
	case 8:
		return huge
	}
	return n
}

func (p *picker) hook() *corev1.Lifecycle {
	s := p.wide()
	switch p.n(8) {
	case 1:
		return sleepHook(s)
	case 2:
		return execHook("sleep", p.sleepWord(s))
	case 3:
		return execHook("/bin/sleep", p.sleepWord(s))
	case 4:
		return execHook("sh", "-c", "sleep "+p.sleepWord(s))
	case 5:
		return &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/drain"}}}
	case 6:
		return execHook("sleep", strconv.FormatInt(s, 10)+"s")
	case 7:
		return execHook(p.of("sleep", "/usr/bin/sleep", "xsleep", huge), p.sleepWord(s), p.of("", "1"))
	}
	return nil
}

// stopSignals are lifecycle.stopSignal values: none mostly, SIGTERM, ones
// the app may drain on, and the two no process can catch.
var stopSignals = []corev1.Signal{"", "", "", corev1.SIGTERM, corev1.SIGQUIT, corev1.SIGINT, corev1.SIGKILL, corev1.SIGSTOP, corev1.SIGUSR1}

func (p *picker) stopSignal(l *corev1.Lifecycle) *corev1.Lifecycle {
	sig := stopSignals[p.n(len(stopSignals))]
	if sig == "" {
		return l
	}
	return withStopSignal(l, sig)
}

func (p *picker) container(name string) corev1.Container {
	c := corev1.Container{Name: name, Image: "registry.local/x:1", Lifecycle: p.hook()}
	c.Lifecycle = p.stopSignal(c.Lifecycle)
	if p.n(2) == 0 {
		c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	}
	if p.n(4) == 0 {
		g := plus1(p.wide())
		c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}, TerminationGracePeriodSeconds: &g}
	}
	if p.n(8) == 0 {
		g := p.wide()
		c.StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}, TerminationGracePeriodSeconds: &g}
	}
	return c
}

// durations are annotation values for the budget keys, floors and
// ceilings: good ones, and every form graceguard and CEL might read apart
// (units, fractions, signs, leading zeros, exponents, huge digit strings,
// 256 KiB).
var durations = []string{"", "0", "5", "5s", "8s", "10s", "1500ms", "20s", "40s", "1m", "59m", "1h", "2h", "lots", " 5s", "-5s", "0.5", "1m30s",
	"500ms", ".5s", "5.s", "5μs", "5µs", "5us", "+5s", "05s", "0005", "00020", "1e3", "3600", "3601", "1h0m0s", "60m", "3600s", "3600.000000001s",
	"4s999ms999us999ns", "20s0ns", "0.000000001s", "99999999999999999999s", "99999999999999999999", strings.Repeat("9", 300), huge, "auto", "Auto", "5S", "5 s"}

func (p *picker) duration() string { return durations[p.n(len(durations))] }

func (p *picker) annotations(keys ...string) map[string]string {
	ann := map[string]string{}
	for _, k := range keys {
		if v := p.duration(); v != "" {
			ann[k] = v
		}
	}
	return ann
}

// fuzzAnnotations are the values genPod gives each annotation besides the
// budget terms (p.duration): valid, invalid and oversized ones.
// TestTheProofFuzzSetsEveryAnnotation holds it to mutate.Keys.
var fuzzAnnotations = []struct {
	k  string
	vs []string
}{
	{mutate.AnnotationRoutingProfile, []string{"", "", "", "", "ingress-nginx", "gke-neg", "bogus"}},
	{mutate.AnnotationMaxWorkFloor, []string{"", "", "", "", "", "10s", "x", "3m", "1h"}},
	{mutate.AnnotationMaxWorkCeiling, []string{"", "", "", "", "", "", "10s", "5m", "x"}},
	{"linkerd.io/inject", []string{"", "", "", "", "", "enabled", "disabled"}},
	{"config.alpha.linkerd.io/proxy-wait-before-exit-seconds", []string{"", "", "", "", "", "", "20", "60"}},
	{mutate.AnnotationInject, []string{"", "", "", "false", "true", "no"}},
	{mutate.AnnotationPreStop, []string{"", "", "sleep", "exec", "none", "wait"}},
	{mutate.AnnotationContainers, []string{"", "", "", "c0", "ghost"}},
	{mutate.AnnotationSidecars, []string{"", "", "", "", "c1", "sidecar", "c0,c1", "ghost", "c1,", "c1,c1"}},
	{mutate.AnnotationLivenessPath, []string{"", "", "", "/healthz", "healthz", "/" + huge}},
	{mutate.AnnotationReadinessPath, []string{"", "", "/readyz", "readyz", "/a b", "/" + strings.Repeat("r", 255), "/" + strings.Repeat("r", 256), "/" + huge}},
	{mutate.AnnotationProbePort, []string{"", "", "8080", "http", "0", "99999", "--x", "065535", "65535", "a-b-c-d-e-f-g-h", huge}},
	{mutate.AnnotationBudget, []string{"", "", "", "routing=5s work=20s cleanup=2s margin=3s grace=30s", "routing=1m work=1h cleanup=0s margin=0s grace=9999s", "routing=x grace=1s",
		"routing=5s work=20s cleanup=2s margin=3s grace=30s " + huge, "routing=9999h work=0s cleanup=0s margin=0s grace=999999999s"}},
	{"kubernetes.io/config.mirror", []string{"", "", "", "", "", "", "", "abc"}},
}

// Every graceguard annotation a Pod sets gets values from the fuzzer: a
// key added to mutate.Keys without them fails here.
func TestTheProofFuzzSetsEveryAnnotation(t *testing.T) {
	set := map[string]bool{}
	for _, t := range budget.Terms {
		set[mutate.KeyFor(t)] = true
	}
	for _, kv := range fuzzAnnotations {
		set[kv.k] = true
	}
	for _, k := range mutate.Keys {
		if k.Where&mutate.PodAnnotation != 0 && strings.HasPrefix(k.Name, "graceguard.io/") && !set[k.Name] {
			t.Errorf("genPod never sets %s: add its values to fuzzAnnotations", k.Name)
		}
	}
}

// genPod builds a Pod from fuzz bytes: containers with every kind of hook,
// stop signals, a native sidecar, probes with their own grace, every
// graceguard annotation with valid and invalid values, and now and then a
// budget record graceguard did not write.
func (p *picker) pod() *corev1.Pod {
	ann := p.annotations(mutate.AnnotationRoutingDelay, mutate.AnnotationMaxWork, mutate.AnnotationCleanup, mutate.AnnotationSafetyMargin)
	// In a fixed order (not a map's), so the same bytes make the same choices.
	for _, kv := range fuzzAnnotations {
		if v := p.of(kv.vs...); v != "" {
			ann[kv.k] = v
		}
	}
	if p.n(6) == 0 {
		ann[mutate.AnnotationMaxWork] = mutate.MaxWorkAuto
	}
	n := 1 + p.n(3)
	var cs []corev1.Container
	for i := range n {
		cs = append(cs, p.container("c"+strconv.Itoa(i)))
	}
	if p.n(6) == 0 {
		cs = append(cs, p.container(p.of(mutate.ContainerIstioProxy, mutate.ContainerLinkerdProxy)))
	}
	grace := plus1(p.wide())
	if p.n(3) == 0 {
		// Just longer than the longest sleep action: where a hook that
		// saturates could pass an integer comparison.
		grace = 1
		for _, c := range cs {
			if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
				grace = max(grace, plus1(c.Lifecycle.PreStop.Sleep.Seconds))
			}
		}
	}
	pod := newPod(ann, grace, cs...)
	if p.n(3) == 0 {
		always := corev1.ContainerRestartPolicyAlways
		sc := p.container(p.of("sidecar", "sidecar", mutate.ContainerIstioProxy))
		sc.RestartPolicy = &always
		pod.Spec.InitContainers = []corev1.Container{sc}
	}
	if p.n(8) == 0 {
		pod.Labels = map[string]string{mutate.AnnotationIstioInject: p.of("true", "false")}
	}
	if os := p.of("linux", "", "windows"); os != "" {
		pod.Spec.OS = &corev1.PodOS{Name: corev1.OSName(os)}
	}
	return pod
}

// namespace builds the Pod's namespace: defaults of every budget key, the
// floor and ceiling of max-work: auto, a mode label, and the settings CEL
// cannot see (routing profiles, auto, meshes).
func (p *picker) namespace() mutate.Namespace {
	ns := optedIn(p.annotations(mutate.AnnotationRoutingDelay, mutate.AnnotationMaxWork))
	if v := p.of("", "", "enforce", "audit", "warn"); v != "" {
		ns.Labels[mutate.LabelMode] = v
	}
	// In a fixed order (not a map's), so the same bytes make the same choices.
	for _, kv := range []struct {
		k  string
		vs []string
	}{
		{mutate.AnnotationRoutingProfile, []string{"", "", "ingress-nginx", "aws-alb-ip", "bogus"}},
		{"linkerd.io/inject", []string{"", "", "", "enabled"}},
		{"config.alpha.linkerd.io/proxy-wait-before-exit-seconds", []string{"", "", "", "15", "90"}},
		{mutate.AnnotationMaxWorkFloor, []string{"", "", "", "30s", "3m", "1h", "x"}},
		{mutate.AnnotationMaxWorkCeiling, []string{"", "", "", "", "10s", "5m", "x"}},
		{mutate.AnnotationCleanup, []string{"", "", "", "", "1s", "500ms", "x"}},
		{mutate.AnnotationSafetyMargin, []string{"", "", "", "", "10s", "0"}},
		{mutate.AnnotationPreStop, []string{"", "", "", "", "exec", "none", "wait"}},
	} {
		if v := p.of(kv.vs...); v != "" {
			ns.Annotations[kv.k] = v
		}
	}
	if p.n(6) == 0 {
		ns.Annotations[mutate.AnnotationMaxWork] = mutate.MaxWorkAuto
	}
	if p.n(6) == 0 {
		ns.Labels[mutate.LabelIstioInjection] = "enabled"
	}
	return ns
}

// options are the cluster's: the webhook's flags, which the fuzz varies
// too (the defaults, the cap, the handler, a default routing profile,
// platform ceilings, the default mode).
func (p *picker) options() mutate.Options {
	o := opts
	if p.n(3) == 0 {
		o.Defaults.Routing = []time.Duration{5 * time.Second, 0, 500 * time.Millisecond, 10 * time.Second, time.Minute, 1500 * time.Millisecond}[p.n(6)]
		o.Defaults.Work = []time.Duration{20 * time.Second, 0, 3 * time.Minute, time.Hour, 90 * time.Second}[p.n(5)]
		o.Defaults.Cleanup = []time.Duration{2 * time.Second, 0, 250 * time.Millisecond}[p.n(3)]
		o.Defaults.Margin = []time.Duration{3 * time.Second, 0, 30 * time.Second}[p.n(3)]
	}
	if p.n(3) == 0 {
		o.MaxGrace = []time.Duration{10 * time.Minute, 30 * time.Second, time.Minute, 2 * time.Hour, 0}[p.n(5)]
	}
	o.PreStop = []mutate.PreStopHandler{mutate.PreStopSleep, mutate.PreStopSleep, mutate.PreStopExec, mutate.PreStopNone}[p.n(4)]
	o.DefaultProfile = p.of("", "", "", "ingress-nginx", "gke-neg", "azure-agic")
	o.Mode = []mutate.Mode{mutate.ModeEnforce, mutate.ModeEnforce, mutate.ModeEnforce, mutate.ModeWarn}[p.n(4)]
	if p.n(4) == 0 {
		o.Ceilings = []budget.Ceiling{{Name: "karpenter", Event: "a Karpenter node disruption", Limit: time.Duration(p.secs()+20) * time.Second, Deny: p.n(2) == 0, Flag: "--karpenter-termination-grace-period"}}
	}
	return o
}

// lateChange is what another mutating webhook may do after graceguard's last
// call (in the reinvocation round, or at all when graceguard's call failed).
// It reports whether it removed one of the Pod's own budget settings.
func (p *picker) lateChange(pod *corev1.Pod) (removed bool) {
	switch p.n(14) {
	case 1:
		pod.Spec.Containers = append(pod.Spec.Containers, p.container("late"))
	case 2:
		g := p.wide()
		pod.Spec.TerminationGracePeriodSeconds = &g
	case 3:
		pod.Spec.Containers[0].Lifecycle = p.hook()
	case 4:
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		k := p.of(mutate.AnnotationRoutingDelay, mutate.AnnotationMaxWork, mutate.AnnotationCleanup, mutate.AnnotationSafetyMargin,
			mutate.AnnotationInject, mutate.AnnotationPreStop, mutate.AnnotationContainers, mutate.AnnotationReadinessPath, mutate.AnnotationProbePort, "graceguard.io/future",
			mutate.AnnotationRoutingProfile, "config.alpha.linkerd.io/proxy-wait-before-exit-seconds", mutate.AnnotationMaxWorkFloor, mutate.AnnotationMaxWorkCeiling,
			mutate.AnnotationBudget, mutate.AnnotationLivenessPath, "example.com/other")
		pod.Annotations[k] = p.of(durations[1:]...)
	case 5:
		delete(pod.Annotations, mutate.AnnotationBudget)
	case 6:
		for _, k := range []string{mutate.AnnotationRoutingDelay, mutate.AnnotationMaxWork, mutate.AnnotationCleanup, mutate.AnnotationSafetyMargin} {
			if _, ok := pod.Annotations[k]; ok {
				delete(pod.Annotations, k)
				return true
			}
		}
	case 7:
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, p.container("late-init"))
		always := corev1.ContainerRestartPolicyAlways
		pod.Spec.InitContainers[len(pod.Spec.InitContainers)-1].RestartPolicy = &always
	case 8:
		// A mesh injector after graceguard's last call.
		pod.Spec.Containers = append(pod.Spec.Containers, p.container(p.of(mutate.ContainerIstioProxy, mutate.ContainerLinkerdProxy)))
	case 9:
		// A stop signal, on a container or a sidecar.
		i := p.n(len(pod.Spec.Containers) + len(pod.Spec.InitContainers))
		c := &pod.Spec.InitContainers
		if i < len(pod.Spec.Containers) {
			c = &pod.Spec.Containers
		} else {
			i -= len(pod.Spec.Containers)
		}
		(*c)[i].Lifecycle = withStopSignal((*c)[i].Lifecycle, stopSignals[3+p.n(len(stopSignals)-3)])
		if pod.Spec.OS == nil {
			pod.Spec.OS = &corev1.PodOS{Name: corev1.Linux}
		}
	case 10:
		// A hook past what pkg/mutate reads without saturating.
		l := sleepHook(wideSeconds[len(wideSeconds)-1-p.n(5)])
		if old := pod.Spec.Containers[0].Lifecycle; old != nil {
			l.StopSignal = old.StopSignal
		}
		pod.Spec.Containers[0].Lifecycle = l
	case 11:
		// Annotations of its own: many, or huge.
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		for i := range []int{1, 8, 70}[p.n(3)] {
			pod.Annotations["late.example.com/k"+strconv.Itoa(i)] = p.of("", "x", strings.Repeat("v", 4096), huge)
		}
	case 12:
		// A probe's own grace changed.
		g := p.wide()
		pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}, TerminationGracePeriodSeconds: &g}
	case 13:
		pod.Spec.OS = nil
	}
	return false
}

// alwaysHeld are the refusals the proof never lets through, whatever
// happened before: whether graceguard's mutating call was made or not, and
// whoever wrote the budget record. They are checked on the Pod itself.
var alwaysHeld = []mutate.Reason{mutate.DenyHookExceedsGrace, mutate.DenyNotMutated, mutate.DenyTooManyContainers, mutate.DenyInvalidAnnotation, mutate.DenyStopSignalKills}

// FuzzProvenPodsPassValidation: the API server skips the validating webhook
// only for a Pod the webhook would admit. For a Pod graceguard's mutating
// webhook admitted (and so wrote the budget record of), or one that opted
// out (whose hooks and stop signals are all the webhook checks), changed
// afterwards in any way another webhook could (containers, hooks, stop
// signals, grace, annotations; short of deleting one of the Pod's own budget
// settings, docs/admission.md), every skipped Pod passes Validate. For any
// Pod at all, the mutating call made or not and the record written by
// anyone, a skipped Pod breaks none of the checks made on the Pod itself:
// hooks within the grace, every container treated, at most 32 containers,
// every graceguard annotation valid, no stop signal that kills. Namespaces:
// enforce mode, with valid and invalid defaults, floors and ceilings;
// cluster options of every kind (a namespace they put in warn mode meets
// the warn-mode webhook, always called).
func FuzzProvenPodsPassValidation(f *testing.F) {
	vp := validatingMatcher(f, nil, "validate-pods.graceguard.io")
	for _, seed := range [][]byte{
		{}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
		[]byte("graceguard proves what it can"), []byte{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4, 3, 3, 8, 3, 2, 7, 9, 5},
		[]byte{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if why := disagreement(vp, b); why != "" {
			t.Fatal(why)
		}
	})
}

// disagreement is what FuzzProvenPodsPassValidation checks for the Pod,
// namespace, options and later change the bytes make: "" when the proof
// and the webhook agree, else why not.
func disagreement(vp podMatcher, b []byte) string {
	p := &picker{b: b}
	ns := p.namespace()
	o := p.options()
	var observed *mutate.Observed
	if p.n(2) == 0 {
		observed = &mutate.Observed{Report: "web", Work: time.Duration(p.secs()) * time.Second, Enough: p.n(2) == 0, Samples: 5}
	}
	pod := p.pod()
	// The mutating call made (not for opted-out Pods: its
	// matchCondition) or not (an outage, failurePolicy Ignore).
	mutated := p.n(4) != 0 && pod.Annotations[mutate.AnnotationInject] != "false"
	if mutated && admitWith(pod, ns, o, observed) {
		return "" // graceguard's mutating webhook refuses it
	}
	if !mutated && p.n(2) == 0 {
		// Not mutated here, but shaped as graceguard shapes a Pod
		// elsewhere (a template copied from another namespace or cluster,
		// an author who wrote the record): hooks, grace and record from
		// the defaults, none of this namespace's or cluster's settings.
		admitWith(pod, optedIn(nil), opts, nil)
	}
	removed := p.lateChange(pod)
	called, err := vp.match(pod)
	if err != nil {
		return fmt.Sprintf("%v\nPod: %+v", err, pod)
	}
	if called {
		return ""
	}
	v := mutate.Validate(mutate.ForPod(pod), ns, o)
	if v.Mode == mutate.ModeWarn {
		// Its namespace meets validate-pods-warn.graceguard.io, which
		// has no such condition (TestModeSelectorsPartitionNamespaces).
		return ""
	}
	var held int
	for _, f := range v.Violations {
		if strings.HasPrefix(f.Err.Field, "Namespace[") {
			// A namespace's setting, which CEL cannot read: the one
			// among these reasons is a Linkerd wait that outlasts the
			// grace, the hook Linkerd's injector would make of it. Had
			// the injector run, its proxy would be in the Pod and the
			// webhook called; it did not, so no such hook runs
			// (docs/admission.md).
			continue
		}
		held++
		if slices.Contains(alwaysHeld, f.Reason) {
			return fmt.Sprintf("skipped, but the validating webhook refuses it (%s): %v\nPod: %+v", f.Reason, v.Err(), pod)
		}
	}
	optedOut := pod.Annotations[mutate.AnnotationInject] == "false"
	if (mutated || optedOut) && !removed && v.Denied() && held > 0 {
		return fmt.Sprintf("graceguard mutated it (or it opted out), the validating webhook was skipped, and it refuses it: %v\nPod: %+v\nnamespace: %+v\noptions: %+v", v.Err(), pod, ns, o)
	}
	return ""
}
