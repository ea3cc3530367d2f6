package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/graceguard/graceguard/internal/fixture"
	"github.com/graceguard/graceguard/internal/freeport"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/webhook"
	"github.com/graceguard/graceguard/test/harness/apiserver"
	"github.com/graceguard/graceguard/test/harness/chart"
)

// releaseNamespace is graceguard's own namespace in the rendered chart.
const releaseNamespace = "graceguard-system"

// binaries builds cmd/webhook as `make build` does, and the no-op baseline.
func buildBinaries(ctx context.Context, root, dir string, log io.Writer) (webhookBin, noopBin string, err error) {
	webhookBin, noopBin = filepath.Join(dir, "webhook"), filepath.Join(dir, "noop")
	// Each in its own module: the webhook in the product's, the baseline in the lab's.
	for _, b := range []struct{ out, dir, pkg string }{{webhookBin, root, "./cmd/webhook"}, {noopBin, filepath.Join(root, "test"), "./bench/noop"}} {
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", b.out, b.pkg)
		cmd.Dir = b.dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Stdout, cmd.Stderr = log, log
		fmt.Fprintf(log, "$ CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o %s %s\n", b.out, b.pkg)
		if err := cmd.Run(); err != nil {
			return "", "", fmt.Errorf("building %s: %w", b.pkg, err)
		}
	}
	return webhookBin, noopBin, nil
}

// cluster is a kube-apiserver and etcd (apiserver.StartAPIServer) with
// the chart's webhook configurations pointed at the real graceguard
// binary, plus a second graceguard serving HTTP/2 and the no-op baseline
// beside it, all sharing the API server's serving certificate.
type cluster struct {
	*apiserver.APIServer
	// rest and kube act as the admin, with rate limits high enough to
	// create thousands of Pods a second.
	rest *rest.Config
	kube kubernetes.Interface
	noop *apiserver.Process
	// http2 is a second graceguard, served with --enable-http2 (ArmHTTP2).
	http2 *apiserver.Process
	// noopURL and http2URL are https://127.0.0.1:PORT.
	noopURL, http2URL string
}

// startCluster starts etcd and kube-apiserver with graceguard's webhook
// configurations (rendered from the chart), the graceguard binary reading
// namespaces from that API server, and the baseline; it returns once
// graceguard mutates a Pod created (dry run) through the API server and the
// baseline answers a review.
func startCluster(ctx context.Context, assets, dir, webhookBin, noopBin string) (_ *cluster, err error) {
	c := &cluster{}
	c.APIServer, err = apiserver.StartAPIServer(ctx, apiserver.APIServerOptions{
		AssetsDir: assets, ReleaseNamespace: releaseNamespace, Dir: dir, WebhookBinary: webhookBin,
		EditWebhooks: func(w *chart.Webhooks) {
			excludeArms(*w, ArmNoopChart, ArmNoopPatch, ArmTwoCalls, ArmHTTP2, ArmGraceguardNoProbe, ArmWebhookOnly, ArmMutatingFloor)
		},
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	c.rest = rest.CopyConfig(c.Config)
	c.rest.QPS, c.rest.Burst = 5000, 5000
	// graceguard warns of every Pod of ArmGraceguardNoProbe (its serving
	// container has no readiness probe): client-go would log each, a line
	// per Pod. The warnings still travel; only their printing is dropped.
	c.rest.WarningHandler = rest.NoWarnings{}
	if c.kube, err = kubernetes.NewForConfig(c.rest); err != nil {
		return c, err
	}
	http2Port, err := freeport.Get()
	if err != nil {
		return c, err
	}
	c.http2URL = "https://127.0.0.1:" + strconv.Itoa(http2Port)
	if c.http2, err = c.StartWebhook("graceguard webhook http2", http2Port, "--enable-http2"); err != nil {
		return c, err
	}
	if err := c.createNamespace(ctx, fixture.Namespace, true); err != nil {
		return c, err
	}
	noopPort, err := freeport.Get()
	if err != nil {
		return c, err
	}
	c.noopURL = "https://127.0.0.1:" + strconv.Itoa(noopPort)
	c.noop, err = c.StartProcess("no-op baseline", noopBin, "--host=127.0.0.1", "--port="+strconv.Itoa(noopPort), "--cert-dir="+c.CertDir)
	if err != nil {
		return c, err
	}
	if err := c.waitAnswering(ctx, c.noop, c.noopURL+webhook.PathMutatePod, 30*time.Second); err != nil {
		return c, err
	}
	return c, nil
}

// createNamespace creates a namespace, opted in to graceguard or not.
func (c *cluster) createNamespace(ctx context.Context, name string, optedIn bool) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if optedIn {
		ns.Labels = map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}
	}
	_, err := c.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// waitAnswering waits until url answers a review allowed.
func (c *cluster) waitAnswering(ctx context.Context, p *apiserver.Process, url string, timeout time.Duration) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.CA)
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	defer hc.CloseIdleConnections()
	body := fixture.Review(fixture.MinimalPod())
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if err := p.Exited(); err != nil {
			return err
		}
		resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && bytes.Contains(b, []byte(`"allowed":true`)) {
				return nil
			}
			err = fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, b)
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s did not answer within %s: %v", p.Name, timeout, last)
}

// restart replaces the servers by fresh processes and waits until they
// answer, so that no run inherits another's heap, connections or backlog
// (Go returns memory to the OS slowly: a run after an overloaded one would
// report that one's RSS).
func (c *cluster) restart(ctx context.Context) error {
	for _, p := range []*apiserver.Process{c.Webhook, c.http2, c.noop} {
		if err := p.Stop(); err != nil {
			return err
		}
		if err := p.Start(); err != nil {
			return err
		}
	}
	if err := c.WaitMutating(ctx, 60*time.Second); err != nil {
		return err
	}
	return c.waitAnswering(ctx, c.noop, c.noopURL+webhook.PathMutatePod, 30*time.Second)
}
