package security

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/graceguard/graceguard/internal/fixture"
	"github.com/graceguard/graceguard/internal/flood"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/webhook"
)

// class is one kind of hostile input, sent for a while; run returns what
// it sent and how it was answered.
type class struct {
	name string
	run  func(ctx context.Context) string
}

// The load of each class.
const (
	apiStreams    = 6 // dense Pods through the API server at once
	updateStreams = 2 // dense workload UPDATEs at once
	directClients = 8 // clients posting dense reviews to the webhook's port
	bigClients    = 5 // clients posting 3 MiB reviews during the flood
	// storedFill is what a stored dense workload holds: etcd's default
	// request limit is 1.5 MiB, so that is the largest oldObject the API
	// server can send.
	storedFill = 1<<20 + 256<<10
	// annotationValue is the size of each oversized annotation.
	annotationValue = 256 << 10
)

func (e *env) classes(d time.Duration) []class {
	timed := func(f func(ctx context.Context) string, d time.Duration) func(ctx context.Context) string {
		return func(ctx context.Context) string {
			ctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			return f(ctx)
		}
	}
	// The floods first, the costliest last: memory the runtime has not
	// yet returned to the kernel shows in the next class's peak (the
	// table has the anonymous memory at each class's start).
	var cs []class
	for _, k := range flood.Kinds {
		cs = append(cs, class{"flood: " + string(k), func(ctx context.Context) string { return e.flood(ctx, k) }})
	}
	return append(cs,
		class{"oversized annotations on Pods and namespaces", timed(e.annotations, d)},
		class{"dense Pods through the API server", timed(e.densePods, d)},
		class{"dense Deployment and CronJob UPDATEs through the API server", timed(e.denseUpdates, d)},
		class{"dense reviews posted to the webhook's port", timed(e.direct, d)},
		class{"idle-headers flood and 3 MiB reviews at once", timed(e.floodAndReviews, d+time.Minute)},
		class{"everything at once", timed(e.everything, 2*d)},
	)
}

// tally counts outcomes, keeping the first message of each.
type tally struct {
	mu     sync.Mutex
	counts map[string]int
	first  map[string]string
	took   []time.Duration // of the requests answered
}

// timed records how long an answered request took.
func (t *tally) timed(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.took = append(t.took, d)
}

func (t *tally) add(outcome, msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts == nil {
		t.counts, t.first = map[string]int{}, map[string]string{}
	}
	t.counts[outcome]++
	if _, ok := t.first[outcome]; !ok && msg != "" {
		t.first[outcome] = msg
	}
}

// String is "N: a admitted, b refused ..." with the largest counts first.
func (t *tally) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	total := 0
	var keys []string
	for k, n := range t.counts {
		total += n
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if t.counts[keys[i]] != t.counts[keys[j]] {
			return t.counts[keys[i]] > t.counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", t.counts[k], k))
	}
	if len(t.took) > 0 {
		slices.Sort(t.took)
		parts = append(parts, fmt.Sprintf("each in %s median, %s at most", t.took[len(t.took)/2].Round(10*time.Millisecond), t.took[len(t.took)-1].Round(10*time.Millisecond)))
	}
	return fmt.Sprintf("%d (%s)", total, strings.Join(parts, ", "))
}

// messages are the first message of each outcome, for the log.
func (t *tally) messages() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	for k, m := range t.first {
		fmt.Fprintf(&b, "\n  %s: %.300s", k, m)
	}
	return b.String()
}

// unfinished is a request still unanswered when its class ended.
const unfinished = "unfinished when the class ended"

// outcome is apiOutcome, or unfinished once ctx ended.
func (e *env) outcome(ctx context.Context, err error) (string, string) {
	if ctx.Err() != nil {
		return unfinished, ""
	}
	return apiOutcome(err)
}

