package helmhook

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/graceguard/graceguard/pkg/mutate"
)

var mutationCheck = SelftestConfig{Check: CheckMutation, TestNamespace: "graceguard-test", Image: "registry.local/graceguard:v1", Timeout: time.Second}

// asGraceguard answers a Pod create as the API server does with graceguard
// in front (defaults: routing 5s, grace 30s), after change.
func asGraceguard(t *testing.T, change func(*corev1.Pod)) k8stesting.ReactionFunc {
	return func(a k8stesting.Action) (bool, runtime.Object, error) {
		c := a.(k8stesting.CreateActionImpl)
		if dr := c.CreateOptions.DryRun; len(dr) != 1 || dr[0] != metav1.DryRunAll {
			t.Errorf("create with dryRun %v, want [All]: the check must create nothing", dr)
		}
		p := c.Object.(*corev1.Pod).DeepCopy()
		grace := int64(30)
		p.Annotations = map[string]string{mutate.AnnotationBudget: "routing=5s work=20s cleanup=2s margin=3s grace=30s"}
		p.Spec.TerminationGracePeriodSeconds = &grace
		for i := range p.Spec.Containers {
			p.Spec.Containers[i].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}
		}
		if change != nil {
			change(p)
		}
		return true, p, nil
	}
}

func TestMutationCheckSaysWhatGraceguardDid(t *testing.T) {
	kube := fake.NewClientset()
	kube.PrependReactor("create", "pods", asGraceguard(t, nil))
	var out bytes.Buffer
	if err := Selftest(context.Background(), mutationCheck, kube, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	want := `the dry-run Pod graceguard-test/graceguard-selftest came back mutated: graceguard.io/budget="routing=5s work=20s cleanup=2s margin=3s grace=30s", terminationGracePeriodSeconds=30, preStop app: sleep 5s`
	if strings.TrimSpace(out.String()) != want {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
	}
}

func TestTheDryRunPodMeetsTheRestrictedStandard(t *testing.T) {
	p := dryRunPod(mutationCheck)
	c := p.Spec.Containers[0]
	sc, psc := c.SecurityContext, p.Spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
		sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("the dry-run Pod would be refused in a namespace enforcing restricted: %+v %+v", psc, sc)
	}
	if c.Image != mutationCheck.Image || len(p.Annotations) != 0 || p.Spec.TerminationGracePeriodSeconds != nil || c.Lifecycle != nil {
		t.Errorf("the dry-run Pod must carry the image it is given and nothing graceguard sets: %+v", p)
	}
}

func TestMutationCheckFailsSayingWhy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*corev1.Pod)
		want   string
	}{
		{"not mutated", func(p *corev1.Pod) {
			p.Annotations, p.Spec.TerminationGracePeriodSeconds, p.Spec.Containers[0].Lifecycle = nil, nil, nil
		}, "the dry-run Pod graceguard-test/graceguard-selftest: came back without graceguard.io/budget: graceguard's mutating webhook did not treat it"},
		{"a record that does not parse", func(p *corev1.Pod) { p.Annotations[mutate.AnnotationBudget] = "routing=5s" },
			`its graceguard.io/budget does not parse: budget "routing=5s"`},
		{"a grace changed after graceguard", func(p *corev1.Pod) { g := int64(20); p.Spec.TerminationGracePeriodSeconds = &g },
			`terminationGracePeriodSeconds is 20, but graceguard.io/budget "routing=5s work=20s cleanup=2s margin=3s grace=30s" records grace=30s: something after graceguard changed it`},
		{"no preStop hook", func(p *corev1.Pod) { p.Spec.Containers[0].Lifecycle = nil },
			`container "app" has no preStop hook`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientset()
			kube.PrependReactor("create", "pods", asGraceguard(t, tc.change))
			var out bytes.Buffer
			c := mutationCheck
			c.Timeout = 100 * time.Millisecond
			err := Selftest(context.Background(), c, kube, &out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to say %q", err, tc.want)
			}
		})
	}
}
