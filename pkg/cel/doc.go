// Package cel builds every CEL expression graceguard's chart ships, from the
// Go tables the webhook decides with: the duration grammar (pkg/budget), the
// preStop hook shapes (mutate.SleepCommand, mutate.Shells), the budget
// record's format (budget.Terms), the annotations and what the one-call
// proof accepts of each (mutate.Keys), and the messages of the denials the
// native floor shares with the webhook (mutate's reasons).
//
// make generate writes what it builds into the chart
// (charts/graceguard/templates/_generated.tpl); the chart holds no
// hand-written CEL. test/harness/chart evaluates the rendered chart with the
// API server's own CEL code and holds it to pkg/mutate both ways.
//
// Invariants, for every expression built here:
//   - It never errs on an object the API server can store: every field is
//     read as optional, every list it walks is bounded first and every
//     string is bounded before a regex, conversion or search reads it, so
//     its cost does not grow with the object.
//   - What it reads of a value, it reads as graceguard's Go does: a length
//     or a duration CEL reads is the one pkg/mutate reads; a form CEL does
//     not read is left to the webhook (never guessed).
package cel
