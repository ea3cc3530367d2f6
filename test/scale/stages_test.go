package scale

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kwok/pkg/apis/internalversion"
	"sigs.k8s.io/kwok/pkg/config"
	"sigs.k8s.io/kwok/pkg/utils/gotpl"
	"sigs.k8s.io/kwok/pkg/utils/lifecycle"
)

// kubelet is kwok's view of the harness's config: its stages, as the kwok
// controller loads and matches them.
type kubelet struct {
	t      *testing.T
	stages []*internalversion.Stage
	lc     lifecycle.Lifecycle
}

func loadKubelet(t *testing.T) kubelet {
	path := filepath.Join(t.TempDir(), "kwok.yaml")
	if err := os.WriteFile(path, []byte(kwokConfig()), 0o600); err != nil {
		t.Fatal(err)
	}
	objs, err := config.Load(context.Background(), path)
	if err != nil {
		t.Fatalf("kwok does not load the harness's config: %v", err)
	}
	// kwok plays a resource the stages of its kind only.
	var stages []*internalversion.Stage
	for _, s := range config.FilterWithType[*internalversion.Stage](objs) {
		if s.Spec.ResourceRef.Kind == "Pod" {
			stages = append(stages, s)
		}
	}
	lc, err := lifecycle.NewLifecycle(stages)
	if err != nil {
		t.Fatal(err)
	}
	return kubelet{t: t, stages: stages, lc: lc}
}

func unstructuredPod(t *testing.T, p *corev1.Pod) *unstructured.Unstructured {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// next is the stage kwok plays next for p, and its delay from now.
func (k kubelet) next(p *corev1.Pod, now time.Time) (string, time.Duration) {
	ev := &lifecycle.Event{Labels: p.Labels, Annotations: p.Annotations, Data: unstructuredPod(k.t, p)}
	s, err := k.lc.Match(context.Background(), ev)
	if err != nil {
		k.t.Fatalf("matching %s: %v", p.Name, err)
	}
	if s == nil {
		return "", 0
	}
	d, _, err := s.Delay(context.Background(), ev, now)
	if err != nil {
		k.t.Fatalf("delay of %s for %s: %v", s.Name(), p.Name, err)
	}
	return s.Name(), d
}

// status renders a stage's status template for p.
func (k kubelet) status(stage string, p *corev1.Pod) corev1.PodStatus {
	for _, s := range k.stages {
		if s.Name != stage {
			continue
		}
		for _, step := range s.Spec.Steps {
			if step.Patch == nil || step.Patch.Root != "status" {
				continue
			}
			b, err := gotpl.NewRenderer(nil).ToJSON(step.Patch.Template, unstructuredPod(k.t, p).Object)
			if err != nil {
				k.t.Fatalf("rendering the status of %s: %v", stage, err)
			}
			var st corev1.PodStatus
			if err := json.Unmarshal(b, &st); err != nil {
				k.t.Fatalf("the status of %s: %v\n%s", stage, err, b)
			}
			return st
		}
	}
	k.t.Fatalf("no stage %s with a status template", stage)
	return corev1.PodStatus{}
}

// treatedPod is a running Pod as graceguard leaves it: a preStop sleep
// on its app container and the grace it computed; drain is the
// stand-in's annotation.
func treatedPod(preStop int64, drain string, grace int64) *corev1.Pod {
	started := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop", UID: "u1", Annotations: map[string]string{}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{
			{Name: "app", Image: "app:1", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: preStop}}}},
			{Name: "proxy", Image: "proxy:1"},
		}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &started},
	}
	if drain != "" {
		p.Annotations[annotationDrain] = drain
	}
	return p
}

// deleting is p after a graceful delete at now: what the kubelet sees.
func deleting(p *corev1.Pod, now time.Time) *corev1.Pod {
	p = p.DeepCopy()
	g := *p.Spec.TerminationGracePeriodSeconds
	p.DeletionGracePeriodSeconds = &g
	p.DeletionTimestamp = &metav1.Time{Time: now.Add(time.Duration(g) * time.Second)}
	return p
}

