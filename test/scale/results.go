package scale

import (
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/graceguard/graceguard/pkg/webhook"
	"github.com/graceguard/graceguard/test/harness/apiserver"
	"github.com/graceguard/graceguard/test/harness/proc"
)

// Results is everything one run measured; docs/scale.json is this, and
// docs/scale.md is rendered from it alone.
type Results struct {
	Options Options   `json:"options"`
	Started time.Time `json:"started"`
	// Seconds is the wall time of the whole run, ClusterSeconds the
	// time the processes ran while measured (the CPU table's window).
	Seconds        float64       `json:"seconds"`
	ClusterSeconds float64       `json:"clusterSeconds"`
	Machine        Machine       `json:"machine"`
	Chart          ChartDefaults `json:"chart"`
	// Phases are the steps of the run, in order, with their wall time.
	Phases    []Phase      `json:"phases"`
	Admission Admission    `json:"admission"`
	Memory    []MemoryStep `json:"memory"`
	Shutdowns *Shutdowns   `json:"shutdowns,omitempty"`
	// Failovers are the churns repeated with the observer's leader
	// stopped (Options.Failover), SIGTERM first.
	Failovers []Failover `json:"failovers,omitempty"`
	// CPU is each process's CPU time over the run, and its peak RSS.
	CPU []ProcCPU `json:"cpu"`
	// Problems are phases that failed, in sentences; Caveats are
	// conditions that make the figures pessimistic.
	Problems []string `json:"problems"`
	Caveats  []string `json:"caveats"`
}

// Machine is where the run happened.
type Machine struct {
	proc.Host
	KubeAPIServer string     `json:"kubeAPIServer"`
	Kwok          string     `json:"kwok"`
	LoadAvgStart  [3]float64 `json:"loadAvgStart"`
	LoadAvgEnd    [3]float64 `json:"loadAvgEnd"`
}

// ChartDefaults are what the chart's default values install, read from
// the chart rendered by the run: the flags the binaries ran with and the
// limits the figures are compared with.
type ChartDefaults struct {
	WebhookArgs  []string `json:"webhookArgs"`
	ObserverArgs []string `json:"observerArgs"`
	// Memory limits of the containers, MiB (0: none).
	WebhookMemoryLimitMiB  float64 `json:"webhookMemoryLimitMiB"`
	ObserverMemoryLimitMiB float64 `json:"observerMemoryLimitMiB"`
	WebhookReplicas        int     `json:"webhookReplicas"`
}

// Phase is one step of the run.
type Phase struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	// Pods is how many Pods the step created or shut down (0: none).
	Pods int `json:"pods,omitempty"`
}

// Rate is Pods per second of the phase (0 without Pods).
func (p Phase) Rate() float64 {
	if p.Pods == 0 || p.Seconds <= 0 {
		return 0
	}
	return float64(p.Pods) / p.Seconds
}

// Admission is what admitting the run's Pods cost and how it went.
type Admission struct {
	// Webhooks is the API server's latency of calling graceguard's
	// webhooks over the whole run (apiserver_admission_webhook_admission_duration_seconds).
	Webhooks []WebhookLatency `json:"webhooks"`
	// Bursts are the creation bursts' arms, in the order they ran.
	Bursts []BurstArm `json:"bursts"`
	// Client is the bare Pod creates, as their client saw them, per arm.
	Client []ClientArm `json:"client"`
	// Decisions counts graceguard's answers by webhook/decision/reason
	// (graceguard_admission_decisions_total); Shed those refused with 429
	// (reason overloaded).
	Decisions map[string]float64 `json:"decisions"`
	Shed      float64            `json:"shed"`
	// FailOpen is the API server's count of calls to graceguard's webhooks
	// that failed and were let through (failurePolicy Ignore), by webhook;
	// Rejected its count of calls that were denied or failed closed, by
	// webhook/error_type (apiserver_admission_webhook_fail_open_count,
	// apiserver_admission_webhook_rejection_count).
	FailOpen map[string]float64 `json:"failOpen"`
	Rejected map[string]float64 `json:"rejected"`
	// Connections are the webhook server's connection counters over the
	// run (graceguard_webhook_connections_refused_total, _evicted_total,
	// graceguard_webhook_tls_handshakes_aborted_total) and its peak of
	// open connections.
	Connections map[string]float64 `json:"connections"`
	// PodsCreated is the Pods created through the API server during the run
	// (apiserver_request_total of POST pods, code 201).
	PodsCreated float64 `json:"podsCreated"`
	// WebhookCPUSeconds is the webhook processes' CPU time over the run,
	// every replica's added.
	WebhookCPUSeconds float64 `json:"webhookCPUSeconds"`
}

