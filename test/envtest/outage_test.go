package envtest_test

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
)

var _ = Describe("a webhook started before its API server is reachable", func() {
	It("stays up and not ready, saying why, retries with back-off, and becomes ready once the API server answers", func(ctx SpecContext) {
		// The API server is reached through a port where nothing listens
		// yet: as in a cluster whose control plane is still coming up.
		proxyPort := freePort()
		proxyAddr := "127.0.0.1:" + strconv.Itoa(proxyPort)
		r := startReplica(replicaOpts{certsFrom: cp.ServerConfig.CertDir},
			"--kubeconfig="+kubeconfigWith("https://"+proxyAddr, ""), "--namespace=graceguard-outage")

		health := "http://127.0.0.1:" + strconv.Itoa(r.health)
		Eventually(func(g Gomega) {
			code, body := get(health + "/readyz")
			g.Expect(code).To(Equal(http.StatusServiceUnavailable))
			g.Expect(body).To(ContainSubstring("waiting for the API server"))
			g.Expect(body).To(ContainSubstring(proxyAddr))
		}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(r.session.ExitCode()).To(Equal(-1), "the webhook exited instead of retrying")
			code, _ := get(health + "/healthz")
			g.Expect(code).To(Equal(http.StatusOK), "liveness must pass, or the kubelet would restart it into the same wait")
			code, _ = get(health + "/readyz")
			g.Expect(code).To(Equal(http.StatusServiceUnavailable))
		}, 4*time.Second, 200*time.Millisecond).Should(Succeed())

		By("the API server becomes reachable")
		stop := tcpProxy(proxyAddr, apiServerAddr())
		DeferCleanup(stop)
		r.waitReady(60 * time.Second)
		Consistently(r.session, 2*time.Second).ShouldNot(gexec.Exit())
	})
})

func get(u string) (int, string) {
	resp, err := http.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func apiServerAddr() string {
	GinkgoHelper()
	u, err := url.Parse(cp.Config.Host)
	Expect(err).NotTo(HaveOccurred())
	return u.Host
}

// tcpProxy forwards connections from listen to target until stop is called.
func tcpProxy(listen, target string) (stop func()) {
	GinkgoHelper()
	ln, err := net.Listen("tcp", listen)
	Expect(err).NotTo(HaveOccurred())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	return func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}
}
