//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/graceguard/graceguard/test/e2e/evidence"
)

// Scenario 8: a hostile tenant against the webhook.
const (
	hostileImage = "registry.local/hostile:e2e"
	tenantSA     = "tenant"
	// hostileDuration is how long the attacker runs every class at once:
	// the requests of each class span at least 60 s of it.
	hostileDuration = 70 * time.Second
	// steadyPause is the ordinary creates' period (5 a second, open loop).
	steadyPause = 200 * time.Millisecond
	// afterCreates are the creates, one at a time, after the attack.
	afterCreates = 30
	// nsRotate is how often the namespace admin gives the next key of
	// hostileNamespaceKeys the largest value the namespace can store.
	nsRotate       = 2 * time.Second
	webhookPort    = 9443
	metricsPort    = 8080
	observerLabel  = "app.kubernetes.io/name=graceguard-observer"
	treatedLabel   = "graceguard.io/treated"
	annotationSize = 256 << 10 // the API server's bound on an object's annotations
)

// hostileNamespaceKeys are the namespace annotations graceguard reads (and
// one it does not read on namespaces), given 256 KiB in turn, next to
// max-work: auto.
var hostileNamespaceKeys = []string{
	"graceguard.io/routing-profile",
	"proxy.istio.io/config",
	"graceguard.io/budget",
	"graceguard.io/max-work-ceiling",
	"graceguard.io/readiness-path",
	"config.linkerd.io/shutdown-grace-period",
}

func hostileTenant(ctx context.Context) {
	h := &evidence.Hostile{Tenant: "system:serviceaccount:" + nsHostile + ":" + tenantSA, Namespace: nsHostile, Outside: nsHostileOut,
		NamespaceKeys: hostileNamespaceKeys}
	evMu.Lock()
	ev.Hostile = h
	evMu.Unlock()
	ck := &h.Checks

	By("the tenant: a ServiceAccount with a Role in each of its two namespaces")
	tenantRBAC(ctx)
	h.Access = tenantAccess(ctx, ck)

	// Right after the install the observer may still be starting: the
	// attack begins once both replicas and the observer are Ready.
	var webhooks, observers []corev1.Pod
	Eventually(func(g Gomega) {
		webhooks, observers = readyPods(ctx, releaseNS, webhookLabel), readyPods(ctx, releaseNS, observerLabel)
		g.Expect(webhooks).To(HaveLen(2), "two webhook replicas Ready")
		g.Expect(observers).To(HaveLen(1), "the observer Ready")
	}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	targets := []*target{}
	var addrs []string
	for _, p := range webhooks {
		targets = append(targets, newTarget(p, "webhook"))
		addrs = append(addrs, fmt.Sprintf("%s:%d", p.Status.PodIP, webhookPort))
	}
	targets = append(targets, newTarget(observers[0], "observer"))
	DeferCleanup(func(ctx SpecContext) {
		saveLogs(ctx, releaseNS, webhookLabel, "hostile-webhook")
		saveLogs(ctx, releaseNS, observerLabel, "hostile-observer")
	})

	By("the attacker's Pod, running as the tenant")
	attacker := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hostile", Namespace: nsHostile, Labels: map[string]string{"app": "hostile-tenant"},
			Annotations: map[string]string{"graceguard.io/inject": "false"}},
		Spec: corev1.PodSpec{
			ServiceAccountName: tenantSA,
			RestartPolicy:      corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "hostile", Image: hostileImage, ImagePullPolicy: corev1.PullNever,
				Args: []string{"-duration=" + hostileDuration.String(), "-outside=" + nsHostileOut, "-webhooks=" + strings.Join(addrs, ","),
					"-image=" + drainappImage},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
				}},
			}},
		},
	}
	must(kube.CoreV1().Pods(nsHostile).Create(ctx, attacker, metav1.CreateOptions{}))
	DeferCleanup(func(ctx SpecContext) { hostileCleanup(ctx) })
	running := waitPodRunning(ctx, nsHostile, attacker.Name)
	attackerCPU := ""
	for _, cs := range running.Status.ContainerStatuses {
		attackerCPU = containerCgroup("cpuacct", string(running.UID), strings.TrimPrefix(cs.ContainerID, "containerd://"))
	}
	lf := followContainerLog(ctx, nsHostile, running.Name, "hostile")
	defer lf.save("hostile-attacker")
	_, ok := lf.waitFor("attack_started", 3*time.Minute)
	Expect(ok).To(BeTrue(), "the attacker started: %s", lastLines(lf, 20))

	By("the attack, with ordinary creates in another opted-in namespace and the namespace admin's annotations")
	h.LoadBefore = loadAverage()
	for _, t := range targets {
		t.resetPeak()
		t.before = t.scrape()
	}
	attackerCPU0 := cgroupValue(attackerCPU, "cpuacct.usage")
	apiBefore := hostileAPIServerMetrics(ctx)
	obsBefore := targets[len(targets)-1].before
	start := time.Now()
	sctx, stopSampling := context.WithCancel(ctx)
	var sampling sync.WaitGroup
	for _, t := range targets {
		sampling.Add(1)
		go func() { defer sampling.Done(); t.sample(sctx) }()
	}
	eps := followEndpoints(sctx, start)
	steady := startSteady(ctx)
	stopRotating := rotateNamespaceAnnotations(ctx, h)

	_, ended := lf.waitFor("attack_ended", hostileDuration+3*time.Minute)
	// Now: the attacker's cgroup goes when it exits.
	h.AttackerCPU = cpuSince(attackerCPU, attackerCPU0)
	stopRotating()
	h.Steady = steady.finish()
	_, resulted := lf.waitFor("result", 5*time.Minute)
	By("ordinary creates once the attacker is done")
	h.After = afterAttack(ctx, afterCreates)
	h.Endpoints, h.NoEndpoint = eps.stop()
	stopSampling()
	sampling.Wait()
	h.LoadAfter = loadAverage()
	Expect(ended && resulted).To(BeTrue(), "the attacker ended and reported: %s", lastLines(lf, 5))
	h.Attack = attackResult(lf)
	Expect(h.Attack).NotTo(BeNil(), "the attacker's result line")

	By("graceguard's Pods after the attack")
	after := map[string]*corev1.Pod{}
	for _, sel := range []string{webhookLabel, observerLabel} {
		for _, p := range must(kube.CoreV1().Pods(releaseNS).List(ctx, metav1.ListOptions{LabelSelector: sel})).Items {
			after[p.Name] = &p
		}
	}
	for _, t := range targets {
		t.finish(after[t.rep.Pod])
		h.Replicas = append(h.Replicas, t.rep)
	}
	h.Decisions = decisionDeltas(targets)
	apiAfter := hostileAPIServerMetrics(ctx)
	for _, name := range graceguardWebhooks {
		h.APIServer = append(h.APIServer, evidence.WebhookMetrics{Name: name,
			Requests:  apiAfter["requests"][name] - apiBefore["requests"][name],
			FailOpen:  apiAfter["failOpen"][name] - apiBefore["failOpen"][name],
			Rejection: apiAfter["rejection"][name] - apiBefore["rejection"][name],
			Skipped:   apiAfter["skipped"][name] - apiBefore["skipped"][name],
		})
	}
	obs := targets[len(targets)-1]
	h.ObserverSkipped = map[string]float64{}
	for _, s := range obs.last {
		if s.name == "graceguard_observer_skipped_total" {
			h.ObserverSkipped[labelValue(s.labels, "reason")] += s.value
		}
	}
	for _, s := range obsBefore {
		if s.name == "graceguard_observer_skipped_total" {
			h.ObserverSkipped[labelValue(s.labels, "reason")] -= s.value
		}
	}
	for k, v := range h.ObserverSkipped {
		if v == 0 {
			delete(h.ObserverSkipped, k)
		}
	}
	dyn := must(dynamic.NewForConfig(cl.RESTConfig))
	reports := must(dyn.Resource(reportsGVR).Namespace(nsHostileOut).List(ctx, metav1.ListOptions{}))
	h.OutsideReports = len(reports.Items)
	h.Events = warningEvents(ctx, start.Add(-5*time.Second))

	hostileChecks(h, ck)
	Expect(h.Checks.Failed()).To(BeEmpty())
}

