package bench

import (
	"time"

	"github.com/graceguard/graceguard/test/harness/proc"
)

// Results is everything one run measured; docs/benchmarks.json is this,
// and docs/benchmarks.md and the SVG are rendered from it alone.
type Results struct {
	Machine  Machine   `json:"machine"`
	Settings Settings  `json:"settings"`
	Started  time.Time `json:"started"`
	// Seconds is the wall time of the whole run.
	Seconds float64 `json:"seconds"`

	GoBench []GoBench `json:"goBenchmarks"`
	Pods    []PodSize `json:"pods"`
	// ManagedFields compares the typical Pod's managedFields in the
	// fixture with those the API server itself records for it.
	ManagedFields *ManagedFieldsCheck `json:"managedFieldsCheck,omitempty"`
	Load          []LoadRun           `json:"load"`
	Creation      *Creation           `json:"podCreation,omitempty"`
	Namespaces    []NamespaceAt       `json:"namespaces"`
	Observer      *ObserverRun        `json:"observer,omitempty"`
	CPUHeld       *CPUHeldRun         `json:"cpuHeld,omitempty"`
	Targets       []Target            `json:"targets"`
	// Problems are phases that failed, in sentences; an empty list means
	// every phase ran. Caveats are conditions that make the numbers
	// pessimistic (a busy machine).
	Problems []string `json:"problems"`
	Caveats  []string `json:"caveats"`
}

// Machine is where the run happened.
type Machine struct {
	proc.Host
	// LoadAvgStart and LoadAvgEnd are /proc/loadavg (1, 5, 15 min).
	LoadAvgStart [3]float64 `json:"loadAvgStart"`
	LoadAvgEnd   [3]float64 `json:"loadAvgEnd"`
	// WaitedForLoad is how long the run waited for the load to drop.
	WaitedForLoadSeconds float64 `json:"waitedForLoadSeconds"`
	KubeAPIServer        string  `json:"kubeAPIServer"`
}

// Settings are the knobs of the run.
type Settings struct {
	BenchTime         string  `json:"benchTime"`
	BenchCount        int     `json:"benchCount"`
	Rates             []int   `json:"rates"`
	LoadSeconds       float64 `json:"loadSeconds"`
	WarmupSeconds     float64 `json:"warmupSeconds"`
	MaxWorkers        int     `json:"maxWorkers"`
	InFlight          int     `json:"inFlight"`
	Rounds            int     `json:"rounds"`
	PodsPerRound      int     `json:"podsPerRound"`
	Clients           int     `json:"clients"`
	SerialPods        int     `json:"serialPods"`
	NamespaceLevels   []int   `json:"namespaceLevels"`
	NamespaceRate     int     `json:"namespaceRate"`
	NamespaceSeconds  float64 `json:"namespaceSeconds"`
	ObserverPods      int     `json:"observerPods,omitempty"`
	ObserverUntreated int     `json:"observerUntreated,omitempty"`
	ObserverWorkloads int     `json:"observerWorkloads,omitempty"`
	ObserverRate      int     `json:"observerRate,omitempty"`
	ObserverSeconds   float64 `json:"observerSeconds,omitempty"`
}

// GoBench is one line of `go test -bench` output.
type GoBench struct {
	Package     string  `json:"package"`
	Name        string  `json:"name"`
	Iterations  int64   `json:"iterations"`
	NsPerOp     float64 `json:"nsPerOp"`
	BytesPerOp  float64 `json:"bytesPerOp"`
	AllocsPerOp float64 `json:"allocsPerOp"`
	MBPerSec    float64 `json:"mbPerSec,omitempty"`
	// Extra holds b.ReportMetric values by unit (pod-bytes).
	Extra map[string]float64 `json:"extra,omitempty"`
	// NsPerOpRuns are the times of every -count repetition; the fields
	// above are those of the median one.
	NsPerOpRuns []float64 `json:"nsPerOpRuns,omitempty"`
}

// PodSize is the JSON size of a fixture Pod and of its AdmissionReview.
type PodSize struct {
	Name       string `json:"name"`
	Containers int    `json:"containers"`
	EnvVars    int    `json:"envVars"`
	// PodBytes is the Pod as the API server sends it to admission,
	// managedFields included; SpecBytes is the same Pod without them.
	PodBytes    int `json:"podBytes"`
	SpecBytes   int `json:"specBytes"`
	ReviewBytes int `json:"reviewBytes"`
}

// Server names in load runs.
const (
	ServerGraceguard = "graceguard"
	ServerBaseline   = "baseline"
)

