package observer

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/pkg/policyreport"
)

// DrainBuckets are the histogram buckets of observed drains, in seconds:
// whole seconds (the API's precision) up to the cluster autoscaler's cap.
var DrainBuckets = []float64{1, 2, 3, 5, 8, 10, 15, 20, 30, 45, 60, 90, 120, 300, 600}

// WithdrawalBuckets are the histogram buckets of observed control-plane
// withdrawals, in whole seconds: most take less than a second (0), a
// loaded controller seconds; past the longest routing profile (2m) only
// stuck slices.
var WithdrawalBuckets = []float64{0, 1, 2, 3, 5, 8, 10, 15, 30, 60, 120, 300}

// Metrics are the observer's Prometheus metrics. Labels are bounded: the
// outcome (2 values) and skip reason (8 values, Skips), and, only when
// NamespaceLabel is set, the namespace (one series per namespace with
// treated Pods, times the outcomes). A nil *Metrics records nothing.
type Metrics struct {
	drain     *prometheus.HistogramVec
	withdrawn *prometheus.HistogramVec
	kills     *prometheus.CounterVec
	hooks     *prometheus.CounterVec
	skipped   *prometheus.CounterVec
	pods      prometheus.Gauge
	reports   *prometheus.CounterVec
	namespace bool
}

// NewMetrics registers the observer's metrics on reg. With namespace,
// every metric but the skip counter carries a namespace label.
func NewMetrics(reg prometheus.Registerer, namespace bool) (*Metrics, error) {
	var labels []string
	if namespace {
		labels = []string{"namespace"}
	}
	m := &Metrics{
		drain: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "graceguard_observed_drain_seconds",
			Help:    "Seconds from SIGTERM to the exit of treated Pods' containers, as observed after their deletion (whole seconds). outcome=killed: to the SIGKILL, a lower bound of the drain needed.",
			Buckets: DrainBuckets,
		}, append([]string{"outcome"}, labels...)),
		withdrawn: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "graceguard_observed_withdrawal_seconds",
			Help:    "Seconds from the deletion request of treated Pods to when the observer saw the last EndpointSlice that listed them ready mark them not ready (whole seconds): the control plane's part of their routing withdrawal; proxies apply it later. Pods no EndpointSlice listed are not counted.",
			Buckets: WithdrawalBuckets,
		}, labels),
		kills: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "graceguard_observed_kills_total",
			Help: "Treated Pods whose container was SIGKILLed (exit 137) at the end of its grace period on deletion.",
		}, labels),
		hooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "graceguard_observed_prestop_failures_total",
			Help: "Treated Pods whose preStop hook failed on deletion (FailedPreStopHook): SIGTERM came before routes were withdrawn.",
		}, labels),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "graceguard_observer_skipped_total",
			Help: "Deleted treated Pods that gave no sample, by reason.",
		}, []string{"reason"}),
		pods: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "graceguard_observer_pods",
			Help: "Pods in the observer's cache: the Pods labelled graceguard.io/treated=true that exist (those of namespaces graceguard does not treat by their key only); 0 on a standby replica.",
		}),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "graceguard_observer_policy_report_writes_total",
			Help: "Policy reports the observer wrote (operation=apply) or deleted (operation=delete), by kind (openreports, policyreport); at most --reports-writes-per-second.",
		}, []string{"kind", "operation"}),
		namespace: namespace,
	}
	for _, c := range []prometheus.Collector{m.drain, m.withdrawn, m.kills, m.hooks, m.skipped, m.pods, m.reports} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering the observer's metrics: %w", err)
		}
	}
	// A counter series that first appears at 1 shows Prometheus no
	// increase (increase() needs two samples of it), so the first kill
	// would never fire GraceguardObservedKills: the series start at 0,
	// here or, per namespace, when its first treated Pod is cached.
	if !namespace {
		m.kills.WithLabelValues()
		m.hooks.WithLabelValues()
	}
	for _, s := range Skips {
		m.skipped.WithLabelValues(string(s))
	}
	for _, k := range policyreport.Kinds {
		for _, op := range []string{"apply", "delete"} {
			m.reports.WithLabelValues(string(k), op)
		}
	}
	return m, nil
}

func (m *Metrics) sample(ns string, s v1alpha1.Sample) {
	if m == nil {
		return
	}
	var l []string
	if m.namespace {
		l = []string{ns}
	}
	outcome := "exited"
	if s.Outcome == v1alpha1.OutcomeKilled {
		outcome = "killed"
		m.kills.WithLabelValues(l...).Inc()
	}
	if s.HookFailed {
		m.hooks.WithLabelValues(l...).Inc()
	}
	m.drain.WithLabelValues(append([]string{outcome}, l...)...).Observe(float64(s.DrainSeconds))
	if s.WithdrawalSeconds != nil {
		m.withdrawn.WithLabelValues(l...).Observe(float64(*s.WithdrawalSeconds))
	}
}

// seen starts the namespace's kill and hook-failure series at 0 (with
// the namespace label): a Pod is cached long before its shutdown is
// observed, so Prometheus has scraped the 0 before the first kill.
func (m *Metrics) seen(ns string) {
	if m == nil || !m.namespace {
		return
	}
	m.kills.WithLabelValues(ns)
	m.hooks.WithLabelValues(ns)
}

func (m *Metrics) skip(s Skip) {
	if m == nil {
		return
	}
	m.skipped.WithLabelValues(string(s)).Inc()
}

func (m *Metrics) reportWrite(k policyreport.Kind, operation string) {
	if m == nil {
		return
	}
	m.reports.WithLabelValues(string(k), operation).Inc()
}

func (m *Metrics) cached(delta float64) {
	if m == nil {
		return
	}
	m.pods.Add(delta)
}
