// Package apiserver runs a real kube-apiserver and etcd (controller-runtime's
// envtest, binaries built from the Go module proxy by hack/envtest-assets.sh)
// with graceguard in front: the webhook configurations the Helm chart ships,
// pointed at a graceguard server in this process, or at the webhook binary
// run as a process of its own (WebhookBinary). The envtest suite, `make demo`
// and `make bench` use it; the chart and cert-manager suites start it Alone
// and install the chart themselves. Tests that need Pods to run (a kubelet,
// containers) use test/harness/cluster instead.
//
// Invariants:
//   - StartAPIServer returns only once graceguard mutates Pods in an
//     opted-in namespace (Alone: once the API server serves), so a test's
//     first Pod is already admitted by graceguard.
//   - Stop leaves no process, listener or temporary directory behind: it
//     stops graceguard, every Process started beside the API server, the
//     API server and etcd.
package apiserver