// LoadRun is one open-loop (or, for Rate 0, max-throughput) run against one server.
type LoadRun struct {
	Server string `json:"server"`
	// Rate is the offered rate in requests per second; 0 is the
	// max-throughput run (Workers closed-loop workers).
	Rate    int     `json:"rate"`
	Workers int     `json:"workers,omitempty"`
	Seconds float64 `json:"seconds"`
	// Namespaces is set for the runs of the namespace sweep.
	Namespaces int `json:"namespaces,omitempty"`
	Requests   int `json:"requests"`
	Errors     int `json:"errors"`
	// ErrorSamples are a few distinct error messages.
	ErrorSamples []string `json:"errorSamples,omitempty"`
	// Throughput is successful answers per second.
	Throughput float64    `json:"throughput"`
	Latency    Percentile `json:"latencyMs"`
	// CPUSeconds is the server process's CPU time during the run; Cores is
	// that over the wall time; CPUPerRequestUs is per answered request.
	CPUSeconds      float64 `json:"cpuSeconds"`
	Cores           float64 `json:"cores"`
	CPUPerRequestUs float64 `json:"cpuPerRequestUs"`
	// PeakRSSMiB is VmHWM over the run (reset before it); RSSMiB is VmRSS after.
	PeakRSSMiB float64 `json:"peakRSSMiB"`
	RSSMiB     float64 `json:"rssMiB"`
}

// Percentile is a latency distribution in milliseconds.
type Percentile struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// Creation is Pod creation through the API server, arm by arm (the arms
// of arms()): the same typical Pods, the same API server, one run.
type Creation struct {
	Rounds       int      `json:"rounds"`
	PodsPerRound int      `json:"podsPerRound"`
	Clients      int      `json:"clients"`
	Arms         []ArmRun `json:"arms"`
	// Webhooks are the API server's own counts, over the measured rounds,
	// of every webhook the arms register: calls, latency, and requests
	// their matchConditions kept from them.
	Webhooks []WebhookLatency `json:"webhooks"`
	// NativePolicy compares the Pods the native policy and graceguard make
	// of the typical Pod; OneMutationPolicy those the one-mutation policy
	// and graceguard make of the typical Pod without
	// graceguard.io/readiness-path (ArmNativeOneMutation,
	// ArmGraceguardNoProbe).
	NativePolicy      string `json:"nativePolicyVsGraceguard"`
	OneMutationPolicy string `json:"oneMutationPolicyVsGraceguard,omitempty"`
	// Serial are SerialPods creations by one client per arm of a few arms:
	// the latency a Pod's creation gains when the machine is not saturated.
	SerialPods int      `json:"serialPods"`
	Serial     []ArmRun `json:"serial,omitempty"`
}

// ArmRun is one arm's Pod creations.
type ArmRun struct {
	Arm  string `json:"arm"`
	Desc string `json:"description"`
	Pods int    `json:"pods"`
	// Seconds is the wall time of the arm's rounds; PodsPerSec the Pods
	// created over it; RoundPodsPerSec the rate of each round, RoundP99
	// its p99 (ms).
	Seconds         float64    `json:"seconds"`
	PodsPerSec      float64    `json:"podsPerSec"`
	RoundPodsPerSec []float64  `json:"roundPodsPerSec"`
	RoundP99        []float64  `json:"roundP99Ms,omitempty"`
	Latency         Percentile `json:"latencyMs"`
	Errors          int        `json:"errors"`
	// Mutated counts the created Pods carrying the budget record;
	// WantMutated says whether the arm should make all or none.
	Mutated     int  `json:"mutated"`
	WantMutated bool `json:"wantMutated"`
	// Webhook is the process the arm calls, CallsPerPod how many calls
	// the API server made to it per Pod.
	Webhook     string  `json:"webhook,omitempty"`
	CallsPerPod float64 `json:"webhookCallsPerPod"`
	// CPUMsPerPod is the CPU time each process spent per created Pod.
	CPUMsPerPod map[string]float64 `json:"cpuMsPerPod"`
}

// WebhookLatency is a webhook's admission histogram as the API server kept it.
type WebhookLatency struct {
	Name  string `json:"name"`
	Count uint64 `json:"count"`
	// Skipped counts the requests a matchCondition kept from the webhook.
	Skipped uint64 `json:"skipped"`
	// P50Le and P99Le are the upper bounds (seconds) of the buckets holding
	// the 50th and 99th percentile.
	P50Le float64 `json:"p50LeSeconds"`
	P99Le float64 `json:"p99LeSeconds"`
	// MeanMs is sum/count.
	MeanMs float64 `json:"meanMs"`
}

