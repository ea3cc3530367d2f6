package webhook

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// Name is a webhook's name: its metric label and log name.
type Name string

const (
	NameMutatePod         Name = "mutate-pod"
	NameValidatePod       Name = "validate-pod"
	NameValidateWorkloads Name = "validate-workloads"
)

// Names lists the webhooks.
var Names = []Name{NameMutatePod, NameValidatePod, NameValidateWorkloads}

// Decision is what a webhook did with one review.
type Decision string

const (
	// DecisionAllowed: evaluated, nothing to change, deny or warn about.
	DecisionAllowed Decision = "allowed"
	// DecisionMutated: allowed with a patch (mutate-pod only).
	DecisionMutated Decision = "mutated"
	// DecisionDenied: refused with a 422 naming the fields.
	DecisionDenied Decision = "denied"
	// DecisionWarned: allowed, unchanged, with warnings (advice, or what
	// enforce mode would do in a warn-mode namespace).
	DecisionWarned Decision = "warned"
	// DecisionSkipped: not evaluated (namespace not opted in or excluded,
	// mirror pod, opted out, operation not acted on, template unchanged).
	DecisionSkipped Decision = "skipped"
	// DecisionError: the review could not be evaluated (undecodable object,
	// unreadable namespace).
	DecisionError Decision = "error"
)

// Decisions lists the decisions.
var Decisions = []Decision{DecisionAllowed, DecisionMutated, DecisionDenied, DecisionWarned, DecisionSkipped, DecisionError}

// Reasons the adapters add to mutate.AllReasons for metrics.
const (
	// ReasonDecodeError: the review's object could not be decoded, or is of
	// a kind the endpoint does not handle.
	ReasonDecodeError mutate.Reason = "decode-error"
	// ReasonNamespaceUnavailable: the namespace's labels could not be read.
	ReasonNamespaceUnavailable mutate.Reason = "namespace-unavailable"
	// ReasonOverloaded: shed with 429 and Retry-After, before any work,
	// because it could not be answered before its deadline (the reviews
	// ahead of it in the queue and its own expected service) or the queue
	// or the in-flight bytes were full (queue.go).
	ReasonOverloaded mutate.Reason = "overloaded"
	// ReasonTooLarge: refused with 413, a body over MaxReviewBytes.
	ReasonTooLarge mutate.Reason = "too-large"
	// ReasonDeadline: the review's deadline passed before it was decided;
	// the API server had stopped waiting, so no decision was made.
	ReasonDeadline mutate.Reason = "deadline-exceeded"
	// reasonOther stands for a reason missing from MetricReasons, so a
	// programming error cannot grow the label set; tests keep it unused.
	reasonOther mutate.Reason = "other"
)

// MetricReasons is every value of the reason label.
var MetricReasons = append(append([]mutate.Reason{}, mutate.AllReasons...), mutate.ReasonOK, ReasonDecodeError, ReasonNamespaceUnavailable,
	ReasonOverloaded, ReasonTooLarge, ReasonDeadline)

// GraceBuckets are the histogram buckets of computed grace periods, in
// seconds: from the smallest useful budget to the cluster autoscaler's cap.
var GraceBuckets = []float64{5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600}

// Metrics are the webhooks' Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	decisions *prometheus.CounterVec
	grace     prometheus.Histogram
	reasons   map[mutate.Reason]bool
}

// NewMetrics registers the metrics on reg (in the webhook,
// controller-runtime's metrics.Registry, which its metrics server serves).
// Registering twice on one registry reuses the collectors already there.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	decisions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "graceguard_admission_decisions_total",
		Help: "Admission reviews answered, by webhook, decision and reason code. Dry-run reviews count too.",
	}, []string{"webhook", "decision", "reason"})
	grace := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "graceguard_grace_period_seconds",
		Help:    "terminationGracePeriodSeconds of Pods the mutating webhook patched, as left by graceguard.",
		Buckets: GraceBuckets,
	})
	var err error
	if decisions, err = register(reg, decisions); err != nil {
		return nil, err
	}
	if grace, err = register(reg, grace); err != nil {
		return nil, err
	}
	m := &Metrics{decisions: decisions, grace: grace, reasons: map[mutate.Reason]bool{}}
	for _, r := range MetricReasons {
		m.reasons[r] = true
	}
	return m, nil
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, fmt.Errorf("registering graceguard metrics: %w", err)
	}
	return c, nil
}

func (m *Metrics) record(name Name, d Decision, reason mutate.Reason) {
	if m == nil {
		return
	}
	if !m.reasons[reason] {
		reason = reasonOther
	}
	m.decisions.WithLabelValues(string(name), string(d), string(reason)).Inc()
}

func (m *Metrics) observeGrace(seconds int64) {
	if m == nil {
		return
	}
	m.grace.Observe(float64(seconds))
}
