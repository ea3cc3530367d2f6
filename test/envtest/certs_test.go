package envtest_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/internal/freeport"
	"github.com/graceguard/graceguard/test/harness/chart"
)

var _ = Describe("self-managed certificates", func() {
	It("lets two replicas converge on one Secret, serve its certificate and inject its CA into both webhook configurations", func(ctx SpecContext) {
		ns := newNamespace(ctx, "gg-certs", nil, nil)
		const release = "gg-certs"
		hooks, err := chart.RenderWebhooks(release, ns, map[string]any{"certificates": map[string]any{"mode": "self-managed"}})
		Expect(err).NotTo(HaveOccurred())
		for _, m := range hooks.Mutating {
			for i := range m.Webhooks {
				Expect(m.Webhooks[i].ClientConfig.CABundle).To(BeEmpty(), "the chart must not template a caBundle in self-managed mode")
			}
		}
		installInert(ctx, hooks)
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
		// Each replica writes the Secret's certificates into its own
		// --cert-dir (an empty temporary dir, as the chart's emptyDir).

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
			expectOwnServing(conn.ConnectionState().PeerCertificates[0], served)
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

var _ = Describe("certificate expiry", func() {
	It("renews a serving certificate within 90 days of expiry at start, keeps the CA, and serves the new one", func(ctx SpecContext) {
		ns := newNamespace(ctx, "gg-expiry", nil, nil)
		const release = "gg-expiry"
		hooks, err := chart.RenderWebhooks(release, ns, nil)
		Expect(err).NotTo(HaveOccurred())
		installInert(ctx, hooks)
		secretName := release + "-graceguard-cert"
		_, err = kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		flags := []string{"--cert-mode=self-managed", "--namespace=" + ns, "--cert-secret-name=" + secretName,
			"--service-name=" + release + "-graceguard",
			"--mutating-webhook-configuration=" + hooks.Mutating[0].Name,
			"--validating-webhook-configuration=" + hooks.Validating[0].Name,
			"--shutdown-delay=0s", "--drain-timeout=2s"}

		first := startReplica(replicaOpts{}, flags...)
		first.waitReady(90 * time.Second)
		first.session.Terminate()
		Eventually(first.session, 30*time.Second).Should(gexec.Exit(0))

		By("replacing the serving certificate with one that expires in 30 days, signed by the same CA")
		s, err := kube.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		ca := s.Data["ca.crt"]
		names := leafOf(s.Data["tls.crt"]).DNSNames
		s.Data["tls.crt"], s.Data["tls.key"] = signServing(s.Data["ca.crt"], s.Data["ca.key"], names, 30*24*time.Hour)
		_, err = kube.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(leafOf(s.Data["tls.crt"]).NotAfter).To(BeTemporally("<", time.Now().Add(31*24*time.Hour)))

		second := startReplica(replicaOpts{port: first.port, health: first.health}, flags...)
		var renewed *corev1.Secret
		Eventually(func(g Gomega) {
			renewed, err = kube.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(leafOf(renewed.Data["tls.crt"]).NotAfter).To(BeTemporally(">", time.Now().Add(300*24*time.Hour)))
		}, 60*time.Second).Should(Succeed(), "the serving certificate was not renewed")
		Expect(renewed.Data["ca.crt"]).To(Equal(ca), "renewing the serving certificate must keep the CA (and so every caBundle)")
		second.waitReady(60 * time.Second)

		pool := x509.NewCertPool()
		Expect(pool.AppendCertsFromPEM(ca)).To(BeTrue())
		Eventually(func(g Gomega) {
			conn, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(second.port)),
				&tls.Config{RootCAs: pool, ServerName: names[0], MinVersion: tls.VersionTLS12})
			g.Expect(err).NotTo(HaveOccurred())
			defer conn.Close()
			g.Expect(conn.ConnectionState().PeerCertificates[0].NotAfter).To(BeTemporally("==", leafOf(renewed.Data["tls.crt"]).NotAfter))
		}, 30*time.Second).Should(Succeed(), "the replica does not serve a certificate for the renewed one's validity")
		m, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, hooks.Mutating[0].Name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(bytes.TrimSpace(m.Webhooks[0].ClientConfig.CABundle)).To(Equal(bytes.TrimSpace(ca)))
	})
})

// expectOwnServing checks a replica's served certificate against the
// Secret's: the replica serves its own, an ECDSA key the Secret's CA
// certified for the same names and validity (pkg/certs, issueServing).
func expectOwnServing(got, secret *x509.Certificate) {
	GinkgoHelper()
	Expect(got.PublicKey).To(BeAssignableToTypeOf(&ecdsa.PublicKey{}), "the replica serves a %T key, want its own ECDSA one", got.PublicKey)
	Expect(got.DNSNames).To(Equal(secret.DNSNames))
	Expect(got.NotAfter).To(BeTemporally("==", secret.NotAfter))
	Expect(got.Raw).NotTo(Equal(secret.Raw), "the replica serves the Secret's RSA certificate")
}

// signServing issues a serving certificate for names, valid for lifetime,
// signed by the PEM CA (an RSA PKCS#1 key, as the rotator writes it).
func signServing(caPEM, caKeyPEM []byte, names []string, lifetime time.Duration) (certPEM, keyPEM []byte) {
	GinkgoHelper()
	caCert := leafOf(caPEM)
	kb, _ := pem.Decode(caKeyPEM)
	Expect(kb).NotTo(BeNil())
	caKey, err := x509.ParsePKCS1PrivateKey(kb.Bytes)
	Expect(err).NotTo(HaveOccurred())
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(lifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	Expect(err).NotTo(HaveOccurred())
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}

// installInert creates the chart's webhook configurations so that a
// replica can inject its CA into them, with selectors that match no
// namespace: they must never be called. They are deleted after the spec.
func installInert(ctx SpecContext, hooks chart.Webhooks) {
	GinkgoHelper()
	never := &metav1.LabelSelector{MatchLabels: map[string]string{"test.graceguard.io/never": "true"}}
	mapi := kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	vapi := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	for _, m := range hooks.Mutating {
		for i := range m.Webhooks {
			m.Webhooks[i].NamespaceSelector = never
		}
		_, err := mapi.Create(ctx, m, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { _ = mapi.Delete(ctx, m.Name, metav1.DeleteOptions{}) })
	}
	for _, v := range hooks.Validating {
		for i := range v.Webhooks {
			v.Webhooks[i].NamespaceSelector = never
		}
		_, err := vapi.Create(ctx, v, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { _ = vapi.Delete(ctx, v.Name, metav1.DeleteOptions{}) })
	}
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
