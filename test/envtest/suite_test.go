// Package envtest_test puts graceguard in front of a real kube-apiserver and
// etcd, registered through the webhook configurations the Helm chart ships,
// and checks what a user sees through the API: what is stored, what is
// denied and with which message, which warnings arrive.
package envtest_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/test/harness/apiserver"
)

func TestEnvtest(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "graceguard against a real API server")
}

var (
	cp      *apiserver.APIServer
	kube    kubernetes.Interface
	dyn     dynamic.Interface
	nsCount atomic.Int32
)

var _ = BeforeSuite(func(ctx SpecContext) {
	// Libraries that log through controller-runtime's global logger (the
	// certificate rotator) show up beside the failing spec.
	logf.SetLogger(GinkgoLogr)
	var err error
	// Container stop signals are alpha through 1.37: on, so that the API
	// server keeps lifecycle.stopSignal for the validating webhook to judge.
	// The chart with its mutating floor on (off by default; the chart
	// renders it on 1.36+ only): both floors are exercised where they exist.
	// Argo Rollouts' real Rollout CRD (pinned), with the chart's Rollout
	// rules, which client-side rendering cannot detect, forced on.
	rolloutCRD, err := apiserver.FindRolloutCRD(ctx)
	Expect(err).NotTo(HaveOccurred())
	cp, err = apiserver.StartAPIServer(ctx, apiserver.APIServerOptions{Log: logr.Discard(),
		APIServerFlags: map[string]string{"feature-gates": "ContainerStopSignals=true"},
		CRDDirs:        []string{rolloutCRD},
		Values: map[string]any{"nativeFloor": map[string]any{"mutate": true},
			"webhooks": map[string]any{"validateWorkloads": map[string]any{"argoRollouts": "always"}}}})
	Expect(err).NotTo(HaveOccurred())
	kube = cp.Client
	dyn, err = dynamic.NewForConfig(cp.Config)
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(5*60e9))

var _ = AfterSuite(func() {
	gexec.CleanupBuildArtifacts()
	if cp != nil {
		Expect(cp.Stop()).To(Succeed())
	}
})

// newNamespace creates a namespace with a unique name, deleted after the spec.
func newNamespace(ctx context.Context, prefix string, labels, annotations map[string]string) string {
	GinkgoHelper()
	name := fmt.Sprintf("%s-%d", prefix, nsCount.Add(1))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}
	_, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		_ = kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	})
	return name
}

func optedIn(ctx context.Context, prefix string) string {
	return newNamespace(ctx, prefix, map[string]string{mutate.LabelInject: mutate.LabelInjectEnabled}, nil)
}

// warningClient is a clientset that records the warnings the API server
// returns, as kubectl prints them.
type warningClient struct {
	kubernetes.Interface
	mu       sync.Mutex
	warnings []string
}

func (w *warningClient) HandleWarningHeader(code int, agent, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

func (w *warningClient) Warnings() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.warnings...)
}

func newWarningClient() *warningClient {
	GinkgoHelper()
	w := &warningClient{}
	cfg := rest.CopyConfig(cp.Config)
	cfg.WarningHandler = w
	c, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	w.Interface = c
	return w
}

func pod(name string, annotations map[string]string, containers ...corev1.Container) *corev1.Pod {
	if len(containers) == 0 {
		containers = []corev1.Container{{Name: "app", Image: "registry.local/app:1"}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: containers},
	}
}
