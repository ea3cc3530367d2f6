// Package controlplane runs graceguard in front of a real kube-apiserver and
// etcd (controller-runtime's envtest): the webhook configurations the Helm
// chart ships, pointed at a graceguard server running in this process. The
// envtest suite and `make demo` both use it.
//
// Invariant: Stop leaves no process, listener or temporary directory behind.
package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/graceguard/graceguard/internal/chart"
	"github.com/graceguard/graceguard/internal/freeport"
	"github.com/graceguard/graceguard/pkg/config"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/server"
)

// Options configure Start.
type Options struct {
	// AssetsDir holds kube-apiserver and etcd (KUBEBUILDER_ASSETS).
	AssetsDir string
	// ReleaseNamespace is graceguard's own namespace (never touched).
	ReleaseNamespace string
	// Values are Helm values for rendering the webhook configurations.
	Values map[string]any
	// Configure adjusts the server configuration before it starts.
	Configure func(*config.Config)
	// Log receives the server's logs (default: discarded).
	Log logr.Logger
}

// ControlPlane is a running API server with graceguard admitting Pods.
type ControlPlane struct {
	Env      *envtest.Environment
	Config   *rest.Config
	Client   kubernetes.Interface
	Webhooks chart.Webhooks
	// ServerConfig is what the graceguard server runs with.
	ServerConfig config.Config
	// WebhookURL is https://127.0.0.1:PORT, the graceguard server.
	WebhookURL string
	// CA trusts the graceguard server's certificate.
	CA []byte

	cancel  context.CancelFunc
	done    chan error
	metrics *prometheus.Registry
}

// Start starts etcd, kube-apiserver and graceguard, installs the chart's
// webhook configurations and returns once a Pod in an opted-in namespace
// is admitted and mutated.
func Start(ctx context.Context, o Options) (*ControlPlane, error) {
	if o.AssetsDir == "" {
		o.AssetsDir = os.Getenv("KUBEBUILDER_ASSETS")
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(o.AssetsDir + "/" + bin); err != nil {
			return nil, fmt.Errorf("no %s in %q: run `make envtest-assets` (or `make test`, which does it) or set KUBEBUILDER_ASSETS", bin, o.AssetsDir)
		}
	}
	if o.ReleaseNamespace == "" {
		o.ReleaseNamespace = "graceguard-system"
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	hooks, err := chart.RenderWebhooks("graceguard", o.ReleaseNamespace, o.Values)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	base := "https://127.0.0.1:" + strconv.Itoa(port)
	hooks.PointAt(base)

	env := &envtest.Environment{
		BinaryAssetsDirectory: o.AssetsDir,
		// The CustomResourceDefinitions the chart ships (ShutdownReport).
		CRDDirectoryPaths:     []string{filepath.Join(chart.ChartDir(), "crds")},
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			LocalServingHost:   "127.0.0.1",
			LocalServingPort:   port,
			MutatingWebhooks:   hooks.Mutating,
			ValidatingWebhooks: hooks.Validating,
		},
	}
	restCfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	cp := &ControlPlane{Env: env, Config: restCfg, Webhooks: hooks, WebhookURL: base, CA: env.WebhookInstallOptions.LocalServingCAData, done: make(chan error, 1)}
	if cp.Client, err = kubernetes.NewForConfig(restCfg); err != nil {
		_ = env.Stop()
		return nil, err
	}

	cfg := config.Default()
	cfg.Port = port
	cfg.CertDir = env.WebhookInstallOptions.LocalServingCertDir
	cfg.Namespace = o.ReleaseNamespace
	cfg.MetricsBindAddress = "0"
	cfg.ShutdownDelay = 0
	cfg.DrainTimeout = 5 * time.Second
	healthPort, err := freePort()
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	cfg.HealthProbeBindAddress = "127.0.0.1:" + strconv.Itoa(healthPort)
	if o.Configure != nil {
		o.Configure(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		_ = env.Stop()
		return nil, err
	}
	cp.ServerConfig = cfg
	cp.metrics = prometheus.NewRegistry()

	srvCtx, cancel := context.WithCancel(logf.IntoContext(context.Background(), o.Log))
	cp.cancel = cancel
	go func() {
		cp.done <- server.Run(srvCtx, cfg,
			server.WithRESTConfig(restCfg),
			server.WithRegistry(cp.metrics),
			server.WithWebhookHost("127.0.0.1"))
	}()

	if err := cp.waitAdmitting(ctx); err != nil {
		_ = cp.Stop()
		return nil, err
	}
	return cp, nil
}

// Metrics is the registry graceguard's own metrics are registered on.
func (cp *ControlPlane) Metrics() *prometheus.Registry { return cp.metrics }

// probeNamespace is an opted-in namespace kept for checking that
// graceguard admits Pods.
const probeNamespace = "graceguard-probe"

// waitAdmitting creates the probe namespace and waits until graceguard
// mutates Pods: then the webhook is serving and its namespace cache has
// synced.
func (cp *ControlPlane) waitAdmitting(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: probeNamespace, Labels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}}}
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the probe namespace: %w", err)
	}
	return cp.WaitMutating(ctx, 60*time.Second)
}

