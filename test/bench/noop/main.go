// Command noop is the baseline of graceguard's load benchmark: the webhook
// server stack graceguard runs (controller-runtime's webhook server over
// TLS, HTTP/1.1 only, certificates from --cert-dir, zap logging, the
// admission.Webhook that webhook.Serve builds), answering every review at
// graceguard's paths allowed and unchanged without looking at the object.
// What graceguard costs is its numbers minus these.
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

	"github.com/graceguard/graceguard/pkg/webhook"
	"github.com/graceguard/graceguard/test/bench/fixture"
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
	for _, path := range []string{webhook.PathMutatePod, webhook.PathValidatePod, webhook.PathValidateWorkloads} {
		srv.Register(path, webhook.Serve(fixture.Allow(), log))
	}
	return srv.Start(ctx)
}
