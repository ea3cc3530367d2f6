package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/graceguard/graceguard/internal/fixture"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// Names the harness gives what it creates.
const (
	// kwok manages the nodes with this label.
	kwokNodeLabel = "type"
	kwokNodeValue = "kwok"
	// The stand-in kubelet's inputs (stages.yaml): how long an app drains
	// after SIGTERM, how long a Job's Pod runs.
	annotationDrain = "scale.graceguard.io/drain-seconds"
	annotationRun   = "scale.graceguard.io/run-seconds"
	// Namespaces of the bare Pods' arms, opted in to graceguard or not
	// (the no-policy arm); the burst arms have their own (burstArm).
	nsBare         = "scale-bare"
	nsBareNone     = "scale-bare-no-policy"
	restartedAtKey = "kubectl.kubernetes.io/restartedAt"
)

// Arms.
const (
	ArmGraceguard = "graceguard"
	ArmNone       = "no policy"
	// ArmNative is the native MutatingAdmissionPolicy doing graceguard's
	// injection (test/bench/policy/graceguard-in-cel.yaml).
	ArmNative = "native policy"
)

func workloadNamespace(i int) string { return fmt.Sprintf("scale-%03d", i) }
func emptyNamespace(i int) string    { return fmt.Sprintf("scale-empty-%05d", i) }
func deploymentName(d int) string    { return fmt.Sprintf("web-%02d", d) }

// parallel runs do(i) for i in [0, n) on clients goroutines; it returns
// how many failed and the first error.
func parallel(ctx context.Context, n, clients int, do func(i int) error) (int, error) {
	var (
		failed atomic.Int64
		mu     sync.Mutex
		first  error
		wg     sync.WaitGroup
	)
	jobs := make(chan int)
	for range max(1, clients) {
		wg.Go(func() {
			for i := range jobs {
				if err := do(i); err != nil {
					failed.Add(1)
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return int(failed.Load()), first
}

// node is a simulated node: kwok manages it (its label) and makes it
// Ready; it has room for podsPerNode Pods of the typical size.
func node(i, podsPerNode int) *corev1.Node {
	name := fmt.Sprintf("kwok-%05d", i)
	room := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: *resource.NewQuantity(int64(podsPerNode), resource.DecimalSI),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{kwokNodeLabel: kwokNodeValue, "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
				"kubernetes.io/arch": "amd64", "topology.kubernetes.io/zone": fmt.Sprintf("zone-%c", 'a'+i%3)},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Status: corev1.NodeStatus{Capacity: room, Allocatable: room},
	}
}

// deployment is the d-th Deployment of a workload namespace: Replicas
// typical Pods (fixture.TypicalPod: three containers, env, probes,
// volumes) with graceguard's max-work and the stand-in's drain.
func deployment(o Options, d int) *appsv1.Deployment {
	drain := o.DrainSeconds
	if d < o.SlowDeployments {
		drain = o.SlowDrainSeconds
	}
	p := fixture.TypicalPod()
	labels := map[string]string{"app": deploymentName(d)}
	annotations := p.Annotations
	annotations[mutate.AnnotationMaxWork] = o.MaxWork
	annotations[annotationDrain] = fmt.Sprint(drain)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: deploymentName(d), Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(o.Replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations}, Spec: p.Spec},
		},
	}
}

// job is the fan-out: parallelism Pods at once, each running
// JobRunSeconds.
func job(o Options) *batchv1.Job {
	labels := map[string]string{"app": "fan-out"}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "fan-out", Labels: labels},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To(int32(o.JobParallelism)), Completions: ptr.To(int32(o.JobParallelism)), BackoffLimit: ptr.To(int32(0)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{
					mutate.AnnotationMaxWork: o.MaxWork, annotationRun: fmt.Sprint(o.JobRunSeconds), annotationDrain: fmt.Sprint(o.DrainSeconds)}},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
					Name: "worker", Image: "registry.local/batch/worker:3.2.1", Args: []string{"--shard=$(JOB_COMPLETION_INDEX)"},
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
				}}},
			},
		},
	}
}

// barePod is the typical Pod without an owner, as a client creates it.
func barePod(i int) *corev1.Pod {
	p := fixture.TypicalPod()
	p.GenerateName, p.Name, p.Namespace, p.ManagedFields, p.OwnerReferences = "", fmt.Sprintf("bare-%05d", i), "", nil, nil
	return p
}

// createNodes creates the simulated nodes.
func (c *cluster) createNodes(ctx context.Context, o Options) error {
	_, err := parallel(ctx, o.Nodes, o.Clients, func(i int) error {
		_, err := c.kube.CoreV1().Nodes().Create(ctx, node(i, o.PodsPerNode), metav1.CreateOptions{})
		return err
	})
	return err
}