// tenantRBAC creates the tenant's ServiceAccount and a Role bound to it in
// each of its namespaces: Pods, Deployments and CronJobs, nothing else.
func tenantRBAC(ctx context.Context) {
	GinkgoHelper()
	must(kube.CoreV1().ServiceAccounts(nsHostile).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: tenantSA}}, metav1.CreateOptions{}))
	verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	for _, ns := range []string{nsHostile, nsHostileOut} {
		must(kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: tenantSA},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: verbs},
				{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: verbs},
				{APIGroups: []string{"batch"}, Resources: []string{"cronjobs"}, Verbs: verbs},
			},
		}, metav1.CreateOptions{}))
		must(kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: tenantSA},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: tenantSA},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: tenantSA, Namespace: nsHostile}},
		}, metav1.CreateOptions{}))
	}
}

// tenantAccess asks the API server what the tenant may do, and checks it
// may act in its namespaces only.
func tenantAccess(ctx context.Context, ck *evidence.Checks) []string {
	GinkgoHelper()
	cases := []struct {
		verb, group, resource, ns string
		want                      bool
	}{
		{"create", "", "pods", nsHostile, true},
		{"update", "apps", "deployments", nsHostile, true},
		{"update", "batch", "cronjobs", nsHostile, true},
		{"create", "", "pods", nsHostileOut, true},
		{"create", "", "pods", nsSteady, false},
		{"patch", "", "namespaces", "", false},
		{"list", "", "pods", releaseNS, false},
		{"update", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", false},
	}
	var out, wrong []string
	for _, c := range cases {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:" + nsHostile + ":" + tenantSA,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + nsHostile, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: c.verb, Group: c.group, Resource: c.resource, Namespace: c.ns},
		}}
		got := must(kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{}))
		where := c.ns
		if where == "" {
			where = "the cluster"
		}
		verdict := "no"
		if got.Status.Allowed {
			verdict = "yes"
		}
		line := fmt.Sprintf("%s %s in %s: %s", c.verb, c.resource, where, verdict)
		out = append(out, line)
		if got.Status.Allowed != c.want {
			wrong = append(wrong, line)
		}
	}
	ck.Add("the tenant may act only in its own two namespaces (SubjectAccessReviews)", "yes in "+nsHostile+" and "+nsHostileOut+", no elsewhere",
		len(wrong) == 0, "%s", evidence.OrNone(strings.Join(wrong, "; ")))
	return out
}

