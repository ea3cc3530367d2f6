package envtest_test

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/graceguard/graceguard/test/harness/apiserver"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
)

// webhookBinary builds cmd/webhook once per suite run; the suite's
// AfterSuite removes it.
var webhookBinary = func() func() string {
	var path string
	return func() string {
		GinkgoHelper()
		if path == "" {
			var err error
			path, err = gexec.Build("github.com/graceguard/graceguard/cmd/webhook")
			Expect(err).NotTo(HaveOccurred())
		}
		return path
	}
}()

// kubeconfig writes a kubeconfig for the envtest API server.
func kubeconfig() string {
	GinkgoHelper()
	return kubeconfigWith(cp.Config.Host, "")
}

// kubeconfigWith is the envtest admin's kubeconfig for the API server at
// host, impersonating user when it is not empty (as the API server's
// impersonation does for a ServiceAccount, with its groups).
func kubeconfigWith(host, user string) string {
	GinkgoHelper()
	path := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(apiserver.WriteKubeconfig(path, cp.Config, host, user)).To(Succeed())
	return path
}

// replica is one real graceguard webhook process.
type replica struct {
	session      *gexec.Session
	port, health int
	certDir      string
}

// replicaOpts place a replica: zero ports are picked free; certsFrom, if
// set, is a directory whose tls.crt and tls.key are copied into the
// replica's --cert-dir before it starts (as a mounted Secret would be).
type replicaOpts struct {
	port, health int
	certsFrom    string
}

// startReplica runs cmd/webhook against the envtest API server on
// loopback; extra flags are appended.
func startReplica(o replicaOpts, extra ...string) *replica {
	GinkgoHelper()
	r := &replica{port: o.port, health: o.health, certDir: GinkgoT().TempDir()}
	if r.port == 0 {
		r.port = freePort()
	}
	if r.health == 0 {
		r.health = freePort()
	}
	if o.certsFrom != "" {
		for _, f := range []string{"tls.crt", "tls.key"} {
			data, err := os.ReadFile(filepath.Join(o.certsFrom, f))
			Expect(err).NotTo(HaveOccurred())
			Expect(os.WriteFile(filepath.Join(r.certDir, f), data, 0o600)).To(Succeed())
		}
	}
	args := append([]string{
		"--kubeconfig=" + kubeconfig(),
		"--port=" + strconv.Itoa(r.port),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(r.health),
		"--metrics-bind-address=0",
		"--cert-dir=" + r.certDir,
	}, extra...)
	cmd := exec.Command(webhookBinary(), args...)
	cmd.Env = append(os.Environ(), "POD_NAMESPACE=")
	var err error
	r.session, err = gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		r.session.Terminate()
		Eventually(r.session, 30*time.Second).Should(gexec.Exit())
	})
	return r
}

func (r *replica) readyz() int { return apiserver.Readyz(r.health) }

// waitReady waits for /readyz to pass.
func (r *replica) waitReady(timeout time.Duration) {
	GinkgoHelper()
	Eventually(r.readyz, timeout, 100*time.Millisecond).Should(Equal(http.StatusOK), "replica on port %d never became ready", r.port)
}
