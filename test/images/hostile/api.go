package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/graceguard/graceguard/test/e2e/evidence"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// api is the API server as the Pod's ServiceAccount sees it: the kubernetes
// Service, TLS verified with the projected CA, the projected token.
type api struct {
	base   string
	token  string
	client *http.Client
}

func inCluster() (*api, error) {
	h, p := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if h == "" || p == "" {
		return nil, errors.New("KUBERNETES_SERVICE_HOST/PORT not set: not in a Pod")
	}
	token, err := os.ReadFile(saDir + "/token")
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no certificate in ca.crt")
	}
	return newAPI("https://"+net.JoinHostPort(h, p), strings.TrimSpace(string(token)), &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}), nil
}

func newAPI(base, token string, tc *tls.Config) *api {
	return &api{base: base, token: token, client: &http.Client{
		// A 3 MiB create through two webhooks on a loaded node takes
		// seconds; the API server's own timeout is 60 s.
		Timeout:   90 * time.Second,
		Transport: &http.Transport{TLSClientConfig: tc, MaxIdleConnsPerHost: 16, ForceAttemptHTTP2: false},
	}}
}

// answer is the API server's answer to one request.
type answer struct {
	code int
	msg  string // a Status's message, for codes >= 400
	body []byte // a success's body, when asked for
	err  error
}

// do sends one request; keep asks for a success's body.
func (a *api) do(ctx context.Context, method, path, contentType string, body []byte, keep bool) answer {
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, bytes.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Accept", "application/json")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	an := answer{code: resp.StatusCode}
	if resp.StatusCode < 300 && !keep {
		_, err = io.Copy(io.Discard, resp.Body)
		an.err = err
		return an
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		an.err = err
		return an
	}
	if resp.StatusCode < 300 {
		an.body = b
		return an
	}
	var st struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &st) == nil && st.Message != "" {
		an.msg = st.Message
	} else {
		an.msg = string(b)
	}
	return an
}

// outcome names an answer's kind, as the class tables count them.
func outcome(an answer) string {
	m := an.msg
	switch {
	case an.err != nil:
		return "no answer"
	case an.code < 300:
		return "admitted"
	case strings.Contains(m, "denied the request"):
		return "denied by " + webhookIn(m)
	case strings.Contains(m, "failed calling webhook"):
		return "call to " + webhookIn(m) + " failed"
	case strings.Contains(m, "request is too large"), strings.Contains(m, "larger than max"):
		return "too large for etcd"
	case an.code == http.StatusRequestEntityTooLarge:
		return "too large for the API server"
	case an.code == http.StatusUnprocessableEntity:
		return "invalid (API server validation)"
	case an.code == http.StatusTooManyRequests:
		return "throttled by the API server"
	}
	return fmt.Sprintf("HTTP %d", an.code)
}

// webhookIn is the webhook an admission error names, without its domain.
func webhookIn(msg string) string {
	_, rest, ok := strings.Cut(msg, `webhook "`)
	if !ok {
		return "a webhook"
	}
	name, _, _ := strings.Cut(rest, `"`)
	return strings.TrimSuffix(name, ".graceguard.io")
}

// class counts one class of requests.
type class struct {
	mu    sync.Mutex
	t0    time.Time
	ev    evidence.AttackClass
	first bool
	took  []time.Duration
}

func newClass(name string, streams int, t0 time.Time, shapes ...[]shape) *class {
	c := &class{t0: t0, ev: evidence.AttackClass{Name: name, Streams: streams, Outcomes: map[string]int{}, Samples: map[string]string{}}}
	for _, list := range shapes {
		for _, s := range list {
			c.ev.Shapes = append(c.ev.Shapes, s.String())
		}
	}
	return c
}

// record counts one request that started at start.
func (c *class) record(start time.Time, bodyLen int, an answer) {
	kind := outcome(an)
	c.mu.Lock()
	defer c.mu.Unlock()
	at := evidence.S(start.Sub(c.t0))
	if !c.first {
		c.ev.First, c.first = at, true
	}
	c.ev.Last = max(c.ev.Last, at)
	c.ev.Ended = max(c.ev.Ended, evidence.S(time.Since(c.t0)))
	c.ev.Sent++
	c.ev.Bytes += int64(bodyLen)
	c.ev.Largest = max(c.ev.Largest, bodyLen)
	c.ev.Outcomes[kind]++
	c.took = append(c.took, time.Since(start))
	if _, ok := c.ev.Samples[kind]; !ok && kind != "admitted" {
		msg := an.msg
		if an.err != nil {
			msg = an.err.Error()
		}
		c.ev.Samples[kind] = clip(msg, 300)
	}
}

func (c *class) snapshot() evidence.AttackClass {
	c.mu.Lock()
	defer c.mu.Unlock()
	ev := c.ev
	ev.Outcomes = map[string]int{}
	for k, v := range c.ev.Outcomes {
		ev.Outcomes[k] = v
	}
	ev.Samples = map[string]string{}
	for k, v := range c.ev.Samples {
		ev.Samples[k] = v
	}
	took := slices.Clone(c.took)
	slices.Sort(took)
	if n := len(took); n > 0 {
		ev.P50, ev.Max = evidence.S(took[n/2]), evidence.S(took[n-1])
	}
	return ev
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// send runs one request of class c.
func (a *api) send(c *class, method, path, contentType string, body []byte) answer {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	an := a.do(ctx, method, path, contentType, body, false)
	c.record(start, len(body), an)
	return an
}

// cycle sends bodies one after another, round robin from offset, until
// stop closes.
func cycle(stop <-chan struct{}, offset int, bodies []shape, send func(shape)) {
	for i := offset; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		send(bodies[i%len(bodies)])
	}
}

