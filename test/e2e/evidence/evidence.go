// Package evidence is what one run of the e2e suite (test/e2e) measured and
// asserted, as JSON, and its renderings: docs/e2e.md (tables) and a
// timeline picture (SVG) of one Pod deletion.
//
// Invariant: every number in a rendering comes from a Run; the renderers
// add prose and layout, never figures. A scenario that did not run is
// rendered as "not run", a failed check as failed, with what was observed.
// Times of a deletion are seconds from the client's delete call, measured
// on the node's clock (the apps log timestamps from the same host the test
// process runs on).
package evidence

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"time"
)

// Schema is bumped when a field changes meaning.
const Schema = 1

// Secs is a duration in seconds, rounded to milliseconds in JSON.
type Secs float64

// S converts a duration.
func S(d time.Duration) Secs { return Secs(d.Seconds()) }

// MarshalJSON rounds to milliseconds.
func (s Secs) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("%.3f", math.Round(float64(s)*1000)/1000)), nil
}

func (s Secs) String() string { return fmt.Sprintf("%.2fs", float64(s)) }

// At is a moment of a deletion, in seconds after the delete call; nil when
// it was not observed.
type At = *Secs

// AtOf returns an At for a measured moment.
func AtOf(d time.Duration) At { s := S(d); return &s }

// Check is one assertion and what was observed.
type Check struct {
	Name   string `json:"name"`
	Want   string `json:"want"`
	Got    string `json:"got"`
	Passed bool   `json:"passed"`
}

// Checks is a scenario's assertions in the order they were made.
type Checks []Check

// Add records a check and returns ok.
func (c *Checks) Add(name, want string, ok bool, gotFormat string, args ...any) bool {
	*c = append(*c, Check{Name: name, Want: want, Got: fmt.Sprintf(gotFormat, args...), Passed: ok})
	return ok
}

// Failed lists the failed checks as "name: want W, got G".
func (c Checks) Failed() []string {
	var out []string
	for _, x := range c {
		if !x.Passed {
			out = append(out, fmt.Sprintf("%s: want %s, got %s", x.Name, x.Want, x.Got))
		}
	}
	return out
}

// Run is one run of the suite.
type Run struct {
	Schema   int       `json:"schema"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Passed is true when every spec passed and none was skipped.
	Passed bool `json:"passed"`

	Env    Env     `json:"env"`
	Specs  []Spec  `json:"specs"`
	Runner *Runner `json:"runner,omitempty"`

	Install     *Install     `json:"install,omitempty"`
	Lab         *Deletion    `json:"lab,omitempty"`
	Control     *Deletion    `json:"control,omitempty"`
	Rollout     *Rollout     `json:"rollout,omitempty"`
	Hook        *Hook        `json:"hookLongerThanGrace,omitempty"`
	SelfRollout *SelfRollout `json:"selfRollout,omitempty"`
	MeshProxy   *MeshProxy   `json:"meshProxy,omitempty"`
	Tune        *Tune        `json:"tuneFromEvidence,omitempty"`
	Hostile     *Hostile     `json:"hostileTenant,omitempty"`
	Native      *Native      `json:"istioNativeSidecar,omitempty"`
	BrokenHook  *BrokenHook  `json:"brokenHook,omitempty"`
	Queue       *Queue       `json:"queueConsumer,omitempty"`
	Alerts      *Alerts      `json:"alerts,omitempty"`
	Ingress     *Ingress     `json:"realIngress,omitempty"`
	Drain       *Drain       `json:"nodeDrain,omitempty"`
	Degrade     *Degrade     `json:"degrade,omitempty"`
	DBSidecar   *DBSidecar   `json:"databaseSidecar,omitempty"`
	// MeasureRouting is scenario 17.
	MeasureRouting *MeasureRouting `json:"measureRouting,omitempty"`
	ArgoRollout    *ArgoRollout    `json:"argoRollout,omitempty"`
}

// Env is what the run ran on.
type Env struct {
	Kubernetes     string `json:"kubernetes"`
	Kubelet        string `json:"kubelet"`
	Runtime        string `json:"containerRuntime"`
	Kernel         string `json:"kernel"`
	OSImage        string `json:"osImage"`
	NodeCPUs       string `json:"nodeCPUs"`
	Go             string `json:"go"`
	GitCommit      string `json:"gitCommit"`
	GitDirty       bool   `json:"gitDirty"`
	WebhookImage   string `json:"webhookImage"`
	WebhookDigest  string `json:"webhookDigest"`
	DrainappImage  string `json:"drainappImage"`
	DrainappDigest string `json:"drainappDigest"`
	TcpproxyImage  string `json:"tcpproxyImage,omitempty"`
	TcpproxyDigest string `json:"tcpproxyDigest,omitempty"`
	HostileImage   string `json:"hostileImage,omitempty"`
	HostileDigest  string `json:"hostileDigest,omitempty"`
	// NativeproxyImage carries a static busybox (its sh and sleep run
	// graceguard's wrapped hook): Busybox is its version line.
	NativeproxyImage  string `json:"nativeproxyImage,omitempty"`
	NativeproxyDigest string `json:"nativeproxyDigest,omitempty"`
	Busybox           string `json:"busybox,omitempty"`
	// DrainappDistroless is the drain app without /bin/sleep (scenario 10).
	DrainappDistroless       string `json:"drainappDistrolessImage,omitempty"`
	DrainappDistrolessDigest string `json:"drainappDistrolessDigest,omitempty"`
	// QueueImage is the queue server and its consumer (scenario 11).
	QueueImage   string `json:"queueImage,omitempty"`
	QueueDigest  string `json:"queueDigest,omitempty"`
	ClusterOwned bool   `json:"clusterStartedBySuite"`
}

// Spec is one Ginkgo spec's outcome.
type Spec struct {
	Name     string `json:"name"`
	State    string `json:"state"` // passed, failed, skipped, interrupted, ...
	Duration Secs   `json:"durationSeconds"`
	Failure  string `json:"failure,omitempty"`
	// Graceguard is the state of graceguard's Pods when the spec failed
	// (phase, readiness, restarts, last termination) and the namespace's
	// latest warnings: a failure on a machine nobody can log into still
	// says whether graceguard was serving.
	Graceguard string `json:"graceguard,omitempty"`
}

// Runner is what the runner (make e2e) adds: the cluster's lifetime.
type Runner struct {
	Build     Secs     `json:"buildSeconds"` // go test -c, concurrent with Up
	Up        Secs     `json:"upSeconds"`
	Test      Secs     `json:"testSeconds"`
	Down      Secs     `json:"downSeconds"`
	Total     Secs     `json:"totalSeconds"`
	Leftovers []string `json:"leftoversAfterDown"`
	ExitCode  int      `json:"testExitCode"`
}

// Install is scenario 0: the chart installed with the Helm SDK.
type Install struct {
	Release      string   `json:"release"`
	Namespace    string   `json:"namespace"`
	Chart        string   `json:"chart"`
	Image        string   `json:"image"`
	Replicas     int      `json:"replicas"`
	Webhooks     []string `json:"webhooks"`
	HelmInstall  Secs     `json:"helmInstallSeconds"`
	CABundle     Secs     `json:"caBundleInjectedSeconds"`
	ReplicasUp   Secs     `json:"replicasReadySeconds"`
	DryRunMutate Secs     `json:"dryRunMutatedSeconds"`
	DryRunBudget string   `json:"dryRunBudget"`
	// CertsMounted tells, per replica, when its rotator filled the Secret
	// and when the kubelet had mounted it (from the webhook's log).
	CertsMounted []string `json:"certsMounted"`
	// DryRunOutcomes are the answers to dry-run creates in an opted-in
	// namespace before graceguard served.
	DryRunOutcomes []Outcome `json:"dryRunOutcomesBeforeServing,omitempty"`
	Checks         Checks    `json:"checks"`
}

// Outcome is one kind of answer, how often and when it came (seconds after
// the install started).
type Outcome struct {
	Outcome string `json:"outcome"`
	Count   int    `json:"count"`
	First   Secs   `json:"first"`
	Last    Secs   `json:"last"`
}

// LogLine is one structured line of the drain app.
type LogLine struct {
	At     Secs   `json:"at"` // after the delete call (negative: before)
	TS     string `json:"ts"`
	Event  string `json:"event"`
	Active *int   `json:"active,omitempty"`
}

// Timeline is the deletion pkg/budget predicts (seconds after delete).
type Timeline struct {
	Hook     Secs `json:"hook"`
	SIGTERM  Secs `json:"sigterm"`
	Drained  Secs `json:"drained"`
	Exited   Secs `json:"exited"`
	Deadline Secs `json:"sigkillDeadline"`
}

// Deletion is one Pod deleted during an admitted request (scenarios 1, 2).
type Deletion struct {
	Namespace   string            `json:"namespace"`
	OptedIn     bool              `json:"optedIn"`
	Pod         string            `json:"pod"`
	PodIP       string            `json:"podIP"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Budget      string            `json:"budget,omitempty"`
	Grace       int64             `json:"terminationGracePeriodSeconds"`
	PreStop     string            `json:"preStop"`
	Readiness   string            `json:"readinessProbe"`
	Liveness    string            `json:"livenessProbe"`
	Request     Secs              `json:"requestSeconds"`
	Expected    *Timeline         `json:"expected,omitempty"`

	// Moments, seconds after the delete call; nil: not observed.
	Admitted         At `json:"admitted"` // the app's work_started
	EndpointNotReady At `json:"endpointNotReady"`
	SIGTERM          At `json:"sigterm"`
	WorkCompleted    At `json:"workCompleted"`
	ShutdownComplete At `json:"shutdownComplete"`
	ClientDone       At `json:"clientDone"`
	PodGone          At `json:"podGone"`

	EndpointConditions string    `json:"endpointConditions"`
	Client             string    `json:"client"` // "200 completed", "error: EOF", ...
	LateRequest        string    `json:"lateRequest,omitempty"`
	LateRequestAt      At        `json:"lateRequestAt,omitempty"`
	ExitCode           *int32    `json:"exitCode,omitempty"`
	LogOrder           []string  `json:"logOrder"`
	Logs               []LogLine `json:"logs"`
	Checks             Checks    `json:"checks"`
}

