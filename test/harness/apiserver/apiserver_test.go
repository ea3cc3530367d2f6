package apiserver

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Both ways of running graceguard beside the API server admit Pods
// (StartAPIServer returns only then), and Stop leaves no process and no
// temporary directory behind.
func TestAPIServerRunsGraceguardInProcessOrAsTheBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "webhook")
	build := exec.Command("go", "build", "-o", bin, "./cmd/webhook")
	build.Dir = filepath.Join("..", "..", "..") // the product's module
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building cmd/webhook: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, binary := range []string{"", bin} {
		a, err := StartAPIServer(ctx, APIServerOptions{WebhookBinary: binary})
		if err != nil {
			t.Fatalf("WebhookBinary %q: %v", binary, err)
		}
		if (a.Webhook != nil) != (binary != "") || a.Version == "" {
			t.Errorf("WebhookBinary %q: process %v, API server version %q", binary, a.Webhook, a.Version)
		}
		if err := a.Stop(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(a.tmpDir); !os.IsNotExist(err) {
			t.Errorf("temporary directory %s left behind (%v)", a.tmpDir, err)
		}
		if a.Webhook != nil && a.Webhook.Exited() == nil {
			t.Errorf("%s still runs after Stop", a.Webhook.Name)
		}
	}
}