// NamespaceAt is graceguard's cost with this many namespaces in the cluster
// (and so in its namespace cache).
type NamespaceAt struct {
	Namespaces int `json:"namespaces"`
	// Lookup is webhook.NewNamespaceLookup over a controller-runtime
	// informer cache of the API server's namespaces, as pkg/server builds
	// it, measured in this process with testing.Benchmark.
	LookupNsPerOp     float64 `json:"lookupNsPerOp"`
	LookupAllocsPerOp int64   `json:"lookupAllocsPerOp"`
	LookupBytesPerOp  int64   `json:"lookupBytesPerOp"`
	// HeapMiB is the bench process's live heap after a GC, which holds
	// the same namespace cache: its growth between levels is what the
	// cache costs per namespace.
	HeapMiB float64 `json:"heapMiB"`
	// Load is the real webhook at NamespaceRate.
	Load *LoadRun `json:"load,omitempty"`
}

// Target is one of the performance goals and whether this run met it.
type Target struct {
	Goal     string `json:"goal"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
	// Known is false when the run could not measure it.
	Known bool `json:"known"`
	// Why explains a missed target from this run's own numbers.
	Why string `json:"why,omitempty"`
}

// ManagedFieldsCheck compares JSON sizes of the typical Pod's managedFields.
type ManagedFieldsCheck struct {
	FixtureBytes   int `json:"fixtureBytes"`
	APIServerBytes int `json:"apiServerBytes"`
}

// ObserverRun is graceguard's shutdown observer (the real `webhook
// observe` process) beside a default controller-runtime cache of every Pod
// (test/bench/podcache), in one cluster.
type ObserverRun struct {
	TreatedPods   int `json:"treatedPods"`
	UntreatedPods int `json:"untreatedPods"`
	Workloads     int `json:"workloads"`
	Clients       int `json:"clients"`
	// FlushSeconds is the observer's --flush-interval.
	FlushSeconds           float64 `json:"flushSeconds"`
	UntreatedCreateSeconds float64 `json:"untreatedCreateSeconds"`
	TreatedCreateSeconds   float64 `json:"treatedCreateSeconds"`
	// Steps are both processes' memory as the cluster fills.
	Steps []ObserverStep `json:"steps"`
	Churn *Churn         `json:"churn,omitempty"`
}

// ObserverStep is both processes' memory at one point.
type ObserverStep struct {
	Name     string     `json:"name"`
	Observer ProcMemory `json:"observer"`
	AllPods  ProcMemory `json:"allPodsCache"`
}

// ProcMemory is one process's cache size and memory.
type ProcMemory struct {
	// CachedPods is the process's own gauge of the Pods it caches.
	CachedPods int `json:"cachedPods"`
	// RSSMiB is VmRSS; HeapInuseMiB is go_memstats_heap_inuse_bytes.
	RSSMiB       float64 `json:"rssMiB"`
	HeapInuseMiB float64 `json:"heapInuseMiB"`
}

// Churn is treated Pods deleted at a fixed rate, each replaced.
type Churn struct {
	TargetRate int `json:"targetRate"`
	// Seconds is the window deletions were started in; DrainSeconds how
	// long the last ones took after it.
	Seconds      float64 `json:"seconds"`
	DrainSeconds float64 `json:"drainSeconds"`
	// Started deletions in the window; Rate is Started per second of the
	// configured window; Late counts those that started more than one
	// interval after they were due (no client was free).
	Started     int     `json:"started"`
	Late        int     `json:"late"`
	Deletions   int     `json:"deletions"`
	Rate        float64 `json:"rate"`
	Errors      int     `json:"errors"`
	ErrorSample string  `json:"errorSample,omitempty"`
	Observer    ProcCPU `json:"observer"`
	AllPods     ProcCPU `json:"allPodsCache"`
	// Recorded is the sum of the reports' status.observed, RecordedAfterSeconds
	// how long after the churn it was read (when it reached Deletions, or 60 s).
	Recorded             int64   `json:"recorded"`
	Reports              int     `json:"reports"`
	Kills                int64   `json:"kills"`
	RecordedAfterSeconds float64 `json:"recordedAfterSeconds"`
}

// ProcCPU is a process's CPU and peak memory over the churn.
type ProcCPU struct {
	CPUSeconds       float64 `json:"cpuSeconds"`
	Cores            float64 `json:"cores"`
	CPUMsPerDeletion float64 `json:"cpuMsPerDeletion"`
	PeakRSSMiB       float64 `json:"peakRSSMiB"`
}

// CPUHeldRun is one webhook replica held by the kernel to its CPU request
// (and to a share of it, and unlimited) while Pods are created through a
// real kube-apiserver calling it through the chart's registrations
// (PhaseCPUHeld). It records its own run: it can be measured alone and
// merged into a document of an earlier run (bench -phases cpu-held).
type CPUHeldRun struct {
	Started       time.Time  `json:"started"`
	Seconds       float64    `json:"seconds"`
	LoadAvgStart  [3]float64 `json:"loadAvgStart"`
	LoadAvgEnd    [3]float64 `json:"loadAvgEnd"`
	KubeAPIServer string     `json:"kubeAPIServer"`
	// RequestMillicores is the chart's CPU request (this checkout's), or
	// -held-cpu; the cells hold every variant to the same quotas.
	RequestMillicores int     `json:"requestMillicores"`
	Creators          []int   `json:"creators"`
	CellSeconds       float64 `json:"cellSeconds"`
	WarmupSeconds     float64 `json:"warmupSeconds"`
	// Rounds is how many times every cell was measured (0 in runs before
	// rounds: one).
	Rounds   int           `json:"rounds,omitempty"`
	Variants []HeldVariant `json:"variants"`
	Cells    []HeldCell    `json:"cells"`
}

// HeldVariant is a webhook binary and the chart it runs with.
type HeldVariant struct {
	// Name is HeldThis or HeldBefore; Ref the git revision of HeldBefore,
	// Commit the commit measured.
	Name   string `json:"name"`
	Ref    string `json:"ref,omitempty"`
	Commit string `json:"commit"`
	// Args and Env are the webhook's, from its chart (the flags that only
	// connect it here left out); RequestMillicores its chart's CPU request.
	Args              []string `json:"args"`
	Env               []string `json:"env"`
	RequestMillicores int      `json:"requestMillicores"`
}

// HeldCell is one variant at one CPU setting and number of creators.
type HeldCell struct {
	Variant string `json:"variant"`
	// Round counts from 0.
	Round int `json:"round,omitempty"`
	// Millicores is the CPU quota (0: unlimited).
	Millicores int `json:"millicores"`
	Creators   int `json:"creators"`
	// Seconds runs from the first creation to the last answer.
	Seconds float64 `json:"seconds"`
	// Attempts are the creations made, Created those the API server
	// accepted (Unmutated of them without graceguard's record: the
	// mutating call failed, failurePolicy Ignore), Refused those it
	// refused (the validating call failed, failurePolicy Fail).
	Attempts   int     `json:"attempts"`
	Created    int     `json:"created"`
	Refused    int     `json:"refused"`
	Unmutated  int     `json:"unmutated"`
	PodsPerSec float64 `json:"podsPerSec"`
	// Goodput is the creations answered with graceguard's changes within
	// the measured window, whenever they started, per second of it: what
	// the replica got done in time. PodsPerSec divides the creations
	// started in the window by the time until the last of them answered,
	// which counts the queue left at the window's end (a second or more
	// with 64 creators) as time, and so reads lower the more creators wait.
	Goodput float64    `json:"goodputPerSec"`
	Latency Percentile `json:"latencyMs"`
	// Shed counts the reviews the webhook answered 429, Expired those
	// whose deadline passed before they were decided, HandshakesAborted
	// the TLS handshakes it cut off, Connections the connections it
	// accepted (its own metrics; the "before" variant may not count them:
	// -1).
	Shed              int `json:"shed"`
	Expired           int `json:"expired"`
	HandshakesAborted int `json:"handshakesAborted"`
	Connections       int `json:"connections"`
	// ReadyzProbes were made as the kubelet makes them (the chart's period
	// and timeout); ReadyzFailed of them failed.
	ReadyzProbes int `json:"readyzProbes"`
	ReadyzFailed int `json:"readyzFailed"`
	// Cores is the webhook's CPU time over the wall time; the kernel held
	// it back in ThrottledPeriods periods, ThrottledSeconds in all.
	Cores            float64 `json:"cores"`
	ThrottledPeriods int64   `json:"throttledPeriods"`
	ThrottledSeconds float64 `json:"throttledSeconds"`
	ErrorSample      string  `json:"errorSample,omitempty"`
	// Calls are the API server's calls to the webhooks over the cell, by
	// webhook and HTTP code (0: no answer, the call timed out or failed).
	Calls map[string]int `json:"apiServerCalls,omitempty"`
}
