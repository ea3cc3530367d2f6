package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/graceguard/graceguard/internal/freeport"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/server"
	"github.com/graceguard/graceguard/test/harness/chart"
	"github.com/graceguard/graceguard/test/harness/logs"
)

// APIServerOptions configure StartAPIServer.
type APIServerOptions struct {
	// AssetsDir holds kube-apiserver and etcd; default $KUBEBUILDER_ASSETS,
	// else the newest built into bin/k8s/.
	AssetsDir string
	// ReleaseNamespace is graceguard's own namespace (never touched).
	ReleaseNamespace string
	// Values are Helm values for rendering the webhook configurations.
	Values map[string]any
	// ChartDir is the chart they are rendered from; default this
	// repository's (chart.ChartDir). A benchmark sets another checkout's
	// to run that checkout's webhook behind its own registrations.
	ChartDir string
	// EditWebhooks, when set, changes the rendered webhook configurations
	// before they are installed.
	EditWebhooks func(*chart.Webhooks)
	// Configure adjusts the configuration of graceguard in this process
	// before it starts.
	Configure func(*server.Config)
	// WebhookBinary, when set, is the webhook binary (cmd/webhook) to run
	// as a process of its own instead (Webhook), with WebhookArgs after
	// the flags that connect it; Configure does not apply then.
	WebhookBinary string
	WebhookArgs   []string
	// WebhookReplicas, with WebhookBinary, runs that many webhook
	// processes behind a Balancer, the stand-in for kube-proxy in front
	// of the chart's Deployment: the webhook configurations name the
	// balancer's address, and each connection of the API server goes to
	// one replica. 0 runs one process the API server calls directly.
	WebhookReplicas int
	// Dir holds the processes' logs and kubeconfig; default a temporary
	// directory that Stop removes.
	Dir string
	// Log receives the in-process server's logs (default: discarded).
	Log logr.Logger
	// Alone starts the API server without graceguard, its webhook
	// configurations and its CRDs, for tests that install graceguard
	// themselves (the chart, with Helm); the options above do not apply.
	Alone bool
	// CRDDirs hold more CustomResourceDefinitions to install, and
	// APIServerFlags and EtcdFlags are more kube-apiserver and etcd flags.
	CRDDirs        []string
	APIServerFlags map[string]string
	EtcdFlags      map[string]string
}

// APIServer is a running API server with graceguard admitting Pods.
type APIServer struct {
	Env      *envtest.Environment
	Config   *rest.Config
	Client   kubernetes.Interface
	Webhooks chart.Webhooks
	// Version is the API server's, e.g. v1.37.2.
	Version string
	// ServerConfig is what the graceguard server in this process runs
	// with; Webhook is the graceguard process (WebhookBinary) instead.
	ServerConfig server.Config
	Webhook      *Process
	// Replicas are the webhook processes (WebhookReplicas; Webhook is the
	// first), each with its own address (ReplicaAddrs: what the balancer
	// forwards to) and metrics URL (ReplicaMetrics); Balancer is in front
	// of them.
	Replicas       []*Process
	ReplicaAddrs   []string
	ReplicaMetrics []string
	Balancer       *Balancer
	// WebhookURL is https://127.0.0.1:PORT, the graceguard server.
	WebhookURL string
	// MutatingFloor says whether the chart's mutating floor is installed
	// (the API server serves MutatingAdmissionPolicy v1: 1.36+).
	MutatingFloor bool
	// CA trusts the graceguard server's certificate, which is in CertDir.
	CA      []byte
	CertDir string

	o      APIServerOptions
	tmpDir string
	cancel context.CancelFunc
	done   chan error
	procs  []*Process
}