func waitPodRunning(ctx context.Context, ns, name string) *corev1.Pod {
	GinkgoHelper()
	var pod *corev1.Pod
	Eventually(func(g Gomega) {
		p, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		pod = p
		g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s/%s running", ns, name)
	}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	return pod
}

func lastLines(lf *logFollower, n int) string {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	return strings.Join(lf.raw[max(0, len(lf.raw)-n):], "\n")
}

// attackResult is the attacker's own account, from its result line.
func attackResult(lf *logFollower) *evidence.Attack {
	for _, e := range slices.Backward(lf.snapshot()) {
		if e.Event != "result" {
			continue
		}
		var line struct {
			Attack *evidence.Attack `json:"attack"`
		}
		if json.Unmarshal([]byte(e.Raw), &line) == nil {
			return line.Attack
		}
	}
	return nil
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// ---- the ordinary creates ----------------------------------------------

type steadyLoad struct {
	mu        sync.Mutex
	s         *evidence.Steady
	latencies []time.Duration
	stop      chan struct{}
	wg        sync.WaitGroup
	start     time.Time
}

// hookEvery makes every hookEvery-th create a Pod whose preStop hook
// outlasts its grace: graceguard's normal decision for it is a refusal.
const hookEvery = 10

// hookRefusal is what graceguard answers such a Pod (scenario 4).
const hookRefusal = "must be shorter than terminationGracePeriodSeconds"

// refusedForHook tells whether graceguard refused a create for its hook:
// the native floor (inside the API server, before any webhook) or the
// validating webhook, with the same message.
func refusedForHook(err error) bool {
	if err == nil || !strings.Contains(err.Error(), hookRefusal) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "denied the request") ||
		strings.Contains(msg, "ValidatingAdmissionPolicy 'graceguard-floor'") && strings.Contains(msg, "denied request")
}

// startSteady creates ordinary Pods in an opted-in namespace (a scheduling
// gate keeps them from running), one every steadyPause, each in its own
// goroutine: a slow answer does not slow the rate.
func startSteady(ctx context.Context) *steadyLoad {
	l := newSteady(float64(time.Second) / float64(steadyPause))
	l.wg.Add(1)
	go func() {
		defer GinkgoRecover()
		defer l.wg.Done()
		// The i-th create is due at start + i*steadyPause: a loaded machine
		// that wakes this loop late makes it catch up, not drop creates
		// (as a Ticker would).
		for i := 1; ; i++ {
			select {
			case <-l.stop:
				return
			case <-time.After(time.Until(l.start.Add(time.Duration(i) * steadyPause))):
			}
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				l.create(ctx, i%hookEvery == 0)
			}()
		}
	}()
	return l
}

func newSteady(rate float64) *steadyLoad {
	return &steadyLoad{s: &evidence.Steady{Namespace: nsSteady, Rate: rate, Causes: map[string]int{}}, stop: make(chan struct{}), start: time.Now()}
}

// afterAttack makes n creates one at a time (every hookEvery-th with a
// hook longer than grace), once the attacker is done.
func afterAttack(ctx context.Context, n int) *evidence.Steady {
	l := newSteady(0)
	for i := 1; i <= n; i++ {
		l.create(ctx, i%hookEvery == 0)
	}
	return l.finish()
}

// create makes one Pod in nsSteady and counts graceguard's answer: an
// ordinary Pod must come back mutated, one whose hook outlasts its grace
// (hook) must be refused.
func (l *steadyLoad) create(ctx context.Context, hook bool) {
	p := appPod(nsSteady, "", map[string]string{"app": "steady"}, nil)
	p.GenerateName = "steady-"
	if hook {
		tmpl := slowHookDeployment(nsSteady).Spec.Template
		p = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nsSteady, GenerateName: "steady-hook-", Labels: map[string]string{"app": "steady"},
			Annotations: tmpl.Annotations}, Spec: tmpl.Spec}
	}
	p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: churnGate}}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	at := time.Now()
	created, err := kube.CoreV1().Pods(nsSteady).Create(cctx, p, metav1.CreateOptions{})
	d := time.Since(at)
	l.mu.Lock()
	defer l.mu.Unlock()
	when := evidence.S(at.Sub(l.start))
	if hook {
		l.s.HookSent++
		switch {
		case refusedForHook(err):
			l.s.HookRefused++
		case len(l.s.HookWrong) >= 10:
		case err != nil:
			l.s.HookWrong = append(l.s.HookWrong, fmt.Sprintf("at %s: %s", when, headTail(err.Error())))
		default:
			l.s.HookWrong = append(l.s.HookWrong, fmt.Sprintf("at %s: %s admitted", when, created.Name))
		}
		return
	}
	l.s.Sent++
	l.latencies = append(l.latencies, d)
	switch {
	case err != nil:
		l.s.Failed++
		l.s.Causes[steadyCause(err.Error())]++
		if len(l.s.Errors) < 10 {
			l.s.Errors = append(l.s.Errors, fmt.Sprintf("at %s: %s", when, headTail(err.Error())))
		}
	case created.Annotations[budgetKey] == "":
		l.s.Unmutated++
		l.s.Causes["admitted unmutated (the mutating webhook failed open)"]++
		if len(l.s.Errors) < 10 {
			l.s.Errors = append(l.s.Errors, fmt.Sprintf("at %s: %s created without %s (fail-open)", when, created.Name, budgetKey))
		}
	default:
		l.s.Created++
	}
}

