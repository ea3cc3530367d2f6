package certmanager_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	helmkube "helm.sh/helm/v4/pkg/kube"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/graceguard/graceguard/internal/freeport"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/test/harness/apiserver"
	"github.com/graceguard/graceguard/test/harness/chart"
)

const (
	release   = "graceguard"
	releaseNS = "graceguard-system"
	fullname  = "graceguard"
	// What the chart names in cert-manager mode.
	servingCert = fullname + "-serving"
	tlsSecret   = fullname + "-tls"
	serviceHost = fullname + "." + releaseNS + ".svc"
)

var certificates = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}

var _ = Describe("cert-manager mode", Ordered, func() {
	var (
		port    int    // the graceguard replica's webhook port
		service string // ClusterIP:port of the chart's Service
	)

	BeforeAll(func(ctx SpecContext) {
		By("running cert-manager's controller and cainjector")
		for _, c := range []struct {
			bin  string
			args []string
		}{
			{"controller", []string{"--kubeconfig=" + kubeconfig, "--cluster-resource-namespace=kube-system"}},
			{"cainjector", []string{"--kubeconfig=" + kubeconfig}},
		} {
			s, err := gexec.Start(exec.Command(filepath.Join(assets, c.bin), c.args...), GinkgoWriter, GinkgoWriter)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() {
				s.Terminate()
				Eventually(s, 30*time.Second).Should(gexec.Exit())
			})
		}

		By("helm install in cert-manager mode")
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNS}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		ch, err := loader.Load(chart.ChartDir())
		Expect(err).NotTo(HaveOccurred())
		inst := action.NewInstall(helmConfig())
		inst.ReleaseName, inst.Namespace = release, releaseNS
		// No kubelet: Helm must not wait for Pods.
		inst.WaitStrategy = helmkube.HookOnlyStrategy
		inst.Timeout = time.Minute
		_, err = inst.RunWithContext(ctx, ch, map[string]any{"certificates": map[string]any{"mode": "cert-manager"}})
		Expect(err).NotTo(HaveOccurred(), "helm install")
		uninstallCfg := helmConfig()
		DeferCleanup(func() {
			un := action.NewUninstall(uninstallCfg)
			un.WaitStrategy = helmkube.HookOnlyStrategy
			// No kubelet runs the pre-delete Job here (`helm uninstall
			// --no-hooks`); test/chart runs it.
			un.DisableHooks = true
			_, err := un.Run(release)
			Expect(err).NotTo(HaveOccurred(), "helm uninstall")
		})

		svc, err := kube.CoreV1().Services(releaseNS).Get(ctx, fullname, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(svc.Spec.ClusterIP).NotTo(BeEmpty())
		service = net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port)))

		By("graceguard runs as the chart's Deployment runs it, once cert-manager filled the Secret it mounts")
		d, err := kube.AppsV1().Deployments(releaseNS).Get(ctx, fullname, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Spec.Template.Spec.Volumes[0].Secret).NotTo(BeNil(), "cert-manager mode mounts the Secret")
		Expect(d.Spec.Template.Spec.Volumes[0].Secret.SecretName).To(Equal(tlsSecret))
		// The kubelet starts the Pod only once the Secret exists.
		waitReady(ctx, servingCert, 1)
		dir := secretVolume(tlsSecret)
		var health int
		// As the chart's ServiceAccount: in this mode its RBAC grants no
		// Secret and no webhook configuration, and must be all it needs.
		sa := "system:serviceaccount:" + releaseNS + ":" + d.Spec.Template.Spec.ServiceAccountName
		port, health = startReplica(d.Spec.Template.Spec.Containers[0].Args, dir, writeKubeconfig(restConfig, sa))
		network.RouteService(svc, svc.Spec.Ports[0].Port, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		Eventually(func() int { return apiserver.Readyz(health) }, time.Minute, 100*time.Millisecond).Should(Equal(http.StatusOK))
	})

	It("gets its serving certificate from cert-manager and its caBundle from cainjector, and admits Pods through its Service", func(ctx SpecContext) {
		By("cert-manager issues the serving certificate through the chart's CA")
		waitReady(ctx, servingCert, 1)
		secret := getSecret(ctx)
		leaf := leafOf(secret.Data["tls.crt"])
		Expect(leaf.DNSNames).To(ContainElement(serviceHost))
		Expect(leaf.Issuer.CommonName).To(Equal(fullname+"-ca"), "the chart's own CA Issuer signs it when no issuerRef is given")

		By("cainjector injects that CA into every webhook of both configurations")
		Eventually(func(g Gomega) {
			for _, b := range caBundles(ctx, g) {
				g.Expect(b).To(Equal(bytes.TrimSpace(secret.Data["ca.crt"])))
			}
		}, time.Minute, 200*time.Millisecond).Should(Succeed())

		By("graceguard, started on the Secret volume as the chart's Deployment runs it, serves it")
		Expect(servedSerial(ctx, port)).To(Equal(leaf.SerialNumber))

		By("a Pod in an opted-in namespace is admitted through the Service, mutated and validated")
		ns := optedIn(ctx, "gg-cm")
		before := network.Connections(service)
		admit(ctx, ns, "before-renewal")
		Expect(network.Connections(service)).To(BeNumerically(">", before), "the API server did not call graceguard through its Service")
	})

	It("survives a renewal: the new certificate (new serial, same CA) is served and Pods are still admitted", func(ctx SpecContext) {
		old := leafOf(getSecret(ctx).Data["tls.crt"])
		oldCA := bytes.TrimSpace(getSecret(ctx).Data["ca.crt"])

		By("triggering a re-issuance as `cmctl renew` does (Issuing=True, ManuallyTriggered)")
		renew(ctx, servingCert)
		waitReady(ctx, servingCert, 2)
		var renewed *x509.Certificate
		Eventually(func(g Gomega) {
			renewed = leafOf(getSecret(ctx).Data["tls.crt"])
			g.Expect(renewed.SerialNumber).NotTo(Equal(old.SerialNumber))
		}, time.Minute).Should(Succeed())
		Expect(renewed.PublicKey).NotTo(Equal(old.PublicKey), "rotationPolicy Always: a new key")
		AddReportEntry("renewal", fmt.Sprintf("serial %x -> %x", old.SerialNumber, renewed.SerialNumber))

		By("the kubelet's Secret volume update reaches graceguard, which serves the new certificate without a restart")
		Eventually(func() *big.Int { return servedSerial(ctx, port) }, 90*time.Second, 250*time.Millisecond).Should(Equal(renewed.SerialNumber))

		By("the CA and so every caBundle stay the same")
		Expect(bytes.TrimSpace(getSecret(ctx).Data["ca.crt"])).To(Equal(oldCA))
		Consistently(func(g Gomega) {
			for _, b := range caBundles(ctx, g) {
				g.Expect(b).To(Equal(oldCA))
			}
		}, 2*time.Second).Should(Succeed())

		By("Pods are admitted through the Service on new connections, whose handshake gets the new certificate")
		// The API server keeps its connections to webhooks alive, and a
		// live TLS connection never sees a new certificate: drop them, as
		// a network blip or a replica restart would.
		network.Reset()
		ns := optedIn(ctx, "gg-cm-renewed")
		before := network.Connections(service)
		admit(ctx, ns, "after-renewal")
		Expect(network.Connections(service)).To(BeNumerically(">", before))
	})
})

