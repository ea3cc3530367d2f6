package mutate

import (
	"slices"
	"time"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/flags"
)

// Where says on which objects, and in which of their maps, graceguard reads
// a key.
type Where uint8

const (
	// PodAnnotation: a Pod's annotations, or a Pod template's.
	PodAnnotation Where = 1 << iota
	// PodLabel: a Pod's labels, or a Pod template's.
	PodLabel
	// NamespaceAnnotation: a Namespace's annotations (defaults for its Pods).
	NamespaceAnnotation
	// NamespaceLabel: a Namespace's labels.
	NamespaceLabel
)

// Key is one label or annotation key graceguard reads. Keys is the one list
// of them: the webhook's decoder keeps exactly these of an object's labels
// and annotations (and skips the rest without reading them), the
// namespace cache keeps exactly these of a Namespace's, the size guard
// bounds each, and the tests generate hostile values for every one. A key
// graceguard reads that is not here is never seen: it cannot be forgotten
// by the bounds.
type Key struct {
	Name  string
	Where Where
	// Owner is who defines the key: "graceguard", "kubernetes", or a mesh.
	Owner string
	// MaxLength bounds the value graceguard reads. A longer value is a
	// finding (it is never parsed); the decoder keeps only a clipped copy
	// of it. Labels are bounded by their API limit (63), whose values
	// graceguard only compares.
	MaxLength int
	// Doc is what the docs say of a key users set (nil for the others):
	// make generate writes the annotation tables of README.md and
	// docs/annotations.md from it.
	Doc *KeyDoc
	// Proof says which values of this annotation the API server's one-call
	// proof accepts on a Pod carrying graceguard's record (docs/admission.md);
	// the zero Proof leaves such Pods to the validating webhook. pkg/cel
	// compiles it to CEL, make generate writes that into the chart, and
	// test/harness/chart's proof tests hold it to Validate.
	Proof Proof
	// Term is the budget term the key sets, if any.
	Term budget.Term
	// set reads a value of the key into the settings, or says what is
	// wrong with it (resolve). Nil for the keys read elsewhere: the
	// meshes' (readMesh), Kubernetes', graceguard's record and labels.
	set setter
}

// KeyDoc is the documentation of one key.
type KeyDoc struct {
	// Meaning is the docs/annotations.md sentence: what the value means
	// and which values are accepted. "{profiles}" stands for the built-in
	// routing profiles' names.
	Meaning string
	// Summary is the README's shorter sentence; "" leaves the key out of
	// the README's table.
	Summary string
	// Default is what applies when the key is unset; for a budget term
	// make generate writes the default of mutate.DefaultOptions instead.
	Default string
	// Flag is the webhook flag that sets the cluster's default, if any.
	Flag string
}

// MaxLabelValueLength is the API's limit on a label value (validated after
// the webhooks): a longer one is clipped, and never equals a value
// graceguard compares with.
const MaxLabelValueLength = 63

// MaxIstioProxyConfigLength bounds proxy.istio.io/config: a ProxyConfig in
// YAML, which can be longer than graceguard's own values.
const MaxIstioProxyConfigLength = 16 << 10

// MaxIstioStatusLength bounds sidecar.istio.io/status, which Istio writes
// (a JSON list of what it injected) and graceguard only tests for
// presence: the API's limit on all of an object's annotations together.
const MaxIstioStatusLength = 256 << 10

// LabelPodTemplateHash is the label a Deployment's ReplicaSet gives its
// Pods.
const LabelPodTemplateHash = "pod-template-hash"

// LabelRolloutsPodTemplateHash is the label an Argo Rollout's ReplicaSet
// gives its Pods (DefaultRolloutUniqueLabelKey), the ReplicaSet's name
// being the Rollout's and this hash.
const LabelRolloutsPodTemplateHash = "rollouts-pod-template-hash"

const (
	ownerGraceguard = "graceguard"
	ownerKubernetes = "kubernetes"
	ownerKnative    = "knative"
	// ownerArgoRollouts: Argo Rollouts.
	ownerArgoRollouts = "argo-rollouts"
)

