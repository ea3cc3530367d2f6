// Package flags is the table of graceguard's command-line flags and the
// machinery that binds them: every flag's name, and the range of those that
// accept a range, are written here once (table.go). The packages that own
// the settings validate them against this table and name these flags in
// their errors (mutate.Options, webhook.Limits, server.Config,
// observer.Config, each with its Validate); each binary binds the flags it
// runs to those structs (pkg/optionflags for the cluster defaults both
// share, pkg/config for the rest of the webhook's, pkg/cli for the
// plugin's own).
//
// Invariant: the package imports none of graceguard's other packages but
// budget and the ShutdownReport API, so every owner of a setting can import
// it and the kubectl plugin links no server code through it.
package flags
