// Package mutate decides what graceguard does to a Pod or a workload's Pod
// template: which preStop hooks, probes and grace period to add
// (Mutate), and whether the result may be admitted (Validate).
//
// Both return a Report: the one decision that the admission responses, the
// kubectl plugin, the metrics and the docs all read. The package is pure: it
// works on Go values, performs no I/O and keeps no state.
//
// Invariants:
//   - Mutate only adds: it never removes or rewrites a field the user set,
//     and its Patch contains only "add" operations.
//   - Mutate is idempotent: mutating its own output changes nothing.
//   - After Mutate, the Pod's grace period covers its budget (a mesh
//     proxy's exit and a routing profile's grace floor included), or
//     Validate reports why it cannot.
//   - What it decides about a mesh proxy depends only on the Pod's final
//     shape and annotations, so the stored Pod is the same whether the
//     mesh's injector runs before or after graceguard (mesh.go).
package mutate