// Rollout is scenario 3: a rollout restart under load, per arm.
type Rollout struct {
	RouterLag     Secs   `json:"routerLagSeconds"`
	Rate          int    `json:"requestsPerSecond"`
	Work          Secs   `json:"workSeconds"`
	KeepAlives    bool   `json:"keepAlives"`
	ClientTimeout Secs   `json:"clientTimeoutSeconds"`
	Replicas      int    `json:"replicas"`
	Strategy      string `json:"strategy"`
	Arms          []*Arm `json:"arms"`
	Checks        Checks `json:"checks"`
}

// Arm is one Deployment restarted under load.
type Arm struct {
	Name       string         `json:"name"`
	Namespace  string         `json:"namespace"`
	OptedIn    bool           `json:"optedIn"`
	Budget     string         `json:"budget,omitempty"`
	PreStop    string         `json:"preStop"`
	Grace      int64          `json:"terminationGracePeriodSeconds"`
	Sent       int            `json:"sent"`
	Succeeded  int            `json:"succeeded"`
	Failed     int            `json:"failed"`
	Rejected   int            `json:"rejected503"`
	ConnErrors int            `json:"connectionErrors"`
	ByKind     map[string]int `json:"failuresByKind"`
	Rollout    Secs           `json:"rolloutSeconds"` // restart → old Pods gone
	Load       Secs           `json:"loadSeconds"`
	Replaced   int            `json:"podsReplaced"`
	// PerEndpoint are the failures of each endpoint that had any.
	PerEndpoint []EndpointFailures `json:"failuresPerEndpoint,omitempty"`
	Samples     []Failure          `json:"failureSamples,omitempty"`
}

// EndpointFailures is when one endpoint failed requests (seconds after the
// restart).
type EndpointFailures struct {
	Endpoint string `json:"endpoint"`
	Failed   int    `json:"failed"`
	First    Secs   `json:"first"`
	Last     Secs   `json:"last"`
}

// Failure is one failed request.
type Failure struct {
	At       Secs   `json:"at"` // after the restart
	Endpoint string `json:"endpoint"`
	Kind     string `json:"kind"`
	Detail   string `json:"detail"`
}

// Hook is scenario 4: a preStop hook longer than the grace period.
type Hook struct {
	PreStop       string    `json:"preStop"`
	Grace         int64     `json:"terminationGracePeriodSeconds"`
	Denied        string    `json:"deniedWith"` // the Deployment create's error
	DeniedPod     string    `json:"podDeniedWith"`
	Unguarded     *Deletion `json:"unguarded,omitempty"`
	Events        []string  `json:"events"`
	HookCutEvents int       `json:"hookCutEvents"`
	Checks        Checks    `json:"checks"`
}

// BrokenHook is scenario 10: a user's own preStop hook that fails (its
// binary is not in the image) or hangs, in an opted-in namespace.
type BrokenHook struct {
	Namespace string       `json:"namespace"`
	Arms      []*BrokenArm `json:"arms"`
	Checks    Checks       `json:"checks"`
}

// BrokenArm is one broken hook: what graceguard answered, the deletion,
// and what the kubelet and graceguard's observer reported.
type BrokenArm struct {
	Name     string `json:"name"`
	Workload string `json:"workload"`
	Image    string `json:"image"`
	PreStop  string `json:"preStop"`
	// Tried is a spec the user tried first and graceguard's answer to it.
	Tried       string    `json:"tried,omitempty"`
	TriedAnswer string    `json:"triedAnswer,omitempty"`
	Warnings    []string  `json:"admissionWarnings"`
	Deletion    *Deletion `json:"deletion,omitempty"`
	// A second request sent shortly before the grace ends (the hang arm).
	InFlight     string `json:"inFlight,omitempty"`
	InFlightSent At     `json:"inFlightSent,omitempty"`
	InFlightDone At     `json:"inFlightDone,omitempty"`
	// PodEvents are the kubelet's events about the Pod; HookEvents counts
	// its FailedPreStopHook events.
	PodEvents  []string `json:"podEvents"`
	HookEvents int      `json:"failedPreStopHookEvents"`
	// What a user reads: the report's sample, graceguard's events on the
	// workload, and `kubectl graceguard recommend`.
	Sample         string   `json:"sample,omitempty"`
	Observed       string   `json:"observed,omitempty"`
	WorkloadEvents []string `json:"workloadEvents"`
	Recommend      []string `json:"recommend"`
}

