package observer

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/shutdownreport"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

const budget15 = "routing=5s work=5s cleanup=2s margin=3s grace=15s"

// deletedPod is a treated Pod as the kubelet leaves it: terminated
// containers with whole-second times.
func deletedPod(annotations map[string]string, containers ...corev1.Container) *corev1.Pod {
	if annotations == nil {
		annotations = map[string]string{mutate.AnnotationBudget: budget15}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-7d9f8c6b5-x2x9q", Namespace: "shop", Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: containers},
	}
}

func sleepHook(s int64) *corev1.Lifecycle {
	return &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: s}}}
}

func exited(p *corev1.Pod, name string, code int32, reason string, finished time.Time) *corev1.Pod {
	p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: name, State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: metav1.NewTime(at(-600)), FinishedAt: metav1.NewTime(finished)},
	}})
	return p
}

func TestObserve(t *testing.T) {
	del := Deletion{Requested: t0, Grace: 15}
	app := corev1.Container{Name: "app", Lifecycle: sleepHook(5)}
	base := v1alpha1.Sample{Pod: "web-7d9f8c6b5-x2x9q", Container: "app", Deleted: metav1.NewTime(t0), GraceSeconds: 15,
		PreStopSeconds: 5, Budget: budget15, Withdrawal: v1alpha1.WithdrawalNotListed}
	with := func(f func(*v1alpha1.Sample)) v1alpha1.Sample {
		s := base
		f(&s)
		return s
	}
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		del   Deletion
		hooks []HookFailure
		want  v1alpha1.Sample
		skip  Skip
	}{
		{
			name: "a drain of 12s in a 15s grace after a 5s preStop sleep: killed with 137 at the grace, 10s after SIGTERM",
			pod:  exited(deletedPod(nil, app), "app", 137, "Error", at(15)),
			want: with(func(s *v1alpha1.Sample) {
				s.Exited, s.ExitCode, s.Reason, s.Outcome, s.DrainSeconds = metav1.NewTime(at(15)), 137, "Error", v1alpha1.OutcomeKilled, 10
			}),
		},
		{
			name: "whole-second times put a kill at the grace one second early at worst: still killed",
			pod:  exited(deletedPod(nil, app), "app", 137, "Error", at(14)),
			want: with(func(s *v1alpha1.Sample) {
				s.Exited, s.ExitCode, s.Reason, s.Outcome, s.DrainSeconds = metav1.NewTime(at(14)), 137, "Error", v1alpha1.OutcomeKilled, 9
			}),
		},
		{
			name: "a clean exit 7s after SIGTERM",
			pod:  exited(deletedPod(nil, app), "app", 0, "Completed", at(12)),
			want: with(func(s *v1alpha1.Sample) {
				s.Exited, s.Reason, s.Outcome, s.DrainSeconds = metav1.NewTime(at(12)), "Completed", v1alpha1.OutcomeExited, 7
			}),
		},
		{
			name: "137 well before the grace is the app's own doing, not the kubelet's kill",
			pod:  exited(deletedPod(nil, app), "app", 137, "Error", at(8)),
			want: with(func(s *v1alpha1.Sample) {
				s.Exited, s.ExitCode, s.Reason, s.Outcome, s.DrainSeconds = metav1.NewTime(at(8)), 137, "Error", v1alpha1.OutcomeExited, 3
			}),
		},
		{
			name: "OOMKilled at the grace is not a shutdown kill",
			pod:  exited(deletedPod(nil, app), "app", 137, "OOMKilled", at(15)),
			want: with(func(s *v1alpha1.Sample) {
				s.Exited, s.ExitCode, s.Reason, s.Outcome, s.DrainSeconds = metav1.NewTime(at(15)), 137, "OOMKilled", v1alpha1.OutcomeExited, 10
			}),
		},
		{
			name:  "a failed preStop hook: SIGTERM when the FailedPreStopHook event says, so the drain counts from there",
			pod:   exited(deletedPod(nil, corev1.Container{Name: "app", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "5"}}}}}), "app", 0, "Completed", at(3)),
			hooks: []HookFailure{{Container: "app", At: at(0)}},
			want: with(func(s *v1alpha1.Sample) {
				s.HookFailed, s.Exited, s.Reason, s.Outcome, s.DrainSeconds = true, metav1.NewTime(at(3)), "Completed", v1alpha1.OutcomeExited, 3
			}),
		},
		{
			name: "a hook that hangs fails only when the kubelet kills it with the container, after the grace: SIGTERM came at the grace, the drain counts from there",
			pod: exited(deletedPod(nil, corev1.Container{Name: "app", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/app/drain"}}}}}),
				"app", 137, "Error", at(17)),
			hooks: []HookFailure{{Container: "app", At: at(17)}},
			want: with(func(s *v1alpha1.Sample) {
				s.PreStopSeconds, s.HookFailed, s.Exited, s.ExitCode, s.Reason, s.Outcome, s.DrainSeconds = 15, true, metav1.NewTime(at(17)), 137, "Error", v1alpha1.OutcomeKilled, 2
			}),
		},
		{
			name: "whole-second times put a hung hook's failure one second before the grace at worst: still hung",
			pod: exited(deletedPod(nil, corev1.Container{Name: "app", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/app/drain"}}}}}),
				"app", 0, "Completed", at(15)),
			hooks: []HookFailure{{Container: "app", At: at(14)}},
			want: with(func(s *v1alpha1.Sample) {
				s.PreStopSeconds, s.HookFailed, s.Exited, s.Reason, s.Outcome, s.DrainSeconds = 15, true, metav1.NewTime(at(15)), "Completed", v1alpha1.OutcomeExited, 0
			}),
		},
		{
			name: "a hook of unknown length that fails well before the grace failed at once: SIGTERM then, the estimate stays",
			pod: exited(deletedPod(nil, corev1.Container{Name: "app", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"curl", "localhost/drain"}}}}}),
				"app", 0, "Completed", at(6)),
			hooks: []HookFailure{{Container: "app", At: at(2)}},
			want: with(func(s *v1alpha1.Sample) {
				s.PreStopEstimated, s.HookFailed, s.Exited, s.Reason, s.Outcome, s.DrainSeconds = true, true, metav1.NewTime(at(6)), "Completed", v1alpha1.OutcomeExited, 4
			}),
		},
		{
			name:  "a hook failure of an earlier life of the Pod (before the deletion) is not this shutdown's",
			pod:   exited(deletedPod(nil, app), "app", 0, "Completed", at(12)),
			hooks: []HookFailure{{Container: "app", At: at(-300)}},
			want: with(func(s *v1alpha1.Sample) {
				s.Exited, s.Reason, s.Outcome, s.DrainSeconds = metav1.NewTime(at(12)), "Completed", v1alpha1.OutcomeExited, 7
			}),
		},
		{
			name: "an HTTP hook's length is unknown: SIGTERM is estimated at the budget's routing term",
			pod: exited(deletedPod(nil, corev1.Container{Name: "app", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/drain"}}}}),
				"app", 0, "Completed", at(9)),
			want: with(func(s *v1alpha1.Sample) {
				s.PreStopEstimated, s.Exited, s.Reason, s.Outcome, s.DrainSeconds = true, metav1.NewTime(at(9)), "Completed", v1alpha1.OutcomeExited, 4
			}),
		},
		{
			name: "a hook as long as the grace: SIGTERM at the grace, the kubelet's 2s minimum, then SIGKILL",
			pod:  exited(deletedPod(nil, corev1.Container{Name: "app", Lifecycle: sleepHook(20)}), "app", 137, "Error", at(17)),
			want: with(func(s *v1alpha1.Sample) {
				s.PreStopSeconds, s.Exited, s.ExitCode, s.Reason, s.Outcome, s.DrainSeconds = 15, metav1.NewTime(at(17)), 137, "Error", v1alpha1.OutcomeKilled, 2
			}),
		},
		{
			name: "of two treated containers, the killed one speaks for the Pod",
			pod: exited(exited(deletedPod(nil, app, corev1.Container{Name: "worker", Lifecycle: sleepHook(5)}),
				"app", 0, "Completed", at(15)), "worker", 137, "Error", at(15)),
			want: with(func(s *v1alpha1.Sample) {
				s.Container, s.Exited, s.ExitCode, s.Reason, s.Outcome, s.DrainSeconds = "worker", metav1.NewTime(at(15)), 137, "Error", v1alpha1.OutcomeKilled, 10
			}),
		},
		{
			name: "an untreated sidecar that exits last is not the Pod's drain",
			pod: exited(exited(deletedPod(map[string]string{mutate.AnnotationBudget: budget15, mutate.AnnotationContainers: "app"},
				app, corev1.Container{Name: "proxy"}), "app", 0, "Completed", at(8)), "proxy", 137, "Error", at(15)),
			want: with(func(s *v1alpha1.Sample) {
				s.Exited, s.Reason, s.Outcome, s.DrainSeconds = metav1.NewTime(at(8)), "Completed", v1alpha1.OutcomeExited, 3
			}),
		},
		{
			name: "a deletion with a shorter grace (kubectl delete --grace-period=5) is judged against it",
			pod:  exited(deletedPod(nil, app), "app", 137, "Error", at(7)),
			del:  Deletion{Requested: t0, Grace: 5},
			want: with(func(s *v1alpha1.Sample) {
				s.GraceSeconds, s.Exited, s.ExitCode, s.Reason, s.Outcome, s.DrainSeconds = 5, metav1.NewTime(at(7)), 137, "Error", v1alpha1.OutcomeKilled, 2
			}),
		},
		{
			name: "containers that had exited before the deletion (a finished Job's Pod) shut nothing down",
			pod:  exited(deletedPod(nil, app), "app", 0, "Completed", at(-60)),
			skip: SkipExitedBefore,
		},
		{
			name: "a Pod deleted before its container ran",
			pod:  deletedPod(nil, app),
			skip: SkipNotRunning,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.del
			if d.Grace == 0 {
				d = del
			}
			got, skip := observePod(tc.pod, d, tc.hooks)
			if skip != tc.skip {
				t.Fatalf("skip = %q, want %q", skip, tc.skip)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("sample (-want +got):\n%s", diff)
			}
		})
	}
}

