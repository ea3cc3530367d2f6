//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/graceguard/graceguard/test/e2e/evidence"
	"github.com/graceguard/graceguard/test/harness/cluster"
	"github.com/graceguard/graceguard/test/harness/ocipack"
	"github.com/graceguard/graceguard/test/harness/release"
)

// Images imported into the node's containerd: the webhook's is the release
// image of this checkout (make image-oci, the same build as make dist's;
// hack/e2e.sh builds it and names its image.json in GG_E2E_IMAGE), the
// drainapp is built here.
const (
	drainappImage = "registry.local/drainapp:e2e"
	// drainappDistroless is the same app without the /bin/sleep link, under
	// a name that says what it is: no distribution in it (scenario 10).
	drainappDistroless = "registry.local/drainapp:e2e-distroless"
	appPort            = 8080
)

// webhookImage is the release image installed: its name (repository:tag)
// and index digest, from GG_E2E_IMAGE.
var webhookImage release.Image

// Namespaces: opted-in ones carry graceguard.io/inject=enabled.
const (
	releaseNS = "graceguard-system"
	nsLab     = "gg-e2e-lab"
	nsControl = "gg-e2e-control"
	nsRollA   = "gg-e2e-rollout-a"
	nsRollB   = "gg-e2e-rollout-b"
	nsHookA   = "gg-e2e-hook-a"
	nsHookB   = "gg-e2e-hook-b"
	nsChurn   = "gg-e2e-churn"
	nsMesh    = "gg-e2e-mesh"
	nsTune    = "gg-e2e-tune"
	nsNative  = "gg-e2e-native"
	// Scenario 8: the hostile tenant's namespaces (one opted in, one not)
	// and the namespace of the ordinary creates beside it.
	nsHostile    = "gg-e2e-hostile"
	nsHostileOut = "gg-e2e-hostile-out"
	nsSteady     = "gg-e2e-steady"
	// Scenario 10: broken preStop hooks.
	nsBroken = "gg-e2e-broken-hook"
	// Scenario 11: the queue server and its consumers (arm B opts its Pod
	// out).
	nsQueue = "gg-e2e-queue"
	// Scenario 13: Traefik's ServiceAccount, and the Pods behind it with
	// graceguard (a) and without (b).
	nsIngress  = "gg-e2e-ingress"
	nsIngressA = "gg-e2e-ingress-a"
	nsIngressB = "gg-e2e-ingress-b"
	// Scenario 14: the Deployments drained off the second node, with
	// graceguard (a) and without (b).
	nsDrainA = "gg-e2e-drain-a"
	nsDrainB = "gg-e2e-drain-b"
	// Scenario 15: the rollouts while graceguard is down or starved.
	nsDegrade = "gg-e2e-degrade"
	// Scenario 16: the app and its database proxy sidecar, named in
	// graceguard.io/sidecars (a) and not (b); both opted in.
	nsSidecarA = "gg-e2e-sidecar-a"
	nsSidecarB = "gg-e2e-sidecar-b"
	// Scenario 17: scenario 13's withdrawal measurement beside
	// measure-routing's (which makes namespaces of its own).
	nsRouting = "gg-e2e-routing"
	// Scenario 18: Argo Rollouts' canary with graceguard (a) and without
	// (b).
	nsArgoA = "gg-e2e-argo-a"
	nsArgoB = "gg-e2e-argo-b"

	optInLabel = "graceguard.io/inject"
)

var testNamespaces = []struct {
	name    string
	optedIn bool
}{{nsLab, true}, {nsControl, false}, {nsRollA, true}, {nsRollB, false}, {nsHookA, true}, {nsHookB, false}, {nsChurn, true}, {nsMesh, true}, {nsTune, true}, {nsNative, true},
	{nsHostile, true}, {nsHostileOut, false}, {nsSteady, true}, {nsBroken, true}, {nsQueue, true},
	{nsIngress, false}, {nsIngressA, true}, {nsIngressB, false}, {nsDrainA, true}, {nsDrainB, false}, {nsDegrade, true},
	{nsSidecarA, true}, {nsSidecarB, true}, {nsRouting, true}, {nsArgoA, true}, {nsArgoB, false}}