// total adds a map's values.
func total(m map[string]float64) float64 {
	var n float64
	for _, v := range m {
		n += v
	}
	return n
}

// Reviews is the number of reviews graceguard answered.
func (a Admission) Reviews() float64 {
	var n float64
	for _, v := range a.Decisions {
		n += v
	}
	return n
}

// PodReviews is the reviews of graceguard's mutating webhook: one per Pod
// created in an opted-in namespace.
func (a Admission) PodReviews() float64 {
	var n float64
	for k, v := range a.Decisions {
		if strings.HasPrefix(k, string(webhook.NameMutatePod)+"/") {
			n += v
		}
	}
	return n
}

// ReviewsPerPod is graceguard's reviews per Pod it mutated or looked at:
// the mutating call, the validating one when made, and the workloads'.
func (a Admission) ReviewsPerPod() float64 {
	if a.PodReviews() == 0 {
		return 0
	}
	return a.Reviews() / a.PodReviews()
}

// CPUMsPerReview is the webhook's CPU time per review answered.
func (a Admission) CPUMsPerReview() float64 {
	if a.Reviews() == 0 {
		return 0
	}
	return 1000 * a.WebhookCPUSeconds / a.Reviews()
}

// WebhookLatency is the API server's histogram of one webhook's calls.
type WebhookLatency struct {
	Name      string    `json:"name"`
	Type      string    `json:"type"`
	Histogram Histogram `json:"histogram"`
}

// BurstArm is one arm of the creation bursts: in a namespace of its own,
// a Job fan-out, then a Deployment scaled out from zero, admitted by
// nothing (no policy), the native policy, or graceguard with Replicas
// webhook replicas.
type BurstArm struct {
	Arm       string          `json:"arm"`
	Replicas  int             `json:"replicas,omitempty"`
	Namespace string          `json:"namespace"`
	Workloads []BurstWorkload `json:"workloads"`
	// Backends are the connections the API server opened to each of
	// graceguard's replicas over the arm, as the balancer in front of
	// them (kube-proxy's stand-in) forwarded them; BalancerFailed those
	// it could not forward.
	Backends       []apiserver.BackendStats `json:"backends,omitempty"`
	BalancerFailed int                      `json:"balancerFailed,omitempty"`
	// Connections are graceguard's connection counters over the arm,
	// every replica's added (as Admission.Connections).
	Connections map[string]float64 `json:"connections,omitempty"`
}

// BurstWorkload is one burst: Pods created by a controller at once,
// measured from the create (or scale) call until all were created, then
// all running (or done).
type BurstWorkload struct {
	Kind           string  `json:"kind"`
	Pods           int     `json:"pods"`
	CreatedSeconds float64 `json:"createdSeconds"`
	RunningSeconds float64 `json:"runningSeconds"`
	// Create is the API server's latency of the Pod creates
	// (apiserver_request_duration_seconds of POST pods: admission, every
	// webhook and policy included, and the write); Codes counts their
	// answers by HTTP code (apiserver_request_total).
	Create Histogram          `json:"create"`
	Codes  map[string]float64 `json:"codes"`
	// Webhooks is the API server's latency of calling graceguard's
	// webhooks (its arms only).
	Webhooks []WebhookLatency `json:"webhooks,omitempty"`
	// Shed is graceguard's reviews refused with 429 (every replica's);
	// FailOpen and Rejected are the API server's counts for graceguard's
	// webhooks, as in Admission.
	Shed     float64 `json:"shed"`
	FailOpen float64 `json:"failOpen"`
	Rejected float64 `json:"rejected"`
	// CPU time of the API server, etcd and graceguard's replicas (every
	// one's, idle ones included) over the burst.
	APIServerCPUSeconds float64 `json:"apiServerCPUSeconds"`
	EtcdCPUSeconds      float64 `json:"etcdCPUSeconds"`
	WebhookCPUSeconds   float64 `json:"webhookCPUSeconds"`
}

// Rate is the Pods created per second.
func (b BurstWorkload) Rate() float64 {
	if b.CreatedSeconds <= 0 {
		return 0
	}
	return float64(b.Pods) / b.CreatedSeconds
}

// APIServerCPUMsPerPod is the API server's CPU per Pod created.
func (b BurstWorkload) APIServerCPUMsPerPod() float64 {
	if b.Pods == 0 {
		return 0
	}
	return 1000 * b.APIServerCPUSeconds / float64(b.Pods)
}

