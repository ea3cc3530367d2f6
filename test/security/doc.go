// Package security holds the binary half of `make security-report`: the
// webhook binary, run with the chart's flags and environment inside a
// memory cgroup whose limit is the chart's memory limit, beside a real
// kube-apiserver and etcd, is sent each class of hostile input the threat
// model names (docs/security.md), one after another and then all at once,
// while ordinary Pods are created through the API server; the table of
// what each class cost it (peak memory, allocations, OOM events, restarts)
// and whether the ordinary Pods kept being admitted is written into
// docs/security.md.
//
// Invariant: what is measured is what an install runs: the flags, the
// environment and the memory limit are rendered from charts/graceguard,
// never restated here, and the load comes from other processes (the API
// server, this test, its flood children), so the cgroup holds the webhook
// alone.
package security
