package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certSpec is one certificate the cluster needs, signed by ca.
type certSpec struct {
	name   string // file stem: name.crt, name.key
	ca     string // signer's file stem
	cn     string
	orgs   []string
	server bool
	client bool
	dns    []string
	ips    []string
}

// certSpecs is the cluster's PKI. Client identities follow the names the
// apiserver's bootstrap RBAC and the Node authorizer expect.
func certSpecs() []certSpec {
	return []certSpec{
		{name: "apiserver", ca: "ca", cn: "kube-apiserver", server: true,
			dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			ips: []string{"127.0.0.1", NodeIP, KubernetesServiceIP}},
		{name: "apiserver-kubelet-client", ca: "ca", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}, client: true},
		{name: "front-proxy-client", ca: "front-proxy-ca", cn: "front-proxy-client", client: true},
		{name: "admin", ca: "ca", cn: "graceguard-admin", orgs: []string{"system:masters"}, client: true},
		{name: "controller-manager", ca: "ca", cn: "system:kube-controller-manager", client: true},
		{name: "scheduler", ca: "ca", cn: "system:kube-scheduler", client: true},
		{name: "kube-proxy", ca: "ca", cn: "system:kube-proxy", client: true},
		{name: "kubelet-client", ca: "ca", cn: "system:node:" + NodeName, orgs: []string{"system:nodes"}, client: true},
		{name: "kubelet", ca: "ca", cn: NodeName, server: true, dns: []string{NodeName}, ips: []string{NodeIP}},
		// The second node (node2.go).
		{name: "kubelet-node2-client", ca: "ca", cn: "system:node:" + Node2Name, orgs: []string{"system:nodes"}, client: true},
		{name: "kubelet-node2", ca: "ca", cn: Node2Name, server: true, dns: []string{Node2Name}, ips: []string{Node2IP}},
	}
}

// pkiFiles lists every file ensurePKI writes.
func pkiFiles() []string {
	files := []string{"ca.crt", "ca.key", "front-proxy-ca.crt", "front-proxy-ca.key", "sa.key", "sa.pub"}
	for _, s := range certSpecs() {
		files = append(files, s.name+".crt", s.name+".key")
	}
	return files
}

// ensurePKI generates the whole PKI in dir unless every file is already
// there (a run directory keeps its PKI until Down).
func ensurePKI(dir string) (generated bool, err error) {
	complete := true
	for _, f := range pkiFiles() {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			complete = false
			break
		}
	}
	if complete {
		return false, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	now := time.Now()
	cas := map[string]*signer{}
	for _, name := range []string{"ca", "front-proxy-ca"} {
		s, err := newCA(name, now)
		if err != nil {
			return false, err
		}
		if err := s.write(dir, name); err != nil {
			return false, err
		}
		cas[name] = s
	}
	for _, spec := range certSpecs() {
		leaf, err := cas[spec.ca].issue(spec, now)
		if err != nil {
			return false, fmt.Errorf("cluster: certificate %s: %w", spec.name, err)
		}
		if err := leaf.write(dir, spec.name); err != nil {
			return false, err
		}
	}
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return false, err
	}
	if err := writeKey(filepath.Join(dir, "sa.key"), sa); err != nil {
		return false, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return false, err
	}
	if err := writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub, 0o644); err != nil {
		return false, err
	}
	return true, nil
}

type signer struct {
	cert *x509.Certificate
	der  []byte
	key  *ecdsa.PrivateKey
}

// newKey is a fresh P-256 key and a random serial number for its certificate.
func newKey() (*ecdsa.PrivateKey, *big.Int, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	sn, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return nil, nil, err
	}
	return key, sn, nil
}

func newCA(cn string, now time.Time) (*signer, error) {
	key, sn, err := newKey()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: "graceguard-cluster-" + cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &signer{cert: cert, der: der, key: key}, nil
}

func (ca *signer) issue(spec certSpec, now time.Time) (*signer, error) {
	if ca == nil {
		return nil, errors.New("unknown signer " + spec.ca)
	}
	key, sn, err := newKey()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: spec.cn, Organization: spec.orgs},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		DNSNames:     spec.dns,
	}
	for _, ip := range spec.ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	if spec.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if spec.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &signer{cert: cert, der: der, key: key}, nil
}

func (s *signer) write(dir, name string) error {
	if err := writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", s.der, 0o644); err != nil {
		return err
	}
	return writeKey(filepath.Join(dir, name+".key"), s.key)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", der, 0o600)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return writeFileAtomic(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}

// writeFileAtomic writes data to a temporary file and renames it into place,
// so a reader never sees half a file.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
