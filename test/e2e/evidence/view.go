package evidence

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
