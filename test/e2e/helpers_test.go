//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/graceguard/graceguard/test/e2e/evidence"
)

// ---- objects ----------------------------------------------------------

// appContainer is the drain app with nothing about shutdown of its own.
func appContainer() corev1.Container {
	return corev1.Container{
		Name:            "app",
		Image:           drainappImage,
		ImagePullPolicy: corev1.PullNever,
		Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: appPort}},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
		}},
	}
}

// ownProbes are the probes graceguard would add from the readiness-path and
// liveness-path annotations (docs/annotations.md), for the arms without
// graceguard: the comparison differs only in the shutdown.
func ownProbes(c *corev1.Container) {
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(appPort)}},
		PeriodSeconds: 2, FailureThreshold: 2, TimeoutSeconds: 1,
	}
	c.LivenessProbe = &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/live", Port: intstr.FromInt32(appPort)}},
		InitialDelaySeconds: 10, PeriodSeconds: 10, FailureThreshold: 3,
	}
}

func appPod(ns, name string, labels, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{appContainer()}},
	}
}

func appService(ns, name string, selector map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Selector: selector,
			Ports:    []corev1.ServicePort{{Name: "http", Port: appPort, TargetPort: intstr.FromInt32(appPort)}},
		},
	}
}

func appDeployment(ns, name string, replicas int32, annotations map[string]string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	zero, one := intstr.FromInt32(0), intstr.FromInt32(1)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &zero, MaxSurge: &one}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{appContainer()}},
			},
		},
	}
}

// ---- waiting ----------------------------------------------------------

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func waitPodReady(ctx context.Context, ns, name string) *corev1.Pod {
	GinkgoHelper()
	var pod *corev1.Pod
	Eventually(func(g Gomega) {
		p, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		pod = p
		g.Expect(podReady(p)).To(BeTrue(), "pod %s/%s Ready (phase %s)", ns, name, p.Status.Phase)
	}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	return pod
}

// waitDeploymentDone waits until every replica runs the latest template and
// is available, and no Pod of an older template is left (terminated).
func waitDeploymentDone(ctx context.Context, ns, name string, timeout time.Duration) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		want := *d.Spec.Replicas
		st := d.Status
		g.Expect(st.ObservedGeneration).To(BeNumerically(">=", d.Generation))
		g.Expect([]int32{st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, st.AvailableReplicas}).To(HaveEach(want), "deployment %s/%s status %+v", ns, name, st)
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(d.Spec.Selector)})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods.Items).To(HaveLen(int(want)), "only the new Pods are left in %s", ns)
	}).WithContext(ctx).WithTimeout(timeout).WithPolling(250 * time.Millisecond).Should(Succeed())
}

// readyPodIPs lists the Ready Pods of a selector that are not terminating.
func readyPods(ctx context.Context, ns, selector string) []corev1.Pod {
	GinkgoHelper()
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	Expect(err).NotTo(HaveOccurred())
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && podReady(&p) {
			out = append(out, p)
		}
	}
	return out
}

// podGone watches a Pod until it is deleted, noting its last container
// termination state. It returns when the Pod is gone or ctx ends.
type podWatch struct {
	mu       sync.Mutex
	gone     time.Time
	exitCode *int32
	reason   string
	done     chan struct{}
}

func watchPod(ctx context.Context, ns, name string) *podWatch {
	GinkgoHelper()
	pw := &podWatch{done: make(chan struct{})}
	w, err := kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer GinkgoRecover()
		defer close(pw.done)
		defer w.Stop()
		for e := range w.ResultChan() {
			p, ok := e.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			pw.mu.Lock()
			for _, cs := range p.Status.ContainerStatuses {
				if t := cs.State.Terminated; t != nil {
					code := t.ExitCode
					pw.exitCode, pw.reason = &code, t.Reason
				}
			}
			if e.Type == watch.Deleted {
				pw.gone = time.Now()
				pw.mu.Unlock()
				return
			}
			pw.mu.Unlock()
		}
	}()
	return pw
}

func (pw *podWatch) wait(timeout time.Duration) (gone time.Time, exitCode *int32, reason string) {
	select {
	case <-pw.done:
	case <-time.After(timeout):
	}
	pw.mu.Lock()
	defer pw.mu.Unlock()
	return pw.gone, pw.exitCode, pw.reason
}

// ---- the app's log ----------------------------------------------------

// appEvent is one structured line of the drain app's log.
type appEvent struct {
	TS       time.Time
	Event    string
	Active   *int
	Received time.Time // when the test read it
	Raw      string
}

// logFollower streams a container's log through the API server (kubelet
// → apiserver → here) and keeps every JSON line.
type logFollower struct {
	mu     sync.Mutex
	raw    []string
	events []appEvent
	notify chan struct{}
	done   chan struct{}
	err    error
}

func followLog(ctx context.Context, ns, pod string) *logFollower {
	GinkgoHelper()
	return followContainerLog(ctx, ns, pod, "app")
}

