package envtest_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/test/harness/chart"
)

// serviceProxy stands in for a Service and kube-proxy in front of the
// webhook replicas: it forwards each TCP connection (TLS passes through)
// to a ready replica, and, like EndpointSlices propagating to proxies,
// learns of readiness changes only after a lag. A connection forwarded to
// a replica that no longer listens hangs, as one to a deleted Pod's IP
// does.
type serviceProxy struct {
	ln       net.Listener
	lag      time.Duration
	mu       sync.Mutex
	backends []*backend
	next     int
	refused  atomic.Int32 // connections with no ready replica
	// blackholed counts connections sent to a replica that was gone.
	blackholed atomic.Int32
}

type backend struct {
	r        *replica
	routable bool
}

func newServiceProxy(lag time.Duration, replicas ...*replica) *serviceProxy {
	GinkgoHelper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	p := &serviceProxy{ln: ln, lag: lag}
	for _, r := range replicas {
		p.backends = append(p.backends, &backend{r: r})
	}
	ctx, cancel := context.WithCancel(context.Background())
	DeferCleanup(func() { cancel(); _ = ln.Close() })
	go p.serve()
	go p.followReadiness(ctx)
	return p
}

func (p *serviceProxy) addr() string { return p.ln.Addr().String() }

// followReadiness polls each replica's /readyz, as the kubelet's readiness
// probe does, and applies what it saw after the propagation lag.
func (p *serviceProxy) followReadiness(ctx context.Context) {
	for ctx.Err() == nil {
		p.mu.Lock()
		backends := append([]*backend(nil), p.backends...)
		p.mu.Unlock()
		for _, b := range backends {
			ready := b.r.readyz() == http.StatusOK
			p.mu.Lock()
			changed := ready != b.routable
			p.mu.Unlock()
			if changed {
				time.AfterFunc(p.lag, func() {
					p.mu.Lock()
					b.routable = b.r.readyz() == http.StatusOK
					p.mu.Unlock()
				})
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (p *serviceProxy) pick() *backend {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range p.backends {
		b := p.backends[p.next%len(p.backends)]
		p.next++
		if b.routable {
			return b
		}
	}
	return nil
}

func (p *serviceProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			b := p.pick()
			if b == nil {
				p.refused.Add(1)
				return
			}
			up, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(b.r.port)))
			if err != nil {
				// A deleted Pod's IP answers nothing: until the proxies
				// learn it is gone, connections to it hang until the
				// client gives up (the webhook's timeoutSeconds).
				p.blackholed.Add(1)
				_, _ = io.Copy(io.Discard, c)
				return
			}
			defer up.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
			<-done
		}()
	}
}

// rolloutResult is what a client creating Pods through a replica restart saw.
type rolloutResult struct {
	created, failed, unmutated int
	failOpen, callErrors       float64
	blackholed, restarts       int
	firstErr                   error
}

func (r rolloutResult) String() string {
	return fmt.Sprintf("restarts=%d created=%d failed=%d created-unmutated=%d apiserver fail-open=%v webhook-call-errors=%v connections-to-a-gone-replica=%d",
		r.restarts, r.created, r.failed, r.unmutated, r.failOpen, r.callErrors, r.blackholed)
}

