//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/test/e2e/evidence"
)

// A preStop hook longer than the grace it runs in (kubernetes#115817).
const (
	hookSleep   = 20
	hookGrace   = 10
	hookRequest = 15 * time.Second
)

// hookCommand runs the drain app's own sleep: the image links /bin/sleep to
// the binary, which sleeps when run under that name (no shell, no
// coreutils), so graceguard reads the hook's length as it would for a real
// `sleep`.
var hookCommand = []string{"/bin/sleep", fmt.Sprint(hookSleep)}

func slowHookDeployment(ns string) *appsv1.Deployment {
	dep := appDeployment(ns, "slow-hook", 1, map[string]string{"graceguard.io/inject": "false"})
	g := int64(hookGrace)
	spec := &dep.Spec.Template.Spec
	spec.TerminationGracePeriodSeconds = &g
	ownProbes(&spec.Containers[0])
	spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: hookCommand}}}
	return dep
}

func hookLongerThanGrace(ctx context.Context) {
	h := &evidence.Hook{PreStop: "exec " + strings.Join(hookCommand, " "), Grace: hookGrace}
	evMu.Lock()
	ev.Hook = h
	evMu.Unlock()
	ck := &h.Checks
	const want = "must be shorter than terminationGracePeriodSeconds"

	By("creating it in an opted-in namespace (the Pod opted out of mutation, not of the hook check)")
	floorBefore := floorDenials(ctx)
	_, err := kube.AppsV1().Deployments(nsHookA).Create(ctx, slowHookDeployment(nsHookA), metav1.CreateOptions{})
	if err != nil {
		h.Denied = err.Error()
	}
	ck.Add("graceguard refuses the Deployment at create time", "denied: "+want, err != nil && strings.Contains(err.Error(), want), "%s", evidence.OrNone(h.Denied))
	tmpl := slowHookDeployment(nsHookA).Spec.Template
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nsHookA, Name: "slow-hook", Labels: tmpl.Labels, Annotations: tmpl.Annotations}, Spec: tmpl.Spec}
	_, err = kube.CoreV1().Pods(nsHookA).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		h.DeniedPod = err.Error()
	}
	ck.Add("graceguard refuses the same spec as a bare Pod", "denied: "+want, err != nil && strings.Contains(err.Error(), want), "%s", evidence.OrNone(h.DeniedPod))
	// The native floor refuses both inside the API server (before any
	// validating webhook), which counts them.
	denials := floorDenials(ctx) - floorBefore
	ck.Add("the native floor refused both, counted in apiserver_validating_admission_policy_check_total", "+2 deny by "+fullname+"-floor",
		denials == 2 && strings.Contains(h.Denied, "ValidatingAdmissionPolicy") && strings.Contains(h.DeniedPod, "ValidatingAdmissionPolicy"), "%+g", denials)

	By("creating it where graceguard does not look, and deleting its Pod during a 15 s request")
	dep, err := kube.AppsV1().Deployments(nsHookB).Create(ctx, slowHookDeployment(nsHookB), metav1.CreateOptions{})
	ck.Add("without graceguard the same Deployment is admitted", "created", err == nil, "%v", errOr(err, "created"))
	Expect(err).NotTo(HaveOccurred())
	must(kube.CoreV1().Services(nsHookB).Create(ctx, appService(nsHookB, "slow-hook", map[string]string{"app": "slow-hook"}), metav1.CreateOptions{}))
	waitDeploymentDone(ctx, nsHookB, dep.Name, 3*time.Minute)
	pods := readyPods(ctx, nsHookB, "app=slow-hook")
	Expect(pods).To(HaveLen(1))

	del := deleteDuringRequest(ctx, deletionCase{ns: nsHookB, name: "slow-hook", existing: &pods[0], request: hookRequest, sigtermWait: 40 * time.Second,
		record: func(d *evidence.Deletion) { h.Unguarded = d }})
	d := del.d
	tl := budget.NewTimeline(budget.Budget{Work: hookRequest}, hookSleep*time.Second, hookGrace)
	d.Expected = timelineOf(tl)

	// The kubelet's events about the Pod (hook failures, kills) arrive
	// asynchronously: read them for up to 15 s, until a FailedPreStopHook.
	var cut int
	for deadline := time.Now().Add(15 * time.Second); ; {
		evs, err := kube.CoreV1().Events(nsHookB).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + d.Pod})
		Expect(err).NotTo(HaveOccurred())
		sort.Slice(evs.Items, func(i, j int) bool { return eventTime(evs.Items[i]).Before(eventTime(evs.Items[j])) })
		h.Events, cut = nil, 0
		for _, e := range evs.Items {
			if e.Reason == "FailedPreStopHook" {
				cut++
			}
			switch e.Reason {
			case "Scheduled", "Pulled", "Created", "Started", "MissingClusterDNS":
				continue
			}
			h.Events = append(h.Events, fmt.Sprintf("%s %s: %s (at %s)", e.Type, e.Reason, strings.TrimSpace(e.Message), fmtAt(since(del.t0, eventTime(e)))))
		}
		if cut > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	h.HookCutEvents = cut

	ck.Add("SIGTERM comes only when the hook has used the whole grace", fmt.Sprintf(">= %ds after the delete (the hook wants %ds)", hookGrace, hookSleep),
		d.SIGTERM != nil && float64(*d.SIGTERM) >= hookGrace, "%s", fmtAt(d.SIGTERM))
	ck.Add("the admitted 15 s request is cut", "not completed", !del.client.completed(), "%s after %s", d.Client, fmtAt(d.ClientDone))
	ck.Add("the kubelet kills no earlier than grace + its 2 s minimum after the hook", fmt.Sprintf(">= %ds", hookGrace+2),
		d.ClientDone != nil && float64(*d.ClientDone) >= hookGrace+2, "request cut at %s", fmtAt(d.ClientDone))
	ck.Add("the app never logs work_completed", "absent", d.WorkCompleted == nil, "log %s", strings.Join(d.LogOrder, " → "))
	ck.Add("the kubelet reports the hook cut", "a FailedPreStopHook event or exit code 137", cut > 0 || (d.ExitCode != nil && *d.ExitCode == 137),
		"%d FailedPreStopHook events, exit code %s", cut, fmtExit(d.ExitCode))
	Expect(h.Checks.Failed()).To(BeEmpty())
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

func errOr(err error, ok string) string {
	if err != nil {
		return err.Error()
	}
	return ok
}

// floorDenials is how many requests the API server's native floor
// (graceguard's ValidatingAdmissionPolicy) has denied.
func floorDenials(ctx context.Context) float64 {
	GinkgoHelper()
	var n float64
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	for _, line := range strings.Split(string(raw), "\n") {
		const metric = "apiserver_validating_admission_policy_check_total{"
		if !strings.HasPrefix(line, metric) {
			continue
		}
		i := strings.LastIndexByte(line, '}')
		labels := line[len(metric):i]
		if labelValue(labels, "policy") != fullname+"-floor" || labelValue(labels, "enforcement_action") != "deny" {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(line[i+1:]), 64); err == nil {
			n += v
		}
	}
	return n
}
