// Command hello is the tiny HTTP server of the cluster smoke test image
// (registry.local/hello:e2e). It answers on $PORT (default 8080):
//
//	GET /         "hello from <hostname>"
//	GET /healthz  "ok" (readiness)
//	GET /kube     GET /version of the apiserver through the in-cluster
//	              Service ($KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT)
//	              with the Pod's ServiceAccount token, relayed verbatim
//
// On SIGTERM it stops accepting, lets in-flight requests finish (5 s at
// most) and exits 0, like a well-behaved workload.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	host, _ := os.Hostname()

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "hello from %s\n", host)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /kube", kube)

	srv := &http.Server{Addr: net.JoinHostPort("", port), Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Printf("hello: listening on %s", srv.Addr)

	select {
	case err := <-errc:
		log.Fatalf("hello: %v", err)
	case <-ctx.Done():
	}
	log.Printf("hello: signal received, shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Printf("hello: shutdown: %v", err)
	}
	log.Printf("hello: bye")
}

// kube proves that a Pod reaches the apiserver the way in-cluster clients
// do: through the kubernetes Service, TLS-verified with the projected CA.
func kube(w http.ResponseWriter, r *http.Request) {
	h, p := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if h == "" || p == "" {
		http.Error(w, "KUBERNETES_SERVICE_HOST/PORT not set", http.StatusBadGateway)
		return
	}
	token, err := os.ReadFile(saDir + "/token")
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	caPEM, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		http.Error(w, "no certificate in ca.crt", http.StatusBadGateway)
		return
	}
	client := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "https://"+net.JoinHostPort(h, p)+"/version", nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := client.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}
