package mutate

import "slices"

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

const (
	ownerGraceguard = "graceguard"
	ownerKubernetes = "kubernetes"
)

// Keys lists every label and annotation key graceguard reads.
var Keys = []Key{
	// graceguard's namespace labels.
	{LabelInject, NamespaceLabel, ownerGraceguard, MaxLabelValueLength},
	{LabelMode, NamespaceLabel, ownerGraceguard, MaxLabelValueLength},
	// The observer's label, which graceguard adds only where it is absent.
	{LabelTreated, PodLabel, ownerGraceguard, MaxLabelValueLength},

	// graceguard's annotations: the budget terms and the other settings a
	// Namespace may default (NamespaceDefaultKeys), then the per-Pod ones.
	{AnnotationRoutingDelay, PodAnnotation | NamespaceAnnotation, ownerGraceguard, MaxAnnotationValueLength},
	{AnnotationMaxWork, PodAnnotation | NamespaceAnnotation, ownerGraceguard, MaxAnnotationValueLength},
	{AnnotationCleanup, PodAnnotation | NamespaceAnnotation, ownerGraceguard, MaxAnnotationValueLength},
	{AnnotationSafetyMargin, PodAnnotation | NamespaceAnnotation, ownerGraceguard, MaxAnnotationValueLength},
	{AnnotationPreStop, PodAnnotation | NamespaceAnnotation, ownerGraceguard, MaxAnnotationValueLength},
	{AnnotationReadinessPath, PodAnnotation | NamespaceAnnotation, ownerGraceguard, MaxAnnotationValueLength},
	{AnnotationLivenessPath, PodAnnotation | NamespaceAnnotation, ownerGraceguard, MaxAnnotationValueLength},
	{AnnotationProbePort, PodAnnotation | NamespaceAnnotation, ownerGraceguard, MaxAnnotationValueLength},
	{AnnotationRoutingProfile, PodAnnotation | NamespaceAnnotation, ownerGraceguard, MaxAnnotationValueLength},
	{AnnotationMaxWorkFloor, PodAnnotation | NamespaceAnnotation, ownerGraceguard, MaxAnnotationValueLength},
	{AnnotationMaxWorkCeiling, PodAnnotation | NamespaceAnnotation, ownerGraceguard, MaxAnnotationValueLength},
	{AnnotationContainers, PodAnnotation, ownerGraceguard, MaxAnnotationValueLength},
	{AnnotationInject, PodAnnotation, ownerGraceguard, MaxAnnotationValueLength},
	// graceguard's record of what it applied, which it compares with what
	// it would write.
	{AnnotationBudget, PodAnnotation, ownerGraceguard, MaxAnnotationValueLength},

	// Kubernetes: mirror Pods are skipped; a ReplicaSet's Pods name their
	// Deployment's report by the template hash (max-work: auto).
	{annotationMirror, PodAnnotation, ownerKubernetes, MaxAnnotationValueLength},
	{LabelPodTemplateHash, PodLabel, ownerKubernetes, MaxLabelValueLength},

	// Istio.
	{AnnotationIstioInject, PodLabel | PodAnnotation, string(MeshIstio), MaxAnnotationValueLength},
	{LabelIstioRev, PodLabel | NamespaceLabel, string(MeshIstio), MaxLabelValueLength},
	{LabelIstioInjection, NamespaceLabel, string(MeshIstio), MaxLabelValueLength},
	{AnnotationIstioProxyConfig, PodAnnotation, string(MeshIstio), MaxIstioProxyConfigLength},
	// Istio's mark of an injected Pod: only its presence counts.
	{annotationIstioStatus, PodAnnotation, string(MeshIstio), MaxIstioStatusLength},
	// Ambient: the Pod's label over the namespace's (istio-ambient profile).
	{LabelIstioDataplaneMode, PodLabel | NamespaceLabel, string(MeshIstio), MaxLabelValueLength},

	// Linkerd: its injector copies a namespace's config annotations to the
	// Pods that lack them, so graceguard reads them on both.
	{AnnotationLinkerdInject, PodAnnotation | NamespaceAnnotation, string(MeshLinkerd), MaxAnnotationValueLength},
	{AnnotationLinkerdWaitBeforeExit, PodAnnotation | NamespaceAnnotation, string(MeshLinkerd), MaxAnnotationValueLength},
	{AnnotationLinkerdShutdownGrace, PodAnnotation | NamespaceAnnotation, string(MeshLinkerd), MaxAnnotationValueLength},
	{AnnotationLinkerdNativeSidecar, PodAnnotation | NamespaceAnnotation, string(MeshLinkerd), MaxAnnotationValueLength},
	// Linkerd does not copy the beta spelling from a namespace.
	{AnnotationLinkerdNativeSidecarBeta, PodAnnotation, string(MeshLinkerd), MaxAnnotationValueLength},
	{AnnotationLinkerdNativeSidecarAlpha, PodAnnotation | NamespaceAnnotation, string(MeshLinkerd), MaxAnnotationValueLength},
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
