package scale

// Envelope is a cluster size to extrapolate to.
type Envelope struct {
	Nodes      int `json:"nodes"`
	Pods       int `json:"pods"`
	Namespaces int `json:"namespaces"`
	// RestartFraction of the Pods shut down in a rolling restart.
	RestartFraction float64 `json:"restartFraction"`
}

// Kubernetes is the scalability envelope SIG Scalability tests
// (kubernetes/community, sig-scalability/configs-and-limits/thresholds.md):
// 5,000 nodes and 150,000 Pods; 10,000 namespaces is its namespace
// threshold, and a rolling restart of a tenth of the Pods the churn issue 23
// asks about.
var Kubernetes = Envelope{Nodes: 5000, Pods: 150000, Namespaces: 10000, RestartFraction: 0.1}

// The memory steps a run measures, by name; the slopes are taken between
// them.
const (
	StepStarted    = "started"
	StepNamespaces = "namespaces created"
	StepPods       = "Deployments' Pods running"
	StepChurn      = "after the churn"
)

// Slope is what one more unit (a namespace, a treated Pod) costs a
// process: the difference of two memory steps over the difference of
// their units.
type Slope struct {
	From  string  `json:"from"`
	To    string  `json:"to"`
	Units float64 `json:"units"`
	// Per unit, KiB: of the live heap and of RSS.
	HeapKiB float64 `json:"heapKiB"`
	RSSKiB  float64 `json:"rssKiB"`
}

// Extrapolation projects the run's figures onto an Envelope, linearly:
// the memory of a process is its memory at the start plus a slope times
// the units it caches; CPU and writes are per review or per shutdown
// times their number. Each figure is nil or zero when the run did not
// measure what it needs.
type Extrapolation struct {
	Envelope Envelope `json:"envelope"`
	// Slopes measured by the run.
	WebhookPerNamespace  *Slope `json:"webhookPerNamespace,omitempty"`
	WebhookPerPod        *Slope `json:"webhookPerPod,omitempty"`
	ObserverPerNamespace *Slope `json:"observerPerNamespace,omitempty"`
	ObserverPerPod       *Slope `json:"observerPerPod,omitempty"`
	// Base is each process's memory at the start; Webhook and Observer
	// the projection: the webhook caches namespaces (not Pods), the
	// observer namespaces and treated Pods.
	WebhookBase, ObserverBase ProcMem  `json:"-"`
	Webhook, Observer         *ProcMem `json:"-"`
	// ReviewsPerPod is graceguard's reviews per treated Pod in the run;
	// AdmitCPUSeconds the webhook's CPU time to admit every Pod of the
	// envelope once at the run's CPU per review.
	ReviewsPerPod   float64 `json:"reviewsPerPod"`
	AdmitCPUSeconds float64 `json:"admitCPUSeconds"`
	// RestartShutdowns is the envelope's rolling restart; the observer's
	// CPU time and the report writes for it at the run's rates per
	// shutdown.
	RestartShutdowns          int     `json:"restartShutdowns"`
	RestartObserverCPUSeconds float64 `json:"restartObserverCPUSeconds"`
	RestartReportWrites       float64 `json:"restartReportWrites"`
}

func (r *Results) step(name string) *MemoryStep {
	for i := range r.Memory {
		if r.Memory[i].Name == name {
			return &r.Memory[i]
		}
	}
	return nil
}

// slope is proc's cost per unit between two steps, nil when either is
// missing or the units did not change.
func slope(from, to *MemoryStep, units func(*MemoryStep) int, proc func(*MemoryStep) ProcMem) *Slope {
	if from == nil || to == nil {
		return nil
	}
	du := float64(units(to) - units(from))
	if du <= 0 {
		return nil
	}
	a, b := proc(from), proc(to)
	return &Slope{From: from.Name, To: to.Name, Units: du,
		HeapKiB: (b.HeapLiveMiB - a.HeapLiveMiB) * 1024 / du, RSSKiB: (b.RSSMiB - a.RSSMiB) * 1024 / du}
}

func namespaces(s *MemoryStep) int      { return s.Namespaces }
func treatedPods(s *MemoryStep) int     { return s.TreatedPods }
func webhookMem(s *MemoryStep) ProcMem  { return s.Webhook }
func observerMem(s *MemoryStep) ProcMem { return s.Observer }

// project is base plus the slopes times the units beyond those of the
// base step.
func project(base *MemoryStep, mem ProcMem, units ...projectUnit) *ProcMem {
	out := mem
	for _, u := range units {
		if u.slope == nil {
			return nil
		}
		n := float64(u.at - u.of(base))
		out.HeapLiveMiB += u.slope.HeapKiB * n / 1024
		out.RSSMiB += u.slope.RSSKiB * n / 1024
	}
	return &out
}

type projectUnit struct {
	slope *Slope
	of    func(*MemoryStep) int
	at    int
}

// Extrapolate projects r onto e (see Extrapolation).
func (r *Results) Extrapolate(e Envelope) Extrapolation {
	x := Extrapolation{Envelope: e}
	start, nss, pods := r.step(StepStarted), r.step(StepNamespaces), r.step(StepPods)
	x.WebhookPerNamespace = slope(start, nss, namespaces, webhookMem)
	x.ObserverPerNamespace = slope(start, nss, namespaces, observerMem)
	x.WebhookPerPod = slope(nss, pods, treatedPods, webhookMem)
	x.ObserverPerPod = slope(nss, pods, treatedPods, observerMem)
	if start != nil {
		x.WebhookBase, x.ObserverBase = start.Webhook, start.Observer
		x.Webhook = project(start, start.Webhook, projectUnit{x.WebhookPerNamespace, namespaces, e.Namespaces})
		x.Observer = project(start, start.Observer,
			projectUnit{x.ObserverPerNamespace, namespaces, e.Namespaces}, projectUnit{x.ObserverPerPod, treatedPods, e.Pods})
	}
	if a := r.Admission; a.PodReviews() > 0 {
		x.ReviewsPerPod = a.ReviewsPerPod()
		x.AdmitCPUSeconds = float64(e.Pods) * x.ReviewsPerPod * a.CPUMsPerReview() / 1000
	}
	x.RestartShutdowns = int(float64(e.Pods)*e.RestartFraction + 0.5)
	if s := r.Shutdowns; s != nil && s.Shutdowns > 0 {
		n := float64(x.RestartShutdowns) / float64(s.Shutdowns)
		x.RestartObserverCPUSeconds = s.ObserverCPUSeconds * n
		x.RestartReportWrites = s.ReportWrites * n
	}
	return x
}
