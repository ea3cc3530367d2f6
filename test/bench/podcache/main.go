// Command podcache is the baseline of the observer benchmark: what a
// shutdown observer would cost if it did the obvious thing, a
// controller-runtime cache of every Pod of the cluster with the library's
// defaults (no label selector, no transform), beside graceguard's observer,
// which caches only the treated Pods, stripped (pkg/observer). It serves
// Prometheus metrics: Go's and the process's, and bench_cached_pods.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
)

func main() {
	// controller-runtime registers --kubeconfig.
	addr := flag.String("metrics-bind-address", "127.0.0.1:0", "address of /metrics")
	flag.Parse()
	if err := run(ctrl.SetupSignalHandler(), *addr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, addr string) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		return err
	}
	c, err := crcache.New(cfg, crcache.Options{Scheme: s})
	if err != nil {
		return err
	}
	pods := prometheus.NewGauge(prometheus.GaugeOpts{Name: "bench_cached_pods", Help: "Pods in the cache."})
	prometheus.MustRegister(pods)
	inf, err := c.GetInformer(ctx, &corev1.Pod{}, crcache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { pods.Inc() },
		DeleteFunc: func(any) { pods.Dec() },
	}); err != nil {
		return err
	}
	srv := &http.Server{Addr: addr, Handler: promhttp.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() { _ = c.Start(ctx) }()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