// apiOutcome says how the API server answered a request the webhooks
// were called for.
func apiOutcome(err error) (string, string) {
	if err == nil {
		return "admitted", ""
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "failed calling webhook"):
		return "failed calling the webhook", msg
	case strings.Contains(msg, "denied the request"):
		return "refused by graceguard", msg
	case apierrors.IsTimeout(err) || errors.Is(err, context.DeadlineExceeded):
		return "timed out", msg
	default:
		return "refused by the API server", msg
	}
}

// fixtures are the bodies the classes send, built once.
type fixtures struct {
	pods      [][]byte // dense Pods, for the API server
	updates   map[workloadKind][][]byte
	direct    []directReview
	big       []directReview // the dense Pods' reviews, at the API server's size
	annotated [][]byte
	ordinary  []byte
}

type directReview struct {
	path string
	body []byte
}

var fx fixtures

// setUp makes the namespaces and stored workloads the classes use, and
// builds their bodies.
func (e *env) setUp(ctx context.Context) error {
	// The dense namespace opts in only once its workloads are stored:
	// graceguard refuses to create them (256 containers are more than it
	// treats), but each UPDATE of a workload that exists is its to review.
	if err := e.namespace(ctx, denseNS, nil, false); err != nil {
		return err
	}
	if err := e.namespace(ctx, trickleNS, nil, true); err != nil {
		return err
	}
	// One namespace per annotation graceguard reads there, at the API
	// server's limit for a namespace's annotations (256 KiB in all).
	for i, key := range namespaceKeys() {
		value := strings.Repeat("x", annotationValue-len(key)-1)
		if err := e.namespace(ctx, "annotated-"+strconv.Itoa(i), map[string]string{key: value}, true); err != nil {
			return err
		}
	}
	for _, s := range shapes {
		fx.pods = append(fx.pods, s.podJSON("dense", denseNS, denseFill, 'a'))
	}
	e.stored = map[workloadKind]string{}
	fx.updates = map[workloadKind][][]byte{}
	stored := shapes[len(shapes)-1] // 256 containers with large probes
	for _, k := range []workloadKind{deployment, cronJob} {
		rv, err := e.storeLargest(ctx, k, stored)
		if err != nil {
			return err
		}
		e.stored[k] = rv
		for _, s := range shapes {
			if s.valid {
				fx.updates[k] = append(fx.updates[k], k.workloadJSON("dense", denseNS, rv, s, denseFill, 'b'))
			}
		}
	}
	optIn := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, mutate.LabelInject, mutate.LabelInjectEnabled)
	if _, err := e.kube.CoreV1().Namespaces().Patch(ctx, denseNS, types.MergePatchType, optIn, metav1.PatchOptions{}); err != nil {
		return err
	}
	for i, s := range shapes {
		path := webhook.PathValidatePod
		if i%2 == 1 {
			path = webhook.PathMutatePod
		}
		fx.direct = append(fx.direct, directReview{path, review("CREATE", "", "Pod", "pods", denseNS, s.podJSON("dense", denseNS, directFill, 'a'), nil)})
	}
	for _, pod := range fx.pods {
		fx.big = append(fx.big, directReview{webhook.PathValidatePod, review("CREATE", "", "Pod", "pods", denseNS, pod, nil)})
	}
	old := deployment.workloadJSON("dense", denseNS, "1", stored, directFill/2-8<<10, 'a')
	obj := deployment.workloadJSON("dense", denseNS, "1", stored, directFill/2-8<<10, 'b')
	fx.direct = append(fx.direct, directReview{webhook.PathValidateWorkloads, review("UPDATE", "apps", "Deployment", "deployments", denseNS, obj, old)})
	fx.annotated = annotatedPods(denseNS, annotationValue)
	p := fixture.TypicalPod()
	p.Namespace = ""
	fx.ordinary = fixture.JSON(p)
	return nil
}

// namespace creates a namespace, opted in or not.
func (e *env) namespace(ctx context.Context, name string, annotations map[string]string, optedIn bool) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
	if optedIn {
		ns.Labels = map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}
	}
	_, err := e.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// storeLargest creates the workload of kind k with a template of shape s
