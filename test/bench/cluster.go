package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/graceguard/graceguard/internal/chart"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/webhook"
	"github.com/graceguard/graceguard/test/bench/fixture"
)

// releaseNamespace is graceguard's own namespace in the rendered chart.
const releaseNamespace = "graceguard-system"

// binaries builds cmd/webhook as `make build` does, and the no-op baseline.
func buildBinaries(ctx context.Context, root, dir string, log io.Writer) (webhookBin, noopBin string, err error) {
	webhookBin, noopBin = filepath.Join(dir, "webhook"), filepath.Join(dir, "noop")
	for _, b := range []struct{ out, pkg string }{{webhookBin, "./cmd/webhook"}, {noopBin, "./test/bench/noop"}} {
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", b.out, b.pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Stdout, cmd.Stderr = log, log
		fmt.Fprintf(log, "$ CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o %s %s\n", b.out, b.pkg)
		if err := cmd.Run(); err != nil {
			return "", "", fmt.Errorf("building %s: %w", b.pkg, err)
		}
	}
	return webhookBin, noopBin, nil
}

// cluster is a kube-apiserver and etcd (envtest) with the chart's webhook
// configurations pointed at the real graceguard binary, plus the no-op
// baseline next to it, sharing its serving certificate.
type cluster struct {
	env     *envtest.Environment
	rest    *rest.Config
	kube    kubernetes.Interface
	ca      []byte
	webhook *process
	noop    *process
	// http2 is a second graceguard, served with --enable-http2 (ArmHTTP2).
	http2 *process
	// webhookURL, noopURL and http2URL are https://127.0.0.1:PORT.
	webhookURL, noopURL, http2URL string
	version                       string
}

// process is a server this run started.
type process struct {
	name string
	bin  string
	args []string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func startProcess(name, logPath, bin string, args ...string) (*process, error) {
	p := &process{name: name, bin: bin, args: args, log: logPath}
	return p, p.start()
}

// start starts the process, appending to its log.
func (p *process) start() error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.err = cmd, done, nil
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(done)
	}()
	return nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v); its log %s ends with:\n%s", p.name, p.err, p.log, tail(p.log, 15))
	default:
		return nil
	}
}

