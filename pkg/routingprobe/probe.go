package routingprobe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// bodyPrefix starts every probe answer; the Pod's name follows. A
// response without it did not come from a probe Pod (a load balancer's
// own 404 or 503 page, another backend).
const bodyPrefix = "graceguard-probe pod="

// maxBody bounds what is read of an answer: a probe's is one short line.
const maxBody = 512

// Handler answers every request with the name of the Pod serving it.
func Handler(pod string) http.Handler {
	body := []byte(bodyPrefix + pod + "\n")
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		// The answer must come from the Pod, never from a cache between.
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(body)
	})
}

// ParsePod returns the Pod named by a probe's answer, or false when body is
// not a probe's answer.
func ParsePod(body []byte) (string, bool) {
	s, ok := strings.CutPrefix(strings.TrimSpace(string(body)), bodyPrefix)
	if !ok || s == "" || strings.ContainsAny(s, " \n") {
		return "", false
	}
	return s, true
}

// Serve runs the probe server on addr as Pod pod until ctx ends, then
// stops within drain. The Pod's preStop sleep, not this server, keeps it
// serving after its deletion: by the time SIGTERM cancels ctx, the path
// has had the whole sleep to withdraw it.
func Serve(ctx context.Context, addr, pod string, drain time.Duration) error {
	if pod == "" {
		return errors.New("no Pod name: set POD_NAME (the downward API's metadata.name)")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: Handler(pod), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("stopping the probe server: %w", err)
	}
	return nil
}
