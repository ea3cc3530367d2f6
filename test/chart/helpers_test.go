// Package chart_test renders and lints charts/graceguard with the Helm SDK
// (helm.sh/helm/v4) and checks the objects a user would get, decoded
// strictly into the Kubernetes API types so a misspelled or misplaced
// field in a template fails here rather than at install time.
package chart_test

import (
	"fmt"
	"log/slog"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

const (
	chartDir    = "../../charts/graceguard"
	releaseName = "graceguard"
	namespace   = "graceguard-system"
	// fullname is the resource name for releaseName (it contains the chart name).
	fullname = "graceguard"
	// testNamespace is the namespace `helm test` creates for its dry-run Pod.
	testNamespace = "graceguard-selftest"
)

// TestMain silences Helm's slog output (lint-mode notices, debug lines);
// failures are reported through the returned errors.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.DiscardHandler))
	os.Exit(m.Run())
}

// rendered is one release as `helm template` would print it, decoded.
type rendered struct {
	manifest string
	notes    string
	// objects by "Kind/name", typed for the kinds the chart uses from
	// Kubernetes, map[string]any for cert-manager's.
	objects map[string]any
	// hooks are the Helm hooks (`helm template` prints them too; an
	// install applies them only at their events), decoded the same way,
	// with Helm's reading of their annotations by "Kind/name".
	hooks     map[string]any
	hookSpecs map[string]*release.Hook
}

// values parses a YAML snippet of values; "" is no overrides.
func values(t *testing.T, y string) map[string]any {
	t.Helper()
	v := map[string]any{}
	if err := yaml.Unmarshal([]byte(y), &v); err != nil {
		t.Fatalf("test values do not parse: %v\n%s", err, y)
	}
	return v
}

type renderOpts struct {
	upgrade     bool
	kubeVersion string
	// unchecked leaves out the schema and the cross-field checks
	// (templates/validate.yaml): what the templates alone would render.
	unchecked bool
	// apiVersions are API group versions the cluster serves, besides the
	// built-in ones (.Capabilities.APIVersions).
	apiVersions []string
}

// renderChart renders the chart client-side, like `helm template` (or
// `helm upgrade --dry-run=client` when upgrade is set).
func renderChart(vals map[string]any, o renderOpts) (*release.Release, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	if o.unchecked {
		ch.Schema = nil
		ch.Templates = slices.DeleteFunc(slices.Clone(ch.Templates), func(f *common.File) bool { return f.Name == "templates/validate.yaml" })
	}
	inst := action.NewInstall(action.NewConfiguration())
	inst.DryRunStrategy = action.DryRunClient
	inst.Replace = true
	inst.ReleaseName = releaseName
	inst.Namespace = namespace
	inst.IsUpgrade = o.upgrade
	inst.APIVersions = o.apiVersions
	kv := o.kubeVersion
	if kv == "" {
		kv = "v1.35.0"
	}
	inst.KubeVersion, err = common.ParseKubeVersion(kv)
	if err != nil {
		return nil, err
	}
	r, err := inst.Run(ch, vals)
	if err != nil {
		return nil, err
	}
	rel, ok := r.(*release.Release)
	if !ok {
		return nil, fmt.Errorf("release is a %T", r)
	}
	return rel, nil
}

// render renders with the given values (a YAML snippet) and fails the test
// on any error.
func render(t *testing.T, y string) *rendered {
	t.Helper()
	rel, err := renderChart(values(t, y), renderOpts{})
	if err != nil {
		t.Fatalf("rendering with values\n%s\nfailed: %v", y, err)
	}
	return decode(t, rel)
}