// as large as the API server stores (etcd's request limit), returning its
// resourceVersion.
func (e *env) storeLargest(ctx context.Context, k workloadKind, s shape) (string, error) {
	var last error
	for n := storedFill; n > 256<<10; n = n * 9 / 10 {
		body := k.workloadJSON("dense", denseNS, "", s, n, 'a')
		raw, err := e.kube.CoreV1().RESTClient().Post().AbsPath(apiPath(k.apiVersion), "namespaces", denseNS, k.resource).
			SetHeader("Content-Type", "application/json").Body(body).Do(ctx).Raw()
		if err == nil {
			var m metav1.PartialObjectMetadata
			if err := jsonUnmarshal(raw, &m); err != nil {
				return "", err
			}
			return m.ResourceVersion, nil
		}
		last = err
		var st apierrors.APIStatus
		if errors.As(err, &st) {
			last = fmt.Errorf("%w: %v", err, st.Status().Details)
		}
	}
	return "", fmt.Errorf("storing a dense %s: %w", k.kind, last)
}

func apiPath(apiVersion string) string {
	if apiVersion == "v1" {
		return "/api/v1"
	}
	return "/apis/" + apiVersion
}

// densePods creates (dry run) the dense Pods through the API server,
// apiStreams at once, until ctx ends.
func (e *env) densePods(ctx context.Context) string {
	var t tally
	e.streams(ctx, apiStreams, func(i int) {
		body := fx.pods[i%len(fx.pods)]
		start := time.Now()
		err := e.kube.CoreV1().RESTClient().Post().AbsPath("/api/v1/namespaces", denseNS, "pods").Param("dryRun", "All").
			SetHeader("Content-Type", "application/json").Body(body).Do(ctx).Error()
		t.add(e.outcome(ctx, err))
		if ctx.Err() == nil {
			t.timed(time.Since(start))
		}
	})
	return "dense Pods: " + t.String() + t.messages()
}

// denseUpdates updates (dry run) the stored dense Deployment and CronJob
// with other dense templates through the API server: object and
// oldObject, updateStreams at once.
func (e *env) denseUpdates(ctx context.Context) string {
	var t tally
	kinds := []workloadKind{deployment, cronJob}
	e.streams(ctx, updateStreams, func(i int) {
		k := kinds[i%len(kinds)]
		body := fx.updates[k][(i/len(kinds))%len(fx.updates[k])]
		start := time.Now()
		err := e.kube.CoreV1().RESTClient().Put().AbsPath(apiPath(k.apiVersion), "namespaces", denseNS, k.resource, "dense").Param("dryRun", "All").
			SetHeader("Content-Type", "application/json").Body(body).Do(ctx).Error()
		t.add(e.outcome(ctx, err))
		if ctx.Err() == nil {
			t.timed(time.Since(start))
		}
	})
	return "dense UPDATEs: " + t.String() + t.messages()
}

// direct posts dense reviews of up to the webhook's own 7 MiB limit to
// its port, directClients at once, one of them without a Content-Length
// (chunked), until ctx ends.
func (e *env) direct(ctx context.Context) string {
	return "reviews: " + e.post(ctx, directClients, fx.direct)
}

