package mutate

import (
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/graceguard/graceguard/pkg/budget"
)

// Knative Serving builds every Revision's Pod with a queue-proxy container
// in front of the app, and drives that Pod's shutdown itself. From
// knative/serving at knative-v1.23.0:
//
//   - queue-proxy has no preStop. At deletion it gets SIGTERM, fails its
//     readiness probe, and waits until 30 s pass without a request
//     (drainSleepDuration, pkg/queue/sharedmain/main.go; every request
//     restarts the wait: Drainer.Drain in knative.dev/pkg
//     network/handlers/drain.go). Then it waits for the requests in
//     flight and exits.
//   - Every app container gets a preStop httpGet of queue-proxy's
//     /wait-for-drain on the admin port 8022 (userLifecycle,
//     pkg/reconciler/revision/resources/deploy.go). It returns when that
//     wait is over, so the app gets SIGTERM after the drain.
//   - terminationGracePeriodSeconds is the Revision's timeoutSeconds
//     (BuildPodSpec, same file), which queue-proxy also reads as
//     REVISION_TIMEOUT_SECONDS: the longest a request may run.
//
// So queue-proxy is a sidecar that outlives the app by Knative's design,
// and graceguard adds nothing to it. A preStop sleep there would break the
// drain: /wait-for-drain gives up when queue-proxy has no SIGTERM within
// 1 s (adminHandler, pkg/queue/sharedmain/handlers.go), so the app would
// get SIGTERM after 1 s while queue-proxy, ready again, still sends it
// requests. The app's
// own hook is counted as what it lasts: until the last request arrives
// (the routing delay) and 30 s more.

const (
	// ContainerKnativeQueueProxy is the name Knative gives its proxy
	// (QueueContainerName, pkg/reconciler/revision/resources/constants.go).
	ContainerKnativeQueueProxy = "queue-proxy"
	// LabelKnativeRevision names a Pod's Revision (serving.RevisionLabelKey).
	LabelKnativeRevision = "serving.knative.dev/revision"
	// KnativeDrainQuiet is how long queue-proxy drains after the last
	// request (drainSleepDuration).
	KnativeDrainQuiet = 30 * time.Second

	// envKnativeRevision is queue-proxy's copy of its Revision's name;
	// envKnativeTimeout the Revision's timeoutSeconds.
	envKnativeRevision = "SERVING_REVISION"
	envKnativeTimeout  = "REVISION_TIMEOUT_SECONDS"
	// knativeDrainPath and knativeAdminPort are the app's preStop
	// (queue.RequestQueueDrainPath, networking.QueueAdminPort).
	knativeDrainPath = "/wait-for-drain"
	knativeAdminPort = 8022
)

// KnativeEnv are the environment variables of queue-proxy graceguard reads.
var KnativeEnv = []string{envKnativeRevision, envKnativeTimeout}

// knativeRevision is what graceguard read of a Knative Pod.
type knativeRevision struct {
	qp container
	// timeout is REVISION_TIMEOUT_SECONDS; ok is false when it is absent
	// or no whole number of seconds (Knative writes one).
	timeout time.Duration
	ok      bool
}

// knativeOf finds Knative's queue-proxy in t: a regular container of that
// name whose SERVING_REVISION is the Pod's serving.knative.dev/revision
// label. Both are Knative's, so a container of the app's own that is
// called queue-proxy is not taken for it.
func knativeOf(t Target) *knativeRevision {
	rev := t.Meta.Labels[LabelKnativeRevision]
	if rev == "" {
		return nil
	}
	for i := range t.Spec.Containers {
		c := &t.Spec.Containers[i]
		if c.Name != ContainerKnativeQueueProxy || envValue(c, envKnativeRevision) != rev {
			continue
		}
		k := &knativeRevision{qp: t.container(i)}
		if n, err := strconv.ParseInt(envValue(c, envKnativeTimeout), 10, 64); err == nil && n > 0 {
			k.timeout, k.ok = secs(n), true
		}
		return k
	}
	return nil
}

