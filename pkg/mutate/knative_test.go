package mutate_test

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// knativePod is a Revision's Pod as Knative v1.23 builds it: the app with
// Knative's /wait-for-drain preStop, and queue-proxy naming the Revision.
func knativePod(label, envRevision, timeout string, ann map[string]string) *corev1.Pod {
	grace := int64(300)
	labels := map[string]string{}
	if label != "" {
		labels[mutate.LabelKnativeRevision] = label
	}
	env := []corev1.EnvVar{{Name: "SERVING_NAMESPACE", Value: "shop"}}
	if envRevision != "" {
		env = append(env, corev1.EnvVar{Name: "SERVING_REVISION", Value: envRevision})
	}
	if timeout != "" {
		env = append(env, corev1.EnvVar{Name: "REVISION_TIMEOUT_SECONDS", Value: timeout})
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "hello-00001-deployment-", Namespace: "shop", Labels: labels, Annotations: ann},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{
			{Name: "user-container", Image: "registry.local/app:1", Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
				Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/wait-for-drain", Port: intstr.FromInt32(8022)}}}},
			{Name: mutate.ContainerKnativeQueueProxy, Image: "registry.local/queue:1", Env: env,
				Ports: []corev1.ContainerPort{{Name: "http1", ContainerPort: 8012}}},
		}},
	}
}

// Knative's queue-proxy is recognised by its name and by Knative's own
// marks together (the Revision label, its SERVING_REVISION): recognised,
// it gets no hook (a preStop there would make Knative's /wait-for-drain
// give up at once) and the app's hook counts as routing + 30 s; a
// container of the app's own called queue-proxy is an app container.
func TestKnativeQueueProxy(t *testing.T) {
	for _, tc := range []struct {
		name              string
		label, envRev     string
		knative           bool
		routing           time.Duration
		routingAnnotation string
	}{
		{"label and SERVING_REVISION agree: Knative's", "hello-00001", "hello-00001", true, 35 * time.Second, ""},
		{"the routing delay is added to Knative's 30s drain", "hello-00001", "hello-00001", true, 38 * time.Second, "8s"},
		{"no Revision label: the app's own queue-proxy", "", "hello-00001", false, 5 * time.Second, ""},
		{"no SERVING_REVISION: the app's own queue-proxy", "hello-00001", "", false, 5 * time.Second, ""},
		{"SERVING_REVISION names another Revision", "hello-00001", "hello-00002", false, 5 * time.Second, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ann := map[string]string{}
			if tc.routingAnnotation != "" {
				ann[mutate.AnnotationRoutingDelay] = tc.routingAnnotation
			}
			pod := knativePod(tc.label, tc.envRev, "300", ann)
			r := mutate.Mutate(mutate.ForPod(pod), sidecarNS, mutate.DefaultOptions())
			if len(r.Violations) > 0 {
				t.Fatalf("violations: %v", r.Violations)
			}
			qp := pod.Spec.Containers[1]
			hooked := qp.Lifecycle != nil && qp.Lifecycle.PreStop != nil
			if hooked == tc.knative {
				t.Errorf("queue-proxy has a preStop: %v, want %v (Knative's: %v)", hooked, !tc.knative, tc.knative)
			}
			if r.Budget.Routing != tc.routing {
				t.Errorf("routing term %v, want %v", r.Budget.Routing, tc.routing)
			}
			i := slices.IndexFunc(r.Sidecars, func(s mutate.SidecarReport) bool { return s.Name == mutate.ContainerKnativeQueueProxy })
			if (i >= 0) != tc.knative {
				t.Fatalf("queue-proxy reported as a sidecar: %v, want %v (%+v)", i >= 0, tc.knative, r.Sidecars)
			}
			if tc.knative && (r.Sidecars[i].Added || r.Sidecars[i].Key != mutate.LabelKnativeRevision) {
				t.Errorf("sidecar report %+v: want nothing added, found by %s", r.Sidecars[i], mutate.LabelKnativeRevision)
			}
			// The mutated Pod is admitted by the validating webhook: no
			// queue-proxy is missing graceguard's hook.
			if v := mutate.Validate(mutate.ForPod(pod), sidecarNS, mutate.DefaultOptions()); v.Denied() {
				t.Errorf("mutated Pod denied: %v", v.Violations)
			}
		})
	}
}

// The budget counts Knative's drain only for Knative's hook: an httpGet
// of another port or path on a Knative Pod is of unknown length, as
// anywhere.
func TestKnativeDrainHookOnly(t *testing.T) {
	pod := knativePod("hello-00001", "hello-00001", "300", nil)
	pod.Spec.Containers[0].Lifecycle.PreStop.HTTPGet.Port = intstr.FromInt32(8080)
	r := mutate.Mutate(mutate.ForPod(pod), sidecarNS, mutate.DefaultOptions())
	if r.Budget.Routing != 5*time.Second {
		t.Errorf("routing term %v for an httpGet of the app's port, want the routing delay 5s", r.Budget.Routing)
	}
	if !slices.ContainsFunc(r.Warnings, func(f mutate.Finding) bool { return f.Reason == mutate.WarnHookUnknownLength }) {
		t.Errorf("no %s warning for the app's own httpGet hook: %v", mutate.WarnHookUnknownLength, r.Warnings)
	}
}

// The warning knative-timeout-over-work fires where the work term is an
// assumption (the cluster's default) shorter than what Knative admits,
// and only there.
func TestKnativeTimeoutWarning(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout string
		podAnn  map[string]string
		nsAnn   map[string]string
		warn    bool
	}{
		{"default work 20s, timeoutSeconds 300: warned", "300", nil, nil, true},
		{"timeoutSeconds equal to the work term: nothing", "20", nil, nil, false},
		{"timeoutSeconds shorter: nothing", "10", nil, nil, false},
		{"work set on the Pod: the team's word", "300", map[string]string{mutate.AnnotationMaxWork: "30s"}, nil, false},
		{"work set on the namespace: the team's word", "300", nil, map[string]string{mutate.AnnotationMaxWork: "30s"}, false},
		{"no REVISION_TIMEOUT_SECONDS: nothing to compare", "", nil, nil, false},
		{"a REVISION_TIMEOUT_SECONDS that is no number: nothing to compare", "5m", nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := sidecarNS
			ns.Annotations = tc.nsAnn
			pod := knativePod("hello-00001", "hello-00001", tc.timeout, tc.podAnn)
			r := mutate.Mutate(mutate.ForPod(pod), ns, mutate.DefaultOptions())
			if len(r.Violations) > 0 {
				t.Fatalf("violations: %v", r.Violations)
			}
			got := slices.ContainsFunc(r.Warnings, func(f mutate.Finding) bool { return f.Reason == mutate.WarnKnativeTimeout })
			if got != tc.warn {
				t.Errorf("%s warned: %v, want %v (warnings %v)", mutate.WarnKnativeTimeout, got, tc.warn, r.Warnings)
			}
			if slices.ContainsFunc(r.Warnings, func(f mutate.Finding) bool { return f.Reason == mutate.WarnNoReadiness }) {
				t.Errorf("advised a readiness probe on a Knative app, which queue-proxy probes: %v", r.Warnings)
			}
		})
	}
}
