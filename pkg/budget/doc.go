// Package budget is graceguard's pure core: the shutdown budget
//
//	terminationGracePeriodSeconds >= routing withdrawal + max admitted work + cleanup + safety margin
//
// and the parsing of the durations people write for its terms, with the
// data it rests on: the built-in routing profiles (profile.go, each number
// with its source) and the platform ceilings a budget is checked against.
//
// Invariants: the package imports no Kubernetes code, never panics on any
// input, rejects negative and absurd (over MaxTerm) durations, and never
// overflows: a Budget's Grace is always >= its Sum, rounded up to whole
// seconds, because the kubelet only counts whole seconds.
package budget
