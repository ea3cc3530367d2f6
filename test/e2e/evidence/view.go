package evidence

import (
	"sort"
	"strings"
)

// What the page's template derives from a Run beyond formatting: sums,
// filtered lists and fallbacks for parts a run left out. Each is computed
// from the Run's own figures, so the page still adds prose, never numbers.

// Reported is the attacker's own account, or an empty one when it left
// none: the section then shows its tables empty rather than not at all.
func (h *Hostile) Reported() *Attack {
	if h.Attack == nil {
		return &Attack{}
	}
	return h.Attack
}

// Creates are the runs of ordinary creates there were, during the attack
// and after it, in that order.
func (h *Hostile) Creates() []Creates {
	var out []Creates
	for _, c := range []Creates{{"during", h.Steady}, {"after", h.After}} {
		if c.Steady != nil {
			out = append(out, c)
		}
	}
	return out
}

// Creates is one run of ordinary creates and when it ran ("during" or
// "after" the attack).
type Creates struct {
	When string
	*Steady
}

// Sampled tells whether any class kept an answer as a sample.
func (a *Attack) Sampled() bool {
	for _, c := range a.Classes {
		if len(c.Samples) > 0 {
			return true
		}
	}
	return false
}

// FailedFloods are the floods that kept a failed attempt as a sample.
func (a *Attack) FailedFloods() []*Flood {
	var out []*Flood
	for _, f := range a.Floods {
		if f.FailSample != "" {
			out = append(out, f)
		}
	}
	return out
}

// GraceguardAnnotations are the Pod's graceguard.io/ annotations other
// than the budget (shown on its own), as "key: value", sorted.
func (d *Deletion) GraceguardAnnotations() []string {
	var out []string
	for k, v := range d.Annotations {
		if strings.HasPrefix(k, "graceguard.io/") && k != "graceguard.io/budget" {
			out = append(out, k+": "+v)
		}
	}
	sort.Strings(out)
	return out
}

// SIGTERMLate is how much later than pkg/budget predicted the app logged
// SIGTERM (the kubelet notices a delete late); nil without both.
func (d *Deletion) SIGTERMLate() At {
	if d.Expected == nil || d.SIGTERM == nil {
		return nil
	}
	late := *d.SIGTERM - d.Expected.SIGTERM
	return &late
}

// Opened is how many connections the floods opened, over every kind and
// replica.
func (a *Attack) Opened() int {
	n := 0
	for _, f := range a.Floods {
		n += f.Opened
	}
	return n
}

// Restarts is how often graceguard's containers restarted over the attack,
// a count it could not read counting as none.
func (h *Hostile) Restarts() int32 {
	var n int32
	for _, r := range h.Replicas {
		n += max(r.Restarts, 0)
	}
	return n
}

// Requests is how many requests ran through the arm's proxy.
func (a *MeshArm) Requests() int { return a.Completed + a.Cut }

// FailOpen is the API server's fail-open count over the rollout, summed
// over graceguard's webhooks.
func (s *SelfRollout) FailOpen() float64 {
	var n float64
	for _, m := range s.Metrics {
		n += m.FailOpen
	}
	return n
}

// Rejections is the API server's rejection count over the rollout, summed
// over graceguard's webhooks.
func (s *SelfRollout) Rejections() float64 {
	var n float64
	for _, m := range s.Metrics {
		n += m.Rejection
	}
	return n
}
