package scale

import (
	"context"
	"fmt"
	"strconv"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/server"
	"github.com/graceguard/graceguard/test/bench/policy"
	"github.com/graceguard/graceguard/test/harness/proc"
)

// The kinds of burst, in the order each arm runs them.
const (
	BurstJob      = "Job fan-out"
	BurstScaleOut = "Deployment scale-out"
)

// armLabel=armNativeValue binds the native policy to its arm's namespace.
const (
	armLabel       = "scale.graceguard.io/arm"
	armNativeValue = "native-policy"
)

// burstArm is one arm of the creation bursts: a namespace of its own,
// admitted by nothing, by the native policy, or by graceguard with a
// number of webhook replicas behind the Service.
type burstArm struct {
	name     string
	replicas int
}

func (a burstArm) graceguard() bool { return a.name == ArmGraceguard }

// namespace is the arm's namespace: opted in to graceguard for its arms,
// labelled for the native policy's binding for that one.
func (a burstArm) namespace() string {
	switch a.name {
	case ArmNone:
		return "scale-burst-no-policy"
	case ArmNative:
		return "scale-burst-native-policy"
	}
	return "scale-burst-graceguard-" + strconv.Itoa(a.replicas)
}

// burstArms are the arms in the order they run: the two without a
// webhook first, then graceguard with each number of replicas.
func (o Options) burstArms() []burstArm {
	arms := []burstArm{{name: ArmNone}, {name: ArmNative}}
	for _, n := range o.BurstReplicas {
		arms = append(arms, burstArm{name: ArmGraceguard, replicas: n})
	}
	return arms
}

// bursts runs every arm: its namespace, then a Job fan-out and a
// Deployment scale-out, each measured on its own; then it deletes what
// the arm made and waits until it is gone, so that every arm meets the
// same cluster. The chart's replicas serve again afterwards.
func (rn *runner) bursts(ctx context.Context) error {
	o, c := rn.o, rn.c
	if o.JobParallelism == 0 && o.ScaleOut == 0 {
		return nil
	}
	if err := policy.Install(ctx, c.kube, policy.TwoMutations, func(b *admissionregv1.MutatingAdmissionPolicyBinding) {
		b.Spec.MatchResources.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{armLabel: armNativeValue}}
	}); err != nil {
		return err
	}
	defer c.routeTo(rn.r.Chart.WebhookReplicas)
	for _, a := range o.burstArms() {
		name := fmt.Sprintf("burst (%s): Job of %d Pods, Deployment scaled out to %d", a.label(), o.JobParallelism, o.ScaleOut)
		if err := rn.phase(name, func() (int, error) {
			return o.JobParallelism + o.ScaleOut, rn.burst(ctx, a)
		}); err != nil {
			return err
		}
	}
	return nil
}

// label names an arm in tables and logs.
func (a burstArm) label() string {
	if a.graceguard() {
		return fmt.Sprintf("%s, %d replicas", a.name, a.replicas)
	}
	return a.name
}

// routeTo sends the API server's new connections to the first n webhook
// replicas and closes the open ones, so that the next calls spread over
// those n as they would after a rollout of n replicas.
func (c *cluster) routeTo(n int) {
	c.Balancer.SetBackends(c.ReplicaAddrs[:min(n, len(c.ReplicaAddrs))]...)
	c.Balancer.CloseConnections()
}

