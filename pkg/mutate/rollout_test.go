package mutate_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// A Rollout's scale-down delay is held to the routing term of its Pods:
// blue-green's always (Argo's default 30 s when unset), canary's only with
// traffic routing (without it Argo scales the old Pods down step by step),
// and an opted-out template has no routing term graceguard counts.
func TestScaleDownDelayWarnings(t *testing.T) {
	tpl := func(annotations string) string {
		return `"template":{"metadata":{"annotations":{` + annotations + `}},"spec":{"containers":[{"name":"app","image":"app:1"}]}}`
	}
	for _, c := range []struct {
		name, spec string
		want       string // the warning, "" for none
	}{
		{"blue-green default covers 5s", `"strategy":{"blueGreen":{}},` + tpl(``), ""},
		{"blue-green default under 45s", `"strategy":{"blueGreen":{}},` + tpl(`"graceguard.io/routing-delay":"45s"`),
			"spec.strategy.blueGreen.scaleDownDelaySeconds: 30s (default) < routing 45s: scaled down before routes move; raise to 45"},
		{"blue-green 0", `"strategy":{"blueGreen":{"scaleDownDelaySeconds":0}},` + tpl(``),
			"spec.strategy.blueGreen.scaleDownDelaySeconds: 0s < routing 5s: scaled down before routes move; raise to 5"},
		{"blue-green equal", `"strategy":{"blueGreen":{"scaleDownDelaySeconds":5}},` + tpl(``), ""},
		{"canary without traffic routing", `"strategy":{"canary":{"scaleDownDelaySeconds":1}},` + tpl(``), ""},
		{"canary with traffic routing", `"strategy":{"canary":{"scaleDownDelaySeconds":1,"trafficRouting":{"nginx":{"stableIngress":"web"}}}},` + tpl(``),
			"spec.strategy.canary.scaleDownDelaySeconds: 1s < routing 5s: scaled down before routes move; raise to 5"},
		{"fraction rounds up", `"strategy":{"blueGreen":{"scaleDownDelaySeconds":2}},` + tpl(`"graceguard.io/routing-delay":"2500ms"`),
			"spec.strategy.blueGreen.scaleDownDelaySeconds: 2s < routing 3s: scaled down before routes move; raise to 3"},
		{"opted out", `"strategy":{"blueGreen":{"scaleDownDelaySeconds":0}},` + tpl(`"graceguard.io/inject":"false"`), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ro mutate.Rollout
			if err := json.Unmarshal([]byte(`{"apiVersion":"argoproj.io/v1alpha1","kind":"Rollout","metadata":{"name":"web","namespace":"shop"},"spec":{`+c.spec+`}}`), &ro); err != nil {
				t.Fatal(err)
			}
			target, err := mutate.ForWorkload(&ro)
			if err != nil {
				t.Fatal(err)
			}
			ns := mutate.Namespace{Name: "shop", Labels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}}
			r := mutate.Validate(target, ns, mutate.DefaultOptions())
			if r.Denied() {
				t.Fatalf("denied: %v", r.Err())
			}
			var got []string
			for _, f := range r.Warnings {
				if f.Reason == mutate.WarnScaleDownEarly {
					got = append(got, f.Message())
				}
			}
			switch {
			case c.want == "" && len(got) > 0:
				t.Errorf("warned %q, want none", got)
			case c.want != "" && (len(got) != 1 || got[0] != c.want):
				t.Errorf("warnings %q, want %q", got, c.want)
			}
			for _, w := range got {
				if len(w) > mutate.MaxWarningLength || strings.HasSuffix(w, "...") {
					t.Errorf("warning cut: %q", w)
				}
			}
		})
	}
}

// A Rollout with spec.workloadRef has no template: ForWorkload says so
// rather than checking an empty one.
func TestWorkloadRefRolloutHasNoTarget(t *testing.T) {
	ro := &mutate.Rollout{Spec: mutate.RolloutSpec{WorkloadRef: &mutate.RolloutWorkloadRef{Kind: "Deployment", Name: "web"}}}
	ro.Name = "web"
	if _, err := mutate.ForWorkload(ro); err == nil || !strings.Contains(err.Error(), "Rollout web has no Pod template (spec.template)") {
		t.Fatalf("ForWorkload = %v", err)
	}
	if c, ok := ro.DeepCopyObject().(*mutate.Rollout); !ok || c.Spec.WorkloadRef == ro.Spec.WorkloadRef || *c.Spec.WorkloadRef != *ro.Spec.WorkloadRef {
		t.Fatalf("DeepCopyObject = %#v", c)
	}
}
