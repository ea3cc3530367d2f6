package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/graceguard/graceguard/internal/fixture"
	"github.com/graceguard/graceguard/internal/freeport"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/test/harness/apiserver"
	"github.com/graceguard/graceguard/test/harness/proc"
	"github.com/graceguard/graceguard/test/harness/promscrape"
)

// Namespaces of the observer phase.
const (
	nsObserved   = "bench-observed"   // opted in: its Pods are treated and labelled
	nsUnobserved = "bench-unobserved" // not opted in: its Pods are never treated
)

// obsFlush is the observer's --flush-interval in the benchmark.
const obsFlush = 2 * time.Second

// observerPhase measures graceguard's observer (the real `webhook observe`
// process) beside the obvious baseline, a default controller-runtime cache
// of every Pod (test/bench/podcache), in a cluster holding untreated Pods
// and then treated ones, and while treated Pods go away at a fixed rate,
// each through a deletion as the kubelet makes it (graceful delete, final
// status, delete with grace 0) and replaced by a new one.
func (r *Results) observerPhase(ctx context.Context, o Options, c *cluster, webhookBin, dir string, logf func(string, ...any)) error {
	run := &ObserverRun{TreatedPods: o.ObserverPods, UntreatedPods: o.ObserverUntreated, Workloads: o.ObserverWorkloads,
		FlushSeconds: obsFlush.Seconds(), Clients: o.ObserverClients}
	r.Observer = run
	podcacheBin := filepath.Join(dir, "podcache")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", podcacheBin, "./bench/podcache")
	build.Dir, build.Env = filepath.Join(o.Root, "test"), append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building test/bench/podcache: %v\n%s", err, out)
	}
	for _, ns := range []struct {
		name string
		in   bool
	}{{nsObserved, true}, {nsUnobserved, false}} {
		if err := c.createNamespace(ctx, ns.name, ns.in); err != nil {
			return err
		}
	}

	logf("observer: creating %d untreated Pods in %s", o.ObserverUntreated, nsUnobserved)
	t0 := time.Now()
	if _, err := c.fixturePods(ctx, nsUnobserved, "u", 0, o.ObserverUntreated, o.ObserverClients, nil); err != nil {
		return err
	}
	run.UntreatedCreateSeconds = time.Since(t0).Seconds()

	kubeconfig, err := c.userKubeconfig(dir, "observer")
	if err != nil {
		return err
	}
	ports := make([]int, 3)
	for i := range ports {
		if ports[i], err = freeport.Get(); err != nil {
			return err
		}
	}
	obsMetrics := "http://127.0.0.1:" + strconv.Itoa(ports[0]) + "/metrics"
	allMetrics := "http://127.0.0.1:" + strconv.Itoa(ports[2]) + "/metrics"
	obs, err := apiserver.StartProcess("graceguard observer", filepath.Join(dir, "observer.log"), webhookBin, "observe",
		"--kubeconfig="+kubeconfig, "--leader-elect=false", "--flush-interval="+obsFlush.String(),
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(ports[0]), "--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(ports[1]))
	if err != nil {
		return err
	}
	defer func() { _ = obs.Stop() }()
	all, err := apiserver.StartProcess("all-Pods cache", filepath.Join(dir, "podcache.log"), podcacheBin,
		"--kubeconfig="+kubeconfig, "--metrics-bind-address=127.0.0.1:"+strconv.Itoa(ports[2]))
	if err != nil {
		return err
	}
	defer func() { _ = all.Stop() }()

	step := func(name string, wantObserved, wantAll int) error {
		s := ObserverStep{Name: name}
		for _, x := range []struct {
			p       *apiserver.Process
			url     string
			gauge   string
			want    int
			dst     *ProcMemory
			subject string
		}{{obs, obsMetrics, "graceguard_observer_pods", wantObserved, &s.Observer, "observer"}, {all, allMetrics, "bench_cached_pods", wantAll, &s.AllPods, "all-Pods cache"}} {
			var m map[string]float64
			deadline := time.Now().Add(3 * time.Minute)
			for {
				if err := x.p.Exited(); err != nil {
					return err
				}
				m, err = scrape(ctx, x.url)
				if err == nil && int(m[x.gauge]) == x.want {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("%s: the %s caches %v Pods, want %d (%v)", name, x.subject, m[x.gauge], x.want, err)
				}
				time.Sleep(500 * time.Millisecond)
			}
			// Let the informer's list settle into the steady state.
			time.Sleep(2 * time.Second)
			mem, err := proc.ReadMemory(x.p.PID())
			if err != nil {
				return err
			}
			m, err = scrape(ctx, x.url)
			if err != nil {
				return err
			}
			*x.dst = ProcMemory{CachedPods: int(m[x.gauge]), RSSMiB: proc.MiB(mem.RSS), HeapInuseMiB: m["go_memstats_heap_inuse_bytes"] / (1 << 20)}
		}
		run.Steps = append(run.Steps, s)
		logf("observer: %-40s observer caches %5d Pods, RSS %6.1f MiB, heap %6.1f MiB | all-Pods cache %5d Pods, RSS %6.1f MiB, heap %6.1f MiB",
			name, s.Observer.CachedPods, s.Observer.RSSMiB, s.Observer.HeapInuseMiB, s.AllPods.CachedPods, s.AllPods.RSSMiB, s.AllPods.HeapInuseMiB)
		return nil
	}
	if err := step(fmt.Sprintf("started, %d untreated Pods", o.ObserverUntreated), 0, o.ObserverUntreated); err != nil {
		return err
	}

	logf("observer: creating %d Deployments with a ReplicaSet each, and %d treated Pods in %s", o.ObserverWorkloads, o.ObserverPods, nsObserved)
	owners, err := c.workloads(ctx, nsObserved, o.ObserverWorkloads)
	if err != nil {
		return err
	}
	t0 = time.Now()
	live, err := c.fixturePods(ctx, nsObserved, "t", 0, o.ObserverPods, o.ObserverClients, owners)
	if err != nil {
		return err
	}
	run.TreatedCreateSeconds = time.Since(t0).Seconds()
	if err := step(fmt.Sprintf("%d treated Pods too", o.ObserverPods), o.ObserverPods, o.ObserverPods+o.ObserverUntreated); err != nil {
		return err
	}

	logf("observer: deleting treated Pods at %d/s for %s, each replaced", o.ObserverRate, o.ObserverChurn)
	ch, err := c.churn(ctx, o, live, owners, []*apiserver.Process{obs, all})
	if err != nil {
		return err
	}
	run.Churn = ch
	// Every deletion must end up in a report.
	dyn, err := dynamic.NewForConfig(c.rest)
	if err != nil {
		return err
	}
	t0 = time.Now()
	for {
		ch.Recorded, ch.Reports, ch.Kills, err = recorded(ctx, dyn)
		if err != nil {
			return err
		}
		if ch.Recorded >= int64(ch.Deletions) || time.Since(t0) > time.Minute {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	ch.RecordedAfterSeconds = time.Since(t0).Seconds()
	logf("observer: %d deletions in %.1f s (%.1f/s, %d errors); observer %.2f cores (%.2f ms CPU per deletion), peak RSS %.1f MiB; all-Pods cache %.2f cores, peak RSS %.1f MiB; %d recorded in %d reports %.1f s after the churn",
		ch.Deletions, ch.Seconds, ch.Rate, ch.Errors, ch.Observer.Cores, ch.Observer.CPUMsPerDeletion, ch.Observer.PeakRSSMiB,
		ch.AllPods.Cores, ch.AllPods.PeakRSSMiB, ch.Recorded, ch.Reports, ch.RecordedAfterSeconds)
	return step("after the deletions", o.ObserverPods, o.ObserverPods+o.ObserverUntreated)
}

// userKubeconfig writes a kubeconfig for a user of its own.
func (c *cluster) userKubeconfig(dir, name string) (string, error) {
	user, err := c.Env.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name+".kubeconfig")
	return path, os.WriteFile(path, kc, 0o600)
}

// owner is a ReplicaSet of a Deployment, for the treated Pods.
type rsOwner struct {
	ref  metav1.OwnerReference
	hash string
}

// workloads creates n Deployments, each with a ReplicaSet it controls (no
// controller runs in envtest: these only give the Pods their owners).
func (c *cluster) workloads(ctx context.Context, ns string, n int) ([]rsOwner, error) {
	var out []rsOwner
	for i := range n {
		name := fmt.Sprintf("web-%03d", i)
		hash := fmt.Sprintf("%09x", 0x7d9f8c6b5+i)
		labels := map[string]string{"app": name}
		tpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1"}}}}
		d, err := c.kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tpl}}, metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		rsLabels := map[string]string{"app": name, "pod-template-hash": hash}
		tpl.Labels = rsLabels
		rs, err := c.kube.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + hash, Labels: rsLabels, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: d.UID, Controller: ptr.To(true)}}},
			Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: rsLabels}, Template: tpl},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		out = append(out, rsOwner{ref: metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}, hash: hash})
	}
	return out, nil
}

