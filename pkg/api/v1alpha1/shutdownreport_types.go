package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Bounds of a report. The observer never writes more (pkg/observer cuts or
// drops what would exceed them), and the CRD's validation says the same:
// its kubebuilder markers below are these numbers (TestCRDStatesTheBounds).
const (
	// MaxSamples bounds the samples a report keeps: the most recent ones.
	MaxSamples = 50
	// MaxNameLength is an object name's: a DNS subdomain.
	MaxNameLength = 253
	// MaxKindLength is a kind's: its lower case is a DNS label (CRDs are
	// validated so, and the built-in kinds are shorter).
	MaxKindLength = 63
	// MaxAPIVersionLength is group/version: a DNS subdomain, "/", a DNS
	// label.
	MaxAPIVersionLength = 253 + 1 + 63
	// MaxPodNameLength is a sample's Pod name. The Pods of every built-in
	// controller have names of at most 63 bytes (generated names are cut
	// to 58 and given 5 random characters; a StatefulSet's Pod name is a
	// label value); a longer name is cut to 52 bytes and given "-" and 10
	// hex digits of its hash, so that it stays distinct.
	MaxPodNameLength = 63
	// MaxContainerNameLength is a container name's: a DNS label.
	MaxContainerNameLength = 63
	// MaxReasonLength is a sample's exit reason: the kubelet's and the
	// runtimes' reasons are single words (the longest,
	// ContainerStatusUnknown, has 22 bytes); a longer one is cut.
	MaxReasonLength = 32
	// MaxBudgetLength is a budget: the observer writes it again from the
	// numbers it parsed, at most 145 bytes (five terms of at most 1h, each
	// printed in at most 16 bytes, and a grace of at most 19 digits).
	MaxBudgetLength = 160
	// MaxDurationLength is a printed duration: the longest Go duration,
	// "2562047h47m16.854775807s", has 24 bytes.
	MaxDurationLength = 32
	// MaxMessageLength is a recommendation's reason: one sentence with
	// a few numbers in it (at most about 250 bytes).
	MaxMessageLength = 512
)

// ShutdownReport is what graceguard observed of one workload's Pod
// shutdowns: the last samples, their summary and the max-work they support.
// graceguard's observer writes it; `kubectl graceguard recommend` reads it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sdr,categories=graceguard
// +kubebuilder:printcolumn:name="Workload",type=string,JSONPath=`.spec.workload.kind`
// +kubebuilder:printcolumn:name="Name",type=string,JSONPath=`.spec.workload.name`,priority=1
// +kubebuilder:printcolumn:name="Samples",type=integer,JSONPath=`.status.summary.samples`
// +kubebuilder:printcolumn:name="Kills",type=integer,JSONPath=`.status.summary.kills`
// +kubebuilder:printcolumn:name="Hook-Failed",type=integer,JSONPath=`.status.summary.hookFailures`,priority=1
// +kubebuilder:printcolumn:name="Drain-P50",type=string,JSONPath=`.status.summary.drainP50`
// +kubebuilder:printcolumn:name="Drain-P95",type=string,JSONPath=`.status.summary.drainP95`
// +kubebuilder:printcolumn:name="Drain-Max",type=string,JSONPath=`.status.summary.drainMax`
// +kubebuilder:printcolumn:name="Work",type=string,JSONPath=`.status.summary.maxWork`
// +kubebuilder:printcolumn:name="Grace",type=integer,JSONPath=`.status.summary.grace`
// +kubebuilder:printcolumn:name="Withdrawal-Max",type=string,JSONPath=`.status.summary.withdrawalMax`,priority=1
// +kubebuilder:printcolumn:name="Rec-Work",type=string,JSONPath=`.status.recommendation.maxWork`
// +kubebuilder:printcolumn:name="Rec-Grace",type=integer,JSONPath=`.status.recommendation.grace`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ShutdownReport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ShutdownReportSpec   `json:"spec"`
	Status ShutdownReportStatus `json:"status,omitempty"`
}

// ShutdownReportSpec names the workload the report is about.
type ShutdownReportSpec struct {
	// Workload is the Deployment, StatefulSet, DaemonSet, CronJob, Job or
	// ReplicaSet whose Pods were observed; it also owns the report.
	Workload WorkloadReference `json:"workload"`
}

