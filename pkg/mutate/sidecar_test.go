package mutate_test

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/mutate"
)

var sidecarNS = mutate.Namespace{Name: "shop", Labels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}}

// sidecarPod is an app and a database proxy the app calls for every
// request, named in graceguard.io/sidecars.
func sidecarPod(ann map[string]string, app *corev1.Lifecycle) *corev1.Pod {
	a := map[string]string{mutate.AnnotationSidecars: "db-proxy"}
	for k, v := range ann {
		a[k] = v
	}
	grace := int64(30) // the API server's default, set before admission
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "shop", Annotations: a},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{
			{Name: "app", Image: "registry.local/app:1", Lifecycle: app, Ports: []corev1.ContainerPort{{ContainerPort: 8080}}},
			{Name: "db-proxy", Image: "registry.local/db-proxy:1", Ports: []corev1.ContainerPort{{ContainerPort: 5432}}},
		}},
	}
}

func secondsOf(h *corev1.LifecycleHandler) time.Duration {
	if h == nil || h.Sleep == nil {
		return 0
	}
	return time.Duration(h.Sleep.Seconds) * time.Second
}

// A named sidecar keeps serving until the app's last request is done: its
// preStop wait covers the app's routing, work and cleanup, the grace
// covers that wait and the margin, and the app container is treated as
// before (its routing sleep, its probes), the sidecar never as an app.
func TestSidecarOutlivesTheApp(t *testing.T) {
	for _, tc := range []struct {
		name string
		ann  map[string]string
		app  *corev1.Lifecycle
		// wait is the sidecar's wait, appSleep the app's, grace the Pod's.
		wait, appSleep time.Duration
		grace          int64
	}{
		{"defaults: 5s + 20s + 2s, grace unchanged", nil, nil, 27 * time.Second, 5 * time.Second, 30},
		{"a longer budget raises the grace as the budget alone would",
			map[string]string{mutate.AnnotationRoutingDelay: "8s", mutate.AnnotationMaxWork: "30s"}, nil, 40 * time.Second, 8 * time.Second, 43},
		{"the app's own longer hook is the routing term the sidecar waits out",
			nil, &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 12}}}, 34 * time.Second, 12 * time.Second, 37},
		{"a fraction rounds the wait up, and the grace covers the rounding",
			map[string]string{mutate.AnnotationCleanup: "2500ms"}, nil, 28 * time.Second, 5 * time.Second, 31},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ann := map[string]string{mutate.AnnotationReadinessPath: "/readyz"}
			for k, v := range tc.ann {
				ann[k] = v
			}
			pod := sidecarPod(ann, tc.app)
			r := mutate.Mutate(mutate.ForPod(pod), sidecarNS, mutate.DefaultOptions())
			if len(r.Violations) > 0 {
				t.Fatalf("violations: %v", r.Violations)
			}
			app, proxy := pod.Spec.Containers[0], pod.Spec.Containers[1]
			wait := secondsOf(proxy.Lifecycle.PreStop)
			if wait != tc.wait {
				t.Errorf("sidecar waits %v, want %v", wait, tc.wait)
			}
			if shutdown := r.Budget.Routing + r.Budget.Work + r.Budget.Cleanup; wait < shutdown {
				t.Errorf("sidecar waits %v, less than the app's shutdown %v (routing %v + work %v + cleanup %v)",
					wait, shutdown, r.Budget.Routing, r.Budget.Work, r.Budget.Cleanup)
			}
			grace := *pod.Spec.TerminationGracePeriodSeconds
			if grace != tc.grace {
				t.Errorf("grace %d, want %d", grace, tc.grace)
			}
			if g := time.Duration(grace) * time.Second; g < wait+r.Budget.Margin {
				t.Errorf("grace %v does not cover the sidecar's wait %v and the margin %v", g, wait, r.Budget.Margin)
			}
			if got := secondsOf(app.Lifecycle.PreStop); got != tc.appSleep {
				t.Errorf("app's preStop %v, want %v (as without a sidecar)", got, tc.appSleep)
			}
			if app.ReadinessProbe == nil {
				t.Errorf("app got no readiness probe")
			}
			if proxy.ReadinessProbe != nil {
				t.Errorf("sidecar got the app's readiness probe: %+v", proxy.ReadinessProbe)
			}
			for _, f := range r.Warnings {
				if f.Err.Field == "spec.containers[1].readinessProbe" {
					t.Errorf("sidecar advised as an app: %s", f.Message())
				}
			}
			if v := mutate.Validate(mutate.ForPod(pod), sidecarNS, mutate.DefaultOptions()); v.Err() != nil {
				t.Errorf("the mutated Pod is denied: %v", v.Err())
			}
			if again := mutate.Mutate(mutate.ForPod(pod), sidecarNS, mutate.DefaultOptions()); len(again.Changes) > 0 {
				t.Errorf("mutating again changes %v", again.Changes)
			}
		})
	}
}

