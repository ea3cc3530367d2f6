// Package scale is graceguard's scale harness, run by `make scale`
// (test/scale/cmd/scale): a real kube-apiserver and etcd with graceguard's
// webhooks registered as the chart registers them, pointed at the real
// webhook binary run with the chart's flags; kube-controller-manager and
// kube-scheduler; kwok (sigs.k8s.io/kwok, pinned in the lab's go.mod)
// simulating the nodes and, through the Stages in stages.yaml, a kubelet
// that runs Pods and shuts them down as a kubelet does (preStop, drain,
// SIGKILL at the grace); and graceguard's observer (`webhook observe`)
// watching those shutdowns. A scenario (smoke, full) creates nodes,
// namespaces, Deployments and a Job fan-out in opted-in namespaces, then
// restarts a tenth of the Deployments and deletes Pods, and measures
// admission latency, shedding and failing open, the webhook's and the
// observer's memory per namespace and per treated Pod, and whether every
// shutdown was observed once. It writes docs/scale.json and renders
// docs/scale.md from it (scale.md.tmpl), with an extrapolation to the
// Kubernetes scalability envelope stated as such.
//
// Invariant: every figure in the documents was measured by the run that
// wrote them, or is computed from those figures by a formula the document
// states; nothing is typed in. A phase that fails says why in Problems and
// leaves its figures empty; nothing here asserts a time.
package scale