// steadyCause names why an ordinary create failed.
func steadyCause(msg string) string {
	hook := ""
	if _, rest, ok := strings.Cut(msg, `webhook "`); ok {
		hook, _, _ = strings.Cut(rest, `"`)
		hook = strings.TrimSuffix(hook, ".graceguard.io") + ": "
	}
	switch {
	case strings.Contains(msg, "denied the request") && strings.Contains(msg, "preStop"):
		return hook + "denied unmutated (the mutating webhook's call failed, failurePolicy Ignore)"
	case strings.Contains(msg, "denied the request"):
		return hook + "denied"
	case strings.Contains(msg, "no endpoints available"):
		return hook + "no ready replica (no endpoints available)"
	case strings.Contains(msg, "EOF"), strings.Contains(msg, "broken pipe"), strings.Contains(msg, "connection reset"):
		return hook + "connection closed by the replica (EOF, reset, broken pipe)"
	case strings.Contains(msg, "deadline exceeded"), strings.Contains(msg, "Timeout"):
		return hook + "timeout"
	}
	return hook + "other"
}

// headTail keeps an error's beginning and its end (the cause).
func headTail(s string) string {
	if len(s) <= 300 {
		return s
	}
	return s[:120] + " ... " + s[len(s)-160:]
}

func (l *steadyLoad) finish() *evidence.Steady {
	close(l.stop)
	l.s.Seconds = evidence.S(time.Since(l.start))
	l.wg.Wait()
	slices.Sort(l.latencies)
	if n := len(l.latencies); n > 0 {
		l.s.P50, l.s.P99, l.s.Max = evidence.S(l.latencies[n/2]), evidence.S(l.latencies[(n*99)/100]), evidence.S(l.latencies[n-1])
	}
	return l.s
}

// rotateNamespaceAnnotations is the namespace admin: every nsRotate it
// gives the tenant's opted-in namespace max-work: auto and the next key of
// hostileNamespaceKeys at the largest value the namespace can store.
func rotateNamespaceAnnotations(ctx context.Context, h *evidence.Hostile) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(nsRotate)
		defer t.Stop()
		for i := 0; ; i++ {
			k := hostileNamespaceKeys[i%len(hostileNamespaceKeys)]
			v := strings.Repeat("9", annotationSize-len(k)-len("graceguard.io/max-work")-len("auto"))
			ns, err := kube.CoreV1().Namespaces().Get(ctx, nsHostile, metav1.GetOptions{})
			if err == nil {
				ns.Annotations = map[string]string{"graceguard.io/max-work": "auto", k: v}
				if _, err = kube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err == nil {
					h.NamespaceUpdates++
					h.NamespaceValueBytes = len(v)
				}
			}
			if err != nil {
				GinkgoWriter.Printf("namespace admin: %v\n", err)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// hostileCleanup releases and deletes whatever the attack left, as the
// cluster admin: the attacker's finalizers (should it have died), its Pods,
// the ordinary Pods, and the namespace annotations.
func hostileCleanup(ctx context.Context) {
	pods, err := kube.CoreV1().Pods(nsHostileOut).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, p := range pods.Items {
			if len(p.Finalizers) > 0 {
				_, _ = kube.CoreV1().Pods(nsHostileOut).Patch(ctx, p.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			}
		}
	}
	zero := int64(0)
	for _, ns := range []string{nsHostileOut, nsHostile, nsSteady} {
		_ = kube.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	}
	if ns, err := kube.CoreV1().Namespaces().Get(ctx, nsHostile, metav1.GetOptions{}); err == nil {
		ns.Annotations = nil
		_, _ = kube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
	}
}

// endpointTimeline follows how many endpoints of the webhook Service are
// ready, as the API server's EndpointSlices say.
type endpointTimeline struct {
	mu      sync.Mutex
	start   time.Time
	bySlice map[string]int
	ready   int
	since   time.Time
	none    time.Duration
	changes []string
	done    chan struct{}
}

func followEndpoints(ctx context.Context, start time.Time) *endpointTimeline {
	GinkgoHelper()
	e := &endpointTimeline{start: start, bySlice: map[string]int{}, since: start, done: make(chan struct{})}
	sel := discoveryv1.LabelServiceName + "=" + fullname
	list := must(kube.DiscoveryV1().EndpointSlices(releaseNS).List(ctx, metav1.ListOptions{LabelSelector: sel}))
	for _, sl := range list.Items {
		e.bySlice[sl.Name] = readyEndpoints(&sl)
	}
	e.update(time.Now())
	w := must(kube.DiscoveryV1().EndpointSlices(releaseNS).Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: list.ResourceVersion}))
	go func() {
		defer close(e.done)
		defer w.Stop()
		for ev := range w.ResultChan() {
			sl, ok := ev.Object.(*discoveryv1.EndpointSlice)
			if !ok {
				continue
			}
			e.mu.Lock()
			if ev.Type == watch.Deleted {
				delete(e.bySlice, sl.Name)
			} else {
				e.bySlice[sl.Name] = readyEndpoints(sl)
			}
			e.mu.Unlock()
			e.update(time.Now())
		}
	}()
	return e
}