// EnvRead are the environment variables graceguard reads, istio-proxy's and
// Knative's queue-proxy's: the webhook's decoder keeps only these of a
// container's env.
var EnvRead = slices.Concat(IstioExitEnv, KnativeEnv)

// Keys lists every label and annotation key graceguard reads.
var Keys = []Key{
	// graceguard's namespace labels.
	{Name: LabelInject, Where: NamespaceLabel, Owner: ownerGraceguard, MaxLength: MaxLabelValueLength},
	{Name: LabelMode, Where: NamespaceLabel, Owner: ownerGraceguard, MaxLength: MaxLabelValueLength, set: setMode},
	// The observer's label, which graceguard adds only where it is absent.
	{Name: LabelTreated, Where: PodLabel, Owner: ownerGraceguard, MaxLength: MaxLabelValueLength},

	// graceguard's annotations, in the order the docs list them. Those read
	// on Namespaces too are the defaults a Namespace may set
	// (NamespaceDefaultKeys).
	{Name: AnnotationRoutingDelay, Where: podOrNamespace, Owner: ownerGraceguard, MaxLength: MaxAnnotationValueLength,
		Doc: &KeyDoc{
			Meaning: "time for routing withdrawal (EndpointSlices, proxies, ingress, load balancers) to converge; becomes the preStop sleep, rounded up to whole seconds",
			Summary: "time for routing withdrawal to converge; becomes the preStop sleep",
		},
		Proof: Proof{Kind: ProofAtMostTerm},
		Term:  budget.Routing, set: setTerm(budget.Routing)},
	{Name: AnnotationRoutingProfile, Where: podOrNamespace, Owner: ownerGraceguard, MaxLength: MaxAnnotationValueLength,
		Doc: &KeyDoc{
			Meaning: "a routing profile: the routing delay (and grace floor) of what sits in front of the Pod, from a table with sources ([routing-profiles.md](routing-profiles.md)): {profiles}, or one the operators added. An explicit `routing-delay` wins; the floor stays. Any other name is denied with the list",
			Summary: "what sits in front of the Pod: {profiles} or an operator's; supplies the routing delay and any grace floor ([docs/routing-profiles.md](docs/routing-profiles.md))",
			Default: "none", Flag: flags.DefaultProfileFlag,
		},
		set: setProfile},
	{Name: AnnotationMaxWork, Where: podOrNamespace, Owner: ownerGraceguard, MaxLength: MaxAnnotationValueLength,
		Doc: &KeyDoc{
			Meaning: "longest admitted work that must finish after SIGTERM (request timeout, stream, job step); or `auto`: taken from the workload's observed shutdowns at each Pod's creation (see [max-work: auto](#max-work-auto))",
			Summary: "longest admitted work that must finish after SIGTERM; `auto`: from the workload's observed shutdowns (bounded by `graceguard.io/max-work-floor`, `-ceiling`)",
		},
		Proof: Proof{Kind: ProofTerm, Values: []string{MaxWorkAuto}},
		Term:  budget.Work, set: setMaxWork},
	{Name: AnnotationMaxWorkFloor, Where: podOrNamespace, Owner: ownerGraceguard, MaxLength: MaxAnnotationValueLength,
		Doc: &KeyDoc{
			Meaning: "the least value `max-work: auto` takes",
			Default: "the cluster default max-work",
		},
		set: setWorkBound(func(s *Settings) (*time.Duration, *at) { return &s.WorkFloor, &s.floorAt })},
	{Name: AnnotationMaxWorkCeiling, Where: podOrNamespace, Owner: ownerGraceguard, MaxLength: MaxAnnotationValueLength,
		Doc: &KeyDoc{
			Meaning: "the most `max-work: auto` takes",
			Default: "`2m`, or the cluster default max-work when longer",
		},
		set: setWorkBound(func(s *Settings) (*time.Duration, *at) { return &s.WorkCeiling, &s.ceilingAt })},
	{Name: AnnotationCleanup, Where: podOrNamespace, Owner: ownerGraceguard, MaxLength: MaxAnnotationValueLength,
		Doc:   &KeyDoc{Meaning: "closing pools, flushing telemetry", Summary: "closing pools, flushing telemetry"},
		Proof: Proof{Kind: ProofTerm},
		Term:  budget.Cleanup, set: setTerm(budget.Cleanup)},
	{Name: AnnotationSafetyMargin, Where: podOrNamespace, Owner: ownerGraceguard, MaxLength: MaxAnnotationValueLength,
		Doc:   &KeyDoc{Meaning: "slack for what is not measured", Summary: "slack for what is not measured"},
		Proof: Proof{Kind: ProofTerm},
		Term:  budget.Margin, set: setTerm(budget.Margin)},
	{Name: AnnotationPreStop, Where: podOrNamespace, Owner: ownerGraceguard, MaxLength: MaxAnnotationValueLength,
		Doc: &KeyDoc{
			Meaning: "`sleep`: native `lifecycle.preStop.sleep` (GA in 1.34); `exec`: `[\"sleep\",\"N\"]`, needs a `sleep` binary in the image (distroless and scratch images lack it: `prestop-binary-may-be-missing` warns where the image's name says so; a Windows Pod (`spec.os.name: windows`, or a node selector `kubernetes.io/os: windows`) gets the sleep action instead, as Windows images have no `sleep`, and the warning `windows-sleep-action` says so); `none`: no hook, the budget still applies and the app must keep serving for the routing delay after SIGTERM itself",
			Summary: "`sleep` (native sleep action), `exec` (`[\"sleep\",\"N\"]`; the sleep action on Windows Pods), `none` (no hook; budget still applies)",
			Default: "`sleep`", Flag: "--" + flags.PreStopHandler,
		},
		Proof: Proof{Kind: ProofOneOf, Values: []string{string(PreStopSleep), string(PreStopExec), string(PreStopNone)}},
		set:   setPreStopHandler},
	{Name: AnnotationContainers, Where: PodAnnotation, Owner: ownerGraceguard, MaxLength: MaxAnnotationValueLength,
		Doc: &KeyDoc{
			Meaning: "comma-separated containers to treat; may name native sidecars (`initContainers` with `restartPolicy: Always`)",
			Summary: "comma list of containers to treat (may name native sidecars)",
			Default: "every regular container",
		},
		set: setContainers},
	// Container names are the Pod's own: no namespace default. No Proof:
	// a Pod naming sidecars is left to the validating webhook, and the
	// mutating floor (pkg/cel) leaves it to the mutating one.
	{Name: AnnotationSidecars, Where: PodAnnotation, Owner: ownerGraceguard, MaxLength: MaxAnnotationValueLength,
		Doc: &KeyDoc{
			Meaning: "comma-separated containers that must outlive the app (a database proxy, Vault Agent, an OpenTelemetry collector). A regular container named here is no app container: it gets a preStop sleep as long as the app's whole shutdown (routing + work + cleanup), so its SIGTERM comes after the app is done; a preStop of its own is kept and must last that long. A native sidecar (`restartPolicy: Always`) needs nothing: Kubernetes stops it after the app. See [Sidecars](#sidecars)",
			Summary: "comma list of containers that must outlive the app: each gets a preStop sleep of the app's whole shutdown",
			Default: "none",
		},
		set: setSidecars},
	{Name: AnnotationReadinessPath, Where: podOrNamespace, Owner: ownerGraceguard, MaxLength: MaxAnnotationValueLength,
		Doc: &KeyDoc{
			Meaning: "HTTP path of a readiness probe to add where a treated container has none: `periodSeconds: 2`, `failureThreshold: 2`, `timeoutSeconds: 1`, so a draining app is withdrawn within about 4 s",
			Summary: "HTTP path of a readiness probe to add where a container has none",
			Default: "none",
		},
		Proof: Proof{Kind: ProofProbePath}, set: setProbePath(func(s *Settings) *string { return &s.ReadinessPath })},
	{Name: AnnotationLivenessPath, Where: podOrNamespace, Owner: ownerGraceguard, MaxLength: MaxAnnotationValueLength,
		Doc: &KeyDoc{
			Meaning: "HTTP path of a liveness probe to add where a treated container has none: `initialDelaySeconds: 10`, `periodSeconds: 10`, `failureThreshold: 3`; keep it independent of draining",
			Summary: "HTTP path of a liveness probe to add where a container has none",
			Default: "none",
		},
		Proof: Proof{Kind: ProofProbePath}, set: setProbePath(func(s *Settings) *string { return &s.LivenessPath })},
	{Name: AnnotationProbePort, Where: podOrNamespace, Owner: ownerGraceguard, MaxLength: MaxAnnotationValueLength,
		Doc: &KeyDoc{
			Meaning: "port to probe: a number (1-65535) or a port name declared by the container",
			Summary: "port number or name for those probes",
			Default: "the container's first declared port",
		},
		Proof: Proof{Kind: ProofProbePort},
		set:   setProbePort},
	{Name: AnnotationInject, Where: PodAnnotation, Owner: ownerGraceguard, MaxLength: MaxAnnotationValueLength,
		Doc: &KeyDoc{
			Meaning: "`\"false\"` opts this Pod out of mutation and of the budget check (its preStop hooks are still checked against its grace; the mutating webhook is not even called); `\"true\"` is the same as unset",
			Summary: "`\"false\"` opts the Pod out of mutation and of the budget check",
		},
		Proof: Proof{Kind: ProofOneOf, Values: []string{"true"}}, set: setInject},
	// graceguard's record of what it applied, which it compares with what
	// it would write. The proof reads it as the record (b), not here.
	{Name: AnnotationBudget, Where: PodAnnotation, Owner: ownerGraceguard, MaxLength: MaxAnnotationValueLength,
		Doc: &KeyDoc{
			Meaning: "written by graceguard on every Pod it treats: `routing=8s work=30s cleanup=2s margin=5s grace=45s`. Explains the numbers; the routing term shows the longest preStop of the treated containers when that is longer than the routing delay; a Pod with a mesh proxy also shows its `proxy=` term ([meshes.md](meshes.md)). It is also graceguard's record of what it applied: the API server reads it to skip the validating call for a Pod that still agrees with it ([admission.md](admission.md)).",
		}},

	// Kubernetes: mirror Pods are skipped; a ReplicaSet's Pods name their
	// Deployment's report by the template hash (max-work: auto).
	{Name: AnnotationMirror, Where: PodAnnotation, Owner: ownerKubernetes, MaxLength: MaxAnnotationValueLength},
	{Name: LabelPodTemplateHash, Where: PodLabel, Owner: ownerKubernetes, MaxLength: MaxLabelValueLength},
	{Name: LabelRolloutsPodTemplateHash, Where: PodLabel, Owner: ownerArgoRollouts, MaxLength: MaxLabelValueLength},
	// Knative Serving's Revision label, which with queue-proxy's
	// SERVING_REVISION marks a Knative Pod (knative.go).
	{Name: LabelKnativeRevision, Where: PodLabel, Owner: ownerKnative, MaxLength: MaxLabelValueLength},

	// Istio.
	{Name: AnnotationIstioInject, Where: PodLabel | PodAnnotation, Owner: string(MeshIstio), MaxLength: MaxAnnotationValueLength},
	{Name: LabelIstioRev, Where: PodLabel | NamespaceLabel, Owner: string(MeshIstio), MaxLength: MaxLabelValueLength},
	{Name: LabelIstioInjection, Where: NamespaceLabel, Owner: string(MeshIstio), MaxLength: MaxLabelValueLength},
	{Name: AnnotationIstioProxyConfig, Where: PodAnnotation, Owner: string(MeshIstio), MaxLength: MaxIstioProxyConfigLength},
	// Istio's mark of an injected Pod: only its presence counts.
	{Name: annotationIstioStatus, Where: PodAnnotation, Owner: string(MeshIstio), MaxLength: MaxIstioStatusLength},
	// Ambient: the Pod's label over the namespace's (istio-ambient profile).
	{Name: LabelIstioDataplaneMode, Where: PodLabel | NamespaceLabel, Owner: string(MeshIstio), MaxLength: MaxLabelValueLength},
	// A waypoint's Pod: the istio-gateway profile.
	{Name: LabelIstioManagedGateway, Where: PodLabel, Owner: string(MeshIstio), MaxLength: MaxLabelValueLength},

	// Linkerd: its injector copies a namespace's config annotations to the
	// Pods that lack them, so graceguard reads them on both.
	{Name: AnnotationLinkerdInject, Where: PodAnnotation | NamespaceAnnotation, Owner: string(MeshLinkerd), MaxLength: MaxAnnotationValueLength},
	{Name: AnnotationLinkerdWaitBeforeExit, Where: PodAnnotation | NamespaceAnnotation, Owner: string(MeshLinkerd), MaxLength: MaxAnnotationValueLength},
	{Name: AnnotationLinkerdShutdownGrace, Where: PodAnnotation | NamespaceAnnotation, Owner: string(MeshLinkerd), MaxLength: MaxAnnotationValueLength},
	{Name: AnnotationLinkerdNativeSidecar, Where: PodAnnotation | NamespaceAnnotation, Owner: string(MeshLinkerd), MaxLength: MaxAnnotationValueLength},
	// Linkerd does not copy the beta spelling from a namespace.
	{Name: AnnotationLinkerdNativeSidecarBeta, Where: PodAnnotation, Owner: string(MeshLinkerd), MaxLength: MaxAnnotationValueLength},
	{Name: AnnotationLinkerdNativeSidecarAlpha, Where: PodAnnotation | NamespaceAnnotation, Owner: string(MeshLinkerd), MaxLength: MaxAnnotationValueLength},
}