// Queue is scenario 11 (seed test 8): a queue consumer that acknowledges
// its batch after finishing it, deleted mid-batch; one queue and one
// consumer Deployment per arm, on the queue server of test/images/queue.
type Queue struct {
	Namespace string `json:"namespace"`
	// Server is the queue server's Pod; Visibility its visibility timeout.
	Server     string `json:"server"`
	Visibility Secs   `json:"visibilityTimeout"`
	// Messages are published to each arm's queue; the consumers lease
	// Batch at a time and work Work on each.
	Messages int  `json:"messagesPerQueue"`
	Batch    int  `json:"batch"`
	Work     Secs `json:"workPerMessage"`
	// AskedGrace is the terminationGracePeriodSeconds both arms' Pod
	// templates ask for; DeletedInto how far into the work of its second
	// message each consumer was deleted.
	AskedGrace  int64       `json:"askedGrace"`
	DeletedInto Secs        `json:"deletedInto"`
	Arms        []*QueueArm `json:"arms"`
	Checks      Checks      `json:"checks"`
}

// QueueArm is one consumer Deployment whose Pod was deleted mid-batch,
// and its queue's ledger once every message was acknowledged; moments are
// seconds after the delete call.
type QueueArm struct {
	Name     string `json:"name"`
	Queue    string `json:"queue"`
	Workload string `json:"workload"`
	OptedIn  bool   `json:"optedIn"`
	// Pod is the consumer deleted; Budget, Grace and PreStop are its own.
	Pod     string `json:"pod"`
	Budget  string `json:"budget,omitempty"`
	Grace   int64  `json:"terminationGracePeriodSeconds"`
	PreStop string `json:"preStop"`
	// From the deleted consumer's log: its SIGTERM with the messages in
	// hand (leased, not acknowledged) and unfinished among them, the
	// batches it leased after it, its last acknowledgement and its exit.
	SIGTERM            At  `json:"sigterm"`
	InHand             int `json:"inHand"`
	Unfinished         int `json:"unfinished"`
	LeasedAfterSIGTERM int `json:"leasedAfterSigterm"`
	LastAck            At  `json:"lastAck"`
	ShutdownComplete   At  `json:"shutdownComplete"`
	// ExitCode and Reason are its container's termination; PodGone when
	// the Pod object went away.
	ExitCode *int32 `json:"exitCode,omitempty"`
	Reason   string `json:"reason,omitempty"`
	PodGone  At     `json:"podGone"`
	// LogOrder is the consumer's log: leases, work done, SIGTERM,
	// acknowledgements, shutdown.
	LogOrder []string `json:"logOrder"`
	// Drained is the queue's last acknowledgement, every message done.
	Drained At          `json:"drained"`
	Ledger  QueueLedger `json:"ledger"`
	// Deliveries are every delivery of the arm's queue, in message order.
	Deliveries []QueueDelivery `json:"deliveries"`
}

// QueueLedger are the sums of a queue's ledger (test/images/queue).
type QueueLedger struct {
	Published    int `json:"published"`
	Deliveries   int `json:"deliveries"`
	Redeliveries int `json:"redeliveries"`
	Expired      int `json:"expiredLeases"`
	Acked        int `json:"acked"`
	Pending      int `json:"pending"`
	DoneOnce     int `json:"doneOnce"`
	DoneTwice    int `json:"doneTwice"`
	Lost         int `json:"lost"`
	WorkCut      int `json:"workCut"`
	RefusedAcks  int `json:"refusedAcks"`
}

// QueueDelivery is one delivery of a message: which consumer leased it,
// and when its work started, was done and acknowledged, or its lease ran
// out (nil: never).
type QueueDelivery struct {
	ID       string `json:"id"`
	N        int    `json:"n"`
	Consumer string `json:"consumer"`
	Leased   At     `json:"leased"`
	Started  At     `json:"started"`
	Done     At     `json:"done"`
	Acked    At     `json:"acked"`
	Expired  At     `json:"expired"`
}

// Ingress is scenario 13 (seed test 10): the traffic of scenarios 1-3
// through a real ingress controller, Traefik, run on the node as a host
// process with its Kubernetes Ingress provider and a ServiceAccount of its
// own, instead of the suite's stand-in router.
type Ingress struct {
	// Traefik is `traefik version`'s version; Binary how it was built.
	Traefik string `json:"traefik"`
	Binary  string `json:"binary"`
	// Provider is how Traefik reads the cluster; Entrypoint where clients
	// send their requests; Throttle its providersThrottleDuration.
	Provider   string `json:"provider"`
	Entrypoint string `json:"entrypoint"`
	Throttle   Secs   `json:"providersThrottleSeconds"`
	// Withdrawal is the measurement of Traefik's withdrawal delay; Rollout
	// and Held the rollout and held-request scenarios through it.
	Withdrawal *Withdrawal    `json:"withdrawal,omitempty"`
	Rollout    *Rollout       `json:"rollout,omitempty"`
	Held       []*HeldRequest `json:"heldRequests,omitempty"`
	Checks     Checks         `json:"checks"`
}

// Withdrawal is Traefik's withdrawal delay measured over repeated Pod
// deletions: the time from each delete call to the last request Traefik
// routed to that Pod (as the Pod's own answer names it).
type Withdrawal struct {
	Namespace string `json:"namespace"`
	Workload  string `json:"workload"`
	Replicas  int    `json:"replicas"`
	// Rate requests/s go through Traefik during the measurement; each Pod
	// gets about Rate/Replicas of them (the measurement's resolution).
	Rate    int    `json:"requestsPerSecond"`
	PreStop string `json:"preStop"`
	Budget  string `json:"budget,omitempty"`
	// Quiet is how long a deleted Pod must go without a request before the
	// round ends.
	Quiet  Secs              `json:"quietSeconds"`
	Rounds []WithdrawalRound `json:"rounds"`
	// Min, Median, P90 and Max are over the rounds' LastRouted.
	Min    Secs `json:"min"`
	Median Secs `json:"median"`
	P90    Secs `json:"p90"`
	Max    Secs `json:"max"`
	// Sent and Failed count every request of the measurement.
	Sent   int `json:"sent"`
	Failed int `json:"failed"`
	// Profile is the built-in routing profile that carries the measurement:
	// its routing delay and the margin it adds to the measured maximum.
	Profile        string `json:"profile"`
	ProfileRouting Secs   `json:"profileRoutingSeconds"`
	ProfileMargin  Secs   `json:"profileMarginSeconds"`
}

// WithdrawalRound is one deletion: the Pod, the requests Traefik still
// routed to it after the delete call and when the last one was sent.
type WithdrawalRound struct {
	Pod        string `json:"pod"`
	Routed     int    `json:"routedAfterDelete"`
	LastRouted At     `json:"lastRouted"`
	Failed     int    `json:"failed"`
}

// HeldRequest is one long request sent through Traefik to a lone Pod, the
// Pod deleted while the app works on it; moments are seconds after the
// delete call.
type HeldRequest struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	OptedIn   bool   `json:"optedIn"`
	Pod       string `json:"pod"`
	Budget    string `json:"budget,omitempty"`
	Grace     int64  `json:"terminationGracePeriodSeconds"`
	PreStop   string `json:"preStop"`
	Request   Secs   `json:"requestSeconds"`
	// Client is what the client got through Traefik, and when.
	Client     string `json:"client"`
	ClientDone At     `json:"clientDone"`
	// Late is a short request sent through Traefik once the app logged
	// SIGTERM.
	Late             string `json:"lateRequest,omitempty"`
	LateAt           At     `json:"lateRequestAt"`
	SIGTERM          At     `json:"sigterm"`
	ShutdownComplete At     `json:"shutdownComplete"`
	ExitCode         *int32 `json:"exitCode,omitempty"`
}

