package certs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"syscall"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// certFiles are the Secret keys written into the cert dir, in the order
// they are written: the key before the certificate, so that whoever sees
// tls.crt (the rotator's readiness check, the webhook server's
// certwatcher) finds its key in place.
var certFiles = []struct {
	key  string
	mode os.FileMode
}{{"ca.crt", 0o644}, {"tls.key", 0o600}, {"tls.crt", 0o644}}

// AddSecretSync makes the webhook copy the certificates from its Secret
// into CertDir itself, as soon as the Secret changes, instead of waiting
// for the kubelet to refresh a Secret volume. The kubelet does that on its
// periodic Pod sync (about a minute), and cert-controller looks for the
// files with a back-off that doubles from 1 s: on a fresh install a replica
// whose volume was mounted while the Secret was still empty took up to two
// minutes to become ready (docs/e2e.md). With the chart's emptyDir at
// CertDir it takes seconds; renewals reach the server as fast. The serving
// key and certificate it writes are the replica's own, issued from the
// Secret's CA (issueServing); the CA key is never written.
//
// It watches only the named Secret (a field selector: the chart's RBAC
// allows get, list and watch on Secrets in the namespace). If CertDir
// cannot be written (a read-only Secret volume, as in older manifests) it
// says so once and leaves the files to the kubelet.
func AddSecretSync(mgr manager.Manager, cfg Config, log logr.Logger) error {
	if mgr == nil {
		return errors.New("certs: nil manager")
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme:            mgr.GetScheme(),
		Mapper:            mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{cfg.Namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Field: fields.OneTermEqualSelector("metadata.name", cfg.SecretName)},
		},
	})
	if err != nil {
		return fmt.Errorf("certs: watching Secret %s/%s: %w", cfg.Namespace, cfg.SecretName, err)
	}
	inf, err := c.GetInformer(context.Background(), &corev1.Secret{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("certs: watching Secret %s/%s: %w", cfg.Namespace, cfg.SecretName, err)
	}
	s := &secretSync{dir: cfg.CertDir, name: cfg.SecretName, log: log}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    s.changed,
		UpdateFunc: func(_, obj any) { s.changed(obj) },
	}); err != nil {
		return fmt.Errorf("certs: watching Secret %s/%s: %w", cfg.Namespace, cfg.SecretName, err)
	}
	return mgr.Add(everyReplica{c})
}

// everyReplica runs the Secret's cache in every replica, with or without
// leader election: each replica needs its own copy of the certificates.
type everyReplica struct{ cache.Cache }

func (everyReplica) NeedLeaderElection() bool { return false }

// secretSync writes the Secret's certificates into dir. The informer calls
// changed from one goroutine.
type secretSync struct {
	dir, name string
	log       logr.Logger
	readOnly  bool
	// issuedFor is the Secret's tls.crt the replica's own serving
	// certificate (issued) was issued for (issueServing).
	issuedFor []byte
	issued    [2][]byte
}

func (s *secretSync) changed(obj any) {
	secret, ok := obj.(*corev1.Secret)
	if !ok || secret.Name != s.name || s.readOnly {
		return
	}
	written, err := writeCerts(s.dir, s.serving(secret.Data))
	switch {
	case errors.Is(err, syscall.EROFS):
		s.readOnly = true
		s.log.Info("the cert dir is read-only (a Secret volume?): the kubelet will put the certificates there", "certDir", s.dir)
	case err != nil:
		s.log.Error(err, "writing the certificates from the Secret into the cert dir", "certDir", s.dir, "secret", s.name)
	case len(written) > 0:
		s.log.Info("certificates written from the Secret", "certDir", s.dir, "files", written, "resourceVersion", secret.ResourceVersion)
	}
}

// serving is data with the replica's own serving certificate and key in
// place of the Secret's (issueServing), issued once per Secret tls.crt;
// data as it is when the Secret holds no CA key, or issuing fails (said
// once per Secret certificate).
func (s *secretSync) serving(data map[string][]byte) map[string][]byte {
	crt := data["tls.crt"]
	if len(crt) == 0 || len(data["tls.key"]) == 0 || len(data["ca.crt"]) == 0 || len(data["ca.key"]) == 0 {
		return data
	}
	if !bytes.Equal(s.issuedFor, crt) {
		c, k, err := issueServing(data["ca.crt"], data["ca.key"], crt)
		s.issuedFor = bytes.Clone(crt)
		s.issued = [2][]byte{c, k}
		if err != nil {
			s.issued = [2][]byte{}
			s.log.Error(err, "issuing this replica's ECDSA serving certificate: serving the Secret's", "secret", s.name)
		}
	}
	if s.issued[0] == nil {
		return data
	}
	out := maps.Clone(data)
	out["tls.crt"], out["tls.key"] = s.issued[0], s.issued[1]
	return out
}

// writeCerts writes those of ca.crt, tls.key and tls.crt that data holds
// and that differ from the files in dir, each atomically (a temporary file
// renamed over it). It writes nothing until data has both tls.crt and
// tls.key: the rotator fills an empty Secret in one update.
func writeCerts(dir string, data map[string][]byte) ([]string, error) {
	if len(data["tls.crt"]) == 0 || len(data["tls.key"]) == 0 {
		return nil, nil
	}
	var written []string
	for _, f := range certFiles {
		v, ok := data[f.key]
		if !ok || len(v) == 0 {
			continue
		}
		path := filepath.Join(dir, f.key)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, v) {
			continue
		}
		tmp, err := os.CreateTemp(dir, "."+f.key+".*")
		if err != nil {
			return written, err
		}
		_, err = tmp.Write(v)
		if err == nil {
			err = tmp.Chmod(f.mode)
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), path)
		}
		if err != nil {
			_ = os.Remove(tmp.Name())
			return written, err
		}
		written = append(written, f.key)
	}
	return written, nil
}
