// Package cli is the kubectl-graceguard plugin: `mutate`, `check` and
// `explain` run the webhook's own decisions (pkg/mutate through
// pkg/manifest) on manifests, offline.
//
// Invariants: the plugin decides nothing itself; every verdict, change and
// warning it prints comes from a mutate.Report, so it cannot disagree with
// the webhook. Output is deterministic (no colour, no terminal width, no map
// order), and Execute never exits the process: it returns 0 when allowed,
// 1 when an object would be denied and 2 for usage and input errors.
package cli
