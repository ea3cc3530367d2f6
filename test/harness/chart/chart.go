// Package chart renders charts/graceguard with the Helm SDK, as `helm
// template` does, for the envtest suite, the demo and config/install.yaml:
// all of them use exactly what an install ships.
package chart

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"runtime"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// KubeVersion is the Kubernetes version the chart is rendered for.
const KubeVersion = "v1.37.2"

// ChartDir is charts/graceguard in this repository.
func ChartDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "charts", "graceguard")
}

// CRDDir holds the CustomResourceDefinitions the chart installs
// (templates/crds.yaml renders them): what make generate writes.
func CRDDir() string { return filepath.Join(ChartDir(), "files", "crds") }

// Webhooks are the admission configurations the chart installs: its
// webhooks, and the native floor's policies and their bindings.
type Webhooks struct {
	Mutating   []*admissionv1.MutatingWebhookConfiguration
	Validating []*admissionv1.ValidatingWebhookConfiguration
	Policies   []*admissionv1.ValidatingAdmissionPolicy
	Bindings   []*admissionv1.ValidatingAdmissionPolicyBinding
	// MutatingPolicies and MutatingBindings are the mutating floor's
	// (rendered for Kubernetes 1.36+).
	MutatingPolicies []*admissionv1.MutatingAdmissionPolicy
	MutatingBindings []*admissionv1.MutatingAdmissionPolicyBinding
}

// RenderWebhooks renders the chart like `helm template` and returns its
// webhook configurations and policies, so tests and the demo register
// exactly what an install ships (rules, selectors, matchConditions, failure
// policies, the native floor).
func RenderWebhooks(releaseName, namespace string, values map[string]any) (Webhooks, error) {
	return RenderWebhooksDir(ChartDir(), releaseName, namespace, values)
}

// RenderWebhooksDir is RenderWebhooks of the chart in dir.
func RenderWebhooksDir(dir, releaseName, namespace string, values map[string]any) (Webhooks, error) {
	manifest, err := RenderDir(dir, releaseName, namespace, values)
	if err != nil {
		return Webhooks{}, err
	}
	return parseWebhooks(manifest)
}

// Render renders the chart like `helm template` and returns the manifest.
func Render(releaseName, namespace string, values map[string]any) (string, error) {
	return RenderDir(ChartDir(), releaseName, namespace, values)
}

// RenderDir is Render of the chart in dir: another checkout's, for a
// benchmark that runs that checkout's webhook as its chart installs it.
func RenderDir(dir, releaseName, namespace string, values map[string]any) (string, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return "", fmt.Errorf("loading the chart: %w", err)
	}
	inst := action.NewInstall(action.NewConfiguration())
	inst.DryRunStrategy = action.DryRunClient
	inst.Replace = true
	inst.ReleaseName = releaseName
	inst.Namespace = namespace
	// Client-side rendering knows no cluster; render for the Kubernetes
	// minor this module's k8s.io/api matches.
	if inst.KubeVersion, err = common.ParseKubeVersion(KubeVersion); err != nil {
		return "", err
	}
	if values == nil {
		values = map[string]any{}
	}
	rel, err := inst.Run(ch, values)
	if err != nil {
		return "", fmt.Errorf("rendering the chart: %w", err)
	}
	r, ok := rel.(*release.Release)
	if !ok {
		return "", fmt.Errorf("rendering the chart: unexpected release type %T", rel)
	}
	return r.Manifest, nil
}

// WebhookContainer renders the chart like `helm template` and returns the
// webhook Deployment's container: the arguments, environment and
// resources an install runs the webhook binary with.
func WebhookContainer(releaseName, namespace string, values map[string]any) (corev1.Container, error) {
	return Container(releaseName, namespace, values, "webhook")
}

// Container renders the chart like `helm template` and returns the
// container called name of the Deployments it renders: "webhook", or
// "observer" (`webhook observe`).
func Container(releaseName, namespace string, values map[string]any, name string) (corev1.Container, error) {
	return ContainerDir(ChartDir(), releaseName, namespace, values, name)
}

// ContainerDir is Container of the chart in dir.
func ContainerDir(dir, releaseName, namespace string, values map[string]any, name string) (corev1.Container, error) {
	d, err := DeploymentDir(dir, releaseName, namespace, values, name)
	if err != nil {
		return corev1.Container{}, err
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c, nil
		}
	}
	return corev1.Container{}, fmt.Errorf("the chart rendered no Deployment with a container named %s", name)
}

// Deployment renders the chart like `helm template` and returns the
// Deployment that has a container called container (its replicas, its
// Pod's resources).
func Deployment(releaseName, namespace string, values map[string]any, container string) (*appsv1.Deployment, error) {
	return DeploymentDir(ChartDir(), releaseName, namespace, values, container)
}

// DeploymentDir is Deployment of the chart in dir.
func DeploymentDir(dir, releaseName, namespace string, values map[string]any, container string) (*appsv1.Deployment, error) {
	manifest, err := RenderDir(dir, releaseName, namespace, values)
	if err != nil {
		return nil, err
	}
	rd := utilyaml.NewYAMLReader(bufioReader(manifest))
	for {
		doc, err := rd.Read()
		if err == io.EOF {
			return nil, fmt.Errorf("the chart rendered no Deployment with a container named %s", container)
		}
		if err != nil {
			return nil, err
		}
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, err
		}
		if meta.Kind != "Deployment" {
			continue
		}
		d := &appsv1.Deployment{}
		if err := yaml.UnmarshalStrict(doc, d); err != nil {
			return nil, err
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name == container {
				return d, nil
			}
		}
	}
}

