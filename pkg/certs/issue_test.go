package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// rotatorSecret is a Secret's data as cert-controller fills it: its own
// RSA CA and serving certificate, made by its own code.
func rotatorSecret(t testing.TB, names ...string) map[string][]byte {
	t.Helper()
	cr := &rotator.CertRotator{DNSName: names[0], ExtraDNSNames: names[1:], ExtKeyUsages: &[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	now := time.Now()
	ca, err := cr.CreateCACert(now.Add(-time.Hour), now.Add(10*365*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	crt, key, err := cr.CreateCertPEM(ca, now.Add(-time.Hour), now.Add(365*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{"ca.crt": ca.CertPEM, "ca.key": ca.KeyPEM, "tls.crt": crt, "tls.key": key}
}

func TestEachReplicaServesItsOwnECDSACertificateFromTheSecretsCA(t *testing.T) {
	dir := t.TempDir()
	s := &secretSync{dir: dir, name: "gg-cert", log: logr.Discard()}
	data := rotatorSecret(t, "gg.ns.svc", "gg.ns.svc.cluster.local")
	s.changed(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gg-cert"}, Data: data})

	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatalf("the cert dir does not hold a matching certificate and key: %v", err)
	}
	if _, ok := pair.PrivateKey.(*ecdsa.PrivateKey); !ok {
		t.Fatalf("serving key is a %T, want ECDSA", pair.PrivateKey)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	secretLeaf, err := parseCert(data["tls.crt"])
	if err != nil {
		t.Fatal(err)
	}
	if !leaf.NotAfter.Equal(secretLeaf.NotAfter) || !leaf.NotBefore.Equal(secretLeaf.NotBefore) {
		t.Errorf("validity %v–%v, want the Secret's %v–%v", leaf.NotBefore, leaf.NotAfter, secretLeaf.NotBefore, secretLeaf.NotAfter)
	}
	// The API server trusts it through the caBundle, the Secret's ca.crt.
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(data["ca.crt"])
	for _, name := range []string{"gg.ns.svc", "gg.ns.svc.cluster.local"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("the Secret's CA does not verify it for %s: %v", name, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "ca.crt")); !bytes.Equal(b, data["ca.crt"]) {
		t.Error("ca.crt is not the Secret's")
	}
	if _, err := os.Stat(filepath.Join(dir, "ca.key")); !os.IsNotExist(err) {
		t.Errorf("the CA key was written into the cert dir (%v)", err)
	}

	// The same Secret again (a resync): nothing issued, nothing written.
	before, _ := os.ReadFile(filepath.Join(dir, "tls.crt"))
	s.changed(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gg-cert"}, Data: data})
	if after, _ := os.ReadFile(filepath.Join(dir, "tls.crt")); !bytes.Equal(before, after) {
		t.Error("a resync of the same Secret issued a new certificate")
	}

	// A renewed Secret: a new certificate, for the new validity.
	renewed := rotatorSecret(t, "gg.ns.svc")
	s.changed(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gg-cert"}, Data: renewed})
	b, _ := os.ReadFile(filepath.Join(dir, "tls.crt"))
	got, err := parseCert(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := got.CheckSignatureFrom(mustCert(t, renewed["ca.crt"])); err != nil {
		t.Errorf("after the Secret changed, the served certificate is not the new CA's: %v", err)
	}
}

func TestWithoutAUsableCAKeyTheSecretsCertificateIsServed(t *testing.T) {
	for name, change := range map[string]func(map[string][]byte){
		"no ca.key": func(d map[string][]byte) { delete(d, "ca.key") },
		"ca.key not a key": func(d map[string][]byte) {
			d["ca.key"] = []byte("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n")
		},
		"tls.crt from another CA":   func(d map[string][]byte) { d["tls.crt"] = rotatorSecret(t, "x.ns.svc")["tls.crt"] },
		"ca.crt not a certificate":  func(d map[string][]byte) { d["ca.crt"] = []byte("ca") },
		"ca.key of another CA pair": func(d map[string][]byte) { d["ca.key"] = rotatorSecret(t, "y.ns.svc")["ca.key"] },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := &secretSync{dir: dir, name: "gg-cert", log: logr.Discard()}
			data := rotatorSecret(t, "gg.ns.svc")
			change(data)
			s.changed(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gg-cert"}, Data: data})
			b, err := os.ReadFile(filepath.Join(dir, "tls.crt"))
			if err != nil || !bytes.Equal(b, data["tls.crt"]) {
				t.Errorf("tls.crt is not the Secret's (%v)", err)
			}
		})
	}
}

func mustCert(t *testing.T, p []byte) *x509.Certificate {
	t.Helper()
	c, err := parseCert(p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// BenchmarkServingKeySignature: what a TLS handshake's signature costs the
// server with cert-controller's RSA-2048 serving key and with the replica's
// own ECDSA P-256 one (issueServing), side by side.
func BenchmarkServingKeySignature(b *testing.B) {
	data := rotatorSecret(b, "gg.ns.svc")
	rsaKey, err := parseKey(data["tls.key"])
	if err != nil {
		b.Fatal(err)
	}
	_, ecPEM, err := issueServing(data["ca.crt"], data["ca.key"], data["tls.crt"])
	if err != nil {
		b.Fatal(err)
	}
	ecKey, err := parseKey(ecPEM)
	if err != nil {
		b.Fatal(err)
	}
	digest := sha256.Sum256([]byte("handshake transcript"))
	for _, c := range []struct {
		name string
		key  crypto.Signer
	}{{"cert-controller RSA-2048", rsaKey}, {"issued ECDSA P-256", ecKey}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := c.key.Sign(rand.Reader, digest[:], crypto.SHA256); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