// livePod is a Pod the churn may delete.
type livePod struct {
	name string
	uid  types.UID
}

// fixturePods creates n typical Pods (fixture.TypicalPod) named
// prefix-<from+i> with clients concurrent clients, bound to a node and
// running (their status as the kubelet reports it), owned round-robin by
// owners (none when nil).
func (c *cluster) fixturePods(ctx context.Context, ns, prefix string, from, n, clients int, owners []rsOwner) ([]livePod, error) {
	var (
		mu    sync.Mutex
		out   []livePod
		first error
		wg    sync.WaitGroup
	)
	jobs := make(chan int)
	for range clients {
		wg.Go(func() {
			for i := range jobs {
				p, err := c.runningPod(ctx, ns, fmt.Sprintf("%s-%05d", prefix, i), i, owners)
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				if err == nil {
					out = append(out, p)
				}
				mu.Unlock()
			}
		})
	}
	for i := from; i < from+n; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return out, first
}

func (c *cluster) runningPod(ctx context.Context, ns, name string, i int, owners []rsOwner) (livePod, error) {
	p := fixture.TypicalPod()
	p.GenerateName, p.Name, p.Namespace, p.ManagedFields = "", name, ns, nil
	p.Spec.NodeName = "node-1"
	p.OwnerReferences = nil
	if len(owners) > 0 {
		o := owners[i%len(owners)]
		p.OwnerReferences = []metav1.OwnerReference{o.ref}
		p.Labels["pod-template-hash"] = o.hash
	}
	got, err := c.kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		return livePod{}, err
	}
	if ns == nsObserved && got.Labels[mutate.LabelTreated] != mutate.LabelTreatedValue {
		return livePod{}, fmt.Errorf("Pod %s/%s was not treated (labels %v)", ns, name, got.Labels)
	}
	// The kubelet's report of a running Pod.
	started := metav1.Now()
	st := corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.%d.%d.%d", 64+i/65536%64, i/256%256, i%256), HostIP: "192.168.0.10",
		StartTime: &started, QOSClass: corev1.PodQOSBurstable}
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: started})
	}
	for _, ctr := range got.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{Name: ctr.Name, Image: ctr.Image, ImageID: ctr.Image + "@sha256:0123",
			ContainerID: "containerd://" + fmt.Sprintf("%064x", i), Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}})
	}
	got.Status = st
	if _, err := c.kube.CoreV1().Pods(ns).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		return livePod{}, err
	}
	return livePod{name: got.Name, uid: got.UID}, nil
}

