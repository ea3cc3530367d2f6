// Package e2e is graceguard's end-to-end suite on a real single-node
// cluster (test/harness/cluster: kubelet, containerd, runc, bridge CNI,
// kube-apiserver, kube-controller-manager, kube-scheduler on this machine).
// The specs are behind the build tag e2e, so `go test ./...` does not
// compile them; run them with
//
//	make e2e                                            # cluster up, suite, docs, cluster down
//	go -C test test -tags e2e ./e2e/ -v -timeout 60m       # against `go -C hack run ./cluster up`
//
// It installs graceguard with its own Helm chart and a locally built image,
// then runs the shutdown lab the project grew from and its control arm, a
// rollout under load behind an EndpointSlice-following router, a preStop
// hook longer than its grace period, and graceguard's own rollout while
// Pods are created. Each run writes its evidence as JSON (package
// evidence) to bin/e2e/<timestamp>/ (or $GG_E2E_OUT); the runner
// (test/e2e/cmd/e2e) renders docs/e2e.md and docs/e2e/ from it.
package e2e