// WebhookCPUMsPerPod is graceguard's CPU per Pod created.
func (b BurstWorkload) WebhookCPUMsPerPod() float64 {
	if b.Pods == 0 {
		return 0
	}
	return 1000 * b.WebhookCPUSeconds / float64(b.Pods)
}

// ClientArm is bare Pod creates by concurrent clients in one arm.
type ClientArm struct {
	Arm    string `json:"arm"`
	Pods   int    `json:"pods"`
	Errors int    `json:"errors"`
	// ErrorSample is one error's message.
	ErrorSample string `json:"errorSample,omitempty"`
	// LatencyMs summarizes the successful creates' latencies.
	LatencyMs Percentiles `json:"latencyMs"`
}

// Percentiles of a set of latencies (nearest rank).
type Percentiles struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// percentiles summarizes vs (any order); zero without any.
func percentiles(vs []float64) Percentiles {
	if len(vs) == 0 {
		return Percentiles{}
	}
	s := slices.Sorted(slices.Values(vs))
	rank := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	var sum float64
	for _, v := range s {
		sum += v
	}
	return Percentiles{P50: rank(0.5), P90: rank(0.9), P99: rank(0.99), Max: s[len(s)-1], Mean: sum / float64(len(s))}
}

// MemoryStep is the webhook's and the observer's memory at one point of
// the run, with what their caches held then.
type MemoryStep struct {
	Name string `json:"name"`
	// Namespaces is the opted-in namespaces in the cluster;
	// TreatedPods the Pods labelled treated, as the observer counts them
	// (graceguard_observer_pods).
	Namespaces  int     `json:"namespaces"`
	TreatedPods int     `json:"treatedPods"`
	Webhook     ProcMem `json:"webhook"`
	Observer    ProcMem `json:"observer"`
}

// ProcMem is a process's resident memory and Go heap: in use (live and
// garbage not yet collected), and live, estimated as half the
// collector's next goal (go_memstats_next_gc_bytes: the live heap its last
// cycle found, doubled at GOGC=100), which moves only with what the
// process keeps.
type ProcMem struct {
	RSSMiB       float64 `json:"rssMiB"`
	HeapInuseMiB float64 `json:"heapInuseMiB"`
	HeapLiveMiB  float64 `json:"heapLiveMiB"`
}

// Shutdowns is how the run's shutdowns went and what the observer made of
// them.
type Shutdowns struct {
	// Restarted Deployments rolled out a new template; Deleted Pods of the
	// others were deleted.
	Restarted int `json:"restarted"`
	Deleted   int `json:"deleted"`
	// Shutdowns is the treated Pods the harness saw shut down while
	// running (deleted gracefully, then their final status), Kills those
	// whose containers exited 137. Unfinished were deleted without a
	// final status.
	Shutdowns  int `json:"shutdowns"`
	Kills      int `json:"kills"`
	Unfinished int `json:"unfinished"`
	// Recorded is the samples the reports count (status.observed summed
	// over every ShutdownReport), RecordedKills their kills; Reports the
	// number of reports.
	Recorded      int `json:"recorded"`
	RecordedKills int `json:"recordedKills"`
	Reports       int `json:"reports"`
	// Samples are the observer's samples by outcome
	// (graceguard_observed_drain_seconds_count), Skipped its deleted Pods
	// without a sample, by reason (graceguard_observer_skipped_total).
	Samples map[string]float64 `json:"samples"`
	Skipped map[string]float64 `json:"skipped"`
	// ChurnSeconds runs from the first deletion to the last Pod gone;
	// LagSeconds from then until the reports counted every shutdown (or
	// the run stopped waiting).
	ChurnSeconds float64 `json:"churnSeconds"`
	LagSeconds   float64 `json:"lagSeconds"`
	// ReportWrites is the API server's count of writes to ShutdownReports
	// during the churn (create, update, patch, status included).
	ReportWrites float64 `json:"reportWrites"`
	// ReportUpdatesPeak is the most ShutdownReport status updates (one
	// per report write of the observer) the harness's watch received in
	// one second of the churn, ReportUpdateSeconds the seconds with any.
	ReportUpdatesPeak   int `json:"reportUpdatesPeak"`
	ReportUpdateSeconds int `json:"reportUpdateSeconds"`
	// The observer's CPU time over the churn and its peak RSS (VmHWM reset
	// before it).
	ObserverCPUSeconds float64 `json:"observerCPUSeconds"`
	ObserverPeakRSSMiB float64 `json:"observerPeakRSSMiB"`
}

