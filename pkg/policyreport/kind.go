package policyreport

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
)

// Kind is a report format: the name a flag, a value or -o gives it.
type Kind string

const (
	// OpenReports is openreports.io/v1alpha1 Report, PolicyReport's
	// successor.
	OpenReports Kind = "openreports"
	// PolicyReport is wgpolicyk8s.io/v1alpha2 PolicyReport.
	PolicyReport Kind = "policyreport"
)

// Kinds are the report formats, in the order auto prefers them.
var Kinds = []Kind{OpenReports, PolicyReport}

// GroupVersionKind is the kind's API group, version and kind.
func (k Kind) GroupVersionKind() schema.GroupVersionKind {
	if k == PolicyReport {
		return schema.GroupVersionKind{Group: "wgpolicyk8s.io", Version: "v1alpha2", Kind: "PolicyReport"}
	}
	return openreports.SchemeGroupVersion.WithKind("Report")
}

// Resource is the kind's resource, as discovery lists it.
func (k Kind) Resource() string {
	if k == PolicyReport {
		return "policyreports"
	}
	return "reports"
}

// String names the kind for people: "openreports.io/v1alpha1 Report".
func (k Kind) String() string {
	gvk := k.GroupVersionKind()
	return gvk.GroupVersion().String() + " " + gvk.Kind
}

// ParseKind reads a kind by its name, saying what is accepted.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if string(k) == s {
			return k, nil
		}
	}
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return "", fmt.Errorf("unknown report kind %q: want %s", s, strings.Join(names, " or "))
}

// Object is the report as an object of kind k. A PolicyReport is a Report
// without the fields v1alpha2 lacks (source, configuration): its results
// have the same schema.
func Object(k Kind, r *openreports.Report) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
	if k == PolicyReport {
		delete(m, "source")
		delete(m, "configuration")
	}
	u.SetGroupVersionKind(k.GroupVersionKind())
	return u, nil
}
