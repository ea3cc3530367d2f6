// Package cli is the kubectl plugin: `mutate`, `check` and `explain` run
// the webhook's own decisions (pkg/mutate through pkg/manifest) on
// manifests, offline; `audit` runs them on the workloads and Pods of a live
// cluster. docs/plugin.md is its manual.
//
// Invariants: the plugin decides nothing itself; every verdict, change and
// warning it prints comes from a mutate.Report, so it cannot disagree with
// the webhook. Output is deterministic (no colour, no terminal width, no map
// order), and Execute never exits the process: it returns 0 when nothing is
// found at the --fail-on level, 1 when something is, and 2 for usage and
// input errors (and objects that could not be evaluated).
package cli