var (
	cl       *cluster.Cluster
	kube     kubernetes.Interface
	repoRoot string
	outDir   string
	owned    bool // the suite started the cluster and stops it

	evMu sync.Mutex
	ev   = &evidence.Run{Schema: evidence.Schema}

	// installed gates the specs that need graceguard running.
	installed bool
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "graceguard e2e on a real node")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	Expect(os.Geteuid()).To(Equal(0), "the e2e suite runs a real kubelet and containerd: run it as root")
	ev.Started = time.Now().UTC()
	var err error
	repoRoot, err = filepath.Abs(filepath.Join("..", ".."))
	Expect(err).NotTo(HaveOccurred())
	outDir = os.Getenv("GG_E2E_OUT")
	if outDir == "" {
		outDir = filepath.Join(repoRoot, "bin", "e2e", ev.Started.Format("20060102-150405"))
	}
	Expect(os.MkdirAll(outDir, 0o755)).To(Succeed())
	GinkgoWriter.Printf("evidence goes to %s\n", outDir)

	opts := cluster.Options{RepoRoot: repoRoot, Logf: func(f string, a ...any) { GinkgoWriter.Printf("cluster: "+f+"\n", a...) }}
	if cl, err = cluster.Attach(ctx, opts); err != nil {
		GinkgoWriter.Printf("no running cluster (%v): starting one (it is stopped after the suite)\n", err)
		cl, err = cluster.Up(ctx, opts)
		Expect(err).NotTo(HaveOccurred(), "cluster up")
		owned = true
	}
	// The suite's own client: no client-side throttling (client-go's default
	// 5 requests/s would pace scenario 5's creates, not the apiserver), and
	// admission warnings kept out of the log (the specs read what they need).
	cfg := rest.CopyConfig(cl.RESTConfig)
	cfg.QPS, cfg.Burst = 500, 1000
	cfg.WarningHandler = rest.NoWarnings{}
	kube, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	ev.Env.ClusterOwned = owned
	fillEnv(ctx)

	By("building and importing the images")
	busybox, version := findBusybox(ctx)
	ev.Env.Busybox = version
	for _, img := range []struct {
		pkg, name, path string
		links           []string
		files           []ocipack.File
		cmd, env        []string
		digest          *string
	}{
		{"./test/images/drainapp", drainappImage, "/drainapp", []string{"/bin/sleep"}, nil, nil, nil, &ev.Env.DrainappDigest},
		{"./test/images/tcpproxy", tcpproxyImage, "/tcpproxy", nil, nil, nil, nil, &ev.Env.TcpproxyDigest},
		{"./test/images/hostile", hostileImage, "/hostile", nil, nil, nil, nil, &ev.Env.HostileDigest},
		// Laid out as Istio's proxyv2: pilot-agent on the PATH, a shell.
		{"./test/images/nativeproxy", nativeproxyImage, "/usr/local/bin/pilot-agent", nil,
			[]ocipack.File{{Source: busybox, Path: "/bin/busybox", Symlinks: []string{"/bin/sh", "/bin/sleep"}}},
			[]string{"proxy", "sidecar"}, []string{"PATH=/usr/local/bin:/bin"}, &ev.Env.NativeproxyDigest},
		{"./test/images/drainapp", drainappDistroless, "/drainapp", nil, nil, nil, nil, &ev.Env.DrainappDistrolessDigest},
		{"./test/images/queue", queueImage, "/queue", nil, nil, nil, nil, &ev.Env.QueueDigest},
	} {
		// One archive per image name: e2e-drainapp.tar, e2e-drainapp-distroless.tar.
		variant := ""
		if _, tag, _ := strings.Cut(img.name, ":e2e"); tag != "" {
			variant = tag
		}
		archive := filepath.Join(repoRoot, "bin", "images", "e2e-"+filepath.Base(img.pkg)+variant+".tar")
		res, err := ocipack.BuildGoImage(ctx, archive, ocipack.GoImage{
			GoBuild: ocipack.GoBuild{Dir: repoRoot, Package: img.pkg, Stderr: GinkgoWriter},
			Image: ocipack.Image{Name: img.name, Path: img.path, Symlinks: img.links, Files: img.files,
				Cmd: img.cmd, Env: img.env, User: "65532:65532"},
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(cl.ImportImage(ctx, res.Archive)).To(Succeed())
		*img.digest = res.Digest
	}
	ev.Env.DrainappImage = drainappImage
	ev.Env.DrainappDistroless = drainappDistroless
	ev.Env.TcpproxyImage = tcpproxyImage
	ev.Env.HostileImage = hostileImage
	ev.Env.NativeproxyImage = nativeproxyImage
	ev.Env.QueueImage = queueImage

	By("importing the release image of the webhook")
	info := os.Getenv("GG_E2E_IMAGE")
	Expect(info).NotTo(BeEmpty(), "GG_E2E_IMAGE must name the image.json of `make image-oci` (make e2e sets it)")
	data, err := os.ReadFile(info)
	Expect(err).NotTo(HaveOccurred())
	Expect(json.Unmarshal(data, &webhookImage)).To(Succeed())
	Expect(cl.ImportImage(ctx, filepath.Join(filepath.Dir(info), webhookImage.Archive))).To(Succeed())
	ev.Env.WebhookImage, ev.Env.WebhookDigest = webhookImage.Name, webhookImage.Digest

	By("recreating the test namespaces")
	for _, n := range testNamespaces {
		deleteNamespace(ctx, n.name, true)
	}
	for _, n := range testNamespaces {
		labels := map[string]string{}
		if n.optedIn {
			labels[optInLabel] = "enabled"
		}
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: labels}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}
	for _, n := range testNamespaces {
		waitServiceAccount(ctx, n.name)
	}

	By("starting Prometheus beside the node, with the chart's alerts (scenario 12)")
	mon = startMonitor(ctx)
}, NodeTimeout(30*time.Minute))

