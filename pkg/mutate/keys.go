package mutate

// Namespace labels, set by platform teams.
const (
	// LabelInject opts a namespace in when set to LabelInjectEnabled.
	LabelInject        = "graceguard.io/inject"
	LabelInjectEnabled = "enabled"
	// LabelMode selects ModeEnforce or ModeWarn for a namespace.
	LabelMode = "graceguard.io/mode"
)

// LabelTreated marks every Pod whose budget graceguard enforced, so that
// the shutdown observer watches those Pods through a label selector and
// never all Pods of the cluster. Written by graceguard, never by users:
// LabelTreatedValue by its mutating webhook, LabelTreatedByFloor by the
// chart's mutating floor (pkg/cel) while the webhook did not answer, which
// the webhook replaces when it does.
const (
	LabelTreated        = "graceguard.io/treated"
	LabelTreatedValue   = "true"
	LabelTreatedByFloor = "floor"
)

// Pod annotations, set by app teams. The four budget keys, PreStop and the
// probe keys also work on a Namespace, as defaults for its Pods.
const (
	AnnotationRoutingDelay = "graceguard.io/routing-delay"
	AnnotationMaxWork      = "graceguard.io/max-work"
	AnnotationCleanup      = "graceguard.io/cleanup"
	AnnotationSafetyMargin = "graceguard.io/safety-margin"
	AnnotationPreStop      = "graceguard.io/prestop"
	AnnotationContainers   = "graceguard.io/containers"
	// AnnotationSidecars names the Pod's containers that must outlive
	// the app (sidecar.go).
	AnnotationSidecars      = "graceguard.io/sidecars"
	AnnotationReadinessPath = "graceguard.io/readiness-path"
	AnnotationLivenessPath  = "graceguard.io/liveness-path"
	AnnotationProbePort     = "graceguard.io/probe-port"
	AnnotationInject        = "graceguard.io/inject"
	AnnotationBudget        = "graceguard.io/budget"
	// AnnotationMaxWorkFloor and AnnotationMaxWorkCeiling bound the value
	// graceguard.io/max-work: auto takes.
	AnnotationMaxWorkFloor   = "graceguard.io/max-work-floor"
	AnnotationMaxWorkCeiling = "graceguard.io/max-work-ceiling"
	AnnotationMirror         = "kubernetes.io/config.mirror"
	defaultGracePeriodSecond = 30
)