// podOrNamespace: a key a Pod sets and a Namespace may default.
const podOrNamespace = PodAnnotation | NamespaceAnnotation

// ProofKind is how the one-call proof reads an annotation's value v.
type ProofKind uint8

const (
	// ProofNone: the proof accepts no value; the webhook decides.
	ProofNone ProofKind = iota
	// ProofAtMostTerm: a duration both graceguard and CEL read alike, at
	// most 1h and at most the record's value of the key's Term.
	ProofAtMostTerm
	// ProofTerm: such a duration equal to the record's value of the Term,
	// or one of Values.
	ProofTerm
	// ProofOneOf: one of Values.
	ProofOneOf
	// ProofProbePath: a path validProbePath accepts.
	ProofProbePath
	// ProofProbePort: a port parsePort accepts.
	ProofProbePort
)

// Proof is what the one-call proof accepts of an annotation (Key.Proof).
type Proof struct {
	Kind ProofKind
	// Values are the exact values accepted (ProofOneOf), or accepted
	// besides a duration (ProofTerm: max-work's auto).
	Values []string
}

// LookupKey returns the key named name if graceguard reads it in m.
// A name may have a row for each place (graceguard.io/inject is a
// Namespace label and a Pod annotation).
func LookupKey(name string, m Where) (Key, bool) {
	i := slices.IndexFunc(Keys, func(k Key) bool { return k.Name == name && k.Where&m != 0 })
	if i < 0 {
		return Key{}, false
	}
	return Keys[i], true
}

// NamespaceDefaultKeys are the annotations a Namespace may carry as
// defaults for its Pods: graceguard's keys read on Namespaces. Per-Pod keys
// (containers, inject) only make sense on a Pod.
var NamespaceDefaultKeys = func() []string {
	var out []string
	for _, k := range Keys {
		if k.Owner == ownerGraceguard && k.Where&NamespaceAnnotation != 0 {
			out = append(out, k.Name)
		}
	}
	return out
}()

// MaxKeyLength is the length of the longest key in Keys: no longer name
// can be one graceguard reads.
var MaxKeyLength = func() int {
	n := 0
	for _, k := range Keys {
		n = max(n, len(k.Name))
	}
	return n
}()