// StartAPIServer starts etcd, kube-apiserver and graceguard, installs the
// chart's webhook configurations and returns once a Pod in an opted-in
// namespace is admitted and mutated (Alone: once the API server serves).
func StartAPIServer(ctx context.Context, o APIServerOptions) (_ *APIServer, err error) {
	if o.AssetsDir == "" {
		o.AssetsDir = assetsDir()
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(o.AssetsDir, bin)); err != nil {
			return nil, fmt.Errorf("no %s in %q: run `make envtest-assets` (or `make test`, which does it) or set KUBEBUILDER_ASSETS=$(hack/envtest-assets.sh)", bin, o.AssetsDir)
		}
	}
	if o.ReleaseNamespace == "" {
		o.ReleaseNamespace = "graceguard-system"
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	if o.ChartDir == "" {
		o.ChartDir = chart.ChartDir()
	}
	hooks, err := chart.RenderWebhooksDir(o.ChartDir, "graceguard", o.ReleaseNamespace, o.Values)
	if err != nil {
		return nil, err
	}
	port, err := freeport.Get()
	if err != nil {
		return nil, err
	}
	a := &APIServer{o: o, done: make(chan error, 1)}
	base := "https://127.0.0.1:" + strconv.Itoa(port)
	if o.WebhookBinary != "" && o.WebhookReplicas > 0 {
		if a.Balancer, err = NewBalancer(); err != nil {
			return nil, err
		}
		base = "https://" + a.Balancer.Addr()
	}
	hooks.PointAt(base)
	if o.EditWebhooks != nil {
		o.EditWebhooks(&hooks)
	}
	a.Webhooks, a.WebhookURL = hooks, base
	if a.o.Dir == "" {
		if a.tmpDir, err = os.MkdirTemp("", "graceguard-apiserver-"); err != nil {
			return nil, err
		}
		a.o.Dir = a.tmpDir
	}
	a.Env = &envtest.Environment{BinaryAssetsDirectory: o.AssetsDir, CRDDirectoryPaths: o.CRDDirs, ErrorIfCRDPathMissing: true}
	if !o.Alone {
		// The CustomResourceDefinitions the chart ships (ShutdownReport).
		a.Env.CRDDirectoryPaths = append(a.Env.CRDDirectoryPaths, chart.CRDDir())
		a.Env.WebhookInstallOptions = envtest.WebhookInstallOptions{
			LocalServingHost:   "127.0.0.1",
			LocalServingPort:   port,
			MutatingWebhooks:   hooks.Mutating,
			ValidatingWebhooks: hooks.Validating,
		}
	}
	for k, v := range o.APIServerFlags {
		a.Env.ControlPlane.GetAPIServer().Configure().Set(k, v)
	}
	if len(o.EtcdFlags) > 0 {
		if a.Env.ControlPlane.Etcd == nil {
			a.Env.ControlPlane.Etcd = &envtest.Etcd{}
		}
		for k, v := range o.EtcdFlags {
			a.Env.ControlPlane.Etcd.Configure().Set(k, v)
		}
	}
	defer func() {
		if err != nil {
			_ = a.Stop()
		}
	}()
	if a.Config, err = a.Env.Start(); err != nil {
		return a, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	a.CA, a.CertDir = a.Env.WebhookInstallOptions.LocalServingCAData, a.Env.WebhookInstallOptions.LocalServingCertDir
	if a.Client, err = kubernetes.NewForConfig(a.Config); err != nil {
		return a, err
	}
	if v, err := a.Client.Discovery().ServerVersion(); err == nil {
		a.Version = v.GitVersion
	}
	if o.Alone {
		return a, nil
	}
	if err := a.InstallPolicies(ctx); err != nil {
		return a, err
	}
	if o.WebhookBinary != "" && o.WebhookReplicas > 0 {
		if err := a.startReplicas(ctx, port); err != nil {
			return a, err
		}
	} else if o.WebhookBinary != "" {
		if a.Webhook, err = a.StartWebhook("graceguard webhook", port, o.WebhookArgs...); err != nil {
			return a, err
		}
	} else if err := a.startInProcess(port); err != nil {
		return a, err
	}
	return a, a.waitAdmitting(ctx)
}

// assetsDir is $KUBEBUILDER_ASSETS, else the newest bin/k8s/<version>/ of
// the repository holding both binaries (what hack/envtest-assets.sh built).
// The repository is the one this source file is in, as for chart.ChartDir.
func assetsDir() string {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	dirs, _ := filepath.Glob(filepath.Join(root, "bin", "k8s", "*"))
	slices.Reverse(dirs) // newest version first (Glob sorts)
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "etcd")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "kube-apiserver")); err == nil {
				return d
			}
		}
	}
	return ""
}