// Drain is scenario 14 (seed test 7): a node drain under load. A second
// node joins; each arm's Deployment runs on it behind a
// PodDisruptionBudget, and `kubectl drain` moves it to the first node while
// the router sends it load, one arm after the other.
type Drain struct {
	// Node is drained; its Pods' replacements go To the other node. Taint
	// keeps every other Pod off Node.
	Node  string `json:"node"`
	To    string `json:"to"`
	Taint string `json:"taint"`
	// NodeUp is how long the second node took to join Ready.
	NodeUp   Secs   `json:"nodeUpSeconds"`
	PDB      string `json:"podDisruptionBudget"`
	Command  string `json:"command"`
	Replicas int    `json:"replicas"`
	// The load, as scenario 3's.
	RouterLag     Secs        `json:"routerLagSeconds"`
	Rate          int         `json:"requestsPerSecond"`
	Work          Secs        `json:"workSeconds"`
	ClientTimeout Secs        `json:"clientTimeoutSeconds"`
	Arms          []*DrainArm `json:"arms"`
	Checks        Checks      `json:"checks"`
}

// DrainArm is one Deployment drained off the node under load: what the
// clients saw (Arm; its Rollout is the drain until every replacement is
// available), where its Pods ran, and what the drain did.
type DrainArm struct {
	Arm
	Before []PodNode `json:"podsBefore"`
	After  []PodNode `json:"podsAfter"`
	// DrainTime is kubectl drain's run; ExitCode its exit code.
	DrainTime Secs `json:"drainSeconds"`
	ExitCode  int  `json:"drainExitCode"`
	// Evicted are the Pods kubectl reported evicted; Refused the evictions
	// the PodDisruptionBudget refused (kubectl retries those).
	Evicted []string `json:"evicted"`
	Refused int      `json:"evictionsRefused"`
	// Floor is the fewest ready endpoints an EndpointSlice informer saw from
	// the drain's start until every replacement was available; Changes how
	// many EndpointSlice events it counted meanwhile.
	Floor   int         `json:"readyFloor"`
	Changes int         `json:"endpointSliceChanges"`
	Log     []DrainLine `json:"kubectlDrain"`
}

// Degrade is scenario 15 (issue 41): a rolling restart of a Deployment
// under load while graceguard's webhook replicas are SIGKILLed and kept
// down, then while they are held by the kernel to their CPU request and a
// CPU hog runs beside them. graceguard degrades, never blocks: no creation
// is refused for its sake, no hook outlasts its grace, and the Pods the
// native floors treated drain like the webhook's.
type Degrade struct {
	Replicas int `json:"replicas"`
	// The load, as scenario 3's.
	RouterLag     Secs          `json:"routerLagSeconds"`
	Rate          int           `json:"requestsPerSecond"`
	Work          Secs          `json:"workSeconds"`
	ClientTimeout Secs          `json:"clientTimeoutSeconds"`
	Arms          []*DegradeArm `json:"arms"`
	Checks        Checks        `json:"checks"`
}

// DegradeArm is one rollout: what the clients saw (Arm), what graceguard's
// replicas were put through, and what admission did with the new Pods.
type DegradeArm struct {
	Arm
	// Disruption says what graceguard went through.
	Disruption string `json:"disruption"`
	// Refused counts the ReplicaSets' FailedCreate events: Pod creations
	// the API server refused.
	Refused int `json:"creationsRefused"`
	// The new Pods by who gave them their budget: graceguard's webhook
	// (graceguard.io/treated: true), the mutating floor (floor), none.
	ByWebhook int `json:"byWebhook"`
	ByFloor   int `json:"byFloor"`
	NoBudget  int `json:"noBudget"`
	// HookOverGrace counts new Pods with a preStop hook as long as their
	// grace.
	HookOverGrace int `json:"hookOverGrace"`
	// Shed and FailOpen are graceguard's sheds (429) and the API server's
	// fail-open calls of graceguard's webhooks during the arm.
	Shed     float64 `json:"shed"`
	FailOpen float64 `json:"failOpen"`
	// Alert is GraceguardNoReadyWebhook's state seen during the arm.
	Alert string `json:"alert,omitempty"`
}

// DBSidecar is scenario 16 (issue 43): an app that reaches its database
// through a proxy sidecar on localhost for every request (a new connection
// each), restarted under load behind the router. The sidecar is
// test/images/tcpproxy, which exits at once on SIGTERM (cloud-sql-proxy
// without --max-sigterm-delay). Both arms are opted in with the same
// budget; arm A names the sidecar in graceguard.io/sidecars.
type DBSidecar struct {
	// Started and Env are the run's that recorded the scenario: a page
	// may show it beside a full run of another commit and other images.
	Started time.Time `json:"started"`
	Env     Env       `json:"env"`
	// Sidecar is the proxy container's name, Listen where the app reaches
	// it; Annotations are both arms' template annotations, but
	// graceguard.io/sidecars ("key: value").
	Sidecar     string   `json:"sidecarContainer"`
	Listen      string   `json:"listen"`
	Annotations []string `json:"templateAnnotations"`
	Replicas    int      `json:"replicas"`
	Strategy    string   `json:"strategy"`
	// The load, as scenario 3's; Work is spent at the database, through
	// the sidecar.
	RouterLag     Secs          `json:"routerLagSeconds"`
	Rate          int           `json:"requestsPerSecond"`
	Work          Secs          `json:"workSeconds"`
	ClientTimeout Secs          `json:"clientTimeoutSeconds"`
	Arms          []*SidecarArm `json:"arms"`
	Checks        Checks        `json:"checks"`
}

// SidecarArm is one Deployment of scenario 16 restarted under load: what
// the clients saw (Arm, whose PreStop is the app's), and how its old Pods
// shut down.
type SidecarArm struct {
	Arm
	// Named is graceguard.io/sidecars, "" when unset; Backend the
	// database's address (its Pod IP) the sidecar relays to.
	Named          string       `json:"sidecarsAnnotation"`
	Backend        string       `json:"backend"`
	SidecarPreStop string       `json:"sidecarPreStop"`
	Pods           []SidecarPod `json:"oldPods"`
}

// SidecarPod is one old Pod's shutdown as its app and its sidecar logged
// it; moments are seconds after the app's SIGTERM.
type SidecarPod struct {
	Pod string `json:"pod"`
	// AppActive is the app's admitted work at its SIGTERM; AppDone its
	// shutdown_complete.
	AppActive *int `json:"appActiveAtSigterm"`
	AppDone   At   `json:"appShutdownComplete"`
	// SidecarSIGTERM is when the sidecar logged SIGTERM, SidecarActive
	// the connections open through it then.
	SidecarSIGTERM At   `json:"sidecarSigterm"`
	SidecarActive  *int `json:"sidecarOpenAtSigterm"`
	// BackendFailed counts the app's backend_failed lines: database calls
	// it saw cut.
	BackendFailed int `json:"backendFailed"`
	// AppLogEnded and SidecarLogEnded: each log was read until its
	// container exited.
	AppLogEnded     bool `json:"appLogEnded"`
	SidecarLogEnded bool `json:"sidecarLogEnded"`
}

