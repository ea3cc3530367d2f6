package server

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Connection metric names.
const (
	ConnectionsName             = "graceguard_webhook_connections"
	ConnectionsEvictedName      = "graceguard_webhook_connections_evicted_total"
	ConnectionsRefusedName      = "graceguard_webhook_connections_refused_total"
	ConnectionsPeakName         = "graceguard_webhook_connections_peak"
	ConnectionsAcceptedName     = "graceguard_webhook_connections_accepted_total"
	HandshakesAbortedName       = "graceguard_webhook_tls_handshakes_aborted_total"
	abortTimeout, abortTooLarge = "timeout", "too-large"
)

// connMetrics are the webhook server's connection metrics; labels take
// fixed values only (connection states, abort reasons). A nil *connMetrics
// records nothing.
type connMetrics struct {
	openG    [numConnStates]prometheus.Gauge
	peakG    prometheus.Gauge
	acceptC  prometheus.Counter
	evictedC [numConnStates]prometheus.Counter
	refusedC prometheus.Counter
	abortedC map[string]prometheus.Counter
}

// newConnMetrics registers the connection metrics on reg; registering on
// a registry that has them (a second Run in one process) reuses them.
func newConnMetrics(reg prometheus.Registerer) (*connMetrics, error) {
	open, err := registerOrReuse(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: ConnectionsName,
		Help: "Open webhook connections by state: pending (in the TLS handshake or sending its first request's headers), idle (kept alive between requests), active (in a request), queued (accepted at --max-pending-connections, waiting for a pending slot).",
	}, []string{"state"}))
	if err != nil {
		return nil, err
	}
	evicted, err := registerOrReuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: ConnectionsEvictedName,
		Help: "Webhook connections closed to make room for a new one at --max-pending-connections or --max-connections, by the state they were in (pending, idle or queued).",
	}, []string{"state"}))
	if err != nil {
		return nil, err
	}
	refused, err := registerOrReuse(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: ConnectionsRefusedName,
		Help: "New webhook connections closed at once because all --max-connections open ones were in a request.",
	}))
	if err != nil {
		return nil, err
	}
	aborted, err := registerOrReuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: HandshakesAbortedName,
		Help: "TLS handshakes graceguard ended: timeout (not done within the handshake timeout) or too-large (the client sent more than a handshake needs).",
	}, []string{"reason"}))
	if err != nil {
		return nil, err
	}
	peak, err := registerOrReuse(reg, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: ConnectionsPeakName,
		Help: "The most webhook connections open at once since the server started, counted as each is admitted (exact: a sum of graceguard_webhook_connections' states, scraped one after another, can count a connection changing state twice).",
	}))
	if err != nil {
		return nil, err
	}
	accepted, err := registerOrReuse(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: ConnectionsAcceptedName,
		Help: "Webhook connections accepted, each a TLS handshake to make: beside the rate of reviews, how often the API server opens a connection rather than reusing one.",
	}))
	if err != nil {
		return nil, err
	}
	m := &connMetrics{peakG: peak, acceptC: accepted, refusedC: refused, abortedC: map[string]prometheus.Counter{}}
	for s := range numConnStates {
		m.openG[s] = open.WithLabelValues(s.String())
		if s != connActive {
			m.evictedC[s] = evicted.WithLabelValues(s.String())
		}
	}
	for _, r := range []string{abortTimeout, abortTooLarge} {
		m.abortedC[r] = aborted.WithLabelValues(r)
	}
	return m, nil
}

func registerOrReuse[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, fmt.Errorf("registering the connection metrics: %w", err)
	}
	return c, nil
}

func (m *connMetrics) add(s connState, d float64) {
	if m != nil {
		m.openG[s].Add(d)
	}
}

func (m *connMetrics) accepted() {
	if m != nil {
		m.acceptC.Inc()
	}
}

func (m *connMetrics) setPeak(n int) {
	if m != nil {
		m.peakG.Set(float64(n))
	}
}

func (m *connMetrics) evicted(s connState) {
	if m != nil && m.evictedC[s] != nil {
		m.evictedC[s].Inc()
	}
}

func (m *connMetrics) refused() {
	if m != nil {
		m.refusedC.Inc()
	}
}

func (m *connMetrics) handshakeAborted(reason string) {
	if m != nil {
		m.abortedC[reason].Inc()
	}
}