// stop sends SIGTERM and waits; SIGKILL after 15s.
func (p *process) stop() error {
	if p == nil {
		return nil
	}
	if p.exited() != nil {
		return nil
	}
	// SIGTERM starts graceguard's graceful shutdown (shutdown delay 0,
	// then draining).
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within 15s of SIGTERM; killed", p.name)
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// startCluster starts etcd and kube-apiserver with graceguard's webhook
// configurations (rendered from the chart), the graceguard binary reading
// namespaces from that API server, and the baseline; it returns once
// graceguard mutates a Pod created (dry run) through the API server and the
// baseline answers a review.
func startCluster(ctx context.Context, assets, dir, webhookBin, noopBin string) (_ *cluster, err error) {
	hooks, err := chart.RenderWebhooks("graceguard", releaseNamespace, nil)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	c := &cluster{webhookURL: "https://127.0.0.1:" + strconv.Itoa(port)}
	hooks.PointAt(c.webhookURL)
	excludeArms(hooks, ArmNoopChart, ArmNoopPatch, ArmTwoCalls, ArmHTTP2)
	c.env = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		// The chart's CRDs: the observer phase writes ShutdownReports.
		CRDDirectoryPaths:     []string{filepath.Join(chart.ChartDir(), "crds")},
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			LocalServingHost:   "127.0.0.1",
			LocalServingPort:   port,
			MutatingWebhooks:   hooks.Mutating,
			ValidatingWebhooks: hooks.Validating,
		},
	}
	if c.rest, err = c.env.Start(); err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	defer func() {
		if err != nil {
			_ = c.stop()
		}
	}()
	c.rest.QPS, c.rest.Burst = 5000, 5000
	if c.kube, err = kubernetes.NewForConfig(c.rest); err != nil {
		return c, err
	}
	if v, err := c.kube.Discovery().ServerVersion(); err == nil {
		c.version = v.GitVersion
	}
	c.ca = c.env.WebhookInstallOptions.LocalServingCAData
	certDir := c.env.WebhookInstallOptions.LocalServingCertDir

	// graceguard authenticates as its own user, from a kubeconfig, as
	// `--kubeconfig` users do.
	user, err := c.env.AddUser(envtest.User{Name: "graceguard", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return c, err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return c, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return c, err
	}
	graceguard := func(name string, port int, extra ...string) (*process, error) {
		health, err := freePort()
		if err != nil {
			return nil, err
		}
		metricsPort, err := freePort()
		if err != nil {
			return nil, err
		}
		return startProcess(name, filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".log"), webhookBin, append([]string{
			"--kubeconfig=" + kubeconfig,
			"--cert-dir=" + certDir,
			"--port=" + strconv.Itoa(port),
			"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(metricsPort),
			"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(health),
			"--namespace=" + releaseNamespace,
			"--shutdown-delay=0s",
			"--drain-timeout=5s",
		}, extra...)...)
	}
	if c.webhook, err = graceguard("graceguard webhook", port); err != nil {
		return c, err
	}
	http2Port, err := freePort()
	if err != nil {
		return c, err
	}
	c.http2URL = "https://127.0.0.1:" + strconv.Itoa(http2Port)
	if c.http2, err = graceguard("graceguard webhook http2", http2Port, "--enable-http2"); err != nil {
		return c, err
	}
	if err := c.createNamespace(ctx, fixture.Namespace, true); err != nil {
		return c, err
	}
	if err := c.waitMutating(ctx, 90*time.Second); err != nil {
		return c, err
	}

	noopPort, err := freePort()
	if err != nil {
		return c, err
	}
	c.noopURL = "https://127.0.0.1:" + strconv.Itoa(noopPort)
	c.noop, err = startProcess("no-op baseline", filepath.Join(dir, "noop.log"), noopBin,
		"--host=127.0.0.1", "--port="+strconv.Itoa(noopPort), "--cert-dir="+certDir)
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

// waitMutating waits until a Pod created (dry run) in the opted-in
// namespace comes back mutated: graceguard serves, and its namespace
// cache has synced.
func (c *cluster) waitMutating(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if err := c.webhook.exited(); err != nil {
			return err
		}
		got, err := c.kube.CoreV1().Pods(fixture.Namespace).Create(ctx, fixture.MinimalPod(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil && got.Annotations[mutate.AnnotationBudget] != "" {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("graceguard did not mutate Pods within %s (last error: %v); its log %s ends with:\n%s",
		timeout, last, c.webhook.log, tail(c.webhook.log, 15))
}

// waitAnswering waits until url answers a review allowed.
func (c *cluster) waitAnswering(ctx context.Context, p *process, url string, timeout time.Duration) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.ca)
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	defer hc.CloseIdleConnections()
	body := fixture.Review(fixture.MinimalPod())
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if err := p.exited(); err != nil {
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
	return fmt.Errorf("%s did not answer within %s: %v", p.name, timeout, last)
}

// restart replaces both servers by fresh processes and waits until they
// answer, so that no run inherits another's heap, connections or backlog
// (Go returns memory to the OS slowly: a run after an overloaded one would
// report that one's RSS).
func (c *cluster) restart(ctx context.Context) error {
	for _, p := range []*process{c.webhook, c.http2, c.noop} {
		if err := p.stop(); err != nil {
			return err
		}
		if err := p.start(); err != nil {
			return err
		}
	}
	if err := c.waitMutating(ctx, 60*time.Second); err != nil {
		return err
	}
	return c.waitAnswering(ctx, c.noop, c.noopURL+webhook.PathMutatePod, 30*time.Second)
}

func (c *cluster) stop() error {
	var errs []error
	for _, p := range []*process{c.noop, c.webhook, c.http2} {
		if err := p.stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.env != nil {
		if err := c.env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping kube-apiserver and etcd: %w", err))
		}
	}
	return errors.Join(errs...)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