// MeasureRouting is scenario 17 (issue 42): kubectl graceguard
// measure-routing run on the node through the plugin's entry point, through
// Traefik (--url) and through the probe Service's ClusterIP with kube-proxy
// (--in-cluster: its Job runs the release image on the node), beside
// scenario 13's method through the same Traefik (Reference).
type MeasureRouting struct {
	// Started and Commit are the run's that recorded the scenario: a page
	// may show it beside a full run of another commit.
	Started time.Time `json:"started"`
	Commit  string    `json:"commit"`
	// Image is the probe's and the Job's; KubeProxy and Traefik what
	// routed the load.
	Image     string `json:"image"`
	KubeProxy string `json:"kubeProxy"`
	Traefik   string `json:"traefik"`
	// HostToClusterIP is the test process's request to a ClusterIP
	// Service and its answer.
	HostToClusterIP string        `json:"hostToClusterIP"`
	Reference       *Withdrawal   `json:"reference,omitempty"`
	Runs            []*RoutingRun `json:"runs"`
	Checks          Checks        `json:"checks"`
}

// RoutingRun is one run of measure-routing, as it printed it.
type RoutingRun struct {
	Name string `json:"name"`
	// Path is "traefik" or "clusterip"; Args the command line.
	Path     string   `json:"path"`
	Args     []string `json:"args"`
	ExitCode int      `json:"exitCode"`
	Duration Secs     `json:"durationSeconds"`
	// Delays are the withdrawals it printed, one per deletion; Min,
	// Median, P90 and Max its statistics.
	Delays []Secs `json:"delays"`
	Min    Secs   `json:"min"`
	Median Secs   `json:"median"`
	P90    Secs   `json:"p90"`
	Max    Secs   `json:"max"`
	Sent   int    `json:"sent"`
	Failed int    `json:"failed"`
	// Profile is the routing delay of the profile it printed; Output its
	// whole standard output (with its errors when it failed).
	Profile string `json:"profile"`
	Output  string `json:"output"`
}

// ArgoRollout is scenario 18 (issue 43): Argo Rollouts' real controller
// moves a Rollout of the drain app to a new revision through canary steps
// (setWeight and pause, no traffic router: replica counts split the
// traffic), under load behind the router; and graceguard's warning for a
// blue-green Rollout whose scaleDownDelaySeconds is shorter than its Pods'
// routing term.
type ArgoRollout struct {
	// Started and Env are the run's that recorded the scenario.
	Started time.Time `json:"started"`
	Env     Env       `json:"env"`
	// Version is the pinned module's; Controller what the binary built
	// from it says; CRDs the CRDs installed from that module; WebhookRule
	// graceguard's webhook and rule for Rollouts, "none" when absent.
	Version     string   `json:"version"`
	Controller  string   `json:"controller"`
	CRDs        []string `json:"crds"`
	WebhookRule string   `json:"webhookRule"`
	// Annotations are arm A's template annotations ("key: value");
	// Strategy and Steps the canary's.
	Annotations   []string    `json:"templateAnnotations"`
	Replicas      int         `json:"replicas"`
	Strategy      string      `json:"strategy"`
	Steps         []string    `json:"steps"`
	RouterLag     Secs        `json:"routerLagSeconds"`
	Rate          int         `json:"requestsPerSecond"`
	Work          Secs        `json:"workSeconds"`
	ClientTimeout Secs        `json:"clientTimeoutSeconds"`
	Arms          []*ArgoArm  `json:"arms"`
	Warning       ArgoWarning `json:"warning"`
	Checks        Checks      `json:"checks"`
}

// ArgoArm is one Rollout moved to a new revision under load: what the
// clients saw (Arm), and what Argo's controller did.
type ArgoArm struct {
	Arm
	// FromHash and ToHash are the stable ReplicaSet's pod-template hash
	// before and after; Phase and Revision the Rollout's at the end.
	FromHash string `json:"fromHash"`
	ToHash   string `json:"toHash"`
	Phase    string `json:"phase"`
	Revision string `json:"revision"`
	// StepEvents are the controller's RolloutStepCompleted events;
	// Progress each change of the Rollout's status it was seen in
	// (seconds after the new revision).
	StepEvents []string   `json:"stepEvents"`
	Progress   []ArgoStep `json:"progress"`
	// Pods are every Pod of the Rollout created during the scenario
	// (both revisions), with graceguard's budget annotation.
	Pods []ArgoPod `json:"pods"`
}

// ArgoStep is a Rollout's status when it changed.
type ArgoStep struct {
	At      Secs   `json:"at"`
	Phase   string `json:"phase"`
	Step    string `json:"currentStepIndex"`
	Message string `json:"message,omitempty"`
	Updated string `json:"updatedReplicas"`
	Ready   string `json:"readyReplicas"`
}

// ArgoPod is one Pod and its graceguard.io/budget ("" when none).
type ArgoPod struct {
	Pod    string `json:"pod"`
	Budget string `json:"budget"`
}

// ArgoWarning is the Rollout created to draw graceguard's scale-down
// warning, and the warnings the API server returned for it.
type ArgoWarning struct {
	Strategy string   `json:"strategy"`
	Routing  string   `json:"routing"`
	Warnings []string `json:"warnings"`
}

// PodNode is where a Pod ran.
type PodNode struct {
	Pod  string `json:"pod"`
	Node string `json:"node"`
}

// DrainLine is one line kubectl drain printed, seconds after it started.
type DrainLine struct {
	At   Secs   `json:"at"`
	Line string `json:"line"`
}

// SelfRollout is scenario 5: graceguard restarted while Pods are created.
type SelfRollout struct {
	Clients   int      `json:"clients"`
	Created   int      `json:"created"`
	Failed    int      `json:"failed"`
	Unmutated int      `json:"unmutated"`
	Errors    []string `json:"errorSamples,omitempty"`
	Rollout   Secs     `json:"rolloutSeconds"`
	Load      Secs     `json:"loadSeconds"`
	P50       Secs     `json:"createP50Seconds"`
	P99       Secs     `json:"createP99Seconds"`
	Max       Secs     `json:"createMaxSeconds"`
	OldPods   []string `json:"oldWebhookPods"`
	NewPods   []string `json:"newWebhookPods"`
	// Shutdown are the old replicas' own shutdown log lines.
	Shutdown []string `json:"webhookShutdownLog"`
	// Metrics are deltas of the apiserver's counters over the run, per
	// webhook name.
	Metrics []WebhookMetrics `json:"apiserverMetricDeltas"`
	Checks  Checks           `json:"checks"`
}