// The stand-in kubelet shuts a Pod down as a kubelet does: the preStop
// sleep, then the drain, exit 0 when both fit in the grace, else SIGKILL
// at the grace's end with exit 137; then the Pod goes. A Job's Pod
// completes after its run time, and a Pod that is not running goes at once.
func TestTheStagesShutPodsDownAsAKubeletDoes(t *testing.T) {
	k := loadKubelet(t)
	now := time.Now().Truncate(time.Second)
	for _, tc := range []struct {
		name      string
		pod       *corev1.Pod
		stage     string
		delay     time.Duration
		exitCode  int32
		phase     corev1.PodPhase
		noDelayOf bool
	}{
		{name: "preStop 5 s + drain 2 s within a grace of 15 s: exits 0 after 7 s",
			pod: deleting(treatedPod(5, "2", 15), now), stage: "pod-shutdown-exit", delay: 7 * time.Second, exitCode: 0, phase: corev1.PodSucceeded},
		{name: "preStop 5 s + drain 30 s past a grace of 15 s: SIGKILLed at the grace",
			pod: deleting(treatedPod(5, "30", 15), now), stage: "pod-shutdown-kill", delay: 15 * time.Second, exitCode: exitSIGKILL, phase: corev1.PodFailed},
		{name: "preStop 5 s + drain 10 s, exactly the grace: SIGKILLed, the app had no time left",
			pod: deleting(treatedPod(5, "10", 15), now), stage: "pod-shutdown-kill", delay: 15 * time.Second, exitCode: exitSIGKILL, phase: corev1.PodFailed},
		{name: "no drain annotation: the preStop sleep alone",
			pod: deleting(treatedPod(5, "", 15), now), stage: "pod-shutdown-exit", delay: 5 * time.Second, exitCode: 0, phase: corev1.PodSucceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stage, delay := k.next(tc.pod, now)
			if stage != tc.stage {
				t.Fatalf("next stage %q, want %q", stage, tc.stage)
			}
			// The kill's delay is to deletionTimestamp, measured from now.
			if diff := delay - tc.delay; diff < -time.Second || diff > time.Second {
				t.Errorf("delay %s, want %s", delay, tc.delay)
			}
			st := k.status(stage, tc.pod)
			if st.Phase != tc.phase || len(st.ContainerStatuses) != len(tc.pod.Spec.Containers) {
				t.Fatalf("status: phase %q, %d container statuses; want %q and %d", st.Phase, len(st.ContainerStatuses), tc.phase, len(tc.pod.Spec.Containers))
			}
			for _, cs := range st.ContainerStatuses {
				term := cs.State.Terminated
				if term == nil || term.ExitCode != tc.exitCode || term.FinishedAt.IsZero() || !term.StartedAt.Equal(tc.pod.Status.StartTime) {
					t.Errorf("container %s: terminated %+v, want exit code %d, finished now, started when the Pod did", cs.Name, term, tc.exitCode)
				}
			}
			// Its final status written, the Pod is deleted at once.
			done := tc.pod.DeepCopy()
			done.Status = st
			if next, d := k.next(done, now); next != "pod-remove" || d != 0 {
				t.Errorf("after the final status: stage %q after %s, want pod-remove at once", next, d)
			}
		})
	}

	t.Run("a Job's Pod completes after its run time", func(t *testing.T) {
		p := treatedPod(5, "2", 15)
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "fan-out", UID: "j1"}}
		p.Annotations[annotationRun] = "30"
		stage, delay := k.next(p, now)
		if stage != "pod-complete" || delay != 30*time.Second {
			t.Fatalf("stage %q after %s, want pod-complete after 30s", stage, delay)
		}
		if st := k.status(stage, p); st.Phase != corev1.PodSucceeded || st.ContainerStatuses[0].State.Terminated == nil {
			t.Errorf("status %+v, want Succeeded with its containers terminated", st)
		}
	})
	t.Run("a running Deployment Pod stays as it is", func(t *testing.T) {
		if stage, _ := k.next(treatedPod(5, "2", 15), now); stage != "" {
			t.Errorf("stage %q, want none", stage)
		}
	})
	t.Run("a Pending Pod deleted goes at once", func(t *testing.T) {
		p := deleting(treatedPod(5, "2", 15), now)
		p.Status = corev1.PodStatus{Phase: corev1.PodPending}
		if stage, d := k.next(p, now); stage != "pod-remove" || d != 0 {
			t.Errorf("stage %q after %s, want pod-remove at once", stage, d)
		}
	})
	t.Run("a Pending Pod bound to a node runs (kwok's own stage)", func(t *testing.T) {
		p := treatedPod(5, "2", 15)
		p.Spec.NodeName, p.Status = "kwok-00000", corev1.PodStatus{Phase: corev1.PodPending}
		if stage, _ := k.next(p, now); stage != "pod-ready" {
			t.Errorf("stage %q, want pod-ready", stage)
		}
	})
}