// untaint removes the taints of the simulated nodes: the API server puts
// node.kubernetes.io/not-ready on a new node, and the node lifecycle
// controller lifts it once the node is Ready; that controller does not run
// (kwok's nodes never fail), so the harness does its part.
func (c *cluster) untaint(ctx context.Context, o Options) error {
	patch := []byte(`{"spec":{"taints":null}}`)
	_, err := parallel(ctx, o.Nodes, o.Clients, func(i int) error {
		_, err := c.kube.CoreV1().Nodes().Patch(ctx, node(i, o.PodsPerNode).Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	return err
}

// readyNodes counts the simulated nodes kwok has made Ready.
func (c *cluster) readyNodes(ctx context.Context) (int, error) {
	list, err := c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwokNodeLabel + "=" + kwokNodeValue})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, nd := range list.Items {
		for _, cond := range nd.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n, nil
}

// createNamespaces creates namespaces, opted in or not.
func (c *cluster) createNamespaces(ctx context.Context, names []string, optedIn bool, clients int) error {
	_, err := parallel(ctx, len(names), clients, func(i int) error { return c.createNamespace(ctx, names[i], optedIn) })
	return err
}

// createDeployments creates every Deployment of the workload namespaces.
func (c *cluster) createDeployments(ctx context.Context, o Options) error {
	_, err := parallel(ctx, o.Deployments(), o.Clients, func(i int) error {
		ns, d := workloadNamespace(i/o.DeploymentsPerNamespace), i%o.DeploymentsPerNamespace
		_, err := c.kube.AppsV1().Deployments(ns).Create(ctx, deployment(o, d), metav1.CreateOptions{})
		return err
	})
	return err
}

// restartDeployment rolls out a new template, as `kubectl rollout
// restart` does.
func (c *cluster) restartDeployment(ctx context.Context, ns, name string, at time.Time) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{restartedAtKey: at.UTC().Format(time.RFC3339)}}}}})
	if err != nil {
		return err
	}
	_, err = c.kube.AppsV1().Deployments(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	return err
}

// deletePods deletes up to n running Pods of a Deployment with the grace
// graceguard gave them; it returns how many it deleted.
func (c *cluster) deletePods(ctx context.Context, ns, name string, n int) (int, error) {
	list, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		return 0, err
	}
	done := 0
	for _, p := range list.Items {
		if done == n {
			break
		}
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		if err := c.kube.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}}); err != nil {
			return done, err
		}
		done++
	}
	return done, nil
}

// rolledOut says whether every Deployment of the workload namespaces runs
// its current template on all its replicas, old ones gone.
func (c *cluster) rolledOut(ctx context.Context, o Options) (bool, error) {
	workload := map[string]bool{}
	for _, ns := range workloadNamespaces(o) {
		workload[ns] = true
	}
	// One list of every Deployment, not one per namespace.
	list, err := c.kube.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, d := range list.Items {
		if !workload[d.Namespace] {
			continue
		}
		want := ptr.Deref(d.Spec.Replicas, 1)
		st := d.Status
		if st.ObservedGeneration < d.Generation || st.UpdatedReplicas != want || st.AvailableReplicas != want || st.Replicas != want {
			return false, nil
		}
	}
	return true, nil
}

var shutdownReports = schema.GroupVersionResource{Group: "graceguard.io", Version: "v1alpha1", Resource: "shutdownreports"}

// reports sums what the observer wrote into the ShutdownReports of the
// workload namespaces (the Deployments the churn shuts down; the burst
// arms' reports are not theirs).
func (c *cluster) reports(ctx context.Context, o Options) (observed, kills, reports int, err error) {
	list, err := c.dyn.Resource(shutdownReports).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, 0, err
	}
	workload := map[string]bool{}
	for _, ns := range workloadNamespaces(o) {
		workload[ns] = true
	}
	for _, it := range list.Items {
		if !workload[it.GetNamespace()] {
			continue
		}
		observed += int(unstructuredInt(it.Object, "status", "observed"))
		kills += int(unstructuredInt(it.Object, "status", "killsObserved"))
	}
	return observed, kills, len(list.Items), nil
}

func unstructuredInt(obj map[string]any, path ...string) int64 {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return 0
		}
		cur = m[p]
	}
	switch v := cur.(type) {
	case int64:
		return v
	case float64:
		return int64(v)
	}
	return 0
}

// stuck describes the Pods of namespaces that do not run, for the error of
// a wait that timed out: how many, and the first one's state.
func (c *cluster) stuck(ctx context.Context, namespaces []string) string {
	n, first := 0, ""
	for _, ns := range namespaces {
		list, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded {
				continue
			}
			n++
			if first == "" {
				first = fmt.Sprintf("%s/%s: phase %q, node %q", p.Namespace, p.Name, p.Status.Phase, p.Spec.NodeName)
				for _, cond := range p.Status.Conditions {
					first += fmt.Sprintf(", %s=%s %s %s", cond.Type, cond.Status, cond.Reason, cond.Message)
				}
			}
		}
	}
	if n == 0 {
		return "every Pod runs"
	}
	return fmt.Sprintf("%d Pods do not run, e.g. %s", n, first)
}