// InstallPolicies creates the chart's native floor (its policies and
// bindings) and waits until the API server enforces it: a dry-run Pod whose
// hook outlasts its grace is refused by the floor.
func (a *APIServer) InstallPolicies(ctx context.Context) error {
	api := a.Client.AdmissionregistrationV1()
	for _, p := range a.Webhooks.Policies {
		if _, err := api.ValidatingAdmissionPolicies().Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("installing the native floor: %w", err)
		}
	}
	for _, b := range a.Webhooks.Bindings {
		if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("installing the native floor: %w", err)
		}
	}
	// The mutating floor needs MutatingAdmissionPolicy v1, GA and on from
	// Kubernetes 1.36 (the chart renders it only there).
	if served, err := a.servesMutatingPolicies(); err != nil {
		return err
	} else if served {
		for _, p := range a.Webhooks.MutatingPolicies {
			if _, err := api.MutatingAdmissionPolicies().Create(ctx, p, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("installing the mutating floor: %w", err)
			}
		}
		for _, b := range a.Webhooks.MutatingBindings {
			if _, err := api.MutatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("installing the mutating floor: %w", err)
			}
		}
		a.MutatingFloor = len(a.Webhooks.MutatingPolicies) > 0
	}
	if len(a.Webhooks.Policies) == 0 {
		return nil
	}
	return a.WaitFloor(ctx, 30*time.Second)
}

// servesMutatingPolicies reports whether the API server serves
// admissionregistration.k8s.io/v1 MutatingAdmissionPolicies.
func (a *APIServer) servesMutatingPolicies() (bool, error) {
	rs, err := a.Client.Discovery().ServerResourcesForGroupVersion(admissionv1.SchemeGroupVersion.String())
	if err != nil {
		return false, err
	}
	for _, r := range rs.APIResources {
		if r.Name == "mutatingadmissionpolicies" {
			return true, nil
		}
	}
	return false, nil
}

// WaitFloor waits until the native floor refuses, in an opted-in
// namespace, a dry-run Pod that opted out and whose hook outlasts its
// grace: the API server loads policies a moment after they are created.
func (a *APIServer) WaitFloor(ctx context.Context, timeout time.Duration) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: floorProbeNamespace, Labels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}}}
	if _, err := a.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the floor's probe namespace: %w", err)
	}
	grace := int64(1)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "floor-probe", Namespace: floorProbeNamespace, Annotations: map[string]string{mutate.AnnotationInject: "false"}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{{Name: "c", Image: "registry.local/probe:1",
			Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "5"}}}}}}},
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		_, err := a.Client.CoreV1().Pods(floorProbeNamespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("the native floor did not refuse a hook longer than its grace within %s", timeout)
}

// untreated is --untreated-pods as the chart sets it: admit while the Pod
// validating webhook fails open.
func (a *APIServer) untreated() mutate.UntreatedPolicy {
	if a.Webhooks.FailsOpen() {
		return mutate.UntreatedAdmit
	}
	return mutate.UntreatedDeny
}

// floorProbeNamespace is where WaitFloor tries the floor.
const floorProbeNamespace = "graceguard-floor-probe"