// post posts reviews to the webhook's port from n clients at once, one of
// them without a Content-Length (chunked), until ctx ends.
func (e *env) post(ctx context.Context, n int, reviews []directReview) string {
	var t tally
	clients := make([]*http.Client, n)
	for i := range clients {
		clients[i] = e.api.HTTPClient()
		defer clients[i].CloseIdleConnections()
	}
	e.streamsOf(ctx, n, func(client, i int) {
		r := reviews[i%len(reviews)]
		var body io.Reader = bytes.NewReader(r.body)
		if client == 0 {
			body = io.MultiReader(body) // no length: sent chunked
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.api.WebhookURL+r.path+"?timeout=5s", body)
		if err != nil {
			panic(err)
		}
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := clients[client].Do(req)
		if ctx.Err() != nil {
			if err == nil {
				resp.Body.Close()
			}
			t.add(unfinished, "")
			return
		}
		if err != nil {
			t.add("connection error", err.Error())
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.timed(time.Since(start))
		switch resp.StatusCode {
		case http.StatusOK:
			t.add("answered", "")
		case http.StatusTooManyRequests:
			t.add("shed (429)", string(b))
		default:
			t.add("HTTP "+strconv.Itoa(resp.StatusCode), string(b))
		}
	})
	return t.String() + t.messages()
}

// floodAndReviews is the worst an in-cluster client can build (it found
// 134 MiB in process, docs/security.md): the costliest flood, 10,000
// idle-headers connections, while bigClients clients post the 3 MiB
// reviews the API server can send, one after another, until the flood
// ends, the flood held until then.
func (e *env) floodAndReviews(ctx context.Context) string {
	var reviews string
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); reviews = e.post(rctx, bigClients, fx.big) }()
	held := "flood: "
	if f, err := flood.Start(flood.IdleHeaders, e.webhookAddr, floodConns, 0); err != nil {
		held += err.Error()
	} else {
		c, err := f.Wait(10 * time.Minute)
		if err != nil {
			held += err.Error()
		} else {
			held = fmt.Sprintf("%s: %d of %d connections opened (%d failed), held until the class ended", flood.Descriptions[flood.IdleHeaders], c.Opened, floodConns, c.Failed)
		}
		<-ctx.Done()
		f.Stop()
	}
	stop()
	<-done
	return held + "; 3 MiB reviews: " + reviews
}

// flood opens floodConns connections of kind (active ones: 1,000, each
// holds a review's slot until its deadline) as fast as it can, holds them
// 5s and closes them.
func (e *env) flood(ctx context.Context, k flood.Kind) string {
	count := floodConns
	if k == flood.Active {
		count = 1000
	}
	start := time.Now()
	f, err := flood.Start(k, e.webhookAddr, count, 0)
	if err != nil {
		return "flood: " + err.Error()
	}
	defer f.Stop()
	c, err := f.Wait(10 * time.Minute)
	if err != nil {
		return "flood: " + err.Error()
	}
	opened := time.Since(start)
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
	}
	return fmt.Sprintf("%s: %d of %d connections opened (%d failed) in %.0fs, held 5s", flood.Descriptions[k], c.Opened, count, c.Failed, opened.Seconds())
}

// annotations creates (dry run) Pods carrying every key graceguard reads
// at 256 KiB, and ordinary Pods in namespaces carrying each namespace key
// at the API server's limit, while those namespaces' annotations change
// (each change is a 256 KiB watch event for the webhook's cache).
func (e *env) annotations(ctx context.Context) string {
	var pods, inNS, updates tally
	keys := namespaceKeys()
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		e.streams(ctx, 3, func(i int) {
			err := e.kube.CoreV1().RESTClient().Post().AbsPath("/api/v1/namespaces", denseNS, "pods").Param("dryRun", "All").
				SetHeader("Content-Type", "application/json").Body(fx.annotated[i%len(fx.annotated)]).Do(ctx).Error()
			pods.add(e.outcome(ctx, err))
		})
	}()
	go func() {
		defer wg.Done()
		e.streams(ctx, 1, func(i int) {
			ns := "annotated-" + strconv.Itoa(i%len(keys))
			err := e.kube.CoreV1().RESTClient().Post().AbsPath("/api/v1/namespaces", ns, "pods").Param("dryRun", "All").
				SetHeader("Content-Type", "application/json").Body(fx.ordinary).Do(ctx).Error()
			inNS.add(e.outcome(ctx, err))
		})
	}()
	go func() {
		defer wg.Done()
		e.streams(ctx, 1, func(i int) {
			key := keys[i%len(keys)]
			value := strings.Repeat(string(rune('a'+i%26)), annotationValue-len(key)-1)
			patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, key, value)
			_, err := e.kube.CoreV1().Namespaces().Patch(ctx, "annotated-"+strconv.Itoa(i%len(keys)), types.MergePatchType, patch, metav1.PatchOptions{})
			if ctx.Err() == nil {
				if err != nil {
					updates.add("failed", err.Error())
				} else {
					updates.add("changed", "")
				}
			}
		})
	}()
	wg.Wait()
	return fmt.Sprintf("Pods with every key at 256 KiB: %s; Pods in namespaces with a key at 256 KiB: %s; namespace changes: %s%s%s",
		pods.String(), inNS.String(), updates.String(), pods.messages(), inNS.messages())
}

