// Package bench is graceguard's performance benchmark, run by `make bench`
// (test/bench/cmd/bench): the Go benchmarks of pkg/mutate and pkg/webhook,
// the real cmd/webhook binary under open-loop load over TLS next to a no-op
// baseline (test/bench/noop), Pod creation through a real kube-apiserver
// with and without graceguard's webhooks, the cost as the namespace
// cache grows, and the shutdown observer at 10,000 treated Pods beside a
// cache of every Pod. It writes docs/benchmarks.md, docs/benchmarks.json and
// docs/benchmarks-latency.svg from one run's results.
//
// Invariant: every number in the documents it writes was measured by the
// run that wrote them; nothing is carried over or typed in. A phase that
// fails leaves its section empty and says why, it never fails silently.
// Nothing here asserts a time: targets are reported as met or missed.
package bench