var _ = AfterSuite(func(ctx SpecContext) {
	mon.stop()
	if os.Getenv("GG_E2E_KEEP") == "1" {
		GinkgoWriter.Printf("GG_E2E_KEEP=1: leaving the namespaces, the release and the cluster\n")
		return
	}
	if os.Getenv("GG_E2E_DISPOSABLE") == "1" {
		GinkgoWriter.Printf("GG_E2E_DISPOSABLE=1: the runner tears the whole cluster down; no cleanup here\n")
		return
	}
	if kube != nil {
		for _, n := range testNamespaces {
			deleteNamespace(ctx, n.name, false)
		}
		uninstallGraceguard(ctx)
	}
	if owned {
		Expect(cluster.Down(ctx, cluster.Options{RepoRoot: repoRoot})).To(Succeed())
	}
}, NodeTimeout(5*time.Minute))

// Every spec's outcome goes into the evidence.
var _ = ReportAfterEach(func(r SpecReport) {
	evMu.Lock()
	defer evMu.Unlock()
	s := evidence.Spec{Name: r.LeafNodeText, State: r.State.String(), Duration: evidence.S(r.RunTime)}
	if r.State.Is(types.SpecStateFailureStates) {
		s.Failure = r.Failure.Message
		if len(s.Failure) > 2000 {
			s.Failure = s.Failure[:2000] + "..."
		}
		s.Graceguard = graceguardState()
	}
	ev.Specs = append(ev.Specs, s)
})

