// Command controller runs cert-manager's certificate controllers, the ones
// cert-manager's own controller binary enables by default for Certificates,
// Issuers and CertificateRequests (SelfSigned and CA issuers, the approver),
// against the API server of a kubeconfig.
//
// cert-manager publishes its library (github.com/cert-manager/cert-manager)
// on the Go module proxy but not its cmd/ modules, so this is the thin main
// of cmd/controller/app (v1.21): cert-manager's ContextFactory and registered
// controllers, run with cert-manager's defaults. ACME, Vault, Venafi, the
// ingress/gateway shims and leader election are left out: graceguard's
// envtest suite needs none of them. hack/cert-manager-assets.sh builds it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"

	// Issuer implementations register themselves with the issuers controllers.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// enabled are the default-enabled controllers of cert-manager's controller
// (DefaultEnabledControllers) that serve SelfSigned and CA issuers.
var enabled = []string{
	issuers.ControllerName,
	clusterissuers.ControllerName,
	approver.ControllerName,
	crca.CRControllerName,
	crselfsigned.CRControllerName,
	trigger.ControllerName,
	issuing.ControllerName,
	keymanager.ControllerName,
	requestmanager.ControllerName,
	readiness.ControllerName,
	revisionmanager.ControllerName,
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server")
	clusterNS := flag.String("cluster-resource-namespace", "kube-system", "namespace of the Secrets of ClusterIssuers")
	workers := flag.Int("concurrent-workers", 5, "workers per controller")
	version := flag.Bool("version", false, "print the cert-manager version and exit")
	logf.InitLogs()
	defer logf.FlushLogs()
	flag.Parse()
	if *version {
		v := util.VersionInfo()
		fmt.Printf("cert-manager controller %s (%s)\n", v.GitVersion, v.GoVersion)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, "controller")
	if err := run(ctx, *kubeconfig, *clusterNS, *workers); err != nil && !errors.Is(err, context.Canceled) {
		logf.Log.Error(err, "controller stopped")
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, clusterNS string, workers int) error {
	log := logf.FromContext(ctx)
	// cert-manager's defaults (internal/apis/config/controller/v1alpha1).
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		IssuerOptions:      controller.IssuerOptions{ClusterResourceNamespace: clusterNS},
		CertificateOptions: controller.CertificateOptions{
			CopiedAnnotationPrefixes:                 []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"},
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return err
	}
	base, err := factory.Build()
	if err != nil {
		return err
	}
	want := sets.New(enabled...)
	known := controller.Known()
	names := make([]string, 0, len(want))
	for n := range want {
		if _, ok := known[n]; !ok {
			return fmt.Errorf("controller %q is not registered", n)
		}
		names = append(names, n)
	}
	sort.Strings(names)
	v := util.VersionInfo()
	log.Info("starting cert-manager controllers", "version", v.GitVersion, "controllers", names)

	g, gctx := errgroup.WithContext(ctx)
	for _, n := range names {
		c, err := known[n](factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", n, err)
		}
		g.Go(func() error { return c.Run(workers, gctx) })
	}
	base.SharedInformerFactory.Start(gctx.Done())
	base.KubeSharedInformerFactory.Start(gctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(gctx.Done())
	err = g.Wait()
	base.HTTP01ResourceMetadataInformersFactory.Shutdown()
	base.KubeSharedInformerFactory.Shutdown()
	base.SharedInformerFactory.Shutdown()
	return err
}
