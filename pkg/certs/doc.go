// Package certs sets up self-managed serving certificates for graceguard's
// admission webhooks: a CA and a serving certificate kept in one Secret,
// rotated before they expire, with the CA injected as caBundle into the
// mutating and validating webhook configurations. The rotation itself is
// github.com/open-policy-agent/cert-controller's (the one Gatekeeper runs);
// this package only configures it and checks that configuration.
//
// Invariant: AddRotator registers nothing on the manager unless the Config
// passed Validate, and every replica of the webhook converges on the same
// Secret: writes are optimistic (resourceVersion) updates of that Secret, so
// a replica that loses a race re-reads the winner's certificates instead of
// overwriting them.
//
// The Secret must exist before the rotator starts (the Helm chart creates it
// empty); the rotator fills it, and never creates or deletes it.
package certs
