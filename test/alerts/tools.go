//go:build tools

// Package alerts pins Prometheus' own promtool and server (github.com/prometheus/prometheus
// v0.316.0) in a module of its own, so the product go.mod never carries them. make e2e runs the
// server against the node (bin/prometheus-v0.316.0).
package alerts

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