func helmConfig() *action.Configuration {
	GinkgoHelper()
	cfg := action.NewConfiguration()
	flags := genericclioptions.NewConfigFlags(false)
	kc, ns, cache := kubeconfig, releaseNS, GinkgoT().TempDir()
	flags.KubeConfig, flags.Namespace, flags.CacheDir = &kc, &ns, &cache
	Expect(cfg.Init(flags, releaseNS, "secret")).To(Succeed())
	return cfg
}

// waitReady waits until the Certificate is Ready at the given revision.
func waitReady(ctx context.Context, name string, revision int64) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		c, err := dyn.Resource(certificates).Namespace(releaseNS).Get(ctx, name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		rev, _, _ := unstructured.NestedInt64(c.Object, "status", "revision")
		g.Expect(rev).To(BeNumerically(">=", revision), "status.revision")
		g.Expect(condition(c, "Ready")).To(Equal("True"), "Ready")
	}, 2*time.Minute, 250*time.Millisecond).Should(Succeed(), "Certificate %s/%s not Ready at revision %d", releaseNS, name, revision)
}

func condition(c *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(c.Object, "status", "conditions")
	for _, x := range conds {
		if m, ok := x.(map[string]any); ok && m["type"] == typ {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

// renew sets the Certificate's Issuing condition to True with reason
// ManuallyTriggered, which is what `cmctl renew` does; cert-manager's
// issuing controllers then issue a new certificate.
func renew(ctx context.Context, name string) {
	GinkgoHelper()
	Eventually(func() error {
		c, err := dyn.Resource(certificates).Namespace(releaseNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(c.Object, "status", "conditions")
		kept := []any{}
		for _, x := range conds {
			if m, ok := x.(map[string]any); !ok || m["type"] != "Issuing" {
				kept = append(kept, x)
			}
		}
		kept = append(kept, map[string]any{
			"type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
			"message":            "Certificate re-issuance manually triggered",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
			"observedGeneration": c.GetGeneration(),
		})
		if err := unstructured.SetNestedSlice(c.Object, kept, "status", "conditions"); err != nil {
			return err
		}
		_, err = dyn.Resource(certificates).Namespace(releaseNS).UpdateStatus(ctx, c, metav1.UpdateOptions{})
		return err
	}, 10*time.Second).Should(Succeed())
}

func getSecret(ctx context.Context) *corev1.Secret {
	GinkgoHelper()
	s, err := kube.CoreV1().Secrets(releaseNS).Get(ctx, tlsSecret, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	return s
}

// caBundles returns the caBundle of every webhook of the chart's two
// configurations.
func caBundles(ctx context.Context, g Gomega) [][]byte {
	m, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, fullname, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	v, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, fullname, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	var out [][]byte
	for _, w := range m.Webhooks {
		g.Expect(w.ClientConfig.Service).NotTo(BeNil(), "webhooks call the Service")
		out = append(out, bytes.TrimSpace(w.ClientConfig.CABundle))
	}
	for _, w := range v.Webhooks {
		out = append(out, bytes.TrimSpace(w.ClientConfig.CABundle))
	}
	g.Expect(out).To(HaveLen(4), "mutate-pods, validate-pods, validate-pods-warn and validate-workloads")
	return out
}

// secretVolume projects the Secret into a directory and keeps it updated
// until the spec ends, the way the kubelet does for a Secret volume: each
// version in its own ..<timestamp> directory, switched to by renaming the
// ..data symlink, with the keys as symlinks through ..data.
// It outlives the node that calls it (a BeforeAll), so it uses its own
// context.
func secretVolume(name string) string {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	var last map[string][]byte
	var current string
	sync := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := kube.CoreV1().Secrets(releaseNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if reflect.DeepEqual(s.Data, last) {
			return nil
		}
		ts := filepath.Join(dir, fmt.Sprintf("..%d", time.Now().UnixNano()))
		if err := os.Mkdir(ts, 0o755); err != nil {
			return err
		}
		for k, v := range s.Data {
			if err := os.WriteFile(filepath.Join(ts, k), v, 0o440); err != nil {
				return err
			}
		}
		tmp := filepath.Join(dir, "..data_tmp")
		_ = os.Remove(tmp)
		if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			return err
		}
		for k := range s.Data {
			if _, err := os.Lstat(filepath.Join(dir, k)); os.IsNotExist(err) {
				if err := os.Symlink(filepath.Join("..data", k), filepath.Join(dir, k)); err != nil {
					return err
				}
			}
		}
		// The previous version goes, as the kubelet removes it.
		if current != "" {
			if err := os.RemoveAll(current); err != nil {
				return err
			}
		}
		current, last = ts, s.Data
		return nil
	}
	Expect(sync()).To(Succeed())
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
				if err := sync(); err != nil && !apierrors.IsNotFound(err) {
					GinkgoWriter.Printf("secret volume: %v\n", err)
				}
			}
		}
	}()
	DeferCleanup(func() { close(stop); <-done })
	return dir
}

// startReplica runs the webhook with the chart's Deployment arguments; only
// what a Pod gets from elsewhere changes: its namespace (downward API), and
// ports and a cert dir of this machine.
func startReplica(args []string, certDir, kubeconfig string) (port, health int) {
	GinkgoHelper()
	Expect(args).To(ContainElement("--cert-mode=files"))
	var own []string
	for _, a := range args {
		switch strings.SplitN(a, "=", 2)[0] {
		case "--port", "--health-probe-bind-address", "--metrics-bind-address", "--cert-dir", "--shutdown-delay":
		default:
			own = append(own, a)
		}
	}
	var err error
	port, err = freeport.Get()
	Expect(err).NotTo(HaveOccurred())
	health, err = freeport.Get()
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(webhookBin, append(own,
		"--kubeconfig="+kubeconfig, "--namespace="+releaseNS,
		"--port="+strconv.Itoa(port), "--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(health),
		"--metrics-bind-address=0", "--cert-dir="+certDir, "--shutdown-delay=0s")...)
	s, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		s.Terminate()
		Eventually(s, 30*time.Second).Should(gexec.Exit())
	})
	return port, health
}

