package mutate_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/mutate"
)

func profilePod(ann map[string]string) *corev1.Pod {
	grace := int64(30)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Annotations: ann},
		Spec:       corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
	}
}

func optedInNS(ann map[string]string) mutate.Namespace {
	return mutate.Namespace{Name: "shop", Labels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}, Annotations: ann}
}

func TestRoutingProfilePrecedence(t *testing.T) {
	nlb := map[string]string{mutate.AnnotationRoutingProfile: "aws-nlb-ip"}
	for _, tc := range []struct {
		name           string
		nsAnn, podAnn  map[string]string
		defaultProfile string
		wantRouting    time.Duration
		wantSource     mutate.Source
		wantProfile    string
		wantFrom       mutate.Source
		wantGrace      int64
	}{
		{name: "a Pod's profile supplies the routing term", podAnn: nlb,
			wantRouting: 2 * time.Minute, wantSource: "profile aws-nlb-ip", wantProfile: "aws-nlb-ip", wantFrom: mutate.FromPod, wantGrace: 145},
		{name: "an explicit routing-delay on the Pod wins; the profile's floor still applies",
			podAnn:      map[string]string{mutate.AnnotationRoutingProfile: "gke-neg", mutate.AnnotationRoutingDelay: "10s"},
			wantRouting: 10 * time.Second, wantSource: mutate.FromPod, wantProfile: "gke-neg", wantFrom: mutate.FromPod, wantGrace: 60},
		{name: "a namespace's profile applies to its Pods", nsAnn: nlb,
			wantRouting: 2 * time.Minute, wantSource: "profile aws-nlb-ip", wantProfile: "aws-nlb-ip", wantFrom: mutate.FromNamespace, wantGrace: 145},
		{name: "a Pod's routing-delay wins over its namespace's profile", nsAnn: nlb, podAnn: map[string]string{mutate.AnnotationRoutingDelay: "8s"},
			wantRouting: 8 * time.Second, wantSource: mutate.FromPod, wantProfile: "aws-nlb-ip", wantFrom: mutate.FromNamespace, wantGrace: 33},
		{name: "a namespace's routing-delay wins over its own profile",
			nsAnn:       map[string]string{mutate.AnnotationRoutingProfile: "aws-nlb-ip", mutate.AnnotationRoutingDelay: "15s"},
			wantRouting: 15 * time.Second, wantSource: mutate.FromNamespace, wantProfile: "aws-nlb-ip", wantFrom: mutate.FromNamespace, wantGrace: 40},
		{name: "a Pod's profile wins over its namespace's routing-delay",
			nsAnn: map[string]string{mutate.AnnotationRoutingDelay: "15s"}, podAnn: map[string]string{mutate.AnnotationRoutingProfile: "ingress-nginx"},
			wantRouting: 10 * time.Second, wantSource: "profile ingress-nginx", wantProfile: "ingress-nginx", wantFrom: mutate.FromPod, wantGrace: 35},
		{name: "the cluster's default profile applies when nothing names one", defaultProfile: "ingress-nginx",
			wantRouting: 10 * time.Second, wantSource: "profile ingress-nginx", wantProfile: "ingress-nginx", wantFrom: mutate.FromCluster, wantGrace: 35},
		{name: "a namespace's routing-delay wins over the cluster's default profile", defaultProfile: "aws-nlb-ip",
			nsAnn:       map[string]string{mutate.AnnotationRoutingDelay: "6s"},
			wantRouting: 6 * time.Second, wantSource: mutate.FromNamespace, wantProfile: "aws-nlb-ip", wantFrom: mutate.FromCluster, wantGrace: 31},
		{name: "no profile anywhere: the cluster's routing delay", wantRouting: 5 * time.Second, wantSource: mutate.FromCluster, wantGrace: 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := mutate.DefaultOptions()
			opts.DefaultProfile = tc.defaultProfile
			if err := opts.Validate(); err != nil {
				t.Fatal(err)
			}
			pod := profilePod(tc.podAnn)
			r := mutate.Mutate(mutate.ForPod(pod), optedInNS(tc.nsAnn), opts)
			if len(r.Violations) > 0 {
				t.Fatalf("violations: %v", r.Violations)
			}
			if r.Budget.Routing != tc.wantRouting || r.Sources[budget.Routing] != tc.wantSource {
				t.Errorf("routing %s from %q, want %s from %q", r.Budget.Routing, r.Sources[budget.Routing], tc.wantRouting, tc.wantSource)
			}
			switch {
			case tc.wantProfile == "" && r.Profile != nil:
				t.Errorf("profile %+v, want none", r.Profile)
			case tc.wantProfile != "" && (r.Profile == nil || r.Profile.Name != tc.wantProfile || r.Profile.From != tc.wantFrom):
				t.Errorf("profile %+v, want %s from %s", r.Profile, tc.wantProfile, tc.wantFrom)
			}
			if got := *pod.Spec.TerminationGracePeriodSeconds; got != tc.wantGrace {
				t.Errorf("grace %d, want %d (%s)", got, tc.wantGrace, r.Budget.Arithmetic())
			}
			if v := mutate.Validate(mutate.ForPod(pod), optedInNS(tc.nsAnn), opts); v.Denied() {
				t.Errorf("the mutated Pod is denied: %v", v.Err())
			}
		})
	}
}

