package mutate

import (
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Rollout is the part of an Argo Rollouts Rollout (argoproj.io/v1alpha1)
// graceguard reads: its Pod template, or the Deployment it takes its
// template from (spec.workloadRef), and the scale-down delays of its
// strategy. graceguard does not link Argo's module; the fields keep
// Argo's JSON names.
type Rollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              RolloutSpec `json:"spec,omitempty"`
}

// RolloutSpec is the part of a Rollout's spec graceguard reads.
type RolloutSpec struct {
	// Template is nil when the Rollout has none (a workloadRef Rollout).
	Template    *corev1.PodTemplateSpec `json:"template,omitempty"`
	WorkloadRef *RolloutWorkloadRef     `json:"workloadRef,omitempty"`
	Strategy    RolloutStrategy         `json:"strategy,omitempty"`
}

// RolloutWorkloadRef names the workload whose Pod template a Rollout uses.
type RolloutWorkloadRef struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Name       string `json:"name,omitempty"`
}

// RolloutStrategy is the part of a Rollout's strategy graceguard reads.
type RolloutStrategy struct {
	BlueGreen *RolloutBlueGreen `json:"blueGreen,omitempty"`
	Canary    *RolloutCanary    `json:"canary,omitempty"`
}

// RolloutBlueGreen is the part of a blue-green strategy graceguard reads.
type RolloutBlueGreen struct {
	ScaleDownDelaySeconds *int32 `json:"scaleDownDelaySeconds,omitempty"`
}

// RolloutCanary is the part of a canary strategy graceguard reads; only
// whether TrafficRouting is set matters.
type RolloutCanary struct {
	ScaleDownDelaySeconds *int32          `json:"scaleDownDelaySeconds,omitempty"`
	TrafficRouting        json.RawMessage `json:"trafficRouting,omitempty"`
}

// DeepCopyObject copies the Rollout (runtime.Object).
func (r *Rollout) DeepCopyObject() runtime.Object {
	if r == nil {
		return nil
	}
	out := &Rollout{TypeMeta: r.TypeMeta}
	r.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if r.Spec.Template != nil {
		out.Spec.Template = r.Spec.Template.DeepCopy()
	}
	if r.Spec.WorkloadRef != nil {
		ref := *r.Spec.WorkloadRef
		out.Spec.WorkloadRef = &ref
	}
	out.Spec.Strategy = r.Spec.Strategy.deepCopy()
	return out
}

func (s RolloutStrategy) deepCopy() RolloutStrategy {
	var out RolloutStrategy
	if s.BlueGreen != nil {
		out.BlueGreen = &RolloutBlueGreen{ScaleDownDelaySeconds: copyInt32(s.BlueGreen.ScaleDownDelaySeconds)}
	}
	if s.Canary != nil {
		out.Canary = &RolloutCanary{ScaleDownDelaySeconds: copyInt32(s.Canary.ScaleDownDelaySeconds),
			TrafficRouting: append(json.RawMessage(nil), s.Canary.TrafficRouting...)}
	}
	return out
}

func copyInt32(p *int32) *int32 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// ArgoScaleDownDelayDefault is Argo Rollouts' scaleDownDelaySeconds when
// unset (blue-green, and canary with traffic routing).
const ArgoScaleDownDelayDefault = 30

// ScaleDownDelay is how long a rollout tool keeps the Pods it moved traffic
// away from before scaling them down (Argo Rollouts'
// scaleDownDelaySeconds). Their deletion must not start before routers
// stop sending to them: the delay must cover the Pods' routing term.
type ScaleDownDelay struct {
	// Path is the field; Seconds its value, or the tool's default when
	// Default is set (the field is absent).
	Path    *field.Path
	Seconds int64
	Default bool
}

// ScaleDownDelays are the delays of a Rollout's strategy graceguard holds
// to the routing term: blue-green's, and canary's with traffic routing
// (without it, Argo scales the old Pods down step by step and ignores the
// field).
func (s RolloutStrategy) ScaleDownDelays() []ScaleDownDelay {
	var out []ScaleDownDelay
	add := func(path *field.Path, v *int32) {
		d := ScaleDownDelay{Path: path, Seconds: ArgoScaleDownDelayDefault, Default: v == nil}
		if v != nil {
			d.Seconds = int64(*v)
		}
		out = append(out, d)
	}
	strategy := field.NewPath("spec", "strategy")
	if s.BlueGreen != nil {
		add(strategy.Child("blueGreen", "scaleDownDelaySeconds"), s.BlueGreen.ScaleDownDelaySeconds)
	}
	if s.Canary != nil && len(s.Canary.TrafficRouting) > 0 && string(s.Canary.TrafficRouting) != "null" {
		add(strategy.Child("canary", "scaleDownDelaySeconds"), s.Canary.ScaleDownDelaySeconds)
	}
	return out
}

// checkScaleDown warns where a scale-down delay is shorter than the
// routing term of the Pods it scales down: their deletion, and so their
// preStop sleep, starts before the traffic router has moved off them, and
// requests still sent to them fail (argo-rollouts#4926, #3617, #4534).
func checkScaleDown(t Target, r *Report) {
	routing := r.Budget.Routing
	if routing <= 0 {
		return
	}
	for _, d := range t.ScaleDown {
		if time.Duration(d.Seconds)*time.Second >= routing {
			continue
		}
		need := int64((routing + time.Second - 1) / time.Second)
		dflt := ""
		if d.Default {
			dflt = " (default)"
		}
		r.warn(WarnScaleDownEarly, d.Path, d.Seconds, "%ds%s < routing %s: scaled down before routes move; raise to %d",
			d.Seconds, dflt, formatHook(routing), need)
	}
}
