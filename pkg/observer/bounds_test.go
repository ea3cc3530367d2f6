package observer

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/shutdownreport"
)

// longestBudget is the longest budget that parses, as the observer writes it.
const longestBudget = "routing=59m59.999999999s work=59m59.999999999s cleanup=59m59.999999999s proxy=59m59.999999999s margin=59m59.999999999s grace=9223372036854775807s"

// worstSample is a sample with every field at its bound: what observe
// makes of a Pod whose fields are all at theirs.
func worstSample(t *testing.T, i int) v1alpha1.Sample {
	t.Helper()
	name := strings.Repeat("c", 63)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("p", 250) + string(rune('a'+i%26)), Namespace: "shop", DeletionTimestamp: &metav1.Time{Time: unixTime(maxUnix)},
			Annotations: map[string]string{mutate.AnnotationBudget: longestBudget}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: name, Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "sleep infinity; curl -s localhost/drain"}}}}}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: -2147483648, Reason: strings.Repeat("R", 1<<10), FinishedAt: metav1.NewTime(unixTime(maxUnix))}}}}},
	}
	s, skip := observe(leanPod(p, true), Deletion{Requested: unixTime(minUnix), Grace: 1<<63 - 1}, []HookFailure{{Container: name, At: unixTime(maxUnix)}},
		withdrawal{listed: true, stopped: maxUnix})
	if skip != "" {
		t.Fatalf("skip %q", skip)
	}
	// The longest numbers: an exit at year 9999 of a deletion at 1970 (a
	// drain of 12 digits, the most there is), a grace of 19 digits.
	// An estimated hook of the longest length there is (10 digits), a
	// withdrawal of the longest (12).
	if s.Budget != longestBudget || len(s.Pod) != v1alpha1.MaxPodNameLength || len(s.Reason) != v1alpha1.MaxReasonLength || s.DrainSeconds < 1e11 ||
		!s.PreStopEstimated || !s.HookFailed || s.PreStopSeconds < 1e9 || s.WithdrawalSeconds == nil || *s.WithdrawalSeconds != maxUnix-minUnix {
		t.Fatalf("not the worst sample: %+v", s)
	}
	return s
}

// TestTheWorstReportIsBounded: 50 samples at their bounds, and every name
// of the report at Kubernetes' limit, make a report of at most
// maxReportBytes as the observer sends it (the API server adds its own
// metadata: managedFields, uid, resourceVersion, about 1 KiB).
func TestTheWorstReportIsBounded(t *testing.T) {
	var st v1alpha1.ShutdownReportStatus
	var samples []v1alpha1.Sample
	for i := range v1alpha1.MaxSamples {
		samples = append(samples, worstSample(t, i))
	}
	shutdownreport.Add(&st, samples, shutdownreport.DefaultMinSamples)
	long := func(c byte, n int) string { return strings.Repeat(string(c), n) }
	wl := workload{APIVersion: long('g', 253) + "/" + long('v', 63), Kind: long('K', 63), Name: long('w', 253), UID: "0f6ad2c4-8b0e-4b6e-9d55-7b1f0e0c1a2b"}
	r := &v1alpha1.ShutdownReport{
		TypeMeta: metav1.TypeMeta{APIVersion: "graceguard.io/v1alpha1", Kind: "ShutdownReport"},
		ObjectMeta: metav1.ObjectMeta{Namespace: long('n', 63), Name: v1alpha1.ReportName(wl.Kind, wl.Name),
			Labels:          map[string]string{"app.kubernetes.io/managed-by": "graceguard"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: wl.APIVersion, Kind: wl.Kind, Name: wl.Name, UID: wl.UID}}},
		Spec:   v1alpha1.ShutdownReportSpec{Workload: wl.ref()},
		Status: st,
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	one, _ := json.Marshal(samples[0])
	if strings.Contains(string(one), "null") {
		t.Errorf("a sample the CRD refuses (a zero time is written as null): %s", one)
	}
	t.Logf("the worst report: %d bytes, %d per sample; summary %+v; recommendation %+v", len(b), len(one)+1, st.Summary, *st.Recommendation)
	if len(b) > maxReportBytes {
		t.Errorf("the worst report has %d bytes, more than %d", len(b), maxReportBytes)
	}
	checkBounds(t, st)

	// An ordinary report: the recommendation's largest reasons.
	var ord v1alpha1.ShutdownReportStatus
	for i := range v1alpha1.MaxSamples {
		s := v1alpha1.Sample{Pod: "web-7d9f8c6b5-x2x9q", Container: "app", Deleted: metav1.NewTime(at(i)), GraceSeconds: 45, PreStopSeconds: 8,
			Exited: metav1.NewTime(at(i + 20)), Reason: "Completed", Outcome: v1alpha1.OutcomeExited, DrainSeconds: 12, Budget: "routing=8s work=30s cleanup=2s margin=5s grace=45s",
			Withdrawal: v1alpha1.WithdrawalWithdrawn, WithdrawalSeconds: new(int64(1))}
		if i%10 == 0 {
			s.Outcome, s.ExitCode, s.Reason, s.DrainSeconds = v1alpha1.OutcomeKilled, 137, "Error", 37
		}
		ord.Samples = append(ord.Samples, s)
	}
	shutdownreport.Add(&ord, nil, shutdownreport.DefaultMinSamples)
	rep := *r
	rep.Namespace, rep.Name, rep.OwnerReferences = "shop", "deployment-web", []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: wl.UID}}
	rep.Spec.Workload = v1alpha1.WorkloadReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	rep.Status = ord
	b, _ = json.Marshal(rep)
	t.Logf("an ordinary report of 50 samples: %d bytes", len(b))
}