// renderErr renders and returns the error, failing the test if there is none.
func renderErr(t *testing.T, y string) string {
	t.Helper()
	_, err := renderChart(values(t, y), renderOpts{})
	if err == nil {
		t.Fatalf("rendering with values\n%s\nsucceeded, want an error", y)
	}
	return err.Error()
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

func decode(t *testing.T, rel *release.Release) *rendered {
	t.Helper()
	r := &rendered{manifest: rel.Manifest, notes: rel.Info.Notes, objects: map[string]any{}, hooks: map[string]any{}, hookSpecs: map[string]*release.Hook{}}
	for _, doc := range docSep.Split(rel.Manifest, -1) {
		decodeDoc(t, doc, r.objects, namespace)
	}
	// The `helm test` Role and RoleBinding live in the namespace the tests
	// create.
	namespaces := []string{namespace}
	for _, h := range rel.Hooks {
		if h.Kind == "Namespace" {
			namespaces = append(namespaces, h.Name)
		}
	}
	for _, h := range rel.Hooks {
		key := decodeDoc(t, h.Manifest, r.hooks, namespaces...)
		r.hookSpecs[key] = h
	}
	return r
}

// decodeDoc decodes one rendered document into objects, by "Kind/name",
// and returns its key ("" for an empty document).
func decodeDoc(t *testing.T, doc string, objects map[string]any, namespaces ...string) string {
	t.Helper()
	if strings.TrimSpace(stripComments(doc)) == "" {
		return ""
	}
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
		t.Fatalf("rendered document does not parse: %v\n%s", err, doc)
	}
	var obj any
	switch meta.APIVersion + "/" + meta.Kind {
	case "apps/v1/Deployment":
		obj = &appsv1.Deployment{}
	case "v1/Service":
		obj = &corev1.Service{}
	case "v1/ServiceAccount":
		obj = &corev1.ServiceAccount{}
	case "v1/Secret":
		obj = &corev1.Secret{}
	case "v1/Namespace":
		obj = &corev1.Namespace{}
	case "v1/Pod":
		obj = &corev1.Pod{}
	case "batch/v1/Job":
		obj = &batchv1.Job{}
	case "policy/v1/PodDisruptionBudget":
		obj = &policyv1.PodDisruptionBudget{}
	case "v1/ResourceQuota":
		obj = &corev1.ResourceQuota{}
	case "networking.k8s.io/v1/NetworkPolicy":
		obj = &networkingv1.NetworkPolicy{}
	case "rbac.authorization.k8s.io/v1/ClusterRole":
		obj = &rbacv1.ClusterRole{}
	case "rbac.authorization.k8s.io/v1/ClusterRoleBinding":
		obj = &rbacv1.ClusterRoleBinding{}
	case "rbac.authorization.k8s.io/v1/Role":
		obj = &rbacv1.Role{}
	case "rbac.authorization.k8s.io/v1/RoleBinding":
		obj = &rbacv1.RoleBinding{}
	case "admissionregistration.k8s.io/v1/MutatingWebhookConfiguration":
		obj = &admissionv1.MutatingWebhookConfiguration{}
	case "admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration":
		obj = &admissionv1.ValidatingWebhookConfiguration{}
	case "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy":
		obj = &admissionv1.ValidatingAdmissionPolicy{}
	case "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding":
		obj = &admissionv1.ValidatingAdmissionPolicyBinding{}
	case "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy":
		obj = &admissionv1.MutatingAdmissionPolicy{}
	case "admissionregistration.k8s.io/v1/MutatingAdmissionPolicyBinding":
		obj = &admissionv1.MutatingAdmissionPolicyBinding{}
	case "apiextensions.k8s.io/v1/CustomResourceDefinition":
		obj = &apiextensionsv1.CustomResourceDefinition{}
	case "cert-manager.io/v1/Issuer", "cert-manager.io/v1/Certificate",
		"monitoring.coreos.com/v1/PodMonitor", "monitoring.coreos.com/v1/PrometheusRule",
		"grafana.integreatly.org/v1beta1/GrafanaDashboard":
		obj = &map[string]any{}
	case "v1/ConfigMap":
		obj = &corev1.ConfigMap{}
	default:
		t.Fatalf("unexpected object %s %s/%s rendered; teach the test about it", meta.APIVersion, meta.Kind, meta.Metadata.Name)
	}
	// Strict: a field the API type does not know is a template bug.
	if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
		t.Fatalf("%s %s does not decode strictly: %v\n%s", meta.Kind, meta.Metadata.Name, err, doc)
	}
	if meta.Metadata.Namespace != "" && !slices.Contains(namespaces, meta.Metadata.Namespace) {
		t.Errorf("%s %s is in namespace %q, want one of %v", meta.Kind, meta.Metadata.Name, meta.Metadata.Namespace, namespaces)
	}
	key := meta.Kind + "/" + meta.Metadata.Name
	if _, dup := objects[key]; dup {
		t.Fatalf("%s rendered twice", key)
	}
	objects[key] = obj
	return key
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// get returns the object kind/name as T, failing the test when it is absent.
func get[T any](t *testing.T, r *rendered, kind, name string) T {
	t.Helper()
	o, ok := r.objects[kind+"/"+name]
	if !ok {
		t.Fatalf("no %s %q rendered; have %v", kind, name, r.keys())
	}
	v, ok := o.(T)
	if !ok {
		t.Fatalf("%s/%s is a %T", kind, name, o)
	}
	return v
}

