package budget

import "time"

// Ceiling is the most grace a platform grants a Pod when it, not the Pod's
// owner, ends the Pod: a node drain by the cluster autoscaler, a Karpenter
// disruption, a graceful node shutdown. A budget above a ceiling is cut
// short in that event however long the Pod's own grace is.
type Ceiling struct {
	// Name is a short stable identifier ("karpenter", "node-shutdown").
	Name string
	// Event says when the ceiling applies, for people
	// ("a Karpenter node disruption").
	Event string
	// Limit is the grace granted; zero means the ceiling is not configured.
	Limit time.Duration
	// Deny makes a budget over the ceiling a denial rather than a warning.
	Deny bool
	// Flag names the setting, so a message says what to change.
	Flag string
}

// Exceeded reports whether a Pod needing need seconds of grace is cut
// short by the ceiling (the platform counts whole seconds too).
func (c Ceiling) Exceeded(need int64) bool {
	return c.Limit > 0 && need > int64(c.Limit/time.Second)
}