const (
	jsonType  = "application/json"
	mergeType = "application/merge-patch+json"
)

// ensureWorkload stores w's base (the dense one, else the plain one) and
// says which.
func (a *api) ensureWorkload(c *class, w *workload) (string, error) {
	var last answer
	for _, base := range []shape{w.base, w.plain} {
		an := a.send(c, http.MethodPost, w.path, jsonType, base.body)
		if an.code == http.StatusConflict {
			an = a.send(c, http.MethodPut, w.path+"/"+w.name, jsonType, base.body)
		}
		if an.err == nil && an.code < 300 {
			return base.String(), nil
		}
		last = an
	}
	return "", fmt.Errorf("storing %s %s: %s", w.kind, w.name, clip(outcome(last)+": "+last.msg, 300))
}

// outside runs the treated Pods of a namespace that did not opt in: n
// slots, each cycling create (held by a finalizer in every other slot),
// label update, delete, and for the held ones two updates while
// terminating and the release.
type outside struct {
	a      *api
	c      *class
	ns     string
	image  string
	n      int
	shapes map[bool]shape // by hold, with the name placeholder
}

const outsideName = "treated-NAMEPLACEHOLDER"

func newOutside(a *api, c *class, ns, image string, n int) *outside {
	return &outside{a: a, c: c, ns: ns, image: image, n: n, shapes: map[bool]shape{
		true:  treatedPod(ns, outsideName, image, true),
		false: treatedPod(ns, outsideName, image, false),
	}}
}

func (o *outside) body(name string, hold bool) []byte {
	return bytes.Replace(o.shapes[hold].body, []byte(outsideName), []byte(name), 1)
}

func (o *outside) run(stop <-chan struct{}) {
	type slot struct{ gen, step int }
	slots := make([]slot, o.n)
	pods := "/api/v1/namespaces/" + o.ns + "/pods"
	for i := 0; ; i = (i + 1) % o.n {
		select {
		case <-stop:
			return
		default:
		}
		s := &slots[i]
		hold := i%2 == 0
		name := fmt.Sprintf("treated-%d-%d", i, s.gen)
		switch s.step {
		case 0:
			if an := o.a.send(o.c, http.MethodPost, pods, jsonType, o.body(name, hold)); an.err == nil && an.code < 300 {
				s.step = 1
			}
		case 1:
			o.a.send(o.c, http.MethodPatch, pods+"/"+name, mergeType, []byte(fmt.Sprintf(`{"metadata":{"labels":{"round":"%d"}}}`, s.gen)))
			s.step = 2
		case 2:
			o.a.send(o.c, http.MethodDelete, pods+"/"+name, jsonType, nil)
			if hold {
				s.step = 3
			} else {
				s.gen, s.step = s.gen+1, 0
			}
		case 3, 4:
			o.a.send(o.c, http.MethodPatch, pods+"/"+name, mergeType, []byte(fmt.Sprintf(`{"metadata":{"annotations":{"hostile.example/step":"%d"}}}`, s.step)))
			s.step++
		case 5:
			o.a.send(o.c, http.MethodPatch, pods+"/"+name, mergeType, []byte(`{"metadata":{"finalizers":null}}`))
			s.gen, s.step = s.gen+1, 0
		}
	}
}

// cleanup releases every Pod of the tenant's held by its finalizer and
// deletes what the attack created, in both namespaces.
func (a *api) cleanup(ns, outsideNS string) []string {
	var errs []string
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	note := func(what string, an answer) {
		if an.err != nil || (an.code >= 300 && an.code != http.StatusNotFound) {
			errs = append(errs, clip(fmt.Sprintf("cleanup: %s: %d %s %v", what, an.code, an.msg, an.err), 300))
		}
	}
	if outsideNS != "" {
		pods := "/api/v1/namespaces/" + outsideNS + "/pods"
		an := a.do(ctx, http.MethodGet, pods+"?labelSelector=hostile%3Doutside", "", nil, true)
		note("listing the treated Pods", an)
		var list struct {
			Items []struct {
				Metadata struct {
					Name       string   `json:"name"`
					Finalizers []string `json:"finalizers"`
				} `json:"metadata"`
			} `json:"items"`
		}
		if an.body != nil && json.Unmarshal(an.body, &list) == nil {
			for _, p := range list.Items {
				if len(p.Metadata.Finalizers) > 0 {
					note("releasing "+p.Metadata.Name, a.do(ctx, http.MethodPatch, pods+"/"+p.Metadata.Name, mergeType, []byte(`{"metadata":{"finalizers":null}}`), false))
				}
			}
		}
		note("deleting the treated Pods", a.do(ctx, http.MethodDelete, pods+"?labelSelector=hostile%3Doutside", "", nil, false))
	}
	note("deleting the tenant's Pods", a.do(ctx, http.MethodDelete, "/api/v1/namespaces/"+ns+"/pods?labelSelector=hostile", "", nil, false))
	note("deleting the Deployment", a.do(ctx, http.MethodDelete, "/apis/apps/v1/namespaces/"+ns+"/deployments/"+deploymentName, "", nil, false))
	note("deleting the CronJob", a.do(ctx, http.MethodDelete, "/apis/batch/v1/namespaces/"+ns+"/cronjobs/"+cronJobName, "", nil, false))
	return errs
}