func followContainerLog(ctx context.Context, ns, pod, container string) *logFollower {
	GinkgoHelper()
	lf := &logFollower{notify: make(chan struct{}, 1), done: make(chan struct{})}
	stream, err := kube.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, Follow: true}).Stream(ctx)
	Expect(err).NotTo(HaveOccurred(), "following the log of %s/%s", ns, pod)
	go func() {
		defer close(lf.done)
		defer stream.Close()
		s := bufio.NewScanner(stream)
		for s.Scan() {
			var raw struct {
				TS     string `json:"ts"`
				Event  string `json:"event"`
				Active *int   `json:"active"`
			}
			line := s.Text()
			lf.mu.Lock()
			lf.raw = append(lf.raw, line)
			lf.mu.Unlock()
			if json.Unmarshal([]byte(line), &raw) != nil || raw.Event == "" {
				continue
			}
			ts, _ := time.Parse(time.RFC3339Nano, raw.TS)
			lf.mu.Lock()
			lf.events = append(lf.events, appEvent{TS: ts, Event: raw.Event, Active: raw.Active, Received: time.Now(), Raw: line})
			lf.mu.Unlock()
			select {
			case lf.notify <- struct{}{}:
			default:
			}
		}
		lf.mu.Lock()
		lf.err = s.Err()
		lf.mu.Unlock()
	}()
	return lf
}

func (lf *logFollower) snapshot() []appEvent {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	return slices.Clone(lf.events)
}

// waitFor returns the first event named name, waiting up to timeout.
func (lf *logFollower) waitFor(name string, timeout time.Duration) (appEvent, bool) {
	deadline := time.After(timeout)
	for {
		for _, e := range lf.snapshot() {
			if e.Event == name {
				return e, true
			}
		}
		select {
		case <-lf.notify:
		case <-lf.done:
			for _, e := range lf.snapshot() {
				if e.Event == name {
					return e, true
				}
			}
			return appEvent{}, false
		case <-deadline:
			return appEvent{}, false
		}
	}
}

// waitEnd waits for the stream to end (the container exited).
func (lf *logFollower) waitEnd(timeout time.Duration) bool {
	select {
	case <-lf.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

func (lf *logFollower) first(name string) *appEvent {
	for _, e := range lf.snapshot() {
		if e.Event == name {
			return &e
		}
	}
	return nil
}

// order lists the shutdown-relevant events: work_started, sigterm
// active=N, work_completed, shutdown_complete (not listening, not rejected
// requests).
func (lf *logFollower) order() []string {
	var out []string
	for _, e := range lf.snapshot() {
		switch e.Event {
		case "work_started", "work_completed", "shutdown_complete":
			out = append(out, e.Event)
		case "sigterm":
			a := -1
			if e.Active != nil {
				a = *e.Active
			}
			out = append(out, fmt.Sprintf("sigterm active=%d", a))
		}
	}
	return out
}

// lines converts the log to evidence, times relative to t0.
func (lf *logFollower) lines(t0 time.Time) []evidence.LogLine {
	var out []evidence.LogLine
	for _, e := range lf.snapshot() {
		out = append(out, evidence.LogLine{At: evidence.S(e.TS.Sub(t0)), TS: e.TS.Format(time.RFC3339Nano), Event: e.Event, Active: e.Active})
	}
	return out
}

// saveLog writes the raw log lines next to the evidence.
func (lf *logFollower) save(name string) {
	lf.mu.Lock()
	text := strings.Join(lf.raw, "\n") + "\n"
	lf.mu.Unlock()
	_ = os.WriteFile(filepath.Join(outDir, name+".log"), []byte(text), 0o644)
}

// saveLogs writes the current logs of every Pod of a selector next to the
// evidence (best effort: for post-mortems).
func saveLogs(ctx context.Context, ns, selector, prefix string) {
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			b, err := kube.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(ctx)
			if err != nil {
				b = []byte(err.Error())
			}
			_ = os.WriteFile(filepath.Join(outDir, prefix+"-"+p.Name+".log"), b, 0o644)
		}
	}
}

// ---- EndpointSlices ---------------------------------------------------

// endpointWatch records the first EndpointSlice update in which ip is
// ready=false and terminating=true.
type endpointWatch struct {
	mu    sync.Mutex
	at    time.Time
	conds discoveryv1.EndpointConditions
	seen  chan struct{}
}

func watchEndpoint(ctx context.Context, ns, service, ip string) *endpointWatch {
	GinkgoHelper()
	sel := discoveryv1.LabelServiceName + "=" + service
	list, err := kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	Expect(err).NotTo(HaveOccurred())
	w, err := kube.DiscoveryV1().EndpointSlices(ns).Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: list.ResourceVersion})
	Expect(err).NotTo(HaveOccurred())
	ew := &endpointWatch{seen: make(chan struct{})}
	go func() {
		defer w.Stop()
		for e := range w.ResultChan() {
			s, ok := e.Object.(*discoveryv1.EndpointSlice)
			if !ok {
				continue
			}
			for _, ep := range s.Endpoints {
				if slices.Contains(ep.Addresses, ip) && !isTrue(ep.Conditions.Ready) && isTrue(ep.Conditions.Terminating) {
					ew.mu.Lock()
					ew.at, ew.conds = time.Now(), ep.Conditions
					ew.mu.Unlock()
					close(ew.seen)
					return
				}
			}
		}
	}()
	return ew
}

