//go:build tools

// Package kubestatemetrics pins kube-state-metrics (k8s.io/kube-state-metrics/v2)
// for make e2e: GraceguardNoReadyWebhook reads its
// kube_deployment_status_replicas_available, so the node runs the real
// exporter (bin/kube-state-metrics-VERSION). A module of its own, so that
// kube-state-metrics and its Kubernetes libraries stay out of graceguard's.
package kubestatemetrics

import _ "k8s.io/kube-state-metrics/v2"
