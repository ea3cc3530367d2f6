package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
)

// issueServing returns a serving certificate and key of this replica's own:
// a new ECDSA P-256 key, certified by the Secret's CA for the names, the
// subject and the validity of the Secret's serving certificate.
//
// Why: cert-controller makes RSA-2048 keys, and a TLS handshake signs with
// the serving key. On this project's machine an RSA-2048 signature takes
// 1.5 ms of CPU and a P-256 one 0.06 ms (BenchmarkServingKeySignature). A
// replica held to its CPU request pays for every connection the API
// server opens, and opens more when it is slow (its idle pool keeps 25),
// so past capacity the RSA handshakes alone could take a starved
// replica's CPU. The CA stays the rotator's (and so every caBundle); only
// the leaf and its key differ, and the key never leaves the replica's
// memory-backed cert dir.
func issueServing(caCertPEM, caKeyPEM, servingPEM []byte) (certPEM, keyPEM []byte, err error) {
	ca, err := parseCert(caCertPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("ca.crt: %w", err)
	}
	if !ca.IsCA {
		return nil, nil, errors.New("ca.crt: not a CA certificate")
	}
	caKey, err := parseKey(caKeyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("ca.key: %w", err)
	}
	serving, err := parseCert(servingPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("tls.crt: %w", err)
	}
	if err := serving.CheckSignatureFrom(ca); err != nil {
		return nil, nil, fmt.Errorf("tls.crt is not signed by ca.crt: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               serving.Subject,
		DNSNames:              serving.DNSNames,
		IPAddresses:           serving.IPAddresses,
		NotBefore:             serving.NotBefore,
		NotAfter:              serving.NotAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the serving certificate with ca.key: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

func parseCert(p []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(p)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM CERTIFICATE block")
	}
	return x509.ParseCertificate(b.Bytes)
}

// parseKey reads a PEM private key as cert-controller writes it (PKCS#1
// RSA) or in PKCS#8 or SEC 1.
func parseKey(p []byte) (crypto.Signer, error) {
	b, _ := pem.Decode(p)
	if b == nil {
		return nil, errors.New("no PEM block")
	}
	if k, err := x509.ParsePKCS1PrivateKey(b.Bytes); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(b.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("not a PKCS#1, SEC 1 or PKCS#8 private key (PEM %q)", b.Type)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("a %T cannot sign", k)
	}
	return s, nil
}