// observePod is observe on the record of a deleted Pod (one the test
// gave no deletionTimestamp is given one: only terminating Pods keep what
// a sample reads) that no EndpointSlice listed.
func observePod(p *corev1.Pod, del Deletion, hooks []HookFailure) (v1alpha1.Sample, Skip) {
	return observeWithdrawn(p, del, hooks, withdrawal{})
}

func observeWithdrawn(p *corev1.Pod, del Deletion, hooks []HookFailure, w withdrawal) (v1alpha1.Sample, Skip) {
	if p.DeletionTimestamp == nil {
		p = p.DeepCopy()
		p.DeletionTimestamp = &metav1.Time{Time: del.Requested.Add(time.Duration(del.Grace) * time.Second)}
	}
	return observe(leanPod(p, true), del, hooks, w)
}

func TestDeletionReadsTheRequestTime(t *testing.T) {
	g := int64(15)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: at(15)}, DeletionGracePeriodSeconds: &g}}
	d, ok := leanPod(p, true).deletion()
	if !ok || !d.Requested.Equal(t0) || d.Grace != 15 {
		t.Errorf("deletion = %+v, %v; want requested at t0 with grace 15", d, ok)
	}
	// The kubelet's final delete: grace 0, deletionTimestamp moved to now.
	zero := int64(0)
	p.DeletionGracePeriodSeconds = &zero
	if _, ok := leanPod(p, true).deletion(); ok {
		t.Error("a Pod with grace 0 is the final state, not the deletion request")
	}
	// A grace no clock can subtract: the request time stops at 1970, a
	// time a report can hold (year 1 would be written as null).
	huge := int64(1<<63 - 1)
	p.DeletionGracePeriodSeconds = &huge
	if d, ok := leanPod(p, true).deletion(); !ok || d.Requested.Unix() != 0 || d.Grace != huge {
		t.Errorf("deletion with grace %d = %+v, %v; want requested at 1970-01-01", huge, d, ok)
	}
	// Not terminating, or in a namespace graceguard does not treat: no deletion kept.
	p.DeletionGracePeriodSeconds = &g
	if _, ok := leanPod(p, false).deletion(); ok {
		t.Error("a Pod of a namespace graceguard does not treat keeps no deletion")
	}
	p.DeletionTimestamp = nil
	if _, ok := leanPod(p, true).deletion(); ok {
		t.Error("a running Pod has no deletion")
	}
}