// checkBounds fails for any string of st beyond the CRD's bound.
func checkBounds(t *testing.T, st v1alpha1.ShutdownReportStatus) {
	t.Helper()
	for _, s := range st.Samples {
		for _, f := range []struct {
			what string
			v    string
			max  int
		}{{"pod", s.Pod, v1alpha1.MaxPodNameLength}, {"container", s.Container, v1alpha1.MaxContainerNameLength},
			{"reason", s.Reason, v1alpha1.MaxReasonLength}, {"budget", s.Budget, v1alpha1.MaxBudgetLength}} {
			if len(f.v) > f.max {
				t.Errorf("sample %s of %d bytes, bound %d", f.what, len(f.v), f.max)
			}
		}
	}
	sum := st.Summary
	for _, d := range []string{sum.DrainP50, sum.DrainP95, sum.DrainMax, sum.DrainCut, sum.MaxWork, sum.WithdrawalP50, sum.WithdrawalP95, sum.WithdrawalMax} {
		if len(d) > v1alpha1.MaxDurationLength {
			t.Errorf("summary duration %q over %d bytes", d, v1alpha1.MaxDurationLength)
		}
	}
	if len(sum.Budget) > v1alpha1.MaxBudgetLength {
		t.Errorf("summary budget of %d bytes", len(sum.Budget))
	}
	if r := st.Recommendation; r != nil && (len(r.MaxWork) > v1alpha1.MaxDurationLength || len(r.Reason) > v1alpha1.MaxMessageLength) {
		t.Errorf("recommendation %+v beyond its bounds", r)
	}
}

func TestTheRecommendationsReasonIsBounded(t *testing.T) {
	// Its longest: too few samples, the rest of the sentence at the
	// longest durations.
	longest := 0
	for _, samples := range [][]v1alpha1.Sample{
		{{Outcome: v1alpha1.OutcomeExited, DrainSeconds: maxUnix - minUnix}, {Outcome: v1alpha1.OutcomeExited, DrainSeconds: maxUnix - minUnix - 1}},
		{{Outcome: v1alpha1.OutcomeKilled, DrainSeconds: maxUnix - minUnix}},
		{{Outcome: v1alpha1.OutcomeKilled, DrainSeconds: maxUnix - minUnix}, {Outcome: v1alpha1.OutcomeExited, DrainSeconds: maxUnix - minUnix - 1}},
	} {
		for n := 1; n <= v1alpha1.MaxSamples; n++ {
			_, rec := shutdownreport.Summarize(samples, n)
			longest = max(longest, len(rec.Reason))
		}
	}
	t.Logf("the longest recommendation reason: %d bytes", longest)
	if longest > v1alpha1.MaxMessageLength/2 {
		t.Errorf("a recommendation's reason of %d bytes: the bound %d has too little room", longest, v1alpha1.MaxMessageLength)
	}
}

