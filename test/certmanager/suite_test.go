// Package certmanager_test installs graceguard's chart in cert-manager mode
// on a real kube-apiserver and etcd (envtest) where cert-manager's own
// controller and cainjector run, and checks what the chart promises in that
// mode: cert-manager issues the serving certificate, cainjector puts its CA
// into both webhook configurations, the API server calls graceguard through
// its Service and trusts it, and a renewal is survived.
//
// No kubelet or kube-proxy runs here; two stand-ins replace them, each doing
// only what the real one does for these objects: a Secret volume (the
// Secret's keys projected into a directory, updated atomically, as the
// kubelet's atomic writer does) and a Service network (the API server's
// "cluster" egress, configured with --egress-selector-config-file, goes
// through an HTTP CONNECT proxy that forwards the Service's ClusterIP:port
// to the graceguard process, as kube-proxy forwards it to a Pod).
//
// Needs KUBEBUILDER_ASSETS (hack/envtest-assets.sh) and CERT_MANAGER_ASSETS
// (hack/cert-manager-assets.sh); `make test` sets both.
package certmanager_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/graceguard/graceguard/test/harness/apiserver"
)

func TestCertManager(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "graceguard in cert-manager mode, with cert-manager, on a real API server")
}

var (
	restConfig *rest.Config
	kube       kubernetes.Interface
	dyn        dynamic.Interface
	kubeconfig string
	assets     string // CERT_MANAGER_ASSETS
	network    *apiserver.ServiceNetwork
	webhookBin string
)

var _ = BeforeSuite(func() {
	assets = os.Getenv("CERT_MANAGER_ASSETS")
	for _, f := range []string{"controller", "cainjector", "crds/cert-manager.io_certificates.yaml"} {
		_, err := os.Stat(filepath.Join(assets, f))
		Expect(err).NotTo(HaveOccurred(), "CERT_MANAGER_ASSETS=%q lacks %s: run `make test`, or set it to the output of hack/cert-manager-assets.sh", assets, f)
	}

	var err error
	network, err = apiserver.NewServiceNetwork()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(network.Close)

	api, err := apiserver.StartAPIServer(context.Background(), apiserver.APIServerOptions{Alone: true,
		CRDDirs: []string{filepath.Join(assets, "crds")}, APIServerFlags: network.APIServerFlags()})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(api.Stop()).To(Succeed()) })
	restConfig, kube = api.Config, api.Client
	dyn, err = dynamic.NewForConfig(restConfig)
	Expect(err).NotTo(HaveOccurred())
	kubeconfig = writeKubeconfig(restConfig, "")

	webhookBin, err = gexec.Build("github.com/graceguard/graceguard/cmd/webhook")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(gexec.CleanupBuildArtifacts)
})

// writeKubeconfig is the envtest admin's kubeconfig, impersonating user
// when it is not empty (a ServiceAccount gets its groups, as in a Pod).
func writeKubeconfig(c *rest.Config, user string) string {
	GinkgoHelper()
	path := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(apiserver.WriteKubeconfig(path, c, "", user)).To(Succeed())
	return path
}