func TestReportKeepsTheLastFiftySamplesAndCountsAll(t *testing.T) {
	var st v1alpha1.ShutdownReportStatus
	var batch []v1alpha1.Sample
	for i := range 60 {
		s := v1alpha1.Sample{Pod: "p", Deleted: metav1.NewTime(at(i)), DrainSeconds: int64(i % 12), Outcome: v1alpha1.OutcomeExited, Budget: budget15}
		if i%20 == 0 {
			s.Outcome, s.DrainSeconds = v1alpha1.OutcomeKilled, 10
		}
		batch = append(batch, s)
	}
	shutdownreport.Add(&st, batch[:30], shutdownreport.DefaultMinSamples)
	shutdownreport.Add(&st, batch[30:], shutdownreport.DefaultMinSamples)
	if st.Observed != 60 || st.KillsObserved != 3 || len(st.Samples) != v1alpha1.MaxSamples {
		t.Fatalf("observed %d, kills %d, samples %d; want 60, 3, 50", st.Observed, st.KillsObserved, len(st.Samples))
	}
	if !st.Samples[0].Deleted.Equal(&metav1.Time{Time: at(10)}) || !st.LastObserved.Equal(&metav1.Time{Time: at(59)}) {
		t.Errorf("window starts at %v (want t0+10s), last observed %v (want t0+59s)", st.Samples[0].Deleted, st.LastObserved)
	}
	want := v1alpha1.Summary{Samples: 50, Kills: 2, DrainP50: "6s", DrainP95: "11s", DrainMax: "11s", DrainCut: "10s",
		Budget: budget15, MaxWork: "5s", Grace: 15}
	if diff := cmp.Diff(want, st.Summary); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	if r := st.Recommendation; r == nil || r.MaxWork != "12s" || r.Grace != 22 || !r.Enough ||
		!strings.HasPrefix(r.Reason, "2 of 50 Pods were SIGKILLed after draining 10s, and the others drained in at most 11s") {
		t.Errorf("recommendation %+v", r)
	}
}