// WorkloadReference names a workload in the report's namespace.
type WorkloadReference struct {
	// APIVersion of the workload, e.g. apps/v1.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	APIVersion string `json:"apiVersion"`
	// Kind of the workload, e.g. Deployment.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Name of the workload.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ShutdownReportStatus is written by graceguard's observer.
type ShutdownReportStatus struct {
	// Observed counts every Pod shutdown recorded in this report, including
	// those that have left the sample window.
	// +optional
	Observed int64 `json:"observed,omitempty"`
	// KillsObserved counts every SIGKILL recorded in this report.
	// +optional
	KillsObserved int64 `json:"killsObserved,omitempty"`
	// HookFailuresObserved counts every failed preStop hook recorded in this report.
	// +optional
	HookFailuresObserved int64 `json:"hookFailuresObserved,omitempty"`
	// LastObserved is when the last sample's Pod was deleted.
	// +optional
	LastObserved *metav1.Time `json:"lastObserved,omitempty"`
	// Summary is over the samples.
	// +optional
	Summary Summary `json:"summary,omitempty"`
	// Recommendation is the max-work the samples support.
	// +optional
	Recommendation *Recommendation `json:"recommendation,omitempty"`
	// Samples are the most recent shutdowns, oldest first, at most 50.
	// +kubebuilder:validation:MaxItems=50
	// +listType=atomic
	// +optional
	Samples []Sample `json:"samples,omitempty"`
}

// Summary reduces the samples. Durations are whole seconds, as in "12s".
type Summary struct {
	// Samples is the number of samples summarised.
	Samples int32 `json:"samples"`
	// Kills is how many samples were SIGKILLed at the end of their grace.
	Kills int32 `json:"kills"`
	// HookFailures is how many samples had a preStop hook fail.
	HookFailures int32 `json:"hookFailures"`
	// DrainP50, DrainP95 and DrainMax are over the drains (SIGTERM to exit)
	// that ended on their own; empty when every sample was killed.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	DrainP50 string `json:"drainP50,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=32
	DrainP95 string `json:"drainP95,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=32
	DrainMax string `json:"drainMax,omitempty"`
	// DrainCut is the longest drain a SIGKILL cut short.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	DrainCut string `json:"drainCut,omitempty"`
	// Budget is the graceguard.io/budget of the most recent sample.
	// +optional
	// +kubebuilder:validation:MaxLength=160
	Budget string `json:"budget,omitempty"`
	// MaxWork is the work term of Budget.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	MaxWork string `json:"maxWork,omitempty"`
	// Grace is the grace period of the most recent sample, in seconds.
	// +optional
	Grace int64 `json:"grace,omitempty"`
	// Withdrawn counts the samples whose control-plane withdrawal was
	// observed (withdrawalSeconds); WithdrawalP50, WithdrawalP95 and
	// WithdrawalMax are over them, empty when there is none.
	// +optional
	Withdrawn int32 `json:"withdrawn,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=32
	WithdrawalP50 string `json:"withdrawalP50,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=32
	WithdrawalP95 string `json:"withdrawalP95,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=32
	WithdrawalMax string `json:"withdrawalMax,omitempty"`
	// NotListed counts the samples whose Pod no EndpointSlice listed: they
	// have no withdrawal figure (not 0).
	// +optional
	NotListed int32 `json:"notListed,omitempty"`
}

// Recommendation is the graceguard.io/max-work the samples support.
type Recommendation struct {
	// MaxWork is the value for graceguard.io/max-work, e.g. "21s".
	// +kubebuilder:validation:MaxLength=32
	MaxWork string `json:"maxWork"`
	// Grace is the grace period that max-work gives, with the other terms
	// of the current budget.
	Grace int64 `json:"grace"`
	// Enough is false when there are too few samples and no kill: the
	// recommendation is then only an indication.
	Enough bool `json:"enough"`
	// Reason explains the value.
	// +kubebuilder:validation:MaxLength=512
	Reason string `json:"reason"`
}

// Outcome is how one shutdown ended.
// +kubebuilder:validation:Enum=Exited;Killed
type Outcome string

const (
	// OutcomeExited: every treated container exited before its grace ran out.
	OutcomeExited Outcome = "Exited"
	// OutcomeKilled: a treated container was SIGKILLed at the end of its grace.
	OutcomeKilled Outcome = "Killed"
)

// Withdrawal is what the observer saw of a Pod's EndpointSlices while it
// terminated: the control plane's part of its routing withdrawal.
// +kubebuilder:validation:Enum=Withdrawn;NotListed;NeverReady;StillReady
type Withdrawal string

const (
	// WithdrawalWithdrawn: the last EndpointSlice that listed the Pod
	// ready marked it not ready (or terminating, or dropped it);
	// withdrawalSeconds says when.
	WithdrawalWithdrawn Withdrawal = "Withdrawn"
	// WithdrawalNotListed: no EndpointSlice listed this Pod while it
	// terminated (no Service selects it): no figure, not 0.
	WithdrawalNotListed Withdrawal = "NotListed"
	// WithdrawalNeverReady: EndpointSlices listed the Pod, never ready
	// while the observer watched (not ready when it was deleted, or
	// withdrawn before the observer started).
	WithdrawalNeverReady Withdrawal = "NeverReady"
	// WithdrawalStillReady: an EndpointSlice still listed the Pod ready
	// when its sample was written.
	WithdrawalStillReady Withdrawal = "StillReady"
)

// Sample is one Pod's shutdown. Times are the API's, in whole seconds.
type Sample struct {
	// Pod is the Pod's name; one longer than 63 bytes is cut to 52 and
	// ends in "-" and 10 hex digits of its hash.
	// +kubebuilder:validation:MaxLength=63
	Pod string `json:"pod"`
	// Container is the treated container that exited last.
	// +kubebuilder:validation:MaxLength=63
	Container string `json:"container"`
	// Deleted is when the deletion was requested:
	// deletionTimestamp - deletionGracePeriodSeconds.
	Deleted metav1.Time `json:"deleted"`
	// GraceSeconds is the grace the deletion gave (deletionGracePeriodSeconds).
	GraceSeconds int64 `json:"graceSeconds"`
	// PreStopSeconds is the length of that container's preStop hook: the
	// time from deletion to SIGTERM.
	PreStopSeconds int64 `json:"preStopSeconds"`
	// PreStopEstimated is set when the hook's length cannot be read from
	// the spec (HTTP, scripts): PreStopSeconds is then the budget's
	// routing term, and the drain is an estimate.
	// +optional
	PreStopEstimated bool `json:"preStopEstimated,omitempty"`
	// HookFailed: a FailedPreStopHook event names a treated container;
	// SIGTERM then came when the hook failed.
	// +optional
	HookFailed bool `json:"hookFailed,omitempty"`
	// Exited is when the container exited (finishedAt).
	Exited metav1.Time `json:"exited"`
	// ExitCode is the container's exit code; 137 is SIGKILL.
	ExitCode int32 `json:"exitCode"`
	// Reason is the container runtime's reason (Completed, Error, ...),
	// cut to 32 bytes.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Reason string `json:"reason,omitempty"`
	// Outcome is Exited or Killed.
	Outcome Outcome `json:"outcome"`
	// DrainSeconds runs from SIGTERM to the exit; for a killed container, to
	// the kill (the drain needed was longer).
	DrainSeconds int64 `json:"drainSeconds"`
	// Budget is the Pod's graceguard.io/budget annotation, written again
	// from the numbers it holds; empty when it does not parse.
	// +optional
	// +kubebuilder:validation:MaxLength=160
	Budget string `json:"budget,omitempty"`
	// Withdrawal is how the Pod left the EndpointSlices that listed it;
	// empty in samples written before the observer watched them.
	// +optional
	Withdrawal Withdrawal `json:"withdrawal,omitempty"`
	// WithdrawalSeconds is the control plane's part of the Pod's routing
	// withdrawal: from the deletion request to when the observer saw the
	// last EndpointSlice that listed the Pod ready mark it not ready
	// (withdrawal Withdrawn only; absent otherwise, never 0 for "no
	// figure"). Proxies, ingress controllers and load balancers apply it
	// later: the Pod's real routing withdrawal is at least this.
	// +optional
	// +kubebuilder:validation:Minimum=0
	WithdrawalSeconds *int64 `json:"withdrawalSeconds,omitempty"`
}

// ShutdownReportList is a list of ShutdownReports.
//
// +kubebuilder:object:root=true
type ShutdownReportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ShutdownReport `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ShutdownReport{}, &ShutdownReportList{})
}
