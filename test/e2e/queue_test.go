//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/graceguard/graceguard/test/e2e/evidence"
)

// Scenario 11 (seed test 8): a queue consumer that acknowledges its batch
// after finishing it, deleted mid-batch (test/images/queue).
const (
	queueImage      = "registry.local/queue:e2e"
	queueServerPod  = "queue"
	queuePort       = 8080
	queueVisibility = 20 * time.Second
	queueMessages   = 8
	queueBatch      = 4
	queueWork       = 4 * time.Second
	// queueBatchWork is a batch's work: arm A's max-work. The visibility
	// timeout outlasts it, so a consumer that lives acknowledges in time.
	queueBatchWork = queueBatch * queueWork
	// queueGrace is what both arms' Pod templates ask for: shorter than
	// what is left of the batch when its Pod is deleted.
	queueGrace = 3
	// queueDeleteInto is how far into its second message's work each
	// consumer is deleted. The kubelet sends SIGTERM up to 2 s after the
	// delete call, and SIGKILL queueGrace after it: arm B's kill lands
	// 3 to 5 s after the delete, in the middle of the third message (2 to
	// 6 s), a second away from the ends of messages, where it would cut
	// no work.
	queueDeleteInto = 2 * time.Second
	// queueDrain bounds the wait for every message to be acknowledged
	// after the delete: the visibility timeout, then a batch of the
	// replacement's, with its start and the batch it took before.
	queueDrain = 2 * time.Minute
)

// queueLedger is the queue server's ledger (test/images/queue, Ledger):
// its sums, and each message's deliveries.
type queueLedger struct {
	evidence.QueueLedger
	Messages []struct {
		ID         string `json:"id"`
		Deliveries []struct {
			N        int        `json:"n"`
			Consumer string     `json:"consumer"`
			Leased   time.Time  `json:"leased"`
			Expires  time.Time  `json:"expires"`
			Started  *time.Time `json:"started"`
			Done     *time.Time `json:"done"`
			Acked    *time.Time `json:"acked"`
			Expired  bool       `json:"expired"`
		} `json:"deliveries"`
	} `json:"messages"`
	Events []struct {
		TS    time.Time `json:"ts"`
		Event string    `json:"event"`
	} `json:"events"`
}

// startedBy is when consumer started the work of message id, if it did.
func (l *queueLedger) startedBy(id, consumer string) (time.Time, bool) {
	for _, m := range l.Messages {
		for _, d := range m.Deliveries {
			if m.ID == id && d.Consumer == consumer && d.Started != nil {
				return *d.Started, true
			}
		}
	}
	return time.Time{}, false
}

// queueClient calls the queue server from the test process, over the
// bridge to its Pod IP.
type queueClient struct {
	base string
	http *http.Client
}

func (c queueClient) call(ctx context.Context, method, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err == nil && resp.StatusCode >= 300 {
		err = fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return b, err
}

func (c queueClient) ledger(ctx context.Context, queue string) (*queueLedger, error) {
	b, err := c.call(ctx, http.MethodGet, "/queues/"+queue+"/ledger")
	if err != nil {
		return nil, err
	}
	l := &queueLedger{}
	return l, json.Unmarshal(b, l)
}

func queueServer() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsQueue, Name: queueServerPod, Labels: map[string]string{"app": queueServerPod},
			Annotations: map[string]string{"graceguard.io/inject": "false"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "queue", Image: queueImage, ImagePullPolicy: corev1.PullNever,
			Args:  []string{"serve", "-visibility", queueVisibility.String()},
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: queuePort}},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(queuePort)}},
				PeriodSeconds: 1,
			},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
			}},
		}}},
	}
}

// consumerDeployment is one consumer of queue, its template asking for
// queueGrace.
func consumerDeployment(name, queue, server string, annotations map[string]string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	one, grace := int32(1), int64(queueGrace)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsQueue, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &grace,
					Containers: []corev1.Container{{
						Name: "consumer", Image: queueImage, ImagePullPolicy: corev1.PullNever,
						Args: []string{"consume", "-server", server, "-queue", queue,
							"-batch", fmt.Sprint(queueBatch), "-work", queueWork.String()},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
						}},
					}},
				},
			},
		},
	}
}