func (r *rendered) has(kind, name string) bool {
	_, ok := r.objects[kind+"/"+name]
	return ok
}

func (r *rendered) keys() []string {
	return slices.Sorted(maps.Keys(r.objects))
}

func (r *rendered) kinds(kind string) []string {
	var names []string
	for _, k := range r.keys() {
		if n, ok := strings.CutPrefix(k, kind+"/"); ok {
			names = append(names, n)
		}
	}
	return names
}

// only returns the single object of a kind, whatever its name.
func only[T any](t *testing.T, r *rendered, kind string) T {
	t.Helper()
	names := r.kinds(kind)
	if len(names) != 1 {
		t.Fatalf("want one %s, have %v", kind, names)
	}
	return get[T](t, r, kind, names[0])
}

// deployment is the webhook's Deployment: the one named after the
// release's full name (the observer's is fullname-observer).
func (r *rendered) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	for _, name := range r.kinds("Deployment") {
		if !strings.HasSuffix(name, "-observer") {
			return get[*appsv1.Deployment](t, r, "Deployment", name)
		}
	}
	t.Fatalf("no webhook Deployment rendered; have %v", r.keys())
	return nil
}

// observer is the shutdown observer's Deployment.
func (r *rendered) observer(t *testing.T) *appsv1.Deployment {
	t.Helper()
	for _, name := range r.kinds("Deployment") {
		if strings.HasSuffix(name, "-observer") {
			return get[*appsv1.Deployment](t, r, "Deployment", name)
		}
	}
	t.Fatalf("no observer Deployment rendered; have %v", r.keys())
	return nil
}

func (r *rendered) container(t *testing.T) corev1.Container {
	t.Helper()
	cs := r.deployment(t).Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("want one container, got %d", len(cs))
	}
	return cs[0]
}

func (r *rendered) mutating(t *testing.T) *admissionv1.MutatingWebhookConfiguration {
	t.Helper()
	return only[*admissionv1.MutatingWebhookConfiguration](t, r, "MutatingWebhookConfiguration")
}

func (r *rendered) validating(t *testing.T) *admissionv1.ValidatingWebhookConfiguration {
	t.Helper()
	return only[*admissionv1.ValidatingWebhookConfiguration](t, r, "ValidatingWebhookConfiguration")
}

func (r *rendered) validatingHook(t *testing.T, name string) admissionv1.ValidatingWebhook {
	t.Helper()
	for _, h := range r.validating(t).Webhooks {
		if h.Name == name {
			return h
		}
	}
	t.Fatalf("no validating webhook %q", name)
	return admissionv1.ValidatingWebhook{}
}

// flags returns the container's --name=value arguments as a map, failing
// on duplicates and on arguments that are not flags.
func flags(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	if len(c.Command) != 0 {
		t.Errorf("command %q overrides the image's entrypoint", c.Command)
	}
	m := map[string]string{}
	for _, a := range c.Args {
		name, val, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !ok {
			t.Fatalf("argument %q is not --flag=value", a)
		}
		if _, dup := m[name]; dup && name != "routing-profile" { // the one repeatable flag
			t.Fatalf("flag --%s given twice", name)
		}
		m[name] = val
	}
	return m
}

// mustContain fails unless s contains every want.
func mustContain(t *testing.T, what, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("%s does not contain %q:\n%s", what, w, s)
		}
	}
}
