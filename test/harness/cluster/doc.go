// Package cluster runs a real single-node Kubernetes cluster on this Linux
// machine, without Docker or kind: etcd, kube-apiserver,
// kube-controller-manager (and kube-scheduler when its binary is next to
// the others), containerd v2 with runc, a kubelet and kube-proxy
// (iptables mode, on the first node), all as background
// processes of one run directory, built from the Go module proxy
// (hack/envtest-assets.sh and ContainerdVersion). The e2e suite calls Up and
// Down; the hack/cluster command is a thin CLI over the same functions.
// AddNode adds a second node on the same machine (its own containerd and
// kubelet in a network namespace of their own, tainted so that only Pods
// that tolerate it land there) and RemoveNode takes it away again.
// Tests that need only an API server use test/harness/apiserver instead.
//
// Invariants:
//   - Everything the cluster creates on the host is named or placed so that
//     Down can find it again without guessing: processes carry the run
//     directory in their command line or live in the /graceguard cgroup,
//     mounts and Pod network namespaces live under the run directory, the
//     bridge is gg0, the second node's network namespace is gg-node2 (with
//     bridge gg1 inside and the veth gg-n2 to it), the iptables chain is
//     GG-CLUSTER, the CNI network is "graceguard", and every sysctl the
//     components change is recorded at Up and restored at Down.
//   - Down is idempotent and leaves the machine as Up found it, except the
//     run directory's logs/ (kept for post-mortems) and the build caches in
//     bin/. Up after Down starts an empty cluster.
//   - Up is idempotent: components already running with the same binary,
//     arguments and configuration are kept; changed ones are restarted.
//   - Only one cluster runs per machine (fixed bridge, addresses, ports and
//     cgroup root); Up refuses to start a second one from another run
//     directory.
//   - Nothing listens outside loopback, the gg0 bridge and the second node's
//     namespace; Pods route only 10.244.0.0/16, which holds both nodes' Pod
//     ranges, the link between them and the Service range, so
//     Pods reach Services (the apiserver's kubernetes Service too) through
//     kube-proxy, and nothing beyond the node.
//
// Layout of the run directory (default bin/cluster in the repository):
//
//	kubeconfig   admin kubeconfig (client certificate in system:masters)
//	pki/         CA, front-proxy CA, serving and client certificates, SA keys
//	config/      containerd.toml, kubelet.yaml, cni/, component kubeconfigs
//	logs/        one log per component (kept by Down; previous run in logs.prev/)
//	pids/        one JSON record per running process
//	state/       etcd data, containerd root/state/socket, kubelet root, Pod logs
//	host.json    host settings recorded at the first Up, restored by Down
package cluster