func readyEndpoints(sl *discoveryv1.EndpointSlice) int {
	n := 0
	for _, ep := range sl.Endpoints {
		if isTrue(ep.Conditions.Ready) {
			n++
		}
	}
	return n
}

func (e *endpointTimeline) update(now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, v := range e.bySlice {
		n += v
	}
	if n == e.ready && len(e.changes) > 0 {
		return
	}
	if e.ready == 0 && len(e.changes) > 0 {
		e.none += now.Sub(e.since)
	}
	e.ready, e.since = n, now
	e.changes = append(e.changes, fmt.Sprintf("%.1f s: %d ready", now.Sub(e.start).Seconds(), n))
}

// stop ends the timeline (its watch ends with ctx) and returns its changes
// and the time no endpoint was ready.
func (e *endpointTimeline) stop() ([]string, evidence.Secs) {
	e.mu.Lock()
	defer e.mu.Unlock()
	none := e.none
	if e.ready == 0 {
		none += time.Since(e.since)
	}
	return slices.Clone(e.changes), evidence.S(none)
}

// ---- graceguard's Pods: memory, metrics, restarts -----------------------

// target is one of graceguard's Pods watched during the attack.
type target struct {
	rep    *evidence.Replica
	ip     string
	cgroup string // the container's memory cgroup (v1), "" if not found
	cpu    string // its cpuacct cgroup
	cpu0   int64
	failc  int64
	oom    int64
	before []promSample
	last   []promSample
	first  *corev1.Pod
}

func newTarget(p corev1.Pod, role string) *target {
	t := &target{rep: &evidence.Replica{Pod: p.Name, Role: role}, ip: p.Status.PodIP, first: &p}
	c := p.Spec.Containers[0]
	if lim, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		t.rep.Limit = lim.Value()
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == c.Name {
			id := strings.TrimPrefix(cs.ContainerID, "containerd://")
			t.cgroup = containerCgroup("memory", string(p.UID), id)
			t.cpu = containerCgroup("cpuacct", string(p.UID), id)
		}
	}
	return t
}

// containerCgroup finds a container's cgroup in a v1 hierarchy (memory,
// cpuacct) under the kubelet's cgroup root (/graceguard, cgroupfs driver).
func containerCgroup(hierarchy, podUID, containerID string) string {
	if containerID == "" {
		return ""
	}
	pod := "pod" + podUID
	root := filepath.Join("/sys/fs/cgroup", hierarchy, "graceguard")
	for _, pattern := range []string{
		filepath.Join(root, "kubepods*", pod, containerID),
		filepath.Join(root, "kubepods*", "*", pod, containerID),
	} {
		if m, _ := filepath.Glob(pattern); len(m) == 1 {
			return m[0]
		}
	}
	return ""
}

func cgroupValue(dir, file string) int64 {
	if dir == "" {
		return -1
	}
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return -1
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return -1
	}
	return v
}

// cpuSince is the CPU time a cpuacct cgroup used since it read ns0.
func cpuSince(dir string, ns0 int64) evidence.Secs {
	ns := cgroupValue(dir, "cpuacct.usage")
	if ns < 0 || ns0 < 0 {
		return -1
	}
	return evidence.Secs(float64(ns-ns0) / 1e9)
}

// oomKills is the oom_kill count of a v1 memory cgroup's oom_control.
func oomKills(dir string) int64 {
	b, err := os.ReadFile(filepath.Join(dir, "memory.oom_control"))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == "oom_kill" {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return -1
}

// resetPeak starts the cgroup's peak (and its count of hitting the limit)
// from now, and notes its OOM kills so far.
func (t *target) resetPeak() {
	t.cpu0 = cgroupValue(t.cpu, "cpuacct.usage")
	if t.cgroup == "" {
		return
	}
	_ = os.WriteFile(filepath.Join(t.cgroup, "memory.max_usage_in_bytes"), []byte("0"), 0)
	t.failc = cgroupValue(t.cgroup, "memory.failcnt")
	t.oom = oomKills(t.cgroup)
}

type promSample struct {
	name, labels string
	value        float64
}

var (
	scrapeClient = &http.Client{Timeout: 3 * time.Second}
	// readyzClient probes as the kubelet does: the chart's timeoutSeconds 1.
	readyzClient = &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
)

const healthPort = 8081

// readyz checks the Pod's /readyz once, as the kubelet's probe does.
func (t *target) readyz() {
	t.rep.ReadyzChecks++
	why := ""
	resp, err := readyzClient.Get(fmt.Sprintf("http://%s:%d/readyz", t.ip, healthPort))
	if err != nil {
		why = trimErr(err)
	} else {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			why = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
		}
	}
	if why == "" {
		return
	}
	t.rep.ReadyzFailed++
	if !slices.Contains(t.rep.ReadyzSamples, why) && len(t.rep.ReadyzSamples) < 5 {
		t.rep.ReadyzSamples = append(t.rep.ReadyzSamples, why)
	}
}