func TestReportName(t *testing.T) {
	if n := v1alpha1.ReportName("Deployment", "web"); n != "deployment-web" {
		t.Errorf("ReportName = %q", n)
	}
	long := strings.Repeat("a", 250)
	n := v1alpha1.ReportName("StatefulSet", long)
	if len(n) > 253 || !strings.HasPrefix(n, "statefulset-aaa") || n == v1alpha1.ReportName("StatefulSet", long+"b") {
		t.Errorf("long name %q (%d chars) must be cut to 253 with a distinguishing hash", n, len(n))
	}
}

// A sample whose hook ran out the grace is a hook failure: no drain, no
// kill the recommendation counts, and no recommendation from it alone.
func TestHungHooksGiveNoDrainOrAdvice(t *testing.T) {
	hung := v1alpha1.Sample{Pod: "web-1", Container: "app", GraceSeconds: 30, PreStopSeconds: 30, HookFailed: true,
		Outcome: v1alpha1.OutcomeKilled, ExitCode: 137, DrainSeconds: 4, Budget: budget15}
	if !shutdownreport.HookHung(hung) {
		t.Fatal("HookHung = false for a failed hook that used the whole grace")
	}
	for _, s := range []v1alpha1.Sample{
		{GraceSeconds: 30, PreStopSeconds: 5, HookFailed: true},   // failed at once
		{GraceSeconds: 30, PreStopSeconds: 30, HookFailed: false}, // no failure recorded
	} {
		if shutdownreport.HookHung(s) {
			t.Errorf("shutdownreport.HookHung(%+v) = true", s)
		}
	}
	sum, rec := shutdownreport.Summarize([]v1alpha1.Sample{hung}, shutdownreport.DefaultMinSamples)
	if rec != nil || sum.DrainMax != "" || sum.Kills != 0 || sum.HookFailures != 1 || sum.Samples != 1 {
		t.Errorf("shutdownreport.Summarize(one hung hook) = %+v, recommendation %+v; want 1 sample, 1 hook failure, no drain, no kill, no recommendation", sum, rec)
	}
	clean := v1alpha1.Sample{Pod: "web-2", Container: "app", GraceSeconds: 30, PreStopSeconds: 5, Outcome: v1alpha1.OutcomeExited, DrainSeconds: 6, Budget: budget15}
	sum, rec = shutdownreport.Summarize([]v1alpha1.Sample{hung, clean}, 1)
	if rec == nil || sum.DrainMax != "6s" || rec.MaxWork != "7s" || !strings.Contains(rec.Reason, "1 Pod whose preStop hook ran out the grace not counted") {
		t.Errorf("shutdownreport.Summarize(hung, clean) = %+v, recommendation %+v; want the clean drain's 6s only, max-work 7s", sum, rec)
	}
}