// ObservedOnce says whether the reports hold every shutdown exactly once,
// kills included.
func (s Shutdowns) ObservedOnce() bool {
	return s.Shutdowns > 0 && s.Recorded == s.Shutdowns && s.RecordedKills == s.Kills
}

// Failover is a churn during which the observer's leader was stopped and
// a standby replica took the Lease over.
type Failover struct {
	// Signal stopped the leader (SIGTERM, SIGKILL), StoppedAfterSeconds
	// after the churn's first deletion.
	Signal              string  `json:"signal"`
	StoppedAfterSeconds float64 `json:"stoppedAfterSeconds"`
	// LeaderlessSeconds runs from the signal until the Lease named the
	// standby, UnobservedSeconds until the standby, now leader, had
	// listed the treated Pods and observed.
	LeaderlessSeconds float64 `json:"leaderlessSeconds"`
	UnobservedSeconds float64 `json:"unobservedSeconds"`
	// Shutdowns and Kills are the harness's count of the churn, as in
	// Shutdowns; GoneUnobserved those whose Pods went while no replica
	// observed (from the signal until the new leader observed).
	Shutdowns      int `json:"shutdowns"`
	Kills          int `json:"kills"`
	GoneUnobserved int `json:"goneUnobserved"`
	// Recorded and RecordedKills are what the reports gained over the
	// churn.
	Recorded      int `json:"recorded"`
	RecordedKills int `json:"recordedKills"`
	// ChurnSeconds and LagSeconds as in Shutdowns.
	ChurnSeconds float64 `json:"churnSeconds"`
	LagSeconds   float64 `json:"lagSeconds"`
}

// Lost is the shutdowns the reports do not count.
func (f Failover) Lost() int { return max(0, f.Shutdowns-f.Recorded) }

// LostPercent is Lost as a share of the shutdowns.
func (f Failover) LostPercent() float64 {
	if f.Shutdowns == 0 {
		return 0
	}
	return 100 * float64(f.Lost()) / float64(f.Shutdowns)
}

// ProcCPU is one process's CPU time over the run and its peak RSS.
type ProcCPU struct {
	Name       string  `json:"name"`
	CPUSeconds float64 `json:"cpuSeconds"`
	PeakRSSMiB float64 `json:"peakRSSMiB"`
}

// Histogram is a Prometheus histogram: cumulative counts of the finite
// buckets (upper bound Le, seconds), and the total Count (the +Inf bucket).
type Histogram struct {
	Count   float64  `json:"count"`
	Sum     float64  `json:"sum"`
	Buckets []Bucket `json:"buckets"`
}

// Bucket is one cumulative bucket.
type Bucket struct {
	Le    float64 `json:"le"`
	Count float64 `json:"count"`
}

// Sub is h minus an earlier scrape of the same histogram: the
// observations between the two.
func (h Histogram) Sub(earlier Histogram) Histogram {
	out := Histogram{Count: h.Count - earlier.Count, Sum: h.Sum - earlier.Sum}
	before := map[float64]float64{}
	for _, b := range earlier.Buckets {
		before[b.Le] = b.Count
	}
	for _, b := range h.Buckets {
		out.Buckets = append(out.Buckets, Bucket{Le: b.Le, Count: b.Count - before[b.Le]})
	}
	return out
}

// Quantile estimates the q-quantile as Prometheus' histogram_quantile does:
// linear interpolation inside the bucket the rank falls in (from 0 for the
// first). A rank beyond the last finite bucket returns its bound and
// above=true: the quantile is only known to exceed it. No observations: 0.
func (h Histogram) Quantile(q float64) (v float64, above bool) {
	if h.Count <= 0 || len(h.Buckets) == 0 {
		return 0, false
	}
	bs := append([]Bucket(nil), h.Buckets...)
	sort.Slice(bs, func(i, j int) bool { return bs[i].Le < bs[j].Le })
	rank := q * h.Count
	lower, below := 0.0, 0.0
	for _, b := range bs {
		if b.Count >= rank {
			if b.Count == below {
				return b.Le, false
			}
			return lower + (b.Le-lower)*(rank-below)/(b.Count-below), false
		}
		lower, below = b.Le, b.Count
	}
	return bs[len(bs)-1].Le, true
}

// Mean is the average observation (seconds), 0 without any.
func (h Histogram) Mean() float64 {
	if h.Count <= 0 {
		return 0
	}
	return h.Sum / h.Count
}
