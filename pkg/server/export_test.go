package server

import (
	"context"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// WithNamespaceLookup replaces the manager's cached namespace reads by f;
// the manager then never reads namespaces from the API server.
func WithNamespaceLookup(f func(ctx context.Context, name string) (mutate.Namespace, error)) Option {
	return func(o *options) { o.namespaces = lookupFunc(f) }
}

type lookupFunc func(ctx context.Context, name string) (mutate.Namespace, error)

func (f lookupFunc) Namespace(ctx context.Context, name string) (mutate.Namespace, error) {
	return f(ctx, name)
}
