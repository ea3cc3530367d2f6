// Package policyreport writes graceguard's findings in the formats policy
// tools read: OpenReports (openreports.io/v1alpha1 Report) and the
// Kubernetes Policy working group's PolicyReport (wgpolicyk8s.io/v1alpha2),
// which Policy Reporter, Kyverno and Kubewarden show. One report per
// workload: the checks of its Pod template, pass, warn or fail per rule,
// and what the shutdown observer saw of its Pods' shutdowns.
//
// `kubectl graceguard audit -o openreports` prints the reports; the
// observer (pkg/observer) writes them, off the admission path: the
// webhooks never do.
//
// Invariants:
//   - Build is pure: the same input and time give the same report. Its
//     admission results are mutate.Findings of the two webhooks' reports,
//     the findings `kubectl graceguard check` lists for the same object:
//     the same rules (reason codes), messages and verdicts (a denial is a
//     fail, a warning a warn). Nothing here decides a rule again.
//   - A report holds at most Bounds.MaxResults results, fails first, then
//     warns, errors and passes; each message is at most
//     Bounds.MaxMessageLength bytes, a longer one cut with a marker that
//     says its length. The summary counts every result, listed or not, and
//     an annotation counts those not listed.
//   - The digest annotation changes only when what the report says does
//     (not when only the time does), so a writer can skip unchanged ones.
package policyreport
