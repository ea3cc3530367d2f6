package webhook_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/graceguard/graceguard/internal/fixture"
	"github.com/graceguard/graceguard/pkg/config"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/webhook"
)

// The HTTP handlers' cost without a network: an AdmissionReview as the API
// server sends it, read and decoded by webhook.Serve (one pass, see
// Endpoint), answered by the handler, encoded. The baseline "noop" is
// controller-runtime's admission.Webhook with a handler that answers
// allowed without looking at the Pod, the floor of a webhook built the
// usual way; "noop-lean" is the same handler behind webhook.Serve, and
// "mutate-pod-cr-envelope" graceguard's mutating handler behind
// controller-runtime's admission.Webhook, as graceguard first served it.
// make bench runs these and puts them in docs/benchmarks.md; they assert
// nothing about time.

// BenchmarkServe runs every handler on every Pod. validate-pod receives the
// Pod as mutated, as the API server sends it after the mutating webhook.
func BenchmarkServe(b *testing.B) {
	for _, tc := range fixture.Pods {
		pod := tc.Pod()
		created := fixture.Review(pod)
		mutated := pod.DeepCopy()
		mutate.Mutate(mutate.ForPod(mutated), fixture.OptedIn(), mutate.DefaultOptions())
		for _, h := range []struct {
			name    string
			path    string
			handler func(webhook.Config) admission.Handler
			body    []byte
			patched bool
			// cr serves it with controller-runtime's admission.Webhook.
			cr bool
		}{
			{"noop", webhook.PathMutatePod, func(webhook.Config) admission.Handler { return fixture.Allow() }, created, false, true},
			{"noop-lean", webhook.PathMutatePod, func(webhook.Config) admission.Handler { return fixture.Allow() }, created, false, false},
			{"mutate-pod", webhook.PathMutatePod, func(c webhook.Config) admission.Handler { return webhook.NewPodMutator(c) }, created, true, false},
			// Before the lean review decode (pkg/webhook/review.go).
			{"mutate-pod-cr-envelope", webhook.PathMutatePod, func(c webhook.Config) admission.Handler { return webhook.NewPodMutator(c) }, created, true, true},
			// Before the lean Pod decode (pkg/webhook/podjson.go) too: the whole Pod decoded.
			{"mutate-pod-full-decode", webhook.PathMutatePod, func(c webhook.Config) admission.Handler { return webhook.NewPodMutatorFullDecode(c) }, created, true, true},
			{"validate-pod", webhook.PathValidatePod, func(c webhook.Config) admission.Handler { return webhook.NewPodValidator(c) }, fixture.Review(mutated), false, false},
		} {
			b.Run("pod="+tc.Name+"/handler="+h.name, func(b *testing.B) {
				benchServe(b, endpoint(h.handler(handlerConfig(b)), h.cr), h.path, h.body, h.patched)
			})
		}
	}
}

// BenchmarkServeScaling sweeps the mutating handler over Pod sizes, like
// BenchmarkMutateScaling in pkg/mutate, with decoding and encoding.
func BenchmarkServeScaling(b *testing.B) {
	// Up to mutate.MaxTreatedContainers: beyond it graceguard refuses the Pod.
	for _, n := range []int{1, 4, 8, 16, 32} {
		body := fixture.Review(fixture.SizedPod(n, 0))
		b.Run("containers="+strconv.Itoa(n), func(b *testing.B) {
			benchServe(b, endpoint(webhook.NewPodMutator(handlerConfig(b)), false), webhook.PathMutatePod, body, true)
		})
	}
	for _, n := range []int{0, 100, 500, 1500, 5000} {
		body := fixture.Review(fixture.SizedPod(1, n))
		b.Run("env="+strconv.Itoa(n), func(b *testing.B) {
			benchServe(b, endpoint(webhook.NewPodMutator(handlerConfig(b)), false), webhook.PathMutatePod, body, true)
		})
	}
}

// handlerConfig is the production wiring minus the API server: default
// options, metrics on a registry, a namespace lookup that answers the
// opted-in namespace at once (the informer cache's cost is measured by the
// load runner against a real API server).
func handlerConfig(b *testing.B) webhook.Config {
	b.Helper()
	m, err := webhook.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	ns := fixture.OptedIn()
	return webhook.Config{
		Options: config.Default().Excluded(),
		Namespaces: webhook.NamespaceLookupFunc(func(context.Context, string) (mutate.Namespace, error) {
			return ns, nil
		}),
		Metrics: m,
	}
}

// endpoint serves h as graceguard does (webhook.Serve), or with
// controller-runtime's admission.Webhook, with the logger cmd/webhook uses
// by default (zap, production, info) writing nowhere: building each
// review's logger is part of the cost.
func endpoint(h admission.Handler, controllerRuntime bool) http.Handler {
	log := zap.New(zap.WriteTo(io.Discard))
	if controllerRuntime {
		return &admission.Webhook{Handler: h, LogConstructor: func(_ logr.Logger, req *admission.Request) logr.Logger {
			return admission.DefaultLogConstructor(log, req)
		}}
	}
	return webhook.Serve(h, log)
}

func benchServe(b *testing.B, wh http.Handler, path string, body []byte, patched bool) {
	serve := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		wh.ServeHTTP(rec, req)
		return rec
	}
	out := serve().Body.String()
	if !strings.Contains(out, `"allowed":true`) || strings.Contains(out, `"patch":`) != patched {
		b.Fatalf("unexpected answer (want allowed, patched=%t): %.300s", patched, out)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if rec := serve(); rec.Code != http.StatusOK {
			b.Fatalf("HTTP %d", rec.Code)
		}
	}
}
