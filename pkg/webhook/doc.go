// Package webhook adapts pkg/mutate to Kubernetes admission: three raw
// admission.Handlers (mutate Pods, validate Pods, validate workload Pod
// templates), the namespace lookup they read settings from, and their
// Prometheus metrics.
//
// Invariants:
//   - Every answer is built from one mutate.Report: the patch is exactly
//     Report.Patch() (add-only, so fields the Go types do not know
//     survive), the warnings are Report.AdmissionWarnings(), a denial
//     carries Report.Err() as a whole metav1.Status (422, field causes).
//   - Only the mutating Pod handler ever returns a patch, and it refuses
//     exactly what the validating Pod handler would refuse of the Pod it
//     leaves (in enforce mode), with the same answer, but for a stop
//     signal, which only the validating handler judges (the API server
//     may drop the field in between): so every Pod it
//     admits carries its record (graceguard.io/budget), which the API
//     server's CEL condition reads to skip the validating call
//     (docs/admission.md).
//   - Serve answers every body exactly as controller-runtime's
//     admission.Webhook does, reading a review in one pass
//     (FuzzReviewDecodeLikeControllerRuntime).
//   - Metric labels are bounded: webhook names, decisions and reason codes,
//     never namespaces or object names.
//   - A review is answered the same whether or not it is a dry run, and its
//     context outlives the server's shutdown signal, so reviews being
//     worked on when draining starts get their real answer; those still
//     waiting for a slot are shed (429) for the API server to retry.
//   - Past its capacity a replica works on a few reviews per CPU at once
//     and admits a review only if it can be answered before its deadline;
//     it sheds the rest on arrival, before any work (queue.go).
package webhook