var _ = Describe("graceguard's own rollout", Ordered, func() {
	var caDir string
	BeforeAll(func(ctx SpecContext) {
		// Install graceguard's webhooks through the proxy instead of the
		// suite's in-process server, for the duration of these specs.
		restore, err := cp.RemoveWebhooks(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { Expect(restore(ctx)).To(Succeed()) })
		caDir = cp.CertDir
	})

	// rollout runs two real replicas behind the proxy with the given flags,
	// creates Pods continuously from 16 clients, restarts replica A up to
	// restarts times (stopping once the window shows if untilShown: a lost
	// admission or a connection sent to a gone replica),
	// and reports what the clients and the API server saw.
	rollout := func(ctx SpecContext, name string, restarts int, untilShown bool, values map[string]any, shutdownFlags ...string) rolloutResult {
		flags := append([]string{"--cert-mode=files", "--namespace=graceguard-system"}, shutdownFlags...)
		a := startReplica(replicaOpts{certsFrom: caDir}, flags...)
		b := startReplica(replicaOpts{certsFrom: caDir}, flags...)
		a.waitReady(30 * time.Second)
		b.waitReady(30 * time.Second)
		proxy := newServiceProxy(2*time.Second, a, b)
		Eventually(func() bool { return proxy.pick() != nil }, 10*time.Second).Should(BeTrue())

		hooks, err := chart.RenderWebhooks("graceguard", "graceguard-system", values)
		Expect(err).NotTo(HaveOccurred())
		hooks.PointAt("https://" + proxy.addr())
		for _, m := range hooks.Mutating {
			for i := range m.Webhooks {
				m.Webhooks[i].ClientConfig.CABundle = cp.CA
			}
			_, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, m, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx SpecContext) {
				_ = kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, m.Name, metav1.DeleteOptions{})
			})
		}
		for _, v := range hooks.Validating {
			for i := range v.Webhooks {
				v.Webhooks[i].ClientConfig.CABundle = cp.CA
			}
			_, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, v, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx SpecContext) {
				_ = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, v.Name, metav1.DeleteOptions{})
			})
		}
		ns := optedIn(ctx, name)
		Eventually(func() string {
			p, err := kube.CoreV1().Pods(ns).Create(ctx, pod("warmup", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				return err.Error()
			}
			return p.Labels[mutate.LabelTreated]
		}, 30*time.Second).Should(Equal(mutate.LabelTreatedValue))

		before := apiserverMetrics(ctx)
		var res rolloutResult
		var mu sync.Mutex
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for c := 0; c < 16; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					got, err := kube.CoreV1().Pods(ns).Create(ctx, pod(fmt.Sprintf("p-%d-%d", c, i), nil), metav1.CreateOptions{})
					mu.Lock()
					switch {
					case err != nil:
						res.failed++
						if res.firstErr == nil {
							res.firstErr = err
						}
					case got.Labels[mutate.LabelTreated] != mutate.LabelTreatedValue:
						// Not graceguard's webhook's (the mutating floor's
						// label is "floor"): its call failed open.
						res.created++
						res.unmutated++
					default:
						res.created++
					}
					mu.Unlock()
				}
			}(c)
		}

		time.Sleep(2 * time.Second)
		// shown: an admission was lost, or a connection was routed to a
		// replica that no longer listened (what the delay prevents).
		shown := func() bool {
			mu.Lock()
			defer mu.Unlock()
			return res.failed+res.unmutated > 0 || proxy.blackholed.Load() > 0
		}
		cur := a
		for i := 1; i <= restarts; i++ {
			By(fmt.Sprintf("restart %d of replica A: SIGTERM, wait for exit, start it again", i))
			cur.session.Terminate()
			Eventually(cur.session, 60*time.Second).Should(gexec.Exit())
			Expect(cur.session.ExitCode()).To(Equal(0), "replica A must exit cleanly after its drain")
			// The new replica comes back on the same address, as a new
			// Pod behind the same Service would.
			cur = startReplica(replicaOpts{port: a.port, health: a.health, certsFrom: caDir}, flags...)
			cur.waitReady(30 * time.Second)
			time.Sleep(time.Second)
			res.restarts = i
			if untilShown && shown() {
				break
			}
		}
		close(stop)
		wg.Wait()

		after := apiserverMetrics(ctx)
		for _, n := range []string{"mutate-pods.graceguard.io", "validate-pods.graceguard.io"} {
			res.failOpen += counter(after, "apiserver_admission_webhook_fail_open_count", map[string]string{"name": n}) -
				counter(before, "apiserver_admission_webhook_fail_open_count", map[string]string{"name": n})
			res.callErrors += counter(after, "apiserver_admission_webhook_rejection_count", map[string]string{"name": n, "error_type": "calling_webhook_error"}) -
				counter(before, "apiserver_admission_webhook_rejection_count", map[string]string{"name": n, "error_type": "calling_webhook_error"})
		}
		res.blackholed = int(proxy.blackholed.Load())
		AddReportEntry(name, res.String())
		GinkgoWriter.Printf("%s: %s\n", name, res)
		return res
	}

	It("loses no admission while a replica restarts three times under load", func(ctx SpecContext) {
		res := rollout(ctx, "graceful", 3, false, nil, "--shutdown-delay=4s", "--drain-timeout=10s")
		Expect(res.created).To(BeNumerically(">", 50), "the clients must have kept creating Pods")
		Expect(res.failed).To(BeZero(), "first error: %v", res.firstErr)
		Expect(res.unmutated).To(BeZero(), "Pods admitted without graceguard's mutation (fail-open)")
		Expect(res.failOpen).To(BeZero())
		Expect(res.callErrors).To(BeZero())
		Expect(res.blackholed).To(BeZero(), "connections routed to a replica that had stopped listening: the delay must outlast the routing lag")
	})

	It("without a shutdown delay, the same restart sends calls to a gone replica (the control)", func(ctx SpecContext) {
		// Without the delay the replica stops listening while the Service
		// still routes to it (the 2 s lag): a new connection the API server
		// opens then goes to a Pod IP that answers nothing. The call on it
		// hangs until the webhook's timeout, an admission lost, unless
		// another connection to the live replica frees first: Go's
		// transport hands a waiting request the first idle connection
		// while its dial goes on. Under this load that usually happens, so
		// a lost admission is rare (with the chart's defaults a Pod costs
		// one webhook call; the control sends every Pod to both webhooks,
		// as graceguard's registrations did when it was written), while a
		// connection to the gone replica comes within a few restarts.
		// Restart until either shows: 30 restarts were not always enough
		// on a loaded machine (two cores shared with other builds).
		res := rollout(ctx, "abrupt", 60, true, map[string]any{"webhooks": map[string]any{"validatePods": map[string]any{"skipProven": false}}},
			"--shutdown-delay=0s", "--drain-timeout=10s")
		Expect(res.created).To(BeNumerically(">", 50))
		Expect(res.failed+res.unmutated+res.blackholed).To(BeNumerically(">", 0),
			"60 restarts without a shutdown delay sent nothing to a gone replica and lost nothing; this suite no longer shows what the delay prevents")
	})
})
