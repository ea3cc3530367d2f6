// Package v1alpha1 is graceguard's API, group graceguard.io: the
// ShutdownReport, the observed shutdowns of one workload's Pods.
//
// Invariant: a ShutdownReport is written only by graceguard's observer, in
// its status; it stays small (at most MaxSamples samples) and is owned by
// its workload, so it goes away with it.
//
// +kubebuilder:object:generate=true
// +groupName=graceguard.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is graceguard.io/v1alpha1.
	GroupVersion = schema.GroupVersion{Group: "graceguard.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this group version.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
