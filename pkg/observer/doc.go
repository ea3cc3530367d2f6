// Package observer is graceguard's shutdown observer: it watches the Pods
// graceguard treated (label graceguard.io/treated=true) and, for each one
// deleted, derives from its final status how its shutdown went: when the
// deletion was requested, when SIGTERM came (after the preStop hook, or
// when a FailedPreStopHook event says the hook failed), when each treated
// container exited and with which code, and whether it was SIGKILLed at the
// end of its grace. It keeps the samples per workload in a ShutdownReport
// (graceguard.io/v1alpha1) owned by the workload, records Warning events on
// the workload for kills and failed hooks, and exports metrics.
//
// It runs as a Deployment of its own (the webhook binary's `observe`
// command), apart from the admission webhook: its memory grows with the
// treated Pods, and admission must not share that failure domain
// (docs/observer.md).
//
// Invariants:
//   - Only label-selected Pods and FailedPreStopHook events are watched and
//     cached, each stripped to what a sample reads; never all Pods.
//   - Observe (sample.go) and Add/Summarize (report.go) are pure: the
//     samples, summary and recommendation follow from the Pod's final
//     object alone, in whole seconds, the API's precision.
//   - A report holds at most v1alpha1.MaxSamples samples and is written at
//     most once per workload and flush interval.
//   - Only the elected leader observes; when it stops it writes what it
//     gathered.
package observer
