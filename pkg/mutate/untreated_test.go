package mutate_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// A Pod graceguard's mutating webhook did not treat (its call failed open)
// reaches the validating webhook without graceguard's record. With
// --untreated-pods=admit it is judged as an opted-out Pod is and admitted
// with a warning; with deny it is refused, as before, for its controller
// to retry.
func TestUntreatedPods(t *testing.T) {
	ns := mutate.Namespace{Name: "shop", Labels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}}
	newPod := func(ann map[string]string, grace int64, l *corev1.Lifecycle) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "shop", Annotations: ann},
			Spec:       corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1", Lifecycle: l}}},
		}
	}
	exec := func(cmd ...string) *corev1.Lifecycle {
		return &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: cmd}}}
	}
	bigBudget := map[string]string{mutate.AnnotationMaxWork: "40s"}
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		policy mutate.UntreatedPolicy
		// want is the reasons of the answer, violations first.
		want []mutate.Reason
	}{
		{"admit: an ordinary Pod", newPod(nil, 30, nil), mutate.UntreatedAdmit, []mutate.Reason{mutate.WarnUntreated}},
		{"admit: a budget its grace does not cover", newPod(bigBudget, 30, nil), mutate.UntreatedAdmit, []mutate.Reason{mutate.WarnUntreated}},
		{"admit: a hook that outlasts its grace is still refused", newPod(nil, 30, exec("sleep", "30")), mutate.UntreatedAdmit, []mutate.Reason{mutate.DenyHookExceedsGrace}},
		{"admit: an annotation that does not parse is still refused", newPod(map[string]string{mutate.AnnotationMaxWork: "thirty"}, 30, nil), mutate.UntreatedAdmit, []mutate.Reason{mutate.DenyInvalidAnnotation}},
		{"deny: an ordinary Pod", newPod(nil, 30, nil), mutate.UntreatedDeny, []mutate.Reason{mutate.DenyNotMutated}},
		{"deny: a budget its grace does not cover", newPod(bigBudget, 30, nil), mutate.UntreatedDeny, []mutate.Reason{mutate.DenyNotMutated, mutate.DenyBudgetExceedsGrace}},
		{"admit: a Pod with graceguard's record is judged whole", newPod(map[string]string{mutate.AnnotationMaxWork: "40s", mutate.AnnotationBudget: "routing=5s work=20s cleanup=2s margin=3s grace=30s"}, 30, &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}),
			mutate.UntreatedAdmit, []mutate.Reason{mutate.DenyBudgetExceedsGrace}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := mutate.DefaultOptions()
			o.Untreated = tc.policy
			r := mutate.Validate(mutate.ForPod(tc.pod), ns, o)
			var got []mutate.Reason
			for _, f := range append(r.Violations, r.Warnings...) {
				if f.Reason != mutate.WarnNoReadiness {
					got = append(got, f.Reason)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("reasons %v, want %v (%v)", got, tc.want, r.Err())
			}
			if slices.Contains(tc.want, mutate.WarnUntreated) && (r.Denied() || r.Reason() != mutate.WarnUntreated) {
				t.Errorf("denied %t, metric reason %s; want admitted as %s", r.Denied(), r.Reason(), mutate.WarnUntreated)
			}
			for _, w := range r.AdmissionWarnings() {
				if len(w) > 120 {
					t.Errorf("warning of %d characters, over 120: %s", len(w), w)
				}
				if strings.HasPrefix(w, "Warning:") {
					t.Errorf("warning starts with Warning: %s", w)
				}
			}
		})
	}
}

// The mutating webhook's own validation (and the plugin's simulation of
// both webhooks) judge a Pod graceguard has just decided on as treated,
// whatever --untreated-pods says: a Pod it refuses to mutate stays refused.
func TestValidateMutatedJudgesTheTreatedPod(t *testing.T) {
	ns := mutate.Namespace{Name: "shop", Labels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}}
	grace := int64(30)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "slow", Namespace: "shop", Annotations: map[string]string{mutate.AnnotationMaxWork: "1h"}},
		Spec:       corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1"}}},
	}
	o := mutate.DefaultOptions()
	o.Untreated = mutate.UntreatedAdmit
	tg := mutate.ForPod(pod)
	mutate.Mutate(tg, ns, o)
	if r := mutate.ValidateMutated(tg, ns, o); r.Reason() != mutate.DenyBudgetOverCap {
		t.Errorf("ValidateMutated: %s (%v), want %s", r.Reason(), r.Err(), mutate.DenyBudgetOverCap)
	}
	if r := mutate.Validate(tg, ns, o); r.Denied() {
		t.Errorf("Validate with --untreated-pods=admit refuses the Pod Mutate left untreated: %v", r.Err())
	}
}