// startInProcess runs graceguard's server in this process on port, as
// cmd/webhook does with the chart's flags.
func (a *APIServer) startInProcess(port int) error {
	cfg := server.DefaultConfig()
	cfg.Options.Untreated = a.untreated()
	cfg.Port = port
	cfg.CertDir = a.CertDir
	cfg.Namespace = a.o.ReleaseNamespace
	cfg.MetricsBindAddress = "0"
	cfg.ShutdownDelay = 0
	cfg.DrainTimeout = 5 * time.Second
	healthPort, err := freeport.Get()
	if err != nil {
		return err
	}
	cfg.HealthProbeBindAddress = "127.0.0.1:" + strconv.Itoa(healthPort)
	if a.o.Configure != nil {
		a.o.Configure(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	a.ServerConfig = cfg
	srvCtx, cancel := context.WithCancel(logf.IntoContext(context.Background(), a.o.Log))
	a.cancel = cancel
	go func() {
		a.done <- server.Run(srvCtx, cfg, a.Config, prometheus.NewRegistry(), server.WithWebhookHost("127.0.0.1"))
	}()
	return nil
}

// startReplicas starts WebhookReplicas webhook processes, the first on
// port, waits until each is ready (its /readyz, as the kubelet's probe
// decides when kube-proxy routes to a Pod), then routes the balancer to
// all of them.
func (a *APIServer) startReplicas(ctx context.Context, port int) error {
	var health []int
	for i := range a.o.WebhookReplicas {
		p := port
		if i > 0 {
			var err error
			if p, err = freeport.Get(); err != nil {
				return err
			}
		}
		proc, metrics, h, err := a.startWebhook(fmt.Sprintf("graceguard webhook %d", i+1), p, a.o.WebhookArgs...)
		if err != nil {
			return err
		}
		a.Replicas = append(a.Replicas, proc)
		a.ReplicaAddrs = append(a.ReplicaAddrs, "127.0.0.1:"+strconv.Itoa(p))
		a.ReplicaMetrics = append(a.ReplicaMetrics, metrics)
		health = append(health, h)
	}
	a.Webhook = a.Replicas[0]
	deadline := time.Now().Add(90 * time.Second)
	for i, h := range health {
		for Readyz(h) != http.StatusOK {
			if err := a.Replicas[i].Exited(); err != nil {
				return err
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s not ready within 90s; its log %s ends with:\n%s", a.Replicas[i].Name, a.Replicas[i].Log, logs.Tail(a.Replicas[i].Log, 15))
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	a.Balancer.SetBackends(a.ReplicaAddrs...)
	return nil
}

// StartWebhook runs the webhook binary (WebhookBinary) as another process
// serving on port with the API server's serving certificate, as a user of
// its own (in system:masters) from a kubeconfig, as `--kubeconfig` users
// do; extra flags follow the ones that connect it. Stop stops it.
func (a *APIServer) StartWebhook(name string, port int, extra ...string) (*Process, error) {
	p, _, _, err := a.startWebhook(name, port, extra...)
	return p, err
}

// startWebhook is StartWebhook, also returning the process's metrics URL
// and health port (extra flags may move either).
func (a *APIServer) startWebhook(name string, port int, extra ...string) (_ *Process, metricsURL string, healthPort int, _ error) {
	kubeconfig, err := a.Kubeconfig("graceguard")
	if err != nil {
		return nil, "", 0, err
	}
	health, err := freeport.Get()
	if err != nil {
		return nil, "", 0, err
	}
	metricsPort, err := freeport.Get()
	if err != nil {
		return nil, "", 0, err
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--cert-dir=" + a.CertDir,
		"--port=" + strconv.Itoa(port),
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(metricsPort),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(health),
		"--namespace=" + a.o.ReleaseNamespace,
		"--shutdown-delay=0s",
		"--drain-timeout=5s",
	}
	// --untreated-pods as the chart sets it, unless extra carries the
	// chart's own arguments (an older chart's webhook, as the cpu-held
	// bench runs it, has no such flag).
	if !slices.ContainsFunc(extra, func(f string) bool {
		return strings.HasPrefix(f, "--untreated-pods") || strings.HasPrefix(f, "--max-concurrent-reviews")
	}) {
		args = append(args, "--untreated-pods="+string(a.untreated()))
	}
	p, err := a.StartProcess(name, a.o.WebhookBinary, append(args, extra...)...)
	return p, "http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics", health, err
}

// Kubeconfig adds user to the API server, in system:masters, and returns
// the path of its kubeconfig (in Dir).
func (a *APIServer) Kubeconfig(user string) (string, error) {
	u, err := a.Env.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	kc, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(a.o.Dir, user+".kubeconfig")
	return path, os.WriteFile(path, kc, 0o600)
}

// StartProcess runs bin beside the API server, its log in Dir (named
// after name); Stop stops it.
func (a *APIServer) StartProcess(name, bin string, args ...string) (*Process, error) {
	p, err := StartProcess(name, filepath.Join(a.o.Dir, strings.ReplaceAll(name, " ", "-")+".log"), bin, args...)
	if err != nil {
		return nil, err
	}
	a.procs = append(a.procs, p)
	return p, nil
}

// probeNamespace is an opted-in namespace kept for checking that
// graceguard admits Pods.
const probeNamespace = "graceguard-probe"

// waitAdmitting creates the probe namespace and waits until graceguard
// mutates Pods.
func (a *APIServer) waitAdmitting(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: probeNamespace, Labels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}}}
	if _, err := a.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the probe namespace: %w", err)
	}
	return a.WaitMutating(ctx, 90*time.Second)
}

// WaitMutating waits until a Pod created (dry-run) in an opted-in
// namespace comes back mutated: graceguard serves, and its namespace cache
// has synced.
func (a *APIServer) WaitMutating(ctx context.Context, timeout time.Duration) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: probeNamespace},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.local/probe:1"}}},
	}
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if err := a.stopped(); err != nil {
			return err
		}
		got, err := a.Client.CoreV1().Pods(probeNamespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		// Only graceguard's webhook labels a Pod treated "true" (the
		// mutating floor labels it "floor").
		if err == nil && got.Labels[mutate.LabelTreated] == mutate.LabelTreatedValue {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	err := fmt.Errorf("graceguard did not mutate Pods within %s (last error: %v)", timeout, last)
	if a.Webhook != nil {
		err = fmt.Errorf("%w; its log %s ends with:\n%s", err, a.Webhook.Log, logs.Tail(a.Webhook.Log, 15))
	}
	return err
}

// stopped says how graceguard stopped, or returns nil while it serves.
func (a *APIServer) stopped() error {
	for _, p := range a.Replicas {
		if err := p.Exited(); err != nil {
			return err
		}
	}
	if a.Webhook != nil {
		return a.Webhook.Exited()
	}
	select {
	case err := <-a.done:
		a.done <- err
		return fmt.Errorf("graceguard stopped: %v", err)
	default:
		return nil
	}
}

// HTTPClient trusts the graceguard server's certificate, to talk to it
// directly as the API server does.
func (a *APIServer) HTTPClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(a.CA)
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}