// scrape reads the Pod's /metrics (plain HTTP on the bridge).
func (t *target) scrape() []promSample {
	resp, err := scrapeClient.Get(fmt.Sprintf("http://%s:%d/metrics", t.ip, metricsPort))
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil
	}
	var out []promSample
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		name, labels := line[:i], ""
		if j := strings.IndexByte(name, '{'); j >= 0 {
			name, labels = line[:j], strings.TrimSuffix(line[j+1:i], "}")
		}
		out = append(out, promSample{name: name, labels: labels, value: v})
	}
	return out
}

func sum(samples []promSample, name string) float64 {
	var v float64
	for _, s := range samples {
		if s.name == name {
			v += s.value
		}
	}
	return v
}

// sample scrapes the Pod every second until ctx ends, keeping the peaks.
func (t *target) sample(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if s := t.scrape(); s != nil {
			t.rep.Scrapes++
			t.last = s
			t.rep.RSSPeak = max(t.rep.RSSPeak, int64(sum(s, "process_resident_memory_bytes")))
			t.rep.HeapPeak = max(t.rep.HeapPeak, int64(sum(s, "go_memstats_heap_inuse_bytes")))
			// The server's own peak: a sum of the state gauges, read one
			// after another, can count a connection changing state twice.
			t.rep.ConnsPeak = max(t.rep.ConnsPeak, sum(s, "graceguard_webhook_connections_peak"))
			t.rep.CachedPodsPeak = max(t.rep.CachedPodsPeak, sum(s, "graceguard_observer_pods"))
		}
		if t.rep.Role == "webhook" {
			t.readyz()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// finish records the cgroup's peak, the counters' deltas and the Pod's
// restarts after the attack; p is the Pod as listed now (nil: gone).
func (t *target) finish(p *corev1.Pod) {
	if s := t.scrape(); s != nil {
		t.last = s
	}
	if t.cgroup != "" {
		t.rep.CgroupPeak = cgroupValue(t.cgroup, "memory.max_usage_in_bytes")
		if n := cgroupValue(t.cgroup, "memory.failcnt"); n >= 0 && t.failc >= 0 {
			t.rep.CgroupFailcnt = n - t.failc
		}
		if n := oomKills(t.cgroup); n >= 0 && t.oom >= 0 {
			t.rep.OOMKills = n - t.oom
		}
	} else {
		t.rep.CgroupPeak, t.rep.OOMKills = -1, -1
	}
	t.rep.CPU = cpuSince(t.cpu, t.cpu0)
	if t.rep.Role == "webhook" {
		t.rep.Evicted = map[string]float64{}
		for _, s := range t.last {
			if s.name == "graceguard_webhook_connections_evicted_total" {
				t.rep.Evicted[labelValue(s.labels, "state")] += s.value
			}
		}
		for _, s := range t.before {
			if s.name == "graceguard_webhook_connections_evicted_total" {
				t.rep.Evicted[labelValue(s.labels, "state")] -= s.value
			}
		}
		t.rep.Refused = sum(t.last, "graceguard_webhook_connections_refused_total") - sum(t.before, "graceguard_webhook_connections_refused_total")
		t.rep.HandshakesAborted = sum(t.last, "graceguard_webhook_tls_handshakes_aborted_total") - sum(t.before, "graceguard_webhook_tls_handshakes_aborted_total")
	}
	if p == nil {
		t.rep.Restarts, t.rep.LastState = -1, "the Pod is gone"
		return
	}
	for _, cs := range p.Status.ContainerStatuses {
		t.rep.Restarts += cs.RestartCount
		if term := cs.LastTerminationState.Terminated; term != nil {
			t.rep.LastState = fmt.Sprintf("terminated %s (exit %d) at %s", term.Reason, term.ExitCode, term.FinishedAt.Format(time.RFC3339))
		}
	}
}

// decisionDeltas sums graceguard_admission_decisions_total over the webhook
// replicas, after minus before.
func decisionDeltas(targets []*target) []evidence.Decision {
	m := map[evidence.Decision]float64{}
	key := func(labels string) evidence.Decision {
		return evidence.Decision{Webhook: labelValue(labels, "webhook"), Decision: labelValue(labels, "decision"), Reason: labelValue(labels, "reason")}
	}
	for _, t := range targets {
		if t.rep.Role != "webhook" {
			continue
		}
		for _, s := range t.last {
			if s.name == "graceguard_admission_decisions_total" {
				m[key(s.labels)] += s.value
			}
		}
		for _, s := range t.before {
			if s.name == "graceguard_admission_decisions_total" {
				m[key(s.labels)] -= s.value
			}
		}
	}
	var out []evidence.Decision
	for k, v := range m {
		if v != 0 {
			k.Count = v
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Webhook != b.Webhook {
			return a.Webhook < b.Webhook
		}
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		return a.Decision+a.Reason < b.Decision+b.Reason
	})
	return out
}

func hostileAPIServerMetrics(ctx context.Context) map[string]map[string]float64 {
	return map[string]map[string]float64{
		"requests":  apiserverCounters(ctx, "apiserver_admission_webhook_request_total"),
		"failOpen":  apiserverCounters(ctx, "apiserver_admission_webhook_fail_open_count"),
		"rejection": apiserverCounters(ctx, "apiserver_admission_webhook_rejection_count"),
		"skipped":   apiserverCounters(ctx, "apiserver_admission_match_condition_exclusions_total"),
	}
}

// warningEvents are the Warning events of graceguard's namespace and the
// node's SystemOOM events since since, "reason object ×count: message".
func warningEvents(ctx context.Context, since time.Time) []string {
	var out []string
	add := func(e corev1.Event) {
		last := e.LastTimestamp.Time
		if last.IsZero() {
			last = e.EventTime.Time
		}
		if last.Before(since) {
			return
		}
		n := max(e.Count, 1)
		if e.Series != nil {
			n = max(n, e.Series.Count)
		}
		out = append(out, fmt.Sprintf("%s %s/%s ×%d: %s", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, n, trimErr(fmt.Errorf("%s", e.Message))))
	}
	if evs, err := kube.CoreV1().Events(releaseNS).List(ctx, metav1.ListOptions{FieldSelector: "type=Warning"}); err == nil {
		for _, e := range evs.Items {
			add(e)
		}
	}
	if evs, err := kube.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node,reason=SystemOOM"}); err == nil {
		for _, e := range evs.Items {
			add(e)
		}
	}
	sort.Strings(out)
	return out
}

// ---- checks -------------------------------------------------------------

func hostileChecks(h *evidence.Hostile, ck *evidence.Checks) {
	a := h.Attack
	// Every class through the API server, all at once, for 60 s or more.
	var short []string
	for _, c := range a.Classes {
		// A class whose requests take half a minute each is still under
		// way while its last one waits: from its first start to its last
		// answer.
		if c.Sent == 0 || c.First > 5 || c.Ended-c.First < 60 {
			short = append(short, fmt.Sprintf("%s: %d sent, first at %.1f s, last answer at %.1f s", c.Name, c.Sent, float64(c.First), float64(c.Ended)))
		}
	}
	ck.Add("every class of the tenant's requests ran at once for at least 60 s", "4 classes, each in flight from <= 5 s to >= 60 s later",
		len(a.Classes) == 4 && len(short) == 0, "%d classes; short: %s", len(a.Classes), evidence.OrNone(strings.Join(short, "; ")))

	// The floods: thousands of connections at each replica, reopened as
	// graceguard closed them.
	perTarget := map[string]int{}
	kinds := map[string]bool{}
	for _, f := range a.Floods {
		perTarget[f.Target] += f.Opened
		if f.Opened > 0 {
			kinds[f.Kind] = true
		}
	}
	var fewer []string
	for t, n := range perTarget {
		if n < 1000 {
			fewer = append(fewer, fmt.Sprintf("%s: %d", t, n))
		}
	}
	ck.Add("the floods opened thousands of connections of every kind at both replicas", ">= 1000 per replica, 4 kinds",
		len(perTarget) == 2 && len(fewer) == 0 && len(kinds) == 4, "%s", floodTotals(a.Floods))

	var webhooks []*evidence.Replica
	for _, r := range h.Replicas {
		if r.Role == "webhook" {
			webhooks = append(webhooks, r)
		}
	}
	var over []string
	for _, r := range webhooks {
		if r.Scrapes == 0 || r.ConnsPeak > 256 {
			over = append(over, fmt.Sprintf("%s: peak %g of %d scrapes", r.Pod, r.ConnsPeak, r.Scrapes))
		}
	}
	ck.Add("each replica held at most --max-connections (256) open at once", "<= 256 (scraped every second)", len(webhooks) == 2 && len(over) == 0,
		"%s", replicaList(webhooks, func(r *evidence.Replica) string {
			return fmt.Sprintf("peak %g, evicted %s, refused %g", r.ConnsPeak, evidence.KindList(r.Evicted), r.Refused)
		}))

	// The tenant's reviews reached graceguard: the API server's own count
	// (graceguard's includes the floods' reviews, one per idle connection).
	calls := map[string]float64{}
	for _, m := range h.APIServer {
		calls[m.Name] = m.Requests
	}
	ck.Add("the API server sent the tenant's reviews to graceguard's webhooks", "> 0 calls of each Pod and workload webhook, mutate-pods beyond the ordinary creates",
		calls["mutate-pods.graceguard.io"] > float64(h.Steady.Sent) && calls["validate-pods.graceguard.io"] > 0 && calls["validate-workloads.graceguard.io"] > 0,
		"mutate-pods %g, validate-pods %g, validate-workloads %g (ordinary creates %d)", calls["mutate-pods.graceguard.io"], calls["validate-pods.graceguard.io"],
		calls["validate-workloads.graceguard.io"], h.Steady.Sent)

	s := h.Steady
	// Nine in ten of the creates due over the time they ran are ordinary
	// (hookEvery); allow a tenth of them lost to a loaded machine's clock.
	wantSent := int(0.9 * s.Rate * float64(s.Seconds) * (hookEvery - 1) / hookEvery)
	ck.Add("ordinary creates in another opted-in namespace during the attack: every one admitted and mutated", fmt.Sprintf("100%% of >= %d", wantSent),
		s.Sent >= wantSent && s.Failed == 0 && s.Unmutated == 0, "%d of %d created and mutated (%d failed, %d unmutated; %s); no ready replica for %.1f s",
		s.Created, s.Sent, s.Failed, s.Unmutated, evidence.KindList(s.Causes), float64(h.NoEndpoint))
	ck.Add("Pods with a preStop hook longer than grace among them: every one refused", "refused: "+hookRefusal,
		s.HookSent > 0 && s.HookRefused == s.HookSent, "%d of %d refused; otherwise: %s", s.HookRefused, s.HookSent, evidence.OrNone(strings.Join(s.HookWrong, "; ")))
	if f := h.After; f != nil {
		ck.Add("after the attack: ordinary creates admitted and mutated, hooks longer than grace refused", fmt.Sprintf("%d of %d, %d of %d", f.Sent, f.Sent, f.HookSent, f.HookSent),
			f.Sent > 0 && f.Created == f.Sent && f.HookSent > 0 && f.HookRefused == f.HookSent,
			"%d of %d created and mutated (%s); %d of %d refused (%s); p99 %.0f ms", f.Created, f.Sent, evidence.OrNone(strings.Join(f.Errors, "; ")),
			f.HookRefused, f.HookSent, evidence.OrNone(strings.Join(f.HookWrong, "; ")), 1000*float64(f.P99))
	} else {
		ck.Add("after the attack: ordinary creates admitted and mutated, hooks longer than grace refused", "measured", false, "not measured")
	}
	// The ordinary creates' latency (the goal: p99 under 2 s) is
	// reported in the evidence, not asserted: on a shared 2-core node the
	// attacker, the API server, etcd and both replicas compete for CPU, and
	// a time is a measurement (benchmarks), not a test.

	// Memory: the kernel's own account of each container, from the reset
	// at the attack's start. Unmeasured counts as a failure.
	var mem, heavy []string
	for _, r := range h.Replicas {
		mem = append(mem, fmt.Sprintf("%s %s: peak %s, RSS %s of %s", r.Role, r.Pod, evidence.ByteSize(r.CgroupPeak), evidence.ByteSize(r.RSSPeak), evidence.ByteSize(r.Limit)))
		if r.Limit <= 0 || r.CgroupPeak <= 0 || r.CgroupPeak >= r.Limit || r.RSSPeak >= r.Limit {
			heavy = append(heavy, r.Pod)
		}
	}
	ck.Add("graceguard's peak memory stayed under its limit (cgroup memory.max_usage_in_bytes, measured)", "peak < limit for both replicas and the observer",
		len(h.Replicas) == 3 && len(heavy) == 0, "%s; over or not measured: %s", strings.Join(mem, "; "), evidence.OrNone(strings.Join(heavy, ", ")))

	// Nothing restarted or was OOM-killed.
	var hurt []string
	for _, r := range h.Replicas {
		if r.Restarts != 0 || r.LastState != "" || r.OOMKills != 0 {
			hurt = append(hurt, fmt.Sprintf("%s: %d restarts, last state %q, %d OOM kills", r.Pod, r.Restarts, r.LastState, r.OOMKills))
		}
	}
	ck.Add("both webhook replicas and the observer: no restart, no OOM kill", "restartCount 0, no lastState, cgroup oom_kill +0",
		len(h.Replicas) == 3 && len(hurt) == 0, "%s", evidence.OrNone(strings.Join(hurt, "; ")))
	var ooms []string
	for _, e := range h.Events {
		if strings.HasPrefix(e, "SystemOOM ") || strings.HasPrefix(e, "OOMKilling ") {
			ooms = append(ooms, e)
		}
	}
	ck.Add("no OOM kill on the node during the attack (the kubelet's SystemOOM events)", "none", len(ooms) == 0, "%s", evidence.OrNone(strings.Join(ooms, "; ")))

	ck.Add("the observer ignored the treated Pods of the namespace that did not opt in", "no ShutdownReport there, deletions skipped as namespace-not-treated",
		h.OutsideReports == 0 && h.ObserverSkipped["namespace-not-treated"] > 0,
		"%d reports; skipped %s", h.OutsideReports, evidence.KindList(h.ObserverSkipped))
}

func floodTotals(fs []*evidence.Flood) string {
	var parts []string
	for _, f := range fs {
		parts = append(parts, fmt.Sprintf("%s@%s %d", f.Kind, f.Target, f.Opened))
	}
	return strings.Join(parts, ", ")
}

func replicaList(rs []*evidence.Replica, f func(*evidence.Replica) string) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, r.Pod+": "+f(r))
	}
	return strings.Join(parts, "; ")
}