// everything sends every class at once: the dense Pods, the UPDATEs, the
// reviews straight to the port, the oversized annotations, and the floods
// one kind after another.
func (e *env) everything(ctx context.Context) string {
	parts := make([]string, 5)
	var wg sync.WaitGroup
	for i, f := range []func(context.Context) string{e.densePods, e.denseUpdates, e.direct, e.annotations} {
		wg.Add(1)
		go func() { defer wg.Done(); parts[i] = f(ctx) }()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		var floods []string
		kinds := []flood.Kind{flood.IdleHeaders, flood.Headers, flood.Hello, flood.Idle, flood.Handshake, flood.TCP}
		for i := 0; ctx.Err() == nil; i++ {
			floods = append(floods, e.flood(ctx, kinds[i%len(kinds)]))
		}
		parts[4] = strings.Join(floods, "; ")
	}()
	wg.Wait()
	return strings.Join(parts, "\n")
}

// streams runs n goroutines calling f with 0, 1, 2, ... (each its own
// sequence, offset by its index) until ctx ends.
func (e *env) streams(ctx context.Context, n int, f func(i int)) {
	e.streamsOf(ctx, n, func(_, i int) { f(i) })
}

func (e *env) streamsOf(ctx context.Context, n int, f func(stream, i int)) {
	var wg sync.WaitGroup
	for s := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := s; ctx.Err() == nil; i += n {
				f(s, i)
			}
		}()
	}
	wg.Wait()
}

// trickle creates ordinary Pods through the API server, one after another
// five a second, for as long as the report runs: whether they are
// admitted during a class is what a cluster's users see of it.
type trickle struct {
	mu       sync.Mutex
	attempts []attempt
	cancel   context.CancelFunc
	done     chan struct{}
}

type attempt struct {
	at   time.Time
	took time.Duration
	err  error
}

func startTrickle(ctx context.Context, kube kubernetes.Interface, namespace string) *trickle {
	ctx, cancel := context.WithCancel(ctx)
	t := &trickle{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			p := fixture.TypicalPod()
			p.Namespace = namespace
			cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
			start := time.Now()
			_, err := kube.CoreV1().Pods(namespace).Create(cctx, p, metav1.CreateOptions{})
			ccancel()
			if ctx.Err() != nil {
				return
			}
			t.mu.Lock()
			t.attempts = append(t.attempts, attempt{start, time.Since(start), err})
			t.mu.Unlock()
		}
	}()
	return t
}

func (t *trickle) stop() { t.cancel(); <-t.done }

// creates is what the trickle saw between from and to.
type creates struct {
	n, ok    int
	p50, p99 time.Duration
	firstErr string
}

func (t *trickle) window(from, to time.Time) creates {
	t.mu.Lock()
	defer t.mu.Unlock()
	var c creates
	var took []time.Duration
	for _, a := range t.attempts {
		if a.at.Before(from) || a.at.After(to) {
			continue
		}
		c.n++
		took = append(took, a.took)
		if a.err == nil {
			c.ok++
		} else if c.firstErr == "" {
			c.firstErr = a.err.Error()
		}
	}
	slices.Sort(took)
	if len(took) > 0 {
		c.p50 = took[len(took)/2]
		c.p99 = took[min(len(took)-1, len(took)*99/100)]
	}
	return c
}