// servedSerial is the serial of the certificate the replica serves for the
// Service's name, verified against the injected caBundle, as the API
// server verifies it.
func servedSerial(ctx context.Context, port int) *big.Int {
	GinkgoHelper()
	m, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, fullname, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	pool := x509.NewCertPool()
	Expect(pool.AppendCertsFromPEM(m.Webhooks[0].ClientConfig.CABundle)).To(BeTrue())
	conn, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		&tls.Config{RootCAs: pool, ServerName: serviceHost, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber
}

func optedIn(ctx context.Context, name string) string {
	GinkgoHelper()
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled},
	}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return name
}

// admit creates a Pod (not a dry run) and expects graceguard's mutation: the
// mutating webhook fails open, so only the budget annotation proves it was
// called; the validating webhook fails closed, so the create itself proves
// that one was.
func admit(ctx context.Context, ns, name string) {
	GinkgoHelper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.local/app:1"}}},
	}
	got, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	Expect(got.Annotations).To(HaveKey(mutate.AnnotationBudget), "created unmutated: the API server could not call graceguard")
	Expect(got.Spec.Containers[0].Lifecycle).NotTo(BeNil())
}

func leafOf(data []byte) *x509.Certificate {
	GinkgoHelper()
	block, _ := pem.Decode(data)
	Expect(block).NotTo(BeNil())
	c, err := x509.ParseCertificate(block.Bytes)
	Expect(err).NotTo(HaveOccurred())
	return c
}
