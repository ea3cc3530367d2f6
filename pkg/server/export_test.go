package server

import "github.com/graceguard/graceguard/pkg/webhook"

// WithNamespaceLookup replaces the manager's cached namespace reads; the
// manager then never reads namespaces from the API server.
func WithNamespaceLookup(l webhook.NamespaceLookup) Option {
	return func(o *options) { o.namespaces = l }
}