// churn deletes treated Pods at o.ObserverRate for o.ObserverChurn, the
// oldest first, as the kubelet does: a graceful delete, the final status
// (every container exited 0, 7 s after the delete), the delete with grace
// 0; each is replaced by a new treated Pod so the count stays. It measures
// the CPU time and peak RSS of procs over that time.
func (c *cluster) churn(ctx context.Context, o Options, live []livePod, owners []rsOwner, procs []*apiserver.Process) (*Churn, error) {
	ch := &Churn{TargetRate: o.ObserverRate}
	queue := make(chan livePod, len(live)+o.ObserverRate*int(o.ObserverChurn.Seconds())+1)
	for _, p := range live {
		queue <- p
	}
	var cpu0 []time.Duration
	for _, p := range procs {
		_ = proc.ResetPeak(p.PID())
		t, err := proc.CPUTime(p.PID())
		if err != nil {
			return nil, err
		}
		cpu0 = append(cpu0, t)
	}
	var (
		done, errs atomic.Int64
		next       atomic.Int64
		wg         sync.WaitGroup
		mu         sync.Mutex
		sample     error
	)
	next.Store(int64(len(live)))
	jobs := make(chan struct{})
	for range o.ObserverClients {
		wg.Go(func() {
			for range jobs {
				p := <-queue
				err := c.shutdownPod(ctx, nsObserved, p)
				if err == nil {
					i := int(next.Add(1))
					var np livePod
					if np, err = c.runningPod(ctx, nsObserved, fmt.Sprintf("t-%05d", i), i, owners); err == nil {
						queue <- np
					}
					done.Add(1)
				}
				if err != nil {
					errs.Add(1)
					mu.Lock()
					if sample == nil {
						sample = err
					}
					mu.Unlock()
				}
			}
		})
	}
	// Open loop on a schedule: deletion i is due at start + i/rate. A
	// client not free when one is due delays it (and every later one), so
	// the deletions started in the window say whether the rate was held.
	start := time.Now()
	interval := time.Second / time.Duration(o.ObserverRate)
	for i := 0; ; i++ {
		due := start.Add(time.Duration(i) * interval)
		if due.Sub(start) >= o.ObserverChurn {
			break
		}
		time.Sleep(time.Until(due))
		if time.Since(start) >= o.ObserverChurn || ctx.Err() != nil {
			break
		}
		if late := time.Since(due); late > interval {
			ch.Late++
		}
		jobs <- struct{}{}
		ch.Started++
	}
	window := time.Since(start)
	close(jobs)
	wg.Wait()
	ch.Seconds = window.Seconds()
	ch.DrainSeconds = time.Since(start).Seconds() - ch.Seconds
	ch.Rate = float64(ch.Started) / o.ObserverChurn.Seconds()
	ch.Deletions, ch.Errors = int(done.Load()), int(errs.Load())
	if sample != nil {
		ch.ErrorSample = sample.Error()
	}
	for i, p := range procs {
		t, err := proc.CPUTime(p.PID())
		if err != nil {
			return nil, err
		}
		mem, err := proc.ReadMemory(p.PID())
		if err != nil {
			return nil, err
		}
		u := ProcCPU{CPUSeconds: (t - cpu0[i]).Seconds(), PeakRSSMiB: proc.MiB(mem.HWM)}
		u.Cores = u.CPUSeconds / (ch.Seconds + ch.DrainSeconds)
		if ch.Deletions > 0 {
			u.CPUMsPerDeletion = 1000 * u.CPUSeconds / float64(ch.Deletions)
		}
		if i == 0 {
			ch.Observer = u
		} else {
			ch.AllPods = u
		}
	}
	return ch, ctx.Err()
}