// The app container is treated exactly as it is without the annotation.
func TestSidecarLeavesTheAppAsItWas(t *testing.T) {
	with := sidecarPod(nil, nil)
	without := sidecarPod(nil, nil)
	delete(without.Annotations, mutate.AnnotationSidecars)
	without.Spec.Containers = without.Spec.Containers[:1]
	with.Spec.Containers = with.Spec.Containers[:2]
	mutate.Mutate(mutate.ForPod(with), sidecarNS, mutate.DefaultOptions())
	mutate.Mutate(mutate.ForPod(without), sidecarNS, mutate.DefaultOptions())
	if a, b := with.Spec.Containers[0], without.Spec.Containers[0]; secondsOf(a.Lifecycle.PreStop) != secondsOf(b.Lifecycle.PreStop) {
		t.Errorf("app's preStop %v with a sidecar, %v without", a.Lifecycle.PreStop, b.Lifecycle.PreStop)
	}
	if *with.Spec.TerminationGracePeriodSeconds != *without.Spec.TerminationGracePeriodSeconds {
		t.Errorf("grace %d with a sidecar, %d without", *with.Spec.TerminationGracePeriodSeconds, *without.Spec.TerminationGracePeriodSeconds)
	}
}

// A sidecar's wait is graceguard's to add: a Pod that reaches the
// validating webhook without it (the mutating one did not run) is refused
// in enforce mode, as an app container without its sleep is.
func TestSidecarWithoutItsWaitIsNotMutated(t *testing.T) {
	pod := sidecarPod(map[string]string{mutate.AnnotationBudget: "routing=5s work=20s cleanup=2s margin=3s grace=30s"},
		&corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}})
	r := mutate.Validate(mutate.ForPod(pod), sidecarNS, mutate.DefaultOptions())
	if len(r.Violations) != 1 || r.Violations[0].Reason != mutate.DenyNotMutated || r.Violations[0].Err.Field != "spec.containers[1].lifecycle.preStop" {
		t.Fatalf("want not-mutated at the sidecar's preStop, got %v", r.Err())
	}
}

// A native sidecar is stopped by the kubelet after the app: graceguard
// adds nothing to it and says so in its report.
func TestNativeSidecarGetsNothing(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	pod := sidecarPod(nil, nil)
	pod.Spec.InitContainers = []corev1.Container{{Name: "db-proxy", Image: "registry.local/db-proxy:1", RestartPolicy: &always}}
	pod.Spec.Containers = pod.Spec.Containers[:1]
	r := mutate.Mutate(mutate.ForPod(pod), sidecarNS, mutate.DefaultOptions())
	if pod.Spec.InitContainers[0].Lifecycle != nil {
		t.Errorf("native sidecar changed: %+v", pod.Spec.InitContainers[0].Lifecycle)
	}
	if len(r.Sidecars) != 1 || !r.Sidecars[0].Native || r.Sidecars[0].Why == "" {
		t.Errorf("report says %+v, want the native sidecar and why nothing is added", r.Sidecars)
	}
	if slices.ContainsFunc(r.Changes, func(c mutate.Change) bool { return c.Reason == mutate.ChangeSidecarWait }) {
		t.Errorf("changes %v", r.Changes)
	}
}

// With no safety margin the grace would end with the sidecar's wait, and
// the kubelet kills a hook as long as its grace: graceguard counts one
// second for the sidecar's exit, so the Pod it leaves is admitted.
func TestSidecarWithoutMarginStillExits(t *testing.T) {
	pod := sidecarPod(map[string]string{mutate.AnnotationSafetyMargin: "0"}, nil)
	short := int64(10)
	pod.Spec.TerminationGracePeriodSeconds = &short
	r := mutate.Mutate(mutate.ForPod(pod), sidecarNS, mutate.DefaultOptions())
	wait := secondsOf(pod.Spec.Containers[1].Lifecycle.PreStop)
	grace := time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	if wait != 27*time.Second || grace <= wait {
		t.Fatalf("sidecar waits %v in grace %v, want 27s in more (%v)", wait, grace, r.Changes)
	}
	if v := mutate.Validate(mutate.ForPod(pod), sidecarNS, mutate.DefaultOptions()); v.Err() != nil {
		t.Errorf("the mutated Pod is denied: %v", v.Err())
	}
}