func parseWebhooks(manifest string) (Webhooks, error) {
	var w Webhooks
	rd := utilyaml.NewYAMLReader(bufioReader(manifest))
	for {
		doc, err := rd.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return w, err
		}
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return w, err
		}
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			m := &admissionv1.MutatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, m); err != nil {
				return w, err
			}
			w.Mutating = append(w.Mutating, m)
		case "ValidatingWebhookConfiguration":
			v := &admissionv1.ValidatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, v); err != nil {
				return w, err
			}
			w.Validating = append(w.Validating, v)
		case "ValidatingAdmissionPolicy":
			p := &admissionv1.ValidatingAdmissionPolicy{}
			if err := yaml.UnmarshalStrict(doc, p); err != nil {
				return w, err
			}
			w.Policies = append(w.Policies, p)
		case "ValidatingAdmissionPolicyBinding":
			b := &admissionv1.ValidatingAdmissionPolicyBinding{}
			if err := yaml.UnmarshalStrict(doc, b); err != nil {
				return w, err
			}
			w.Bindings = append(w.Bindings, b)
		case "MutatingAdmissionPolicy":
			p := &admissionv1.MutatingAdmissionPolicy{}
			if err := yaml.UnmarshalStrict(doc, p); err != nil {
				return w, err
			}
			w.MutatingPolicies = append(w.MutatingPolicies, p)
		case "MutatingAdmissionPolicyBinding":
			b := &admissionv1.MutatingAdmissionPolicyBinding{}
			if err := yaml.UnmarshalStrict(doc, b); err != nil {
				return w, err
			}
			w.MutatingBindings = append(w.MutatingBindings, b)
		}
	}
	if len(w.Mutating) == 0 || len(w.Validating) == 0 {
		return w, fmt.Errorf("the chart rendered %d mutating and %d validating webhook configurations, want both", len(w.Mutating), len(w.Validating))
	}
	return w, nil
}

// PointAt rewrites every webhook's client config to call url+path directly,
// as envtest and the demo do instead of going through a Service.
func (w Webhooks) PointAt(base string) {
	set := func(cc *admissionv1.WebhookClientConfig) {
		if cc.Service == nil {
			return
		}
		path := ""
		if cc.Service.Path != nil {
			path = *cc.Service.Path
		}
		u := base + path
		cc.URL, cc.Service = &u, nil
	}
	for _, m := range w.Mutating {
		for i := range m.Webhooks {
			set(&m.Webhooks[i].ClientConfig)
		}
	}
	for _, v := range w.Validating {
		for i := range v.Webhooks {
			set(&v.Webhooks[i].ClientConfig)
		}
	}
}

func bufioReader(s string) *bufio.Reader { return bufio.NewReader(bytes.NewBufferString(s)) }

// FailsOpen reports whether the chart's Pod validating webhook fails open,
// as the chart then runs the webhook with --untreated-pods=admit.
func (w Webhooks) FailsOpen() bool {
	for _, v := range w.Validating {
		for _, h := range v.Webhooks {
			if h.Name == "validate-pods.graceguard.io" {
				return h.FailurePolicy != nil && *h.FailurePolicy == admissionv1.Ignore
			}
		}
	}
	return false
}

// Env is a container's environment as the kubelet would give it: its
// downward-API values resolved for a Pod in namespace, resource fields
// from the container's own resources (rounded up by the divisor, as the
// kubelet does). An environment the lab cannot resolve is an error, so a
// new one in the chart is not silently dropped.
func Env(c corev1.Container, namespace string) ([]string, error) {
	var out []string
	for _, v := range c.Env {
		value := v.Value
		switch vf := v.ValueFrom; {
		case vf == nil:
		case vf.FieldRef != nil && vf.FieldRef.FieldPath == "metadata.namespace":
			value = namespace
		case vf.ResourceFieldRef != nil:
			q, ok := map[string]resource.Quantity{
				"limits.memory": c.Resources.Limits[corev1.ResourceMemory], "requests.memory": c.Resources.Requests[corev1.ResourceMemory],
				"limits.cpu": c.Resources.Limits[corev1.ResourceCPU], "requests.cpu": c.Resources.Requests[corev1.ResourceCPU],
			}[vf.ResourceFieldRef.Resource]
			if !ok {
				return nil, fmt.Errorf("the chart's env %s comes from %s, which the lab cannot resolve", v.Name, vf.ResourceFieldRef.Resource)
			}
			divisor := vf.ResourceFieldRef.Divisor
			if divisor.IsZero() {
				divisor = resource.MustParse("1")
			}
			// k8s.io/kubernetes pkg/api/v1/resource: ExtractContainerResourceValue
			// rounds up, in millis for CPU.
			n := (q.MilliValue() + divisor.MilliValue() - 1) / divisor.MilliValue()
			value = fmt.Sprint(n)
		default:
			return nil, fmt.Errorf("the chart's env %s comes from %v, which the lab cannot resolve", v.Name, vf)
		}
		out = append(out, v.Name+"="+value)
	}
	return out, nil
}