func TestGraceFloorIsEnforced(t *testing.T) {
	// The mutating webhook did not run (failurePolicy Ignore): the hooks
	// are there but the grace is under the profile's floor.
	pod := profilePod(map[string]string{mutate.AnnotationRoutingProfile: "gke-neg", mutate.AnnotationRoutingDelay: "5s"})
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}
	v := mutate.Validate(mutate.ForPod(pod), optedInNS(nil), mutate.DefaultOptions())
	if !v.Denied() || v.Violations[0].Reason != mutate.DenyBudgetExceedsGrace {
		t.Fatalf("want budget-exceeds-grace, got %v", v.Err())
	}
	if msg := v.Err().Error(); !strings.Contains(msg, "must be at least 60 (grace floor of routing profile gke-neg; the budget alone needs 30") {
		t.Errorf("the denial must name the floor and its profile: %s", msg)
	}
}

func TestOperatorProfiles(t *testing.T) {
	own, err := budget.ParseProfile("aws-nlb-ip=150s,grace-floor=3m")
	if err != nil {
		t.Fatal(err)
	}
	corp, _ := budget.ParseProfile("corp-lb=45s")
	opts := mutate.DefaultOptions()
	if opts.Profiles, err = budget.MergeProfiles(budget.BuiltinProfiles(), []budget.Profile{own, corp}); err != nil {
		t.Fatal(err)
	}
	pod := profilePod(map[string]string{mutate.AnnotationRoutingProfile: "aws-nlb-ip"})
	r := mutate.Mutate(mutate.ForPod(pod), optedInNS(nil), opts)
	if r.Budget.Routing != 150*time.Second || *pod.Spec.TerminationGracePeriodSeconds != 180 || r.Profile.Basis != budget.BasisOperator {
		t.Errorf("an operator's aws-nlb-ip replaces the built-in: routing %s, grace %d, %+v", r.Budget.Routing, *pod.Spec.TerminationGracePeriodSeconds, r.Profile)
	}
	bad := profilePod(map[string]string{mutate.AnnotationRoutingProfile: "corp-lbb"})
	v := mutate.Validate(mutate.ForPod(bad), optedInNS(nil), opts)
	if !v.Denied() || !strings.Contains(v.Err().Error(), `Unsupported value: "corp-lbb"`) || !strings.Contains(v.Err().Error(), `"corp-lb"`) {
		t.Errorf("an unknown name is denied listing the operator's profiles too: %v", v.Err())
	}
}