// burst runs one arm.
func (rn *runner) burst(ctx context.Context, a burstArm) error {
	o, c, w := rn.o, rn.c, rn.w
	ns := a.namespace()
	labels := map[string]string{}
	switch a.name {
	case ArmGraceguard:
		labels[mutate.LabelInject] = mutate.LabelInjectEnabled
		c.routeTo(a.replicas)
	case ArmNative:
		labels[armLabel] = armNativeValue
	}
	if _, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// Wait until the arm's admission works: the policy's binding is
	// loaded, graceguard's replicas know the namespace.
	if a.name != ArmNone {
		if err := c.waitMutated(ctx, ns, o.Timeout); err != nil {
			return fmt.Errorf("%s: %w", a.label(), err)
		}
	}
	// The scale-out's Deployment exists at 0 replicas before the clock
	// starts, as a workload an autoscaler scales from zero.
	d := scaleOutDeployment(o)
	if _, err := c.kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return err
	}
	c.Balancer.ResetStats()
	res := BurstArm{Arm: a.name, Replicas: a.replicas, Namespace: ns}
	gg0, err := c.scrapeWebhooks(ctx)
	if err != nil {
		return err
	}
	if o.JobParallelism > 0 {
		bw, err := rn.measureBurst(ctx, BurstJob, ns, o.JobParallelism, func() error {
			_, err := c.kube.BatchV1().Jobs(ns).Create(ctx, job(o), metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return err
		}
		res.Workloads = append(res.Workloads, *bw)
	}
	if o.ScaleOut > 0 {
		bw, err := rn.measureBurst(ctx, BurstScaleOut, ns, o.ScaleOut, func() error {
			_, err := c.kube.AppsV1().Deployments(ns).UpdateScale(ctx, d.Name, &autoscalingv1.Scale{
				ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: int32(o.ScaleOut)}}, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return err
		}
		res.Workloads = append(res.Workloads, *bw)
	}
	if a.graceguard() {
		gg1, err := c.scrapeWebhooks(ctx)
		if err != nil {
			return err
		}
		res.Connections = connectionCounters(gg0, gg1)
		backends, failed := c.Balancer.Stats()
		for _, addr := range c.ReplicaAddrs[:a.replicas] {
			for _, b := range backends {
				if b.Addr == addr {
					res.Backends = append(res.Backends, b)
				}
			}
		}
		res.BalancerFailed = failed
	}
	rn.r.Admission.Bursts = append(rn.r.Admission.Bursts, res)
	for _, bw := range res.Workloads {
		p50, _ := bw.Create.Quantile(0.5)
		p99, _ := bw.Create.Quantile(0.99)
		rn.logf("%s, %s: %d Pods created in %.1f s, running in %.1f s; create p50 %.0f ms, p99 %.0f ms; %.0f shed, %.0f failed open, %.0f rejected; API server %.2f ms CPU per Pod",
			a.label(), bw.Kind, bw.Pods, bw.CreatedSeconds, bw.RunningSeconds, 1000*p50, 1000*p99, bw.Shed, bw.FailOpen, bw.Rejected, bw.APIServerCPUMsPerPod())
	}
	// Clean up: what the arm made goes, so that the next arm meets the
	// same cluster.
	bg := metav1.DeletePropagationBackground
	if err := c.kube.BatchV1().Jobs(ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, metav1.ListOptions{}); err != nil {
		return err
	}
	if err := c.kube.AppsV1().Deployments(ns).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, metav1.ListOptions{}); err != nil {
		return err
	}
	_, err = w.waitFor(ctx, o.Timeout, a.label()+": the arm's Pods gone", func(n counts) bool { return n.all[ns] == 0 }, c.exited)
	return err
}

// measureBurst starts a workload of n Pods in ns (do) and waits until all
// are created, then running (or done); it measures the API server and
// graceguard over that time.
func (rn *runner) measureBurst(ctx context.Context, kind, ns string, n int, do func() error) (*BurstWorkload, error) {
	c, w, o := rn.c, rn.w, rn.o
	base := w.snapshot().all[ns]
	api0, err := scrapeAPIServer(ctx, c.kube)
	if err != nil {
		return nil, err
	}
	gg0, err := c.scrapeWebhooks(ctx)
	if err != nil {
		return nil, err
	}
	cpu0 := proc.CPUTimes(rn.pids)
	t0 := time.Now()
	if err := do(); err != nil {
		return nil, err
	}
	bw := &BurstWorkload{Kind: kind, Pods: n}
	if _, err := w.waitFor(ctx, o.Timeout, kind+": Pods created", func(s counts) bool { return s.all[ns] >= base+n }, c.exited); err != nil {
		return nil, err
	}
	bw.CreatedSeconds = time.Since(t0).Seconds()
	if _, err := w.waitFor(ctx, o.Timeout, kind+": Pods running", func(s counts) bool { return s.running[ns]+s.succeeded[ns] >= base+n }, c.exited); err != nil {
		return nil, fmt.Errorf("%w: %s", err, c.stuck(ctx, []string{ns}))
	}
	bw.RunningSeconds = time.Since(t0).Seconds()
	cpu1 := proc.CPUTimes(rn.pids)
	api1, err := scrapeAPIServer(ctx, c.kube)
	if err != nil {
		return nil, err
	}
	gg1, err := c.scrapeWebhooks(ctx)
	if err != nil {
		return nil, err
	}
	post := map[string]string{"verb": "POST", "resource": "pods", "subresource": ""}
	bw.Create = api1.histogram("apiserver_request_duration_seconds", post).Sub(api0.histogram("apiserver_request_duration_seconds", post))
	bw.Codes = deltaMap(api1.by("apiserver_request_total", post, "code"), api0.by("apiserver_request_total", post, "code"))
	bw.Webhooks = rn.webhookLatencies(api0, api1)
	over := map[string]string{"reason": "overloaded"}
	const decisions = "graceguard_admission_decisions_total"
	bw.Shed = gg1.sum(decisions, over) - gg0.sum(decisions, over)
	for _, name := range rn.webhookNames() {
		want := map[string]string{"name": name}
		bw.FailOpen += api1.sum("apiserver_admission_webhook_fail_open_count", want) - api0.sum("apiserver_admission_webhook_fail_open_count", want)
		bw.Rejected += api1.sum("apiserver_admission_webhook_rejection_count", want) - api0.sum("apiserver_admission_webhook_rejection_count", want)
	}
	bw.APIServerCPUSeconds = (cpu1[procAPIServer] - cpu0[procAPIServer]).Seconds()
	bw.EtcdCPUSeconds = (cpu1[procEtcd] - cpu0[procEtcd]).Seconds()
	for _, name := range rn.webhookProcs() {
		bw.WebhookCPUSeconds += (cpu1[name] - cpu0[name]).Seconds()
	}
	return bw, nil
}

// connectionCounters are graceguard's connection counters between two
// scrapes of every replica: refused, aborted handshakes, and evictions by
// the state of the connection evicted, every state's even when zero (a
// burst that evicts none says so).
func connectionCounters(before, after exposition) map[string]float64 {
	out := map[string]float64{}
	for key, family := range map[string]string{"refused": server.ConnectionsRefusedName, "TLS handshakes aborted": server.HandshakesAbortedName} {
		out[key] = after.sum(family, nil) - before.sum(family, nil)
	}
	evicted := deltaMap(after.by(server.ConnectionsEvictedName, nil, "state"), before.by(server.ConnectionsEvictedName, nil, "state"))
	for _, state := range []string{"pending", "idle", "queued"} {
		out["evicted while "+state] = evicted[state]
	}
	for state, v := range evicted {
		out["evicted while "+state] = v
	}
	return out
}

// scaleOutDeployment is the Deployment each arm scales out: the typical
// Pod, as the workloads run it, at 0 replicas.
func scaleOutDeployment(o Options) *appsv1.Deployment {
	d := deployment(o, o.SlowDeployments) // a Deployment that drains in time
	d.Name = "scale-out"
	d.Labels = map[string]string{"app": d.Name}
	d.Spec.Selector.MatchLabels = d.Labels
	d.Spec.Template.Labels = d.Labels
	d.Spec.Replicas = ptr.To(int32(0))
	return d
}

// waitMutated waits until a Pod created (dry-run) in ns comes back with
// graceguard's budget record, whoever wrote it.
func (c *cluster) waitMutated(ctx context.Context, ns string, timeout time.Duration) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.local/probe:1"}}}}
	deadline := time.Now().Add(timeout)
	var last error
	// Several in a row: each connection may reach another replica.
	for ok := 0; time.Now().Before(deadline); {
		got, err := c.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil && got.Annotations[mutate.AnnotationBudget] != "" {
			if ok++; ok == 5 {
				return nil
			}
			continue
		}
		ok, last = 0, err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("Pods in %s were not mutated within %s (last error: %v)", ns, timeout, last)
}
