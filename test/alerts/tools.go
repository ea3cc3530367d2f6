//go:build tools

// Package alerts pins Prometheus' own promtool (github.com/prometheus/prometheus
// v0.316.0) in a module of its own, so the product go.mod never carries it.
package alerts

import _ "github.com/prometheus/prometheus/cmd/promtool"
