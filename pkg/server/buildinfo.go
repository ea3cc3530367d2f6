package server

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/graceguard/graceguard/internal/version"
	"github.com/graceguard/graceguard/pkg/webhook"
)

// BuildInfoName is the metric that tells which graceguard build is running:
// always 1, labelled with the version, the Go toolchain and the platform,
// so a dashboard can join it to the other metrics or count a rollout's
// replicas per version.
const BuildInfoName = "graceguard_build_info"

// RegisterMetrics registers every metric of the webhook server on reg:
// the webhooks' (webhook.NewMetrics), the build info and the connection
// metrics. Registering twice reuses what is there. Run calls it; make
// generate lists what it registers (docs/alerts.md, "Metrics").
func RegisterMetrics(reg prometheus.Registerer) (*webhook.Metrics, error) {
	m, err := webhook.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	if err := registerBuildInfo(reg); err != nil {
		return nil, err
	}
	if _, err := newConnMetrics(reg); err != nil {
		return nil, err
	}
	return m, nil
}

// registerBuildInfo registers graceguard_build_info on reg; registering on
// a registry that already has it (a second Run in one process) reuses it.
func registerBuildInfo(reg prometheus.Registerer) error {
	info := version.GetInfo()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        BuildInfoName,
		Help:        "A metric with a constant '1' value labelled by the version, Go toolchain and platform graceguard was built with.",
		ConstLabels: prometheus.Labels{"version": info.Version, "go_version": info.GoVersion, "platform": info.Platform},
	})
	g.Set(1)
	if err := reg.Register(g); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			return nil
		}
		return err
	}
	return nil
}
