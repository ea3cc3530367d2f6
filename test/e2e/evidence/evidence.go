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
	ClusterOwned   bool   `json:"clusterStartedBySuite"`
}

// Spec is one Ginkgo spec's outcome.
type Spec struct {
	Name     string `json:"name"`
	State    string `json:"state"` // passed, failed, skipped, interrupted, ...
	Duration Secs   `json:"durationSeconds"`
	Failure  string `json:"failure,omitempty"`
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
func checksOfS(s *SelfRollout) Checks {
	if s == nil {
		return nil
	}
	return s.Checks
}