// Alerts is scenario 12: the chart's PrometheusRule loaded, unchanged,
// into a real Prometheus that scrapes graceguard on the node from before
// the install to the end of the suite, and what it said. Moments are
// seconds after Prometheus started.
type Alerts struct {
	// Prometheus and KubeStateMetrics are the version lines of the
	// binaries that ran.
	Prometheus       string `json:"prometheus"`
	KubeStateMetrics string `json:"kubeStateMetrics"`
	ScrapeInterval   Secs   `json:"scrapeIntervalSeconds"`
	// Rules are the alerts loaded ("name for 1m"), as Prometheus lists them.
	Rules []string `json:"rules"`
	// Targets are the scrape targets and their health at the check.
	Targets []string `json:"targets"`
	// Marks are the moments of the run the checks refer to.
	Marks []AlertMark `json:"marks"`
	// Episodes are every alert that was pending or firing during the run,
	// from Prometheus' ALERTS series.
	Episodes []AlertEpisode `json:"episodes"`
	// Refused is what a Pod create (dry run) in an opted-in namespace got
	// while no webhook replica was ready.
	Refused string `json:"refusedWithoutReplica,omitempty"`
	Checks  Checks `json:"checks"`
}

// AlertMark is a named moment of the run.
type AlertMark struct {
	Name string `json:"name"`
	At   Secs   `json:"at"`
}

// AlertEpisode is one alert (name and labels) from its first evaluation as
// pending to its resolution; Firing is nil when it never fired, Resolved
// when it was still pending or firing at the end.
type AlertEpisode struct {
	Alert    string `json:"alert"`
	Labels   string `json:"labels"`
	Pending  At     `json:"pending"`
	Firing   At     `json:"firing"`
	Resolved At     `json:"resolved"`
}

// Tune is scenario 7: a budget shorter than the app's drain, observed by
// graceguard's observer, its recommendation applied, and the next rollout.
type Tune struct {
	Namespace     string       `json:"namespace"`
	Workload      string       `json:"workload"`
	Replicas      int          `json:"replicas"`
	Annotations   string       `json:"templateAnnotations"`
	Grace         int64        `json:"templateGrace"`
	Rate          int          `json:"requestsPerSecond"`
	Work          Secs         `json:"workSeconds"`
	RouterLag     Secs         `json:"routerLagSeconds"`
	ClientTimeout Secs         `json:"clientTimeoutSeconds"`
	Rounds        []*TuneRound `json:"rounds"`
	// Recommend is `kubectl graceguard recommend` after the first round,
	// RecommendYAML its -o yaml, applied server-side; RecommendAfter is
	// recommend after the last round.
	Recommend      string `json:"recommend"`
	RecommendYAML  string `json:"recommendYAML"`
	RecommendAfter string `json:"recommendAfter"`
	// Table is `kubectl get shutdownreports` after the last round.
	Table  []string `json:"reportTable"`
	Events []string `json:"workloadEvents"`
	// GarbageCollected: the report went away with the Deployment, in seconds.
	GarbageCollected At     `json:"reportGarbageCollected"`
	Checks           Checks `json:"checks"`
}

// TuneRound is one rollout of scenario 7 under load.
type TuneRound struct {
	Name   string `json:"name"`
	Budget string `json:"oldPodsBudget"`
	Grace  int64  `json:"oldPodsGrace"`
	// Sent, Succeeded, Failed and ByKind are the load's requests.
	Sent      int            `json:"sent"`
	Succeeded int            `json:"succeeded"`
	Failed    int            `json:"failed"`
	ByKind    map[string]int `json:"failuresByKind"`
	Rollout   Secs           `json:"rolloutSeconds"`
	// Observed and Kills are what the report gained in this round.
	Observed int64 `json:"observed"`
	Kills    int64 `json:"kills"`
	// Samples are the report's samples of this round's Pods.
	Samples []TuneSample `json:"samples"`
	// Recommended is the report's recommendation after the round.
	Recommended string `json:"recommended"`
}

// TuneSample is one observed shutdown, beside what the app itself logged.
type TuneSample struct {
	Pod      string `json:"pod"`
	Outcome  string `json:"outcome"`
	ExitCode int32  `json:"exitCode"`
	Drain    int64  `json:"observedDrainSeconds"`
	// AppDrain is sigterm to shutdown_complete in the app's own log
	// (nanoseconds); nil when the app never completed (killed).
	AppDrain At `json:"appDrainSeconds,omitempty"`
	// Withdrawal and WithdrawalSeconds are the observer's timing of the
	// control plane's part of the Pod's routing withdrawal.
	Withdrawal        string `json:"withdrawal,omitempty"`
	WithdrawalSeconds *int64 `json:"withdrawalSeconds,omitempty"`
}

// WebhookMetrics are the apiserver counters of one webhook.
type WebhookMetrics struct {
	Name      string  `json:"name"`
	Requests  float64 `json:"requests"`
	FailOpen  float64 `json:"failOpen"`
	Rejection float64 `json:"rejections"`
	// Skipped counts the requests a matchCondition kept from the webhook
	// (apiserver_admission_match_condition_exclusions_total).
	Skipped float64 `json:"skipped"`
}

// MeshProxy is scenario 6: Pods whose traffic enters through a naive
// proxy sidecar (exits at once on SIGTERM), deleted while requests run
// through it; one arm per name of the proxy container.
type MeshProxy struct {
	Requests int        `json:"requestsPerPod"`
	Request  Secs       `json:"requestSeconds"`
	Arms     []*MeshArm `json:"arms"`
	Checks   Checks     `json:"checks"`
}

// MeshArm is one Pod of scenario 6.
type MeshArm struct {
	Name         string `json:"name"`
	Pod          string `json:"pod"`
	Proxy        string `json:"proxyContainer"`
	Budget       string `json:"budget"`
	Grace        int64  `json:"terminationGracePeriodSeconds"`
	AppPreStop   string `json:"appPreStop"`
	ProxyPreStop string `json:"proxyPreStop"`
	Completed    int    `json:"completed"`
	Cut          int    `json:"cut"`
	// Clients are the requests' outcomes, as the client saw them.
	Clients []string `json:"clients"`
	// Moments, seconds after the delete call.
	AppSIGTERM       At `json:"appSigterm"`
	AppShutdown      At `json:"appShutdownComplete"`
	ProxySIGTERM     At `json:"proxySigterm"`
	LastClientAnswer At `json:"lastClientAnswer"`
	PodGone          At `json:"podGone"`
}

// Native is scenario 9: Pods shaped as Istio injects a native sidecar
// (init container istio-proxy, restartPolicy Always, preStop `pilot-agent
// request POST drain`), behind test/images/nativeproxy, deleted while the
// router, converging RouterLag late, still sends them requests.
type Native struct {
	RouterLag     Secs         `json:"routerLag"`
	Routing       Secs         `json:"routingDelay"`
	Rate          int          `json:"requestsPerSecond"`
	Work          Secs         `json:"requestWork"`
	ClientTimeout Secs         `json:"clientTimeout"`
	Arms          []*NativeArm `json:"arms"`
	Checks        Checks       `json:"checks"`
}

