package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/pkg/manifest"
	"github.com/graceguard/graceguard/pkg/policyreport"
)

// auditFormats are audit's -o values: check's, and the policy report kinds.
var auditFormats = append(slices.Clone(reportFormats), string(policyreport.OpenReports), string(policyreport.PolicyReport))

const auditOutputUsage = "output format: text, json (one object per workload, and a summary), sarif (SARIF 2.1.0, for code-scanning UIs), " +
	"openreports or policyreport (one openreports.io/v1alpha1 Report or wgpolicyk8s.io/v1alpha2 PolicyReport per workload, YAML to kubectl apply)"

// reportKind is the policy report kind -o asks for, if any.
func reportKind(output string) (policyreport.Kind, bool) {
	k, err := policyreport.ParseKind(output)
	return k, err == nil
}

// shutdowns are what the ShutdownReports say, by workload ("Deployment
// web" in a namespace): what the observer saw.
type shutdowns map[types.NamespacedName]*policyreport.Observed

var shutdownReportsGVR = v1alpha1.GroupVersion.WithResource("shutdownreports")

// readShutdowns lists the ShutdownReports of one namespace or all: none
// when the CRD is not installed; a note when they may not be read.
func readShutdowns(ctx context.Context, dyn dynamic.Interface, ns string, errOut io.Writer) (shutdowns, error) {
	out := shutdowns{}
	list, err := dyn.Resource(shutdownReportsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return out, nil // no observer: no ShutdownReport CRD
	case apierrors.IsForbidden(err):
		fmt.Fprintf(errOut, "note: the ShutdownReports may not be read (%v): the reports say nothing of observed shutdowns\n", err)
		return out, nil
	case err != nil:
		return nil, runtimeError{fmt.Errorf("listing %s: %w", resourceName(shutdownReportsGVR, ns), err)}
	}
	for i := range list.Items {
		var r v1alpha1.ShutdownReport
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &r); err != nil {
			continue // not one the observer wrote
		}
		w := r.Spec.Workload
		out[types.NamespacedName{Namespace: r.Namespace, Name: w.Kind + " " + w.Name}] = policyreport.Observe(
			policyreport.Workload{APIVersion: w.APIVersion, Kind: w.Kind, Namespace: r.Namespace, Name: w.Name}, &r.Status)
	}
	return out, nil
}

// writeReports prints one policy report per evaluated workload and bare
// Pod, as YAML documents: Pods of a workload are its template's, and
// what graceguard skips (excluded namespaces, mirror Pods) gets none.
func writeReports(w io.Writer, errOut io.Writer, kind policyreport.Kind, objs []object, seen shutdowns, now time.Time) error {
	p := &printer{w: w}
	n := 0
	for _, o := range objs {
		if verdictOf(o) == verdictSkipped || podOwner(o.doc) != "" {
			continue
		}
		in := policyreport.Input{
			Workload: policyreport.Workload{APIVersion: o.doc.APIVersion, Kind: o.doc.Kind, Namespace: o.ns, Name: o.doc.Name, UID: types.UID(o.doc.UID)},
			Err:      o.err,
			Observed: seen[types.NamespacedName{Namespace: o.ns, Name: o.doc.Kind + " " + o.doc.Name}],
		}
		if o.res != nil {
			in.Mutation, in.Validation = o.res.Mutation, o.res.Validation
		}
		u, err := policyreport.Object(kind, policyreport.Build(in, policyreport.DefaultBounds(), now))
		if err != nil {
			return err
		}
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return err
		}
		p.raw("---\n" + string(b))
		n++
	}
	if n == 0 {
		fmt.Fprintf(errOut, "note: no workload to report on\n")
	}
	return p.err
}

// podOwner names a live Pod's controlling workload, or "".
func podOwner(d manifest.Document) string {
	if d.Kind != "Pod" {
		return ""
	}
	var meta struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := yaml.Unmarshal(d.Raw, &meta); err != nil {
		return ""
	}
	return manifest.ControllingWorkload(meta.Metadata.OwnerReferences)
}