func queueConsumer(ctx context.Context) {
	q := &evidence.Queue{Namespace: nsQueue, Server: queueServerPod, Visibility: evidence.S(queueVisibility), Messages: queueMessages,
		Batch: queueBatch, Work: evidence.S(queueWork), AskedGrace: queueGrace, DeletedInto: evidence.S(queueDeleteInto)}
	evMu.Lock()
	ev.Queue = q
	evMu.Unlock()
	A := &evidence.QueueArm{Name: "A: graceguard, max-work = the batch's work", Queue: "a", Workload: "consumer-a", OptedIn: true}
	B := &evidence.QueueArm{Name: "B: opted out, grace shorter than the batch", Queue: "b", Workload: "consumer-b"}
	q.Arms = []*evidence.QueueArm{A, B}
	DeferCleanup(func(ctx SpecContext) {
		saveLogs(ctx, nsQueue, "app="+queueServerPod, "queue-server")
		for _, arm := range q.Arms {
			saveLogs(ctx, nsQueue, "app="+arm.Workload, "queue-"+arm.Workload)
			_ = kube.AppsV1().Deployments(nsQueue).Delete(ctx, arm.Workload, metav1.DeleteOptions{})
		}
	})

	By("starting the queue server and creating a queue per arm")
	must(kube.CoreV1().Pods(nsQueue).Create(ctx, queueServer(), metav1.CreateOptions{}))
	srv := waitPodReady(ctx, nsQueue, queueServerPod)
	base := fmt.Sprintf("http://%s:%d", srv.Status.PodIP, queuePort)
	qc := queueClient{base: base, http: newClient(10 * time.Second)}
	for _, arm := range q.Arms {
		must(qc.call(ctx, http.MethodPut, "/queues/"+arm.Queue))
	}

	By("creating the consumers: arm A treated by graceguard, arm B opted out")
	annotations := map[*evidence.QueueArm]map[string]string{
		A: {"graceguard.io/max-work": queueBatchWork.String(), "graceguard.io/routing-delay": "0s"},
		B: {"graceguard.io/inject": "false"},
	}
	for _, arm := range q.Arms {
		must(kube.AppsV1().Deployments(nsQueue).Create(ctx, consumerDeployment(arm.Workload, arm.Queue, base, annotations[arm]), metav1.CreateOptions{}))
	}
	followed := map[*evidence.QueueArm]*queueArmRun{}
	for _, arm := range q.Arms {
		waitDeploymentDone(ctx, nsQueue, arm.Workload, 3*time.Minute)
		pods := readyPods(ctx, nsQueue, "app="+arm.Workload)
		Expect(pods).To(HaveLen(1), "one consumer of %s", arm.Workload)
		p := pods[0]
		arm.Pod, arm.Budget, arm.Grace, arm.PreStop = p.Name, p.Annotations[budgetKey], grace(&p), preStopString(p.Spec.Containers[0])
		r := &queueArmRun{arm: arm, log: followContainerLog(ctx, nsQueue, p.Name, "consumer"), watch: watchPod(ctx, nsQueue, p.Name)}
		_, ok := r.log.waitFor("consumer_started", 30*time.Second)
		Expect(ok).To(BeTrue(), "the consumer %s logged consumer_started", p.Name)
		followed[arm] = r
	}

	By(fmt.Sprintf("publishing %d messages to each queue; deleting each consumer %s into its second message", queueMessages, queueDeleteInto))
	for _, arm := range q.Arms {
		must(qc.call(ctx, http.MethodPost, fmt.Sprintf("/queues/%s/messages?n=%d", arm.Queue, queueMessages)))
	}
	var wg sync.WaitGroup
	for _, arm := range q.Arms {
		wg.Add(1)
		go func() {
			defer GinkgoRecover()
			defer wg.Done()
			followed[arm].run(ctx, qc)
		}()
	}
	wg.Wait()

	ck := &q.Checks
	wantGrace := int64((queueBatchWork + 2*time.Second + 3*time.Second) / time.Second)
	ck.Add("A: graceguard raised the grace to the budget, with no preStop (routing delay 0)", fmt.Sprintf("grace %d (the Pod asked for %d), preStop none", wantGrace, queueGrace),
		A.Grace == wantGrace && A.PreStop == "none" && A.Budget != "", "grace %d, preStop %s, %s=%q", A.Grace, A.PreStop, budgetKey, A.Budget)
	ck.Add("B: opted out, the Pod keeps the grace it asked for", fmt.Sprintf("grace %d, no budget, preStop none", queueGrace),
		B.Grace == queueGrace && B.Budget == "" && B.PreStop == "none", "grace %d, budget %q, preStop %s", B.Grace, B.Budget, B.PreStop)
	for _, arm := range q.Arms {
		ck.Add(arm.Name+": deleted mid-batch: SIGTERM with the batch in hand, part of it done", fmt.Sprintf("%d in hand, 1 to %d unfinished", queueBatch, queueBatch-1),
			arm.SIGTERM != nil && arm.InHand == queueBatch && arm.Unfinished >= 1 && arm.Unfinished < queueBatch,
			"sigterm at %s: %d in hand, %d unfinished", fmtAt(arm.SIGTERM), arm.InHand, arm.Unfinished)
		ck.Add(arm.Name+": takes no new batch after SIGTERM", "0 leases after sigterm", arm.SIGTERM != nil && arm.LeasedAfterSIGTERM == 0,
			"%d", arm.LeasedAfterSIGTERM)
	}
	ck.Add("A: finishes and acknowledges the batch in hand, then exits on its own before the grace", fmt.Sprintf("acknowledged after sigterm, shutdown_complete < %ds, exit code 0", A.Grace),
		after(A.LastAck, A.SIGTERM) && A.ShutdownComplete != nil && float64(*A.ShutdownComplete) < float64(A.Grace) && A.ExitCode != nil && *A.ExitCode == 0,
		"acknowledged at %s, shutdown_complete at %s, exit code %s", fmtAt(A.LastAck), fmtAt(A.ShutdownComplete), fmtExit(A.ExitCode))
	la, lb := A.Ledger, B.Ledger
	ck.Add("A: the ledger: every message done exactly once, none lost", fmt.Sprintf("%d of %d done once, 0 done twice, 0 lost, 0 pending", queueMessages, queueMessages),
		la.Published == queueMessages && la.DoneOnce == queueMessages && la.DoneTwice == 0 && la.Lost == 0 && la.Pending == 0,
		"%d of %d done once, %d done twice, %d lost, %d pending", la.DoneOnce, la.Published, la.DoneTwice, la.Lost, la.Pending)
	ck.Add("A: nothing delivered twice, no lease ran out, no work cut", "0 redelivered, 0 leases run out, 0 cut",
		la.Deliveries == queueMessages && la.Redeliveries == 0 && la.Expired == 0 && la.WorkCut == 0,
		"%d deliveries, %d redelivered, %d leases run out, %d cut", la.Deliveries, la.Redeliveries, la.Expired, la.WorkCut)
	ck.Add("B: SIGKILLed at the grace, its batch unacknowledged", "exit code 137, no shutdown_complete, no acknowledgement",
		B.ExitCode != nil && *B.ExitCode == 137 && B.ShutdownComplete == nil && B.LastAck == nil,
		"exit code %s (%s), shutdown_complete %s, last acknowledgement %s", fmtExit(B.ExitCode), evidence.OrNone(B.Reason), fmtAt(B.ShutdownComplete), fmtAt(B.LastAck))
	ck.Add("B: the batch in hand is delivered again after the visibility timeout", fmt.Sprintf("%d redelivered, %d leases run out", B.InHand, B.InHand),
		B.InHand > 0 && lb.Redeliveries == B.InHand && lb.Expired == B.InHand, "%d redelivered, %d leases run out", lb.Redeliveries, lb.Expired)
	ck.Add("B: the work done before the kill is done again, the work in progress cut", ">= 1 done twice, >= 1 cut",
		lb.DoneTwice >= 1 && lb.WorkCut >= 1, "%d done twice, %d cut", lb.DoneTwice, lb.WorkCut)
	ck.Add("B: in the end every message is done (redelivery is at-least-once): none lost", "0 lost, 0 pending",
		lb.Published == queueMessages && lb.Lost == 0 && lb.Pending == 0, "%d lost, %d pending of %d", lb.Lost, lb.Pending, lb.Published)
	for _, arm := range q.Arms {
		GinkgoWriter.Printf("%s: sigterm %s (%d/%d), exit %s, ledger %+v, drained %s\n", arm.Name, fmtAt(arm.SIGTERM), arm.InHand, arm.Unfinished,
			fmtExit(arm.ExitCode), arm.Ledger, fmtAt(arm.Drained))
	}
	Expect(q.Checks.Failed()).To(BeEmpty())
}