// RemoveMutatingWebhooks deletes the mutating configuration, as if the
// mutating webhook were unavailable under failurePolicy Ignore. The
// returned func puts it back and waits until Pods are mutated again.
func (a *APIServer) RemoveMutatingWebhooks(ctx context.Context) (restore func(context.Context) error, err error) {
	return a.removeWebhooks(ctx, false)
}

// RemoveWebhooks deletes both configurations, so that a test can install
// graceguard's webhooks differently; the returned func puts them back.
func (a *APIServer) RemoveWebhooks(ctx context.Context) (restore func(context.Context) error, err error) {
	return a.removeWebhooks(ctx, true)
}

func (a *APIServer) removeWebhooks(ctx context.Context, validating bool) (func(context.Context) error, error) {
	mapi := a.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	vapi := a.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	var savedM []*admissionv1.MutatingWebhookConfiguration
	var savedV []*admissionv1.ValidatingWebhookConfiguration
	for _, m := range a.Webhooks.Mutating {
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
		for _, v := range a.Webhooks.Validating {
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
		return a.WaitMutating(ctx, 30*time.Second)
	}, nil
}

// Stop stops graceguard (and every process started beside it), the API
// server and etcd, and removes the temporary directory.
func (a *APIServer) Stop() error {
	var errs []error
	if a.cancel != nil {
		a.cancel()
		select {
		case err := <-a.done:
			if err != nil {
				errs = append(errs, fmt.Errorf("graceguard: %w", err))
			}
		case <-time.After(30 * time.Second):
			errs = append(errs, errors.New("graceguard did not stop within 30s"))
		}
		a.cancel = nil
	}
	if a.Balancer != nil {
		errs = append(errs, a.Balancer.Close())
	}
	for _, p := range a.procs {
		if err := p.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if a.Config != nil {
		if err := a.Env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping the control plane: %w", err))
		}
	}
	if a.tmpDir != "" {
		if err := os.RemoveAll(a.tmpDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// WriteKubeconfig writes a kubeconfig at path for c's credentials against
// the API server at host (c.Host when empty), impersonating user when it
// is not empty (a ServiceAccount gets its groups, as in a Pod).
func WriteKubeconfig(path string, c *rest.Config, host, user string) error {
	if host == "" {
		host = c.Host
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: c.CAData}
	kc.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.CertData, ClientKeyData: c.KeyData, Token: c.BearerToken, Impersonate: user}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest"}
	kc.CurrentContext = "envtest"
	return clientcmd.WriteToFile(*kc, path)
}

// ServeTLS serves h on a free loopback port with the API server's serving
// certificate, which the API server trusts (CA): a webhook of the test's
// own beside graceguard's. It returns the server's https:// base URL and
// a func that stops it.
func (a *APIServer) ServeTLS(h http.Handler) (url string, stop func() error, err error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(a.CertDir, "tls.crt"), filepath.Join(a.CertDir, "tls.key"))
	if err != nil {
		return "", nil, err
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "https://" + ln.Addr().String(), srv.Close, nil
}