func TestAddBoundsSamplesWrittenBeforeTheBounds(t *testing.T) {
	old := v1alpha1.Sample{Pod: strings.Repeat("p", 253), Container: "app", Reason: strings.Repeat("R", 100), Budget: strings.Repeat("b", 250<<10),
		Outcome: v1alpha1.OutcomeExited, Deleted: metav1.NewTime(t0)}
	st := v1alpha1.ShutdownReportStatus{Samples: []v1alpha1.Sample{old}}
	shutdownreport.Add(&st, []v1alpha1.Sample{{Pod: "web-1", Container: "app", Outcome: v1alpha1.OutcomeExited, Deleted: metav1.NewTime(at(1)), Budget: budget15}}, shutdownreport.DefaultMinSamples)
	checkBounds(t, st)
	if got := st.Samples[0].Pod; got != shutdownreport.SampleName(old.Pod) || len(got) != v1alpha1.MaxPodNameLength || got == shutdownreport.SampleName(old.Pod+"x") {
		t.Errorf("a long Pod name becomes %q: want it cut to 63 bytes, distinct by its hash", got)
	}
	if st.Samples[0].Budget != "" || st.Summary.Budget != budget15 {
		t.Errorf("a 250 KiB budget of an old sample must go (and the summary take the last one that parses): %q", st.Summary.Budget)
	}
}

// TestEventNotes: the events' notes at their longest (every value at its
// bound) stay under the 1 KiB the API server keeps, with room to spare.
func TestEventNotes(t *testing.T) {
	var worst []v1alpha1.Sample
	for i := range v1alpha1.MaxSamples {
		worst = append(worst, worstSample(t, i))
	}
	ns := strings.Repeat("n", 63)
	rec := budget.Format(time.Duration(1<<63 - 1))
	mixed := append([]v1alpha1.Sample(nil), worst...)
	for i := range mixed {
		mixed[i].HookFailed = true
		if i%2 == 0 {
			mixed[i].PreStopSeconds = mixed[i].GraceSeconds
		}
	}
	for what, note := range map[string]string{"killed": shutdownreport.KilledNote(ns, rec, worst), "failed": shutdownreport.FailedNote(ns, worst), "failed or hung": shutdownreport.FailedNote(ns, mixed)} {
		t.Logf("the longest %s note: %d bytes", what, len(note))
		if len(note) > maxWorstNote {
			t.Errorf("the longest %s note has %d bytes, more than %d: %s", what, len(note), maxWorstNote, note)
		}
	}
	one := worst[:1]
	one[0].Pod, one[0].Container, one[0].GraceSeconds, one[0].DrainSeconds, one[0].Budget = "web-1", "app", 15, 10, budget15
	if got, want := shutdownreport.KilledNote("shop", "21s", one), "1 Pod SIGKILLed at the end of 15s grace after draining 10s (web-1 container app); budget "+budget15+"; recommended max-work 21s: kubectl graceguard recommend -n shop"; got != want {
		t.Errorf("note\n%s\nwant\n%s", got, want)
	}
	one[0].HookFailed, one[0].PreStopSeconds = true, 15
	if got, want := shutdownreport.FailedNote("shop", one), "preStop hook failed in 1 Pod (web-1 container app): it ran out the 15s grace, so SIGTERM came only at its end, with the kubelet's 2s left; budget "+budget15+"; make the hook finish within the grace, or use a sleep graceguard can count (graceguard.io/prestop: sleep): kubectl graceguard recommend -n shop"; got != want {
		t.Errorf("note\n%s\nwant\n%s", got, want)
	}
	one[0].PreStopSeconds = 5
	if got, want := shutdownreport.FailedNote("shop", one), "preStop hook failed in 1 Pod (web-1 container app): SIGTERM came at once, before the routing delay; budget "+budget15+"; fix the hook (graceguard.io/prestop: sleep needs no binary in the image): kubectl graceguard recommend -n shop"; got != want {
		t.Errorf("note\n%s\nwant\n%s", got, want)
	}
	if got := shutdownreport.Cut(strings.Repeat("é", 600), shutdownreport.MaxNoteLength); len(got) > shutdownreport.MaxNoteLength || !strings.HasSuffix(got, "é") {
		t.Errorf("cut to %d bytes: %d bytes, ending %q", shutdownreport.MaxNoteLength, len(got), got[len(got)-2:])
	}
}
