// Package helmhook is what the chart's Helm hooks run, from the webhook's
// own image (it has no shell and no kubectl): the `helm test` checks
// (`webhook selftest --check=service|mutation`) and the pre-delete removal
// of the release's webhook configurations (`webhook unregister`).
//
// Invariants:
//   - A check passes only on what the API server itself would see: the
//     service check calls each webhook at the address its configuration
//     names (the Service's DNS name, or its URL), trusting only that
//     configuration's caBundle, and wants the AdmissionReview answered for
//     its UID; the mutation check wants the Pod the API server returns from
//     a server-side dry run, after every admission webhook, to carry
//     graceguard's budget record, the grace it records and a preStop hook.
//     Each retries until its timeout and then fails with the last reason.
//   - Unregister deletes a webhook configuration only when its Helm
//     ownership annotations name the release, and only the object it read
//     (a UID precondition); one already gone is success. It never lists.
package helmhook
