//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// router stands in for kube-proxy or an ingress controller: it follows a
// Service's EndpointSlices with an informer and, like a data plane that
// converges late, applies each change only routerLag after the informer
// delivered it. It round-robins requests over the ready endpoints
// (ready = serving and not terminating) it currently knows.
type router struct {
	lag time.Duration

	mu      sync.Mutex
	ready   []string
	next    int
	seq     uint64 // changes seen
	applied uint64 // changes applied
}

func startRouter(ctx context.Context, ns, service string, lag time.Duration) *router {
	GinkgoHelper()
	r := &router{lag: lag}
	followReady(ctx, ns, service, func(ips []string) {
		r.mu.Lock()
		r.seq++
		seq := r.seq
		r.mu.Unlock()
		time.AfterFunc(r.lag, func() { r.apply(seq, ips) })
	})
	return r
}

// followReady follows a Service's EndpointSlices with an informer and calls
// changed with the ready endpoint addresses (sorted, once each) on every
// event, without lag. It returns once the informer has synced, and a
// function that lists the ready addresses now.
func followReady(ctx context.Context, ns, service string, changed func(ips []string)) (current func() []string) {
	GinkgoHelper()
	f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = discoveryv1.LabelServiceName + "=" + service }))
	inf := f.Discovery().V1().EndpointSlices()
	lister := inf.Lister()
	current = func() []string {
		list, err := lister.List(labels.Everything())
		if err != nil {
			return nil
		}
		var ips []string
		for _, s := range list {
			for _, ep := range s.Endpoints {
				// A nil ready condition means ready (the API's contract).
				if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
					ips = append(ips, ep.Addresses...)
				}
			}
		}
		slices.Sort(ips)
		return slices.Compact(ips)
	}
	onEvent := func() { changed(current()) }
	_, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { onEvent() },
		UpdateFunc: func(any, any) { onEvent() },
		DeleteFunc: func(any) { onEvent() },
	})
	Expect(err).NotTo(HaveOccurred())
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return current
}

// apply installs a change unless a later one is already in place (timers
// of equal length may fire out of order).
func (r *router) apply(seq uint64, ips []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if seq <= r.applied {
		return
	}
	r.applied, r.ready = seq, ips
}

func (r *router) pick() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ready) == 0 {
		return ""
	}
	ip := r.ready[r.next%len(r.ready)]
	r.next++
	return ip
}

func (r *router) endpoints() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ready)
}

// loadResult is one request of the load.
type loadResult struct {
	at       time.Time
	endpoint string
	code     int
	// body is a failed answer's, trimmed (the app says why it failed).
	body string
	err  error
}

// kind is "" for a success, else the failure class.
func (l loadResult) kind() string {
	switch {
	case l.endpoint == "":
		return "no_endpoint"
	case l.err != nil:
		return errKind(l.err)
	case l.code == http.StatusServiceUnavailable:
		return "rejected_503"
	case l.code != http.StatusOK:
		return fmt.Sprintf("http_%d", l.code)
	}
	return ""
}

// load sends requests through the router at a fixed rate (open loop: a
// slow answer does not slow the sender) until stop is closed, then waits
// for the requests in flight.
type load struct {
	mu      sync.Mutex
	results []loadResult
	wg      sync.WaitGroup
	stop    chan struct{}
	done    chan struct{}
}

func startLoad(ctx context.Context, r *router, rate int, work time.Duration, client *http.Client) *load {
	return startLoadOn(ctx, r, appPort, rate, work, client)
}

// startLoadOn is startLoad to another port of the endpoints (a proxy's).
func startLoadOn(ctx context.Context, r *router, port int, rate int, work time.Duration, client *http.Client) *load {
	l := &load{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		t := time.NewTicker(time.Second / time.Duration(rate))
		defer t.Stop()
		for {
			select {
			case <-l.stop:
				l.wg.Wait()
				return
			case <-ctx.Done():
				l.wg.Wait()
				return
			case now := <-t.C:
				ip := r.pick()
				if ip == "" {
					l.add(loadResult{at: now})
					continue
				}
				l.wg.Add(1)
				go func() {
					defer l.wg.Done()
					res := get(ctx, client, fmt.Sprintf("http://%s:%d/work?seconds=%g", ip, port, work.Seconds()))
					lr := loadResult{at: now, endpoint: ip, code: res.code, err: res.err}
					if res.err == nil && res.code != http.StatusOK {
						lr.body = strings.TrimSpace(res.body)
						if len(lr.body) > 160 {
							lr.body = lr.body[:160] + "..."
						}
					}
					l.add(lr)
				}()
			}
		}
	}()
	return l
}

func (l *load) add(r loadResult) {
	l.mu.Lock()
	l.results = append(l.results, r)
	l.mu.Unlock()
}

func (l *load) finish() []loadResult {
	close(l.stop)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.results)
}
