// Package observer is graceguard's shutdown observer: it watches the Pods
// graceguard treated (label graceguard.io/treated=true) and, for each one
// deleted, derives from its final status how its shutdown went: when the
// deletion was requested, when SIGTERM came (after the preStop hook, or
// when a FailedPreStopHook event says the hook failed), when each treated
// container exited and with which code, and whether it was SIGKILLed at the
// end of its grace, and when the last EndpointSlice that listed it ready
// marked it not ready (the control plane's part of its routing
// withdrawal; proxies apply it later). It keeps the samples per workload
// in a ShutdownReport
// (graceguard.io/v1alpha1) owned by the workload, records Warning events on
// the workload for kills and failed hooks, exports metrics and, when
// asked, writes policy reports (docs/reports.md).
//
// It runs as a Deployment of its own (the webhook binary's `observe`
// command), apart from the admission webhook: its memory grows with the
// treated Pods, and admission must not share that failure domain
// (docs/observer.md).
//
// Invariants:
//   - Only label-selected Pods, FailedPreStopHook events and the metadata
//     of opted-in namespaces are watched and cached; never all Pods. Each
//     Pod is cached as a record of bounded size whatever it holds
//     (record.go, maxRecordBytes): its key only unless it is terminating
//     in a namespace graceguard treats.
//   - EndpointSlices are watched in full, since a Service's slices carry
//     no label of the Pods they list and only their namespace tells
//     whether they matter; each is cached lean (endpointSlice, at most
//     maxSliceBytes): in a namespace graceguard treats, 17 bytes an
//     endpoint (its Pod's UID as 16 bytes, and whether it is routed to),
//     elsewhere its key only. They are cached rather than only watched
//     because an update changes a Pod's standing only by what differs
//     from the version before, and the informer hands that version over
//     from its store: nothing else keeps it. From their events the
//     observer keeps a fixed-size listing per Pod they list (how many
//     list it, how many route to it, when the last stopped; gone when
//     none lists it) and a fixed-size withdrawal per Pod it saw
//     terminating, until that Pod's sample is written (routes.go).
//   - Pods labelled treated in namespaces graceguard does not treat give
//     no sample (SkipNamespace): anyone may label a Pod.
//   - A sample goes to a workload's report only through the objects that
//     really own its Pod, UIDs checked (owner.go); never by name.
//   - observe (sample.go) and Add/Summarize (report.go) are pure: the
//     samples, summary and recommendation follow from the Pod's final
//     object, its deletion, its failed hooks and its withdrawal alone, in
//     whole seconds, the API's precision. The withdrawal's end is the one
//     time that is not the API's: when the observer saw the slice's
//     event, by its own clock.
//   - A report holds at most v1alpha1.MaxSamples samples, every string
//     within the CRD's bounds, and is written at most once per workload
//     and flush interval; an event's note stays under 1 KiB.
//   - Only the elected leader observes; when it stops it writes what it
//     gathered.
//   - With --reports, a policy report per workload of the treated
//     namespaces (reports.go) says what the webhooks' own decision says
//     (pkg/policyreport), is written only when its digest changes, and at
//     most --reports-writes-per-second writes and deletes a second; while
//     the API server serves no report kind nothing is written and one
//     line says why. It deletes only the reports it wrote.
package observer
