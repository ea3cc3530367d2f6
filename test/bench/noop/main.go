// Command noop is the baseline of graceguard's benchmarks: a webhook built
// the usual way with controller-runtime (its webhook server over TLS,
// HTTP/1.1 only, certificates from --cert-dir, zap logging, its
// admission.Webhook decoding each review), answering every review at
// graceguard's paths allowed and unchanged without looking at the object:
// the floor of any webhook design that makes a call. graceguard reads its
// reviews with its own one-pass Endpoint (webhook.Serve), so it can cost
// less than this per call.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/graceguard/graceguard/internal/fixture"
	"github.com/graceguard/graceguard/pkg/webhook"
)

func main() {
	host := flag.String("host", "127.0.0.1", "address to listen on")
	port := flag.Int("port", 9443, "HTTPS port")
	certDir := flag.String("cert-dir", "", "directory with tls.crt and tls.key")
	flag.Parse()
	if *certDir == "" {
		fmt.Fprintln(os.Stderr, "--cert-dir is required")
		os.Exit(2)
	}
	// The logger cmd/webhook builds by default: zap, production, info.
	log := zap.New(zap.WriteTo(os.Stderr))
	ctrl.SetLogger(log)
	ctx := ctrl.SetupSignalHandler()
	if err := run(ctx, log, *host, *port, *certDir); err != nil {
		log.Error(err, "noop webhook stopped")
		os.Exit(1)
	}
}

func run(ctx context.Context, log logr.Logger, host string, port int, certDir string) error {
	// As pkg/server configures it without --enable-http2.
	srv := crwebhook.NewServer(crwebhook.Options{Host: host, Port: port, CertDir: certDir,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}})
	// As server.Run names the logger it gives the endpoints.
	log = log.WithName("graceguard").WithName("admission")
	serve := func(h admission.Handler) *admission.Webhook {
		return &admission.Webhook{Handler: h, LogConstructor: func(_ logr.Logger, req *admission.Request) logr.Logger {
			return admission.DefaultLogConstructor(log, req)
		}}
	}
	for _, path := range []string{webhook.PathMutatePod, webhook.PathValidatePod, webhook.PathValidateWorkloads} {
		srv.Register(path, serve(fixture.Allow()))
	}
	// graceguard's patch of the typical Pod, for every review.
	srv.Register(fixture.PathPatchTypical, serve(fixture.PatchTypical()))
	// The smallest mutation: one operation adding graceguard's record.
	srv.Register(fixture.PathRecordOnly, serve(fixture.RecordOnly()))
	return srv.Start(ctx)
}