func TestOptionsValidateProfilesAndCeilings(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*mutate.Options)
		want string
	}{
		{"an unknown default profile", func(o *mutate.Options) { o.DefaultProfile = "aws-nlb" },
			`--default-routing-profile="aws-nlb": no such profile; want one of kube-proxy, ingress-nginx, aws-alb-ip, aws-nlb-ip, gke-neg, azure-agic`},
		{"a default profile over the cap", func(o *mutate.Options) { o.DefaultProfile = "aws-nlb-ip"; o.MaxGrace = time.Minute },
			"--default-routing-profile=aws-nlb-ip: its Pods need 145s, over --max-grace-period=1m"},
		{"a profile given twice", func(o *mutate.Options) {
			p, _ := budget.ParseProfile("x=1s")
			o.Profiles = append(o.Profiles, p, p)
		}, `--routing-profile: "x" is given twice`},
		{"a negative ceiling", func(o *mutate.Options) {
			o.Ceilings = []budget.Ceiling{{Name: mutate.CeilingKarpenter, Limit: -time.Second, Flag: "--karpenter-termination-grace-period"}}
		}, "--karpenter-termination-grace-period=-1s: must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := mutate.DefaultOptions()
			tc.set(&o)
			if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

func TestPlatformCeilings(t *testing.T) {
	karpenter := budget.Ceiling{Name: mutate.CeilingKarpenter, Event: "a Karpenter disruption", Limit: 40 * time.Second, Flag: "--karpenter-termination-grace-period"}
	shutdown := budget.Ceiling{Name: mutate.CeilingNodeShutdown, Event: "a graceful node shutdown", Limit: 15 * time.Second, Flag: "--node-shutdown-grace-period"}
	ann := map[string]string{mutate.AnnotationMaxWork: "1m"} // needs 70s
	t.Run("warn: the Pod is mutated and told", func(t *testing.T) {
		opts := mutate.DefaultOptions()
		opts.Ceilings = []budget.Ceiling{karpenter, shutdown}
		pod := profilePod(ann)
		r := mutate.Mutate(mutate.ForPod(pod), optedInNS(nil), opts)
		if !r.Applied || *pod.Spec.TerminationGracePeriodSeconds != 70 {
			t.Fatalf("not mutated: %+v", r)
		}
		var msgs []string
		for _, w := range r.Warnings {
			if w.Reason == mutate.WarnOverCeiling {
				msgs = append(msgs, w.Message())
			}
		}
		want := []string{
			"spec.terminationGracePeriodSeconds: needs 70s; a Karpenter disruption grants 40s",
			"spec.terminationGracePeriodSeconds: needs 70s; a graceful node shutdown grants 15s",
		}
		if strings.Join(msgs, "\n") != strings.Join(want, "\n") {
			t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(msgs, "\n"), strings.Join(want, "\n"))
		}
		if v := mutate.Validate(mutate.ForPod(pod), optedInNS(nil), opts); v.Denied() || len(v.Warnings) > 0 {
			t.Errorf("validation repeats or denies: %v %v", v.Err(), v.Warnings)
		}
	})
	t.Run("deny: refused with the arithmetic and the flag", func(t *testing.T) {
		opts := mutate.DefaultOptions()
		karpenter.Deny = true
		opts.Ceilings = []budget.Ceiling{karpenter}
		pod := profilePod(ann)
		if r := mutate.Mutate(mutate.ForPod(pod), optedInNS(nil), opts); r.Applied || len(r.Changes) > 0 {
			t.Errorf("a Pod to be denied is not mutated: %v", r.Changes)
		}
		v := mutate.Validate(mutate.ForPod(pod), optedInNS(nil), opts)
		if !v.Denied() || v.Violations[0].Reason != mutate.DenyOverCeiling {
			t.Fatalf("want a denial, got %v", v.Err())
		}
		if msg := v.Err().Error(); !strings.Contains(msg, "the budget needs 70s but a Karpenter disruption grants at most 40s (--karpenter-termination-grace-period)") {
			t.Errorf("message: %s", msg)
		}
		under := profilePod(nil)
		mutate.Mutate(mutate.ForPod(under), optedInNS(nil), opts)
		if v := mutate.Validate(mutate.ForPod(under), optedInNS(nil), opts); v.Denied() {
			t.Errorf("a 30s budget under a 40s ceiling: %v", v.Err())
		}
	})
}