func (ew *endpointWatch) result() (time.Time, discoveryv1.EndpointConditions) {
	ew.mu.Lock()
	defer ew.mu.Unlock()
	return ew.at, ew.conds
}

func waitEndpointReady(ctx context.Context, ns, service, ip string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		list, err := kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
		g.Expect(err).NotTo(HaveOccurred())
		found := false
		for _, s := range list.Items {
			for _, ep := range s.Endpoints {
				if slices.Contains(ep.Addresses, ip) && isTrue(ep.Conditions.Ready) {
					found = true
				}
			}
		}
		g.Expect(found).To(BeTrue(), "endpoint %s ready in the EndpointSlices of %s/%s", ip, ns, service)
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
}

func isTrue(b *bool) bool { return b != nil && *b }

func condString(c discoveryv1.EndpointConditions) string {
	f := func(b *bool) string {
		if b == nil {
			return "nil"
		}
		return strconv.FormatBool(*b)
	}
	return fmt.Sprintf("ready=%s serving=%s terminating=%s", f(c.Ready), f(c.Serving), f(c.Terminating))
}

// ---- HTTP -------------------------------------------------------------

// newClient is a plain HTTP client without keep-alives: every request is a
// new TCP connection to the Pod IP over the gg0 bridge.
func newClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DisableKeepAlives: true,
			DialContext:       (&net.Dialer{Timeout: 3 * time.Second}).DialContext,
			Proxy:             nil,
		},
	}
}

// result is one HTTP exchange.
type result struct {
	start, end time.Time
	code       int
	body       string
	err        error
}

func (r result) String() string {
	if r.err != nil {
		return "error (" + errKind(r.err) + "): " + trimErr(r.err)
	}
	return fmt.Sprintf("%d %s", r.code, strings.TrimSpace(r.body))
}

func (r result) completed() bool {
	return r.err == nil && r.code == http.StatusOK && strings.Contains(r.body, `"completed":true`)
}

func get(ctx context.Context, c *http.Client, url string) result {
	r := result{start: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		r.err, r.end = err, time.Now()
		return r
	}
	resp, err := c.Do(req)
	if err != nil {
		r.err, r.end = err, time.Now()
		return r
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	r.code, r.body, r.err, r.end = resp.StatusCode, string(b), err, time.Now()
	return r
}

// errKind classifies a client error the way the rollout report counts
// them.
func errKind(err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return ""
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection_refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection_reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host_unreachable"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "eof"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "other"
}

func trimErr(err error) string {
	s := err.Error()
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}

// ---- metrics ----------------------------------------------------------

// apiserverCounters sums the apiserver's counter metric by webhook name.
func apiserverCounters(ctx context.Context, metric string) map[string]float64 {
	GinkgoHelper()
	return apiserverCountersBy(ctx, metric, "name")
}

// apiserverCountersBy sums the API server's counter metric by the value of
// one of its labels (its series with a value for the others summed).
func apiserverCountersBy(ctx context.Context, metric, label string) map[string]float64 {
	GinkgoHelper()
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, metric+"{") {
			continue
		}
		i := strings.LastIndexByte(line, '}')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[i+1:]), 64)
		if err != nil {
			continue
		}
		name := labelValue(line[len(metric)+1:i], label)
		out[name] += v
	}
	return out
}

func labelValue(labels, key string) string {
	for _, kv := range strings.Split(labels, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k == key {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// ---- misc -------------------------------------------------------------

func restartTemplate(ctx context.Context, ns, name string) {
	GinkgoHelper()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
	_, err := kube.AppsV1().Deployments(ns).Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	Expect(err).NotTo(HaveOccurred(), "rollout restart of %s/%s", ns, name)
}

func must[T any](o T, err error) T {
	GinkgoHelper()
	Expect(err).NotTo(HaveOccurred())
	return o
}

// preStopString describes a container's preStop hook for the evidence.
func preStopString(c corev1.Container) string {
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		return "none"
	}
	h := c.Lifecycle.PreStop
	switch {
	case h.Sleep != nil:
		return fmt.Sprintf("sleep %ds", h.Sleep.Seconds)
	case h.Exec != nil:
		return "exec " + strings.Join(h.Exec.Command, " ")
	case h.HTTPGet != nil:
		return "httpGet " + h.HTTPGet.Path
	}
	return "other"
}

func probeString(p *corev1.Probe) string {
	if p == nil {
		return "none"
	}
	if p.HTTPGet != nil {
		return fmt.Sprintf("httpGet %s:%s period=%ds failureThreshold=%d", p.HTTPGet.Path, p.HTTPGet.Port.String(), p.PeriodSeconds, p.FailureThreshold)
	}
	return "other"
}

func grace(p *corev1.Pod) int64 {
	if p.Spec.TerminationGracePeriodSeconds == nil {
		return -1
	}
	return *p.Spec.TerminationGracePeriodSeconds
}

func since(t0, t time.Time) evidence.At {
	if t.IsZero() {
		return nil
	}
	return evidence.AtOf(t.Sub(t0))
}