// envValue is the value of c's last entry called name (the kubelet uses the
// last), or "".
func envValue(c *corev1.Container, name string) string {
	v := ""
	for _, e := range c.Env {
		if e.Name == name {
			v = e.Value
		}
	}
	return v
}

// is reports whether name is the queue-proxy of a Knative Pod.
func (k *knativeRevision) is(name string) bool {
	return k != nil && name == ContainerKnativeQueueProxy
}

// isKnativeDrain reports whether h is Knative's preStop on an app container.
func isKnativeDrain(h *corev1.LifecycleHandler) bool {
	return h != nil && h.HTTPGet != nil && h.HTTPGet.Path == knativeDrainPath &&
		h.HTTPGet.Port == intstr.FromInt32(knativeAdminPort)
}

// hookOf is how long container c's preStop lasts, as the budget counts it:
// on a Knative Pod, Knative's drain hook lasts the routing delay and 30 s
// more; any other hook as preStopLength reads it.
func (s Settings) hookOf(c container) hookLength {
	var h *corev1.LifecycleHandler
	if c.c.Lifecycle != nil {
		h = c.c.Lifecycle.PreStop
	}
	if s.knative != nil && isKnativeDrain(h) {
		return hookLength{D: s.Budget.Routing + KnativeDrainQuiet, Known: true,
			Desc: "Knative's drain: routing " + budget.Format(s.Budget.Routing) + " + " + budget.Format(KnativeDrainQuiet) + " without requests"}
	}
	return preStopLength(h)
}

// knativeSidecar is Knative's queue-proxy, as a sidecar: found by knativeOf,
// stopped by Knative.
type knativeSidecar struct{}

func (knativeSidecar) check(Target, Settings, paths) []Finding { return nil }

func (knativeSidecar) detect(_ Target, s Settings) []container {
	if s.knative == nil {
		return nil
	}
	return []container{s.knative.qp}
}

func (knativeSidecar) plan(c container, app appShutdown, _ Settings) sidecarPlan {
	return sidecarPlan{c: c, report: SidecarReport{Name: c.c.Name, Key: LabelKnativeRevision, NeedWait: app.need, WaitKnown: true,
		Why: "Knative's: SIGTERM at deletion, drains until 30s pass without a request, then the requests in flight; graceguard adds nothing"}}
}

// adviseKnative warns where the work term is the cluster's default and
// Knative lets a request run longer (the Revision's timeoutSeconds): the
// budget then does not cover the requests Knative admits. A work term the
// Pod or its namespace set is the team's word and not second-guessed.
func adviseKnative(s Settings, p paths, b budget.Budget, r *Report) {
	k := s.knative
	if k == nil || !k.ok || s.Sources[budget.Work] != FromCluster || k.timeout <= b.Work {
		return
	}
	r.warn(WarnKnativeTimeout, p.pod.Key(AnnotationMaxWork), budget.Format(b.Work),
		"default %s < Knative's timeoutSeconds %s: set yours", budget.Format(b.Work), budget.Format(k.timeout))
}

// knativeNamed are the names of list that are a Knative Pod's queue-proxy.
func (k *knativeRevision) named(list []string) []string {
	var out []string
	for _, n := range list {
		if k.is(n) {
			out = append(out, n)
		}
	}
	return out
}

// knativeProxyNamed warns that key names Knative's queue-proxy, which
// graceguard leaves to Knative.
func knativeProxyNamed(k *knativeRevision, key string, list []string, p paths, r *Report) {
	if len(k.named(list)) == 0 {
		return
	}
	r.warn(WarnMeshProxyNamed, p.pod.Key(key), clip(strings.Join(list, ",")),
		"%q: Knative stops it after the app; remove it", ContainerKnativeQueueProxy)
}