// WaitMutating waits until a Pod created (dry-run) in an opted-in
// namespace comes back mutated.
func (cp *ControlPlane) WaitMutating(ctx context.Context, timeout time.Duration) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: probeNamespace},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.local/probe:1"}}},
	}
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case err := <-cp.done:
			cp.done <- err
			return fmt.Errorf("graceguard stopped: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		got, err := cp.Client.CoreV1().Pods(probeNamespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil && got.Annotations[mutate.AnnotationBudget] != "" {
			return nil
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("graceguard did not mutate Pods within %s (last error: %v)", timeout, last)
}

// HTTPClient trusts the graceguard server's certificate, to talk to it
// directly as the API server does.
func (cp *ControlPlane) HTTPClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cp.CA)
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}

// RemoveMutatingWebhooks deletes the mutating configuration, as if the
// mutating webhook were unavailable under failurePolicy Ignore. The
// returned func puts it back and waits until Pods are mutated again.
func (cp *ControlPlane) RemoveMutatingWebhooks(ctx context.Context) (restore func(context.Context) error, err error) {
	return cp.removeWebhooks(ctx, false)
}

// RemoveWebhooks deletes both configurations, so that a test can install
// graceguard's webhooks differently; the returned func puts them back.
func (cp *ControlPlane) RemoveWebhooks(ctx context.Context) (restore func(context.Context) error, err error) {
	return cp.removeWebhooks(ctx, true)
}

func (cp *ControlPlane) removeWebhooks(ctx context.Context, validating bool) (func(context.Context) error, error) {
	mapi := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	vapi := cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	var savedM []*admissionv1.MutatingWebhookConfiguration
	var savedV []*admissionv1.ValidatingWebhookConfiguration
	for _, m := range cp.Webhooks.Mutating {
		cur, err := mapi.Get(ctx, m.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		savedM = append(savedM, cur)
		if err := mapi.Delete(ctx, m.Name, metav1.DeleteOptions{}); err != nil {
			return nil, err
		}
	}
	if validating {
		for _, v := range cp.Webhooks.Validating {
			cur, err := vapi.Get(ctx, v.Name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			savedV = append(savedV, cur)
			if err := vapi.Delete(ctx, v.Name, metav1.DeleteOptions{}); err != nil {
				return nil, err
			}
		}
	}
	return func(ctx context.Context) error {
		for _, m := range savedM {
			m = m.DeepCopy()
			m.ResourceVersion, m.UID = "", ""
			if _, err := mapi.Create(ctx, m, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		for _, v := range savedV {
			v = v.DeepCopy()
			v.ResourceVersion, v.UID = "", ""
			if _, err := vapi.Create(ctx, v, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		return cp.WaitMutating(ctx, 30*time.Second)
	}, nil
}

// Stop stops graceguard, the API server and etcd.
func (cp *ControlPlane) Stop() error {
	var errs []error
	if cp.cancel != nil {
		cp.cancel()
		select {
		case err := <-cp.done:
			if err != nil {
				errs = append(errs, fmt.Errorf("graceguard: %w", err))
			}
		case <-time.After(30 * time.Second):
			errs = append(errs, errors.New("graceguard did not stop within 30s"))
		}
		cp.cancel = nil
	}
	if err := cp.Env.Stop(); err != nil {
		errs = append(errs, fmt.Errorf("stopping the control plane: %w", err))
	}
	return errors.Join(errs...)
}

func freePort() (int, error) { return freeport.Get() }