// NativeArm is one Pod of scenario 9; moments are seconds after its
// delete call.
type NativeArm struct {
	Name         string `json:"name"`
	Pod          string `json:"pod"`
	Budget       string `json:"budget"`
	Grace        int64  `json:"terminationGracePeriodSeconds"`
	AppPreStop   string `json:"appPreStop"`
	ProxyPreStop string `json:"proxyPreStop"`
	// Requests the router sent to the Pod before the delete call, and
	// after it (during the withdrawal), and how many of each failed.
	Before       int `json:"sentBefore"`
	BeforeFailed int `json:"failedBefore"`
	During       int `json:"sentDuringWithdrawal"`
	Lost         int `json:"lostDuringWithdrawal"`
	// ByKind: the lost requests by failure class; FirstLost and LastLost
	// when they were sent.
	ByKind    map[string]int `json:"lostByKind,omitempty"`
	FirstLost At             `json:"firstLost"`
	LastLost  At             `json:"lastLost"`
	// NoEndpoint: ticks after the router had dropped the Pod (not sent).
	NoEndpoint     int `json:"noEndpoint"`
	RouterDropped  At  `json:"routerDropped"`
	Drain          At  `json:"proxyDrain"`
	ListenerClosed At  `json:"proxyListenerClosed"`
	AppSIGTERM     At  `json:"appSigterm"`
	AppShutdown    At  `json:"appShutdownComplete"`
	ProxySIGTERM   At  `json:"proxySigterm"`
	PodGone        At  `json:"podGone"`
	// From the proxy's exit line: requests it relayed, and answered
	// while draining.
	ProxyRequests int `json:"proxyRequests"`
	ProxyDrained  int `json:"proxyDrained"`
}

// Hostile is scenario 8: a tenant whose ServiceAccount has RBAC only in its
// own two namespaces attacks graceguard from a Pod (test/images/hostile),
// through the API server and straight at the webhook replicas' Pod IPs,
// while the test process creates ordinary Pods in another opted-in
// namespace.
type Hostile struct {
	// Tenant is the attacker's ServiceAccount as a user name; Namespace its
	// opted-in namespace, Outside its namespace that did not opt in.
	Tenant    string `json:"tenant"`
	Namespace string `json:"namespace"`
	Outside   string `json:"outsideNamespace"`
	// Access is what the tenant may and may not do, as the API server
	// answered SubjectAccessReviews for it.
	Access []string `json:"access"`
	// Attack is the attacker's own account of what it sent (its last log
	// line).
	Attack *Attack `json:"attack"`
	// NamespaceUpdates counts the namespace admin's updates of the
	// tenant's opted-in namespace during the attack, each giving the next
	// of NamespaceKeys a value of NamespaceValueBytes.
	NamespaceUpdates    int      `json:"namespaceAnnotationUpdates"`
	NamespaceKeys       []string `json:"namespaceAnnotationKeys"`
	NamespaceValueBytes int      `json:"namespaceAnnotationValueBytes"`
	// Steady are the ordinary creates in another opted-in namespace during
	// the attack; After the same, one at a time, once the attacker is done.
	Steady *Steady `json:"steady"`
	After  *Steady `json:"after"`
	// Replicas are graceguard's webhook replicas and its observer.
	Replicas []*Replica `json:"replicas"`
	// Decisions are graceguard_admission_decisions_total over the attack,
	// summed over the webhook replicas.
	Decisions []Decision `json:"webhookDecisions"`
	// APIServer are the API server's admission counters over the attack,
	// per graceguard webhook.
	APIServer []WebhookMetrics `json:"apiserverMetricDeltas"`
	// ObserverSkipped is graceguard_observer_skipped_total over the attack,
	// by reason; OutsideReports the ShutdownReports in Outside afterwards.
	ObserverSkipped map[string]float64 `json:"observerSkipped"`
	OutsideReports  int                `json:"outsideReports"`
	// Events are the Warning events of graceguard's Pods and the node
	// (SystemOOM) during the attack, counted by reason and object.
	Events []string `json:"warningEvents"`
	// Endpoints are the webhook Service's ready endpoints through the
	// attack, as the API server's EndpointSlices said ("at: n ready"), and
	// NoEndpoint the seconds none was ready (every review then fails).
	Endpoints  []string `json:"endpointChanges,omitempty"`
	NoEndpoint Secs     `json:"noReadyEndpointSeconds"`
	// AttackerCPU is the CPU time the attacker's container used.
	AttackerCPU Secs `json:"attackerCPUSeconds"`
	// LoadBefore and LoadAfter are /proc/loadavg before and after.
	LoadBefore string `json:"loadBefore"`
	LoadAfter  string `json:"loadAfter"`
	Checks     Checks `json:"checks"`
}

// Attack is what the attacker sent, per class, as it counted it.
type Attack struct {
	Duration Secs `json:"durationSeconds"`
	// Connections is how many the floods try to hold open at once, ConnRate
	// how many they open a second at most, over every kind and replica.
	Connections int `json:"connectionsTarget"`
	ConnRate    int `json:"connectionRate"`
	// NoFile is RLIMIT_NOFILE in the attacker's container, before and
	// after it raised its soft limit.
	NoFile  string         `json:"noFile"`
	Classes []*AttackClass `json:"classes"`
	Floods  []*Flood       `json:"floods"`
	Errors  []string       `json:"errors,omitempty"`
}

// AttackClass is one class of requests through the API server.
type AttackClass struct {
	Name string `json:"name"`
	// Shapes are the request bodies it cycles through, "name (size)".
	Shapes  []string `json:"shapes"`
	Streams int      `json:"streams"`
	Sent    int      `json:"sent"`
	Bytes   int64    `json:"bytesSent"`
	Largest int      `json:"largestBody"`
	// Outcomes count the API server's answers by kind; Samples hold one
	// answer of each kind, clipped.
	Outcomes map[string]int    `json:"outcomes"`
	Samples  map[string]string `json:"samples,omitempty"`
	// First and Last are the first and last request's start, seconds after
	// the attack started, Ended when the last answer came; P50 and Max the
	// requests' durations.
	First Secs `json:"first"`
	Last  Secs `json:"last"`
	Ended Secs `json:"ended"`
	P50   Secs `json:"p50Seconds"`
	Max   Secs `json:"maxSeconds"`
}

// Flood is one kind of connection against one webhook replica.
type Flood struct {
	Kind   string `json:"kind"`
	Target string `json:"target"`
	// Opened connections (TCP connected, and for the TLS kinds the
	// handshake and first request done), Failed attempts, Closed: the
	// opened ones the server closed while the attacker held them.
	Opened int `json:"opened"`
	Failed int `json:"failed"`
	Closed int `json:"closedByServer"`
	// HeldPeak is the most the attacker held open at once.
	HeldPeak int `json:"heldPeak"`
	// FailSample is one failed attempt's error.
	FailSample string `json:"failSample,omitempty"`
}

// Steady are ordinary Pod creates in an opted-in namespace during the
// attack, at a steady rate, open loop.
type Steady struct {
	Namespace string  `json:"namespace"`
	Rate      float64 `json:"createsPerSecond"`
	// Seconds is how long the creates ran.
	Seconds   Secs     `json:"seconds"`
	Sent      int      `json:"sent"`
	Created   int      `json:"created"`
	Failed    int      `json:"failed"`
	Unmutated int      `json:"unmutated"`
	P50       Secs     `json:"p50Seconds"`
	P99       Secs     `json:"p99Seconds"`
	Max       Secs     `json:"maxSeconds"`
	Errors    []string `json:"errorSamples,omitempty"`
	// Causes counts the failed and unmutated creates by cause.
	Causes map[string]int `json:"causes,omitempty"`
	// HookSent are Pods among them whose preStop hook outlasts their grace:
	// graceguard must refuse each (HookRefused); HookWrong are the answers
	// that were not that refusal.
	HookSent    int      `json:"hookLongerThanGraceSent"`
	HookRefused int      `json:"hookLongerThanGraceRefused"`
	HookWrong   []string `json:"hookLongerThanGraceWrong,omitempty"`
}

