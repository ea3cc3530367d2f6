// Command cainjector runs cert-manager's CA injector (the controllers of
// github.com/cert-manager/cert-manager/pkg/controller/cainjector) against
// the API server of a kubeconfig: it copies the CA of a Certificate's Secret
// into webhook configurations, APIServices and CRDs annotated with
// cert-manager.io/inject-ca-from.
//
// cert-manager publishes its library on the Go module proxy but not its
// cmd/ modules, so this is the thin main of cmd/cainjector/app (v1.21) with
// its defaults: the same manager options (Secrets read uncached), every
// injectable kind enabled, the Certificate data source on. Leader election
// and the metrics server are left out. hack/cert-manager-assets.sh builds it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
	corev1 "k8s.io/api/core/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	apireg "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func main() {
	// controller-runtime registers --kubeconfig on the standard flag set.
	version := flag.Bool("version", false, "print the cert-manager version and exit")
	logf.InitLogs()
	defer logf.FlushLogs()
	flag.Parse()
	if *version {
		v := util.VersionInfo()
		fmt.Printf("cert-manager cainjector %s (%s)\n", v.GitVersion, v.GoVersion)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, "cainjector")
	ctrl.SetLogger(logf.Log)
	if err := run(ctx); err != nil {
		logf.Log.Error(err, "cainjector stopped")
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	cfg = util.RestConfigWithUserAgent(cfg, "cainjector")
	scheme := runtime.NewScheme()
	utilruntime.Must(kscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	utilruntime.Must(apiext.AddToScheme(scheme))
	utilruntime.Must(apireg.AddToScheme(scheme))
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Cache:   cache.Options{ReaderFailOnMissingInformer: true},
		Client:  client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	err = cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
			cainjector.APIServiceName:                     true,
			cainjector.CustomResourceDefinitionName:       true,
		},
	})
	if err != nil {
		return fmt.Errorf("registering the injectors: %w", err)
	}
	v := util.VersionInfo()
	logf.FromContext(ctx).Info("starting cert-manager cainjector", "version", v.GitVersion)
	return mgr.Start(ctx)
}