var _ = ReportAfterSuite("evidence", func(r Report) {
	evMu.Lock()
	defer evMu.Unlock()
	ev.Finished = time.Now().UTC()
	ev.Passed = r.SuiteSucceeded && len(ev.Specs) > 0
	for _, s := range ev.Specs {
		if s.State != "passed" {
			ev.Passed = false
		}
	}
	if outDir == "" {
		return
	}
	path := filepath.Join(outDir, "evidence.json")
	if err := ev.Write(path); err != nil {
		fmt.Fprintf(os.Stderr, "writing %s: %v\n", path, err)
		return
	}
	if err := evidence.RenderFiles(ev, outDir, "."); err != nil {
		fmt.Fprintf(os.Stderr, "rendering %s: %v\n", outDir, err)
	}
	fmt.Fprintf(os.Stderr, "evidence: %s (passed=%v)\n", path, ev.Passed)
})

// graceguardState is one line on graceguard's Pods (phase, readiness,
// restarts, how each last stopped) and the latest warnings in its
// namespace, for a failed spec's evidence.
func graceguardState() string {
	if kube == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, err := kube.CoreV1().Pods(releaseNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Sprintf("listing its Pods: %v", err)
	}
	var parts []string
	for _, p := range pods.Items {
		part := fmt.Sprintf("%s %s ready=%v", p.Name, p.Status.Phase, podReady(&p))
		if p.DeletionTimestamp != nil {
			part += " terminating"
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount == 0 {
				continue
			}
			part += fmt.Sprintf(" restarts=%d", cs.RestartCount)
			if t := cs.LastTerminationState.Terminated; t != nil {
				part += fmt.Sprintf(" (last: %s, exit %d, %s)", t.Reason, t.ExitCode, t.FinishedAt.UTC().Format("15:04:05"))
			}
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		parts = append(parts, "no Pods in "+releaseNS)
	}
	events, err := kube.CoreV1().Events(releaseNS).List(ctx, metav1.ListOptions{FieldSelector: "type=Warning"})
	if err == nil && len(events.Items) > 0 {
		items := events.Items
		sort.Slice(items, func(i, j int) bool { return eventTime(items[i]).Before(eventTime(items[j])) })
		items = items[max(0, len(items)-3):]
		for _, e := range items {
			msg := e.Message
			if len(msg) > 160 {
				msg = msg[:160] + "..."
			}
			parts = append(parts, fmt.Sprintf("warning %s %s x%d at %s: %s", e.InvolvedObject.Name, e.Reason, max(e.Count, 1), eventTime(e).UTC().Format("15:04:05"), msg))
		}
	}
	return strings.Join(parts, "; ")
}

func fillEnv(ctx context.Context) {
	e := &ev.Env
	e.Go = runtime.Version()
	if v, err := kube.Discovery().ServerVersion(); err == nil {
		e.Kubernetes = v.GitVersion
	}
	if n, err := kube.CoreV1().Nodes().Get(ctx, cluster.NodeName, metav1.GetOptions{}); err == nil {
		e.Kubelet = n.Status.NodeInfo.KubeletVersion
		e.Runtime = n.Status.NodeInfo.ContainerRuntimeVersion
		e.Kernel = n.Status.NodeInfo.KernelVersion
		e.OSImage = n.Status.NodeInfo.OSImage
		e.NodeCPUs = n.Status.Capacity.Cpu().String()
	}
	if out, err := exec.CommandContext(ctx, "git", "-C", repoRoot, "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		e.GitCommit = strings.TrimSpace(string(out))
	}
	if out, err := exec.CommandContext(ctx, "git", "-C", repoRoot, "status", "--porcelain", "--untracked-files=no").Output(); err == nil {
		e.GitDirty = len(strings.TrimSpace(string(out))) > 0
	}
}

// deleteNamespace deletes a namespace; with wait, until it is gone.
func deleteNamespace(ctx context.Context, name string, wait bool) {
	err := kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) || !wait {
		return
	}
	Expect(err).NotTo(HaveOccurred())
	Eventually(func() bool {
		_, err := kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}).WithContext(ctx).WithTimeout(3*time.Minute).WithPolling(500*time.Millisecond).Should(BeTrue(), "namespace %s deleted", name)
}

// waitServiceAccount waits for the default ServiceAccount the controller
// manager creates in every namespace.
func waitServiceAccount(ctx context.Context, ns string) {
	Eventually(func() error {
		_, err := kube.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
}
