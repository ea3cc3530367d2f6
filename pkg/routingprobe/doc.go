// Package routingprobe measures a data plane's routing withdrawal: how long
// after a Pod's delete call the path in front of it (a load balancer, an
// ingress controller, kube-proxy) still sends it requests. It holds the
// probe server (each answer names the Pod that served it), the load that
// sends requests through the path at a bounded rate and attributes each
// answer to its Pod, the rounds that delete Pods one at a time, and the
// statistics and routing profile drawn from them.
//
// Invariant: it imports no Kubernetes package. The cluster is an interface
// (Cluster) that kubeprobe implements with client-go, so the measuring logic
// is tested with real HTTP servers standing in for Pods.
package routingprobe