// Replica is one of graceguard's Pods during the attack.
type Replica struct {
	Pod  string `json:"pod"`
	Role string `json:"role"` // webhook, observer
	// Limit is the container's memory limit; CgroupPeak its cgroup's
	// memory.max_usage_in_bytes, reset when the attack started;
	// CgroupFailcnt how often usage hit the limit (memory.failcnt, from
	// the same reset); OOMKills the cgroup's oom_kill count.
	Limit         int64 `json:"memoryLimitBytes"`
	CgroupPeak    int64 `json:"cgroupPeakBytes"`
	CgroupFailcnt int64 `json:"cgroupFailcnt"`
	OOMKills      int64 `json:"cgroupOOMKills"`
	// RSSPeak and HeapPeak are the highest process_resident_memory_bytes
	// and go_memstats_heap_inuse_bytes of its /metrics, scraped every
	// second (Scrapes of them answered).
	RSSPeak  int64 `json:"rssPeakBytes"`
	HeapPeak int64 `json:"heapInusePeakBytes"`
	Scrapes  int   `json:"scrapes"`
	// CPU is the CPU time its container used over the attack
	// (cpuacct.usage), -1 when not measured.
	CPU Secs `json:"cpuSeconds"`
	// Restarts and LastState are its container's after the attack.
	Restarts  int32  `json:"restarts"`
	LastState string `json:"lastState"`
	// Readyz counts the /readyz answers of a second-by-second check from
	// the node (as the kubelet's probe, timeout 1 s) that failed, of
	// ReadyzChecks; ReadyzSamples are their distinct answers.
	ReadyzChecks  int      `json:"readyzChecks,omitempty"`
	ReadyzFailed  int      `json:"readyzFailed,omitempty"`
	ReadyzSamples []string `json:"readyzSamples,omitempty"`
	// Webhook replicas: the most connections open at once (scraped),
	// evictions by state, refusals and aborted handshakes over the attack.
	ConnsPeak         float64            `json:"connectionsPeak,omitempty"`
	Evicted           map[string]float64 `json:"evicted,omitempty"`
	Refused           float64            `json:"refused,omitempty"`
	HandshakesAborted float64            `json:"handshakesAborted,omitempty"`
	// Observer: the most Pods in its cache (graceguard_observer_pods).
	CachedPodsPeak float64 `json:"cachedPodsPeak,omitempty"`
}

// Decision is one series of graceguard_admission_decisions_total.
type Decision struct {
	Webhook  string  `json:"webhook"`
	Decision string  `json:"decision"`
	Reason   string  `json:"reason"`
	Count    float64 `json:"count"`
}

// Read loads a Run.
func Read(path string) (*Run, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &Run{}
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// Write stores a Run as indented JSON.
func (r *Run) Write(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// scenarios lists the scenarios with their checks, in order.
func (r *Run) scenarios() []scenario {
	var out []scenario
	add := func(name, title string, ran bool, checks Checks) {
		out = append(out, scenario{name: name, title: title, ran: ran, checks: checks})
	}
	add("install", "0. Install with the Helm chart", r.Install != nil, checksOf(r.Install))
	add("lab", "1. Pod deleted during an admitted request, graceguard", r.Lab != nil, checksOfD(r.Lab))
	add("control", "2. Control: same app and request, no graceguard, short grace", r.Control != nil, checksOfD(r.Control))
	add("rollout", "3. Rollout restart under load", r.Rollout != nil, checksOfR(r.Rollout))
	add("hook", "4. preStop hook longer than grace", r.Hook != nil, checksOfH(r.Hook))
	add("self", "5. graceguard's own rollout", r.SelfRollout != nil, checksOfS(r.SelfRollout))
	add("mesh", "6. A naive proxy sidecar in front of the app", r.MeshProxy != nil, checksOfM(r.MeshProxy))
	add("tune", "7. Budgets from evidence: observe, recommend, apply", r.Tune != nil, checksOfT(r.Tune))
	add("hostile", "8. A hostile tenant against the webhook", r.Hostile != nil, checksOfX(r.Hostile))
	add("native", "9. Istio native sidecar: its drain waits for the routing window", r.Native != nil, checksOfN(r.Native))
	add("broken-hook", "10. A broken preStop hook: one fails, one hangs", r.BrokenHook != nil, checksOfB(r.BrokenHook))
	add("queue", "11. A queue consumer deleted mid-batch", r.Queue != nil, checksOfQ(r.Queue))
	// Runs from before this scenario existed have no alerts, and their
	// pages no such row.
	if r.Alerts != nil {
		add("alerts", "12. The chart's alerts in a real Prometheus", true, r.Alerts.Checks)
	}
	add("ingress", "13. Through a real ingress: Traefik", r.Ingress != nil, checksOfI(r.Ingress))
	add("drain", "14. A node drain under load, with a PodDisruptionBudget", r.Drain != nil, checksOfDr(r.Drain))
	// Runs from before this scenario existed have no such row.
	if r.Degrade != nil {
		add("degrade", "15. graceguard down or starved during a rollout", true, r.Degrade.Checks)
	}
	// Runs from before this scenario existed have no such row.
	if r.DBSidecar != nil {
		add("db-sidecar", "16. A database proxy sidecar named in graceguard.io/sidecars", true, r.DBSidecar.Checks)
	}
	// Runs from before this scenario existed have no such row.
	if r.MeasureRouting != nil {
		add("measure-routing", "17. kubectl graceguard measure-routing through Traefik and kube-proxy", true, r.MeasureRouting.Checks)
	}
	if r.ArgoRollout != nil {
		add("argo", "18. Argo Rollouts' real controller: a canary under load", true, r.ArgoRollout.Checks)
	}
	return out
}

type scenario struct {
	name, title string
	ran         bool
	checks      Checks
}

func (s scenario) passed() bool { return s.ran && len(s.checks) > 0 && len(s.checks.Failed()) == 0 }

func checksOf(i *Install) Checks {
	if i == nil {
		return nil
	}
	return i.Checks
}
func checksOfB(b *BrokenHook) Checks {
	if b == nil {
		return nil
	}
	return b.Checks
}
func checksOfI(i *Ingress) Checks {
	if i == nil {
		return nil
	}
	return i.Checks
}
func checksOfQ(q *Queue) Checks {
	if q == nil {
		return nil
	}
	return q.Checks
}
func checksOfD(d *Deletion) Checks {
	if d == nil {
		return nil
	}
	return d.Checks
}
func checksOfR(r *Rollout) Checks {
	if r == nil {
		return nil
	}
	return r.Checks
}
func checksOfH(h *Hook) Checks {
	if h == nil {
		return nil
	}
	return h.Checks
}
func checksOfM(m *MeshProxy) Checks {
	if m == nil {
		return nil
	}
	return m.Checks
}
func checksOfT(t *Tune) Checks {
	if t == nil {
		return nil
	}
	return t.Checks
}
func checksOfN(n *Native) Checks {
	if n == nil {
		return nil
	}
	return n.Checks
}

func checksOfX(h *Hostile) Checks {
	if h == nil {
		return nil
	}
	return h.Checks
}
func checksOfS(s *SelfRollout) Checks {
	if s == nil {
		return nil
	}
	return s.Checks
}

func checksOfDr(d *Drain) Checks {
	if d == nil {
		return nil
	}
	return d.Checks
}