// shutdownPod is the kubelet's part of a deletion.
func (c *cluster) shutdownPod(ctx context.Context, ns string, p livePod) error {
	if err := c.kube.CoreV1().Pods(ns).Delete(ctx, p.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.uid}}); err != nil {
		return err
	}
	finished := metav1.NewTime(time.Now().Add(7 * time.Second))
	var statuses []map[string]any
	for _, name := range []string{"app", "log-shipper", "proxy"} {
		statuses = append(statuses, map[string]any{"name": name, "ready": false, "state": map[string]any{"terminated": map[string]any{
			"exitCode": 0, "reason": "Completed", "startedAt": finished.Add(-time.Hour).UTC().Format(time.RFC3339), "finishedAt": finished.UTC().Format(time.RFC3339)}}})
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"phase": "Succeeded", "containerStatuses": statuses}})
	if err != nil {
		return err
	}
	if _, err := c.kube.CoreV1().Pods(ns).Patch(ctx, p.name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return err
	}
	return c.kube.CoreV1().Pods(ns).Delete(ctx, p.name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &p.uid}})
}

// recorded sums what the observer wrote into the reports of nsObserved.
func recorded(ctx context.Context, dyn dynamic.Interface) (observed int64, reports int, kills int64, err error) {
	list, err := dyn.Resource(schema.GroupVersionResource{Group: "graceguard.io", Version: "v1alpha1", Resource: "shutdownreports"}).
		Namespace(nsObserved).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, 0, err
	}
	for _, it := range list.Items {
		n, _, _ := unstructuredInt(it.Object, "status", "observed")
		k, _, _ := unstructuredInt(it.Object, "status", "killsObserved")
		observed += n
		kills += k
	}
	return observed, len(list.Items), kills, nil
}

func unstructuredInt(obj map[string]any, path ...string) (int64, bool, error) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return 0, false, nil
		}
		cur = m[p]
	}
	switch v := cur.(type) {
	case int64:
		return v, true, nil
	case float64:
		return int64(v), true, nil
	}
	return 0, false, nil
}

// scrape reads a process's /metrics, the values of unlabelled metrics.
func scrape(ctx context.Context, url string) (map[string]float64, error) {
	fams, err := promscrape.Get(ctx, url)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) > 0 {
				continue
			}
			switch {
			case m.Gauge != nil:
				out[name] = m.GetGauge().GetValue()
			case m.Counter != nil:
				out[name] = m.GetCounter().GetValue()
			}
		}
	}
	return out, nil
}