// queueArmRun is one arm's consumer Pod, followed from its start.
type queueArmRun struct {
	arm   *evidence.QueueArm
	log   *logFollower
	watch *podWatch
}

// run deletes the arm's consumer queueDeleteInto into its second
// message's work (as the ledger says it started), reads what the consumer
// logged and how it ended, and waits for the replacement to empty the
// queue.
func (r *queueArmRun) run(ctx context.Context, qc queueClient) {
	GinkgoHelper()
	arm := r.arm
	var second time.Time
	Eventually(func(g Gomega) {
		l, err := qc.ledger(ctx, arm.Queue)
		g.Expect(err).NotTo(HaveOccurred())
		var ok bool
		second, ok = l.startedBy("m2", arm.Pod)
		g.Expect(ok).To(BeTrue(), "m2 started by %s", arm.Pod)
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
	time.Sleep(time.Until(second.Add(queueDeleteInto)))
	By(fmt.Sprintf("deleting consumer %s/%s mid-batch", nsQueue, arm.Pod))
	t0 := time.Now()
	Expect(kube.CoreV1().Pods(nsQueue).Delete(ctx, arm.Pod, metav1.DeleteOptions{})).To(Succeed())

	gone, exit, reason := r.watch.wait(time.Duration(arm.Grace)*time.Second + time.Minute)
	arm.PodGone, arm.ExitCode, arm.Reason = since(t0, gone), exit, reason
	r.log.waitEnd(30 * time.Second)
	r.read(t0)

	var l *queueLedger
	Eventually(func(g Gomega) {
		var err error
		l, err = qc.ledger(ctx, arm.Queue)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(l.Pending).To(BeZero(), "every message of queue %s acknowledged", arm.Queue)
	}).WithContext(ctx).WithTimeout(queueDrain).WithPolling(500 * time.Millisecond).Should(Succeed())
	arm.Ledger = l.QueueLedger
	for _, m := range l.Messages {
		for _, d := range m.Deliveries {
			qd := evidence.QueueDelivery{ID: m.ID, N: d.N, Consumer: d.Consumer, Leased: since(t0, d.Leased)}
			if d.Started != nil {
				qd.Started = since(t0, *d.Started)
			}
			if d.Done != nil {
				qd.Done = since(t0, *d.Done)
			}
			if d.Acked != nil {
				qd.Acked = since(t0, *d.Acked)
			}
			if d.Expired {
				qd.Expired = since(t0, d.Expires)
			}
			arm.Deliveries = append(arm.Deliveries, qd)
		}
	}
	for _, e := range l.Events {
		if e.Event == "acked" {
			arm.Drained = since(t0, e.TS)
		}
	}
}

// consumerLine is one line of the consumer's log (test/images/queue).
type consumerLine struct {
	TS         time.Time `json:"ts"`
	Event      string    `json:"event"`
	ID         string    `json:"id"`
	IDs        []string  `json:"ids"`
	Leases     []string  `json:"leases"`
	InHand     int       `json:"in_hand"`
	Unfinished int       `json:"unfinished"`
}

// read takes the deleted consumer's SIGTERM, what it leased after it, its
// acknowledgements and its shutdown from its log.
func (r *queueArmRun) read(t0 time.Time) {
	arm := r.arm
	r.log.mu.Lock()
	raw := append([]string(nil), r.log.raw...)
	r.log.mu.Unlock()
	sigterm := false
	for _, line := range raw {
		var c consumerLine
		if json.Unmarshal([]byte(line), &c) != nil {
			continue
		}
		switch c.Event {
		case "leased":
			if sigterm {
				arm.LeasedAfterSIGTERM++
			}
			arm.LogOrder = append(arm.LogOrder, "leased "+strings.Join(c.IDs, " "))
		case "work_done":
			arm.LogOrder = append(arm.LogOrder, "work_done "+c.ID)
		case "sigterm":
			sigterm = true
			arm.SIGTERM, arm.InHand, arm.Unfinished = since(t0, c.TS), c.InHand, c.Unfinished
			arm.LogOrder = append(arm.LogOrder, fmt.Sprintf("sigterm in_hand=%d unfinished=%d", c.InHand, c.Unfinished))
		case "acked":
			arm.LastAck = since(t0, c.TS)
			arm.LogOrder = append(arm.LogOrder, fmt.Sprintf("acked %d", len(c.Leases)))
		case "shutdown_complete":
			arm.ShutdownComplete = since(t0, c.TS)
			arm.LogOrder = append(arm.LogOrder, "shutdown_complete")
		}
	}
	r.log.save(nsQueue + "-" + arm.Pod)
}
