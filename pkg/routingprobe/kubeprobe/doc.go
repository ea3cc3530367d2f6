// Package kubeprobe is routingprobe's adapter to a cluster: the probe's
// names and labels, its Pods read and deleted with client-go, the load's
// settings and their checks, and the in-cluster run (`webhook measure`,
// the Job that measure-routing's Service path starts). The plugin and the
// webhook binary share it, so the probe's Pods, the plugin and the Job
// agree on one set of names.
//
// Invariant: the measuring itself is routingprobe's; this package only
// lists, deletes and waits.
package kubeprobe
