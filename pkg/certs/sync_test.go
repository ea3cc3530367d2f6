package certs

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWriteCertsWritesTheSecretsCertificatesOnce(t *testing.T) {
	dir := t.TempDir()
	if got, err := writeCerts(dir, map[string][]byte{"ca.crt": []byte("ca")}); err != nil || got != nil {
		t.Fatalf("a Secret without tls.crt and tls.key: wrote %v, %v; want nothing", got, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("files appeared before the Secret held a certificate and key: %v", entries)
	}

	data := map[string][]byte{"ca.crt": []byte("ca1"), "ca.key": []byte("secret CA key"), "tls.crt": []byte("crt1"), "tls.key": []byte("key1")}
	got, err := writeCerts(dir, data)
	if err != nil || !slices.Equal(got, []string{"ca.crt", "tls.key", "tls.crt"}) {
		t.Fatalf("first write: %v, %v; want ca.crt, tls.key, tls.crt in that order", got, err)
	}
	for name, want := range map[string]struct {
		body string
		mode os.FileMode
	}{"ca.crt": {"ca1", 0o644}, "tls.crt": {"crt1", 0o644}, "tls.key": {"key1", 0o600}} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(b) != want.body {
			t.Errorf("%s = %q, %v; want %q", name, b, err, want.body)
		}
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode().Perm() != want.mode {
			t.Errorf("%s mode %v, want %v", name, fi.Mode().Perm(), want.mode)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("the dir holds %d entries, want the 3 files and no CA key or temporary file", len(entries))
	}

	if got, err := writeCerts(dir, data); err != nil || len(got) != 0 {
		t.Errorf("the same Secret again: wrote %v, %v; want nothing", got, err)
	}
	data["tls.crt"], data["tls.key"] = []byte("crt2"), []byte("key2")
	if got, err := writeCerts(dir, data); err != nil || !slices.Equal(got, []string{"tls.key", "tls.crt"}) {
		t.Errorf("a renewed serving certificate: wrote %v, %v; want tls.key, tls.crt", got, err)
	}
}

// Only the named Secret is written, only into an existing dir, and a
// failed write is retried on the next change.
func TestSecretSyncWritesOnlyItsSecret(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	s := &secretSync{dir: dir, name: "gg-cert", log: logr.Discard()}
	s.changed(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Data: map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")}})
	s.changed(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gg-cert"}, Data: map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")}})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the sync created its cert dir (%v): it must write only into an existing one", err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s.changed(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Data: map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")}})
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("another Secret's data was written: %v", entries)
	}
	s.changed(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gg-cert"}, Data: map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")}})
	if b, err := os.ReadFile(filepath.Join(dir, "tls.crt")); err != nil || string(b) != "c" {
		t.Fatalf("tls.crt = %q, %v after the dir appeared", b, err)
	}
}
