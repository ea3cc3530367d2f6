package envtest_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/internal/chart"
	"github.com/graceguard/graceguard/internal/freeport"
)

var _ = Describe("self-managed certificates", func() {
	It("lets two replicas converge on one Secret, serve its certificate and inject its CA into both webhook configurations", func(ctx SpecContext) {
		ns := newNamespace(ctx, "gg-certs", nil, nil)
		const release = "gg-certs"
		hooks, err := chart.RenderWebhooks(release, ns, map[string]any{"certificates": map[string]any{"mode": "self-managed"}})
		Expect(err).NotTo(HaveOccurred())
		// These copies only receive the CA: they must never select a Pod.
		never := &metav1.LabelSelector{MatchLabels: map[string]string{"test.graceguard.io/never": "true"}}
		for _, m := range hooks.Mutating {
			for i := range m.Webhooks {
				Expect(m.Webhooks[i].ClientConfig.CABundle).To(BeEmpty(), "the chart must not template a caBundle in self-managed mode")
				m.Webhooks[i].NamespaceSelector = never
			}
			_, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, m, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx SpecContext) {
				_ = kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, m.Name, metav1.DeleteOptions{})
			})
		}
		for _, v := range hooks.Validating {
			for i := range v.Webhooks {
				v.Webhooks[i].NamespaceSelector = never
			}
			_, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, v, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx SpecContext) {
				_ = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, v.Name, metav1.DeleteOptions{})
			})
		}
		// The chart creates the Secret empty; the webhook fills it.
		secretName := release + "-graceguard-certs"
		_, err = kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		var replicas []*replica
		for i := 0; i < 2; i++ {
			replicas = append(replicas, startReplica(replicaOpts{},
				"--cert-mode=self-managed",
				"--namespace="+ns,
				"--cert-secret-name="+secretName,
				"--service-name="+release+"-graceguard",
				"--mutating-webhook-configuration="+hooks.Mutating[0].Name,
				"--validating-webhook-configuration="+hooks.Validating[0].Name,
				"--shutdown-delay=0s", "--drain-timeout=2s"))
		}
		// No kubelet here: stand in for its Secret volume, projecting the
		// Secret's keys into each replica's --cert-dir as they change.
		projectSecret(ctx, ns, secretName, replicas)

		for _, r := range replicas {
			Expect(r.readyz()).NotTo(Equal(http.StatusOK), "ready before any certificate existed")
		}
		for _, r := range replicas {
			r.waitReady(90 * time.Second)
		}

		secret, err := kube.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		served := leafOf(secret.Data["tls.crt"])
		Expect(served.DNSNames).To(ContainElement(release + "-graceguard." + ns + ".svc"))
		pool := x509.NewCertPool()
		Expect(pool.AppendCertsFromPEM(secret.Data["ca.crt"])).To(BeTrue())
		for _, r := range replicas {
			conn, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)),
				&tls.Config{RootCAs: pool, ServerName: served.DNSNames[0], MinVersion: tls.VersionTLS12})
			Expect(err).NotTo(HaveOccurred(), "replica on %d does not serve a certificate the Secret's CA trusts", r.port)
			Expect(conn.ConnectionState().PeerCertificates[0].Raw).To(Equal(served.Raw), "replicas serve different certificates")
			_ = conn.Close()
		}

		Eventually(func(g Gomega) {
			m, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, hooks.Mutating[0].Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			for _, w := range m.Webhooks {
				g.Expect(bytes.TrimSpace(w.ClientConfig.CABundle)).To(Equal(bytes.TrimSpace(secret.Data["ca.crt"])), "mutating %s", w.Name)
			}
			v, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, hooks.Validating[0].Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			for _, w := range v.Webhooks {
				g.Expect(bytes.TrimSpace(w.ClientConfig.CABundle)).To(Equal(bytes.TrimSpace(secret.Data["ca.crt"])), "validating %s", w.Name)
			}
		}, 30*time.Second).Should(Succeed())
	})
})

// projectSecret writes the Secret's data into each replica's cert dir
// whenever it changes, atomically per file, as the kubelet's Secret volume
// does (there the delay is up to a minute).
func projectSecret(ctx SpecContext, ns, name string, replicas []*replica) {
	pctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	DeferCleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		defer GinkgoRecover()
		var last string
		for pctx.Err() == nil {
			s, err := kube.CoreV1().Secrets(ns).Get(pctx, name, metav1.GetOptions{})
			if err == nil && len(s.Data) > 0 && s.ResourceVersion != last {
				last = s.ResourceVersion
				for _, r := range replicas {
					for k, v := range s.Data {
						tmp := filepath.Join(r.certDir, "."+k+".tmp")
						if os.WriteFile(tmp, v, 0o600) == nil {
							_ = os.Rename(tmp, filepath.Join(r.certDir, k))
						}
					}
				}
			}
			select {
			case <-pctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
}

func readyz(port int) int {
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func leafOf(pemData []byte) *x509.Certificate {
	GinkgoHelper()
	block, _ := pem.Decode(pemData)
	Expect(block).NotTo(BeNil())
	c, err := x509.ParseCertificate(block.Bytes)
	Expect(err).NotTo(HaveOccurred())
	return c
}

func freePort() int {
	GinkgoHelper()
	p, err := freeport.Get()
	Expect(err).NotTo(HaveOccurred())
	return p
}
