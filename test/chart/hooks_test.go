package chart_test

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"

	"github.com/graceguard/graceguard/pkg/config"
	"github.com/graceguard/graceguard/pkg/helmhook"
)

const (
	servicePod  = "graceguard-selftest-service"
	mutationPod = "graceguard-selftest-mutation"
	selftest    = "graceguard-selftest"
	preDelete   = "graceguard-pre-delete"
)

// hook returns the hook object kind/name as T and Helm's reading of it.
func hook[T any](t *testing.T, r *rendered, kind, name string) (T, *release.Hook) {
	t.Helper()
	o, ok := r.hooks[kind+"/"+name]
	if !ok {
		t.Fatalf("no %s hook %q rendered; have %v", kind, name, slices.Sorted(func(yield func(string) bool) {
			for k := range r.hooks {
				if !yield(k) {
					return
				}
			}
		}))
	}
	v, ok := o.(T)
	if !ok {
		t.Fatalf("%s/%s is a %T", kind, name, o)
	}
	return v, r.hookSpecs[kind+"/"+name]
}

// restricted fails unless the restricted Pod Security Standard (the
// admission plugin's own checks, at the latest version) admits the Pod.
func restricted(t *testing.T, what string, meta *metav1.ObjectMeta, spec *corev1.PodSpec) {
	t.Helper()
	e, err := psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	res := psapolicy.AggregateCheckResults(e.EvaluatePod(psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}, meta, spec))
	if !res.Allowed {
		t.Errorf("%s violates the restricted Pod Security Standard: %s: %s", what, res.ForbiddenReason(), res.ForbiddenDetail())
	}
}

// hookPod checks what every hook Pod shares: the chart's image and
// security contexts, the restricted standard, no labels the webhook's
// Service, budget or policy select, opted out of graceguard, in the
// release namespace, as its own ServiceAccount; it returns its arguments.
func hookPod(t *testing.T, r *rendered, what string, meta metav1.ObjectMeta, spec corev1.PodSpec) []string {
	t.Helper()
	restricted(t, what, &meta, &spec)
	d := r.deployment(t)
	if !reflect.DeepEqual(spec.SecurityContext, d.Spec.Template.Spec.SecurityContext) {
		t.Errorf("%s: pod securityContext %+v, want the chart's %+v", what, spec.SecurityContext, d.Spec.Template.Spec.SecurityContext)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%s: %d containers, want 1", what, len(spec.Containers))
	}
	c := spec.Containers[0]
	if !reflect.DeepEqual(c.SecurityContext, r.container(t).SecurityContext) || c.Image != r.container(t).Image || len(c.Command) != 0 {
		t.Errorf("%s: container %s image %s command %q securityContext %+v: want the webhook's image, entrypoint and securityContext", what, c.Name, c.Image, c.Command, c.SecurityContext)
	}
	if spec.RestartPolicy != corev1.RestartPolicyNever || spec.ServiceAccountName == d.Spec.Template.Spec.ServiceAccountName || spec.ServiceAccountName == "" {
		t.Errorf("%s: restartPolicy %s, ServiceAccount %q: want Never, and a ServiceAccount of its own", what, spec.RestartPolicy, spec.ServiceAccountName)
	}
	if meta.Annotations["graceguard.io/inject"] != "false" {
		t.Errorf("%s: annotations %v: want graceguard.io/inject: \"false\", as graceguard's own Pods", what, meta.Annotations)
	}
	svc := get[*corev1.Service](t, r, "Service", fullname)
	if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(meta.Labels)) {
		t.Errorf("%s: labels %v match the webhook Service's selector: the API server's calls would reach it", what, meta.Labels)
	}
	if s, _ := metav1.LabelSelectorAsSelector(d.Spec.Selector); s.Matches(labels.Set(meta.Labels)) {
		t.Errorf("%s: labels %v match the webhook Deployment's selector", what, meta.Labels)
	}
	return c.Args
}

func TestHelmTestPodsCheckTheServiceAndAMutation(t *testing.T) {
	r := render(t, "")
	ns, nsHook := hook[*corev1.Namespace](t, r, "Namespace", selftest)
	svcPod, svcHook := hook[*corev1.Pod](t, r, "Pod", servicePod)
	mutPod, mutHook := hook[*corev1.Pod](t, r, "Pod", mutationPod)

	for key, h := range r.hookSpecs {
		if !strings.HasPrefix(h.Name, selftest) {
			continue
		}
		if !slices.Equal(h.Events, []release.HookEvent{release.HookTest}) {
			t.Errorf("%s is a %v hook, want test only", key, h.Events)
		}
		if h.Kind == "Pod" || h.Kind == "Namespace" {
			continue
		}
		// What the Pods need exists before them and is gone after.
		if h.Weight >= svcHook.Weight || h.Weight <= nsHook.Weight {
			t.Errorf("%s has weight %d: want it after the Namespace (%d) and before the Pods (%d)", key, h.Weight, nsHook.Weight, svcHook.Weight)
		}
		if !slices.Equal(h.DeletePolicies, []release.HookDeletePolicy{release.HookBeforeHookCreation, release.HookSucceeded}) {
			t.Errorf("%s delete policies %v", key, h.DeletePolicies)
		}
	}
	if svcHook.Weight >= mutHook.Weight {
		t.Errorf("the service check (weight %d) must run before the mutation check (%d): a webhook it cannot reach explains a Pod left untreated", svcHook.Weight, mutHook.Weight)
	}
	for _, h := range []*release.Hook{svcHook, mutHook} {
		if !slices.Equal(h.DeletePolicies, []release.HookDeletePolicy{release.HookBeforeHookCreation, release.HookSucceeded}) {
			t.Errorf("%s delete policies %v: want a passed Pod deleted and a failed one kept for its logs", h.Name, h.DeletePolicies)
		}
	}
	// Helm's default, before-hook-creation, would delete whatever
	// namespace of that name there is.
	if !slices.Equal(nsHook.DeletePolicies, []release.HookDeletePolicy{release.HookSucceeded}) {
		t.Errorf("the test Namespace's delete policies %v, want hook-succeeded only: never delete a namespace graceguard did not create", nsHook.DeletePolicies)
	}
	if ns.Labels["graceguard.io/inject"] != "enabled" || ns.Labels["graceguard.io/mode"] != "enforce" || ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("the test Namespace's labels %v: want it opted in, in enforce mode, restricted", ns.Labels)
	}
	sel := r.mutating(t).Webhooks[0].NamespaceSelector
	if s, _ := metav1.LabelSelectorAsSelector(sel); !s.Matches(labels.Set(ns.Labels)) {
		t.Errorf("the mutating webhook's namespaceSelector %v does not select the test Namespace %v", sel, ns.Labels)
	}

	parse := func(what string, args []string) helmhook.SelftestConfig {
		t.Helper()
		if len(args) == 0 || args[0] != "selftest" {
			t.Fatalf("%s: args %q, want `webhook selftest ...`", what, args)
		}
		c := helmhook.DefaultSelftest()
		c.Namespace = namespace // the Pod's POD_NAMESPACE
		parseArgs(t, what, config.SelftestFlags(&c), args[1:])
		return c
	}
	svc := parse("the service check", hookPod(t, r, "the service check", svcPod.ObjectMeta, svcPod.Spec))
	if svc.Check != helmhook.CheckService || svc.MutatingWebhookConfiguration != r.mutating(t).Name || svc.ValidatingWebhookConfiguration != r.validating(t).Name || svc.Timeout.String() != "1m0s" {
		t.Errorf("the service check runs %+v, want the release's configurations %s, %s within tests.timeout", svc, r.mutating(t).Name, r.validating(t).Name)
	}
	mut := parse("the mutation check", hookPod(t, r, "the mutation check", mutPod.ObjectMeta, mutPod.Spec))
	if mut.Check != helmhook.CheckMutation || mut.TestNamespace != ns.Name || mut.Image != r.container(t).Image {
		t.Errorf("the mutation check runs %+v, want namespace %s and the chart's image", mut, ns.Name)
	}
	if svcPod.Spec.ServiceAccountName != selftest || mutPod.Spec.ServiceAccountName != selftest {
		t.Errorf("the test Pods run as %s and %s, want %s", svcPod.Spec.ServiceAccountName, mutPod.Spec.ServiceAccountName, selftest)
	}
	if c := svcPod.Spec.Containers[0]; c.Resources.Limits.Memory().String() != "64Mi" {
		t.Errorf("resources %+v, want tests.resources", c.Resources)
	}
}

func TestHelmTestRBACIsScopedToItsChecks(t *testing.T) {
	r := render(t, "")
	sa, _ := hook[*corev1.ServiceAccount](t, r, "ServiceAccount", selftest)
	cr, _ := hook[*rbacv1.ClusterRole](t, r, "ClusterRole", selftest)
	crb, _ := hook[*rbacv1.ClusterRoleBinding](t, r, "ClusterRoleBinding", selftest)
	role, _ := hook[*rbacv1.Role](t, r, "Role", selftest)
	rb, _ := hook[*rbacv1.RoleBinding](t, r, "RoleBinding", selftest)
	want := []rbacv1.PolicyRule{{APIGroups: []string{"admissionregistration.k8s.io"},
		Resources: []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}, ResourceNames: []string{fullname}, Verbs: []string{"get"}}}
	if !reflect.DeepEqual(cr.Rules, want) {
		t.Errorf("the test ClusterRole grants %+v, want only %+v", cr.Rules, want)
	}
	// Pods, created (server-side dry run) in the test namespace only.
	if want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create"}}}; !reflect.DeepEqual(role.Rules, want) || role.Namespace != testNamespace {
		t.Errorf("the test Role in %s grants %+v, want only %+v in %s", role.Namespace, role.Rules, want, testNamespace)
	}
	for _, b := range []struct {
		kind     string
		subjects []rbacv1.Subject
		ref      rbacv1.RoleRef
	}{{"ClusterRoleBinding", crb.Subjects, crb.RoleRef}, {"RoleBinding", rb.Subjects, rb.RoleRef}} {
		if len(b.subjects) != 1 || b.subjects[0].Name != sa.Name || b.subjects[0].Namespace != namespace || b.ref.Name != selftest {
			t.Errorf("%s binds %+v to %+v, want %s to %s/%s", b.kind, b.ref, b.subjects, selftest, namespace, sa.Name)
		}
	}
}

func TestPreDeleteHookUnregistersTheReleasesWebhooks(t *testing.T) {
	r := render(t, "")
	job, jobHook := hook[*batchv1.Job](t, r, "Job", preDelete)
	sa, saHook := hook[*corev1.ServiceAccount](t, r, "ServiceAccount", preDelete)
	cr, crHook := hook[*rbacv1.ClusterRole](t, r, "ClusterRole", preDelete)
	crb, crbHook := hook[*rbacv1.ClusterRoleBinding](t, r, "ClusterRoleBinding", preDelete)
	for _, h := range []*release.Hook{jobHook, saHook, crHook, crbHook} {
		if !slices.Equal(h.Events, []release.HookEvent{release.HookPreDelete}) ||
			!slices.Equal(h.DeletePolicies, []release.HookDeletePolicy{release.HookBeforeHookCreation, release.HookSucceeded}) {
			t.Errorf("%s %s: events %v, delete policies %v; want pre-delete, deleted once it succeeded", h.Kind, h.Name, h.Events, h.DeletePolicies)
		}
		if h != jobHook && h.Weight >= jobHook.Weight {
			t.Errorf("%s %s (weight %d) must exist before the Job (weight %d)", h.Kind, h.Name, h.Weight, jobHook.Weight)
		}
	}
	if !slices.Equal(jobHook.OutputLogPolicies, []release.HookOutputLogPolicy{release.HookOutputOnFailed}) {
		t.Errorf("output log policies %v, want Helm to print the Job's log when it fails", jobHook.OutputLogPolicies)
	}
	want := []rbacv1.PolicyRule{{APIGroups: []string{"admissionregistration.k8s.io"},
		Resources: []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}, ResourceNames: []string{fullname}, Verbs: []string{"get", "delete"}}}
	if !reflect.DeepEqual(cr.Rules, want) {
		t.Errorf("the pre-delete ClusterRole grants %+v, want only %+v", cr.Rules, want)
	}
	if len(crb.Subjects) != 1 || crb.Subjects[0].Name != sa.Name || crb.Subjects[0].Namespace != namespace || crb.RoleRef.Name != cr.Name {
		t.Errorf("the pre-delete ClusterRoleBinding binds %+v to %+v", crb.RoleRef, crb.Subjects)
	}
	spec := job.Spec.Template.Spec
	if spec.ServiceAccountName != sa.Name {
		t.Errorf("the Job runs as %s, want %s", spec.ServiceAccountName, sa.Name)
	}
	if job.Spec.BackoffLimit == nil || *job.Spec.BackoffLimit > 3 || job.Spec.ActiveDeadlineSeconds == nil || *job.Spec.ActiveDeadlineSeconds >= 300 {
		t.Errorf("backoffLimit %v, activeDeadlineSeconds %v: want a few retries, failing before Helm's default 5m timeout", job.Spec.BackoffLimit, job.Spec.ActiveDeadlineSeconds)
	}
	args := hookPod(t, r, "the pre-delete Job", job.Spec.Template.ObjectMeta, spec)
	if len(args) == 0 || args[0] != "unregister" {
		t.Fatalf("the Job runs %q, want `webhook unregister ...`", args)
	}
	c := helmhook.DefaultUnregister()
	c.Namespace = namespace
	parseArgs(t, "the pre-delete Job", config.UnregisterFlags(&c), args[1:])
	if c.Release != releaseName || c.MutatingWebhookConfiguration != r.mutating(t).Name || c.ValidatingWebhookConfiguration != r.validating(t).Name {
		t.Errorf("the Job unregisters %+v, want release %s's configurations %s, %s", c, releaseName, r.mutating(t).Name, r.validating(t).Name)
	}
	mustContain(t, "NOTES", r.notes, "`helm uninstall` first removes the webhook configurations")
}

func TestHooksCanBeTurnedOff(t *testing.T) {
	for vals, want := range map[string][]string{
		"tests: {enabled: false}":     {"ClusterRole/" + preDelete, "ClusterRoleBinding/" + preDelete, "Job/" + preDelete, "ServiceAccount/" + preDelete},
		"preDelete: {enabled: false}": {"ClusterRole/" + selftest, "ClusterRoleBinding/" + selftest, "Namespace/" + selftest, "Pod/" + mutationPod, "Pod/" + servicePod, "Role/" + selftest, "RoleBinding/" + selftest, "ServiceAccount/" + selftest},
		// Without the chart's RBAC the hooks could not work: none.
		"{rbac: {create: false}, serviceAccount: {create: false, name: existing}}": nil,
	} {
		r := render(t, vals)
		var got []string
		for k := range r.hooks {
			got = append(got, k)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: hooks %v, want %v", vals, got, want)
		}
	}
	if notes := render(t, "tests: {enabled: false}").notes; strings.Contains(notes, "helm test") {
		t.Errorf("NOTES offer `helm test` with tests.enabled=false:\n%s", notes)
	}
}

func TestHelmTestHonoursTheNetworkPolicy(t *testing.T) {
	if r := render(t, ""); r.hooks["NetworkPolicy/"+selftest] != nil {
		t.Error("a test NetworkPolicy is rendered without networkPolicy.enabled")
	}
	r := render(t, "networkPolicy: {enabled: true, webhookFrom: [{ipBlock: {cidr: 10.0.0.0/24}}]}")
	np, _ := hook[*networkingv1.NetworkPolicy](t, r, "NetworkPolicy", selftest)
	svcPod, _ := hook[*corev1.Pod](t, r, "Pod", servicePod)
	if s, _ := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector); !s.Matches(labels.Set(r.deployment(t).Spec.Template.Labels)) {
		t.Errorf("the test NetworkPolicy does not select the webhook's Pods")
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 || np.Spec.Ingress[0].Ports[0].Port.StrVal != "webhook" {
		t.Fatalf("the test NetworkPolicy admits %+v, want the service check to the webhook port only", np.Spec.Ingress)
	}
	from := np.Spec.Ingress[0].From[0]
	if from.NamespaceSelector != nil || from.IPBlock != nil {
		t.Errorf("the test NetworkPolicy admits %+v, want Pods of the release namespace only", from)
	}
	if s, _ := metav1.LabelSelectorAsSelector(from.PodSelector); !s.Matches(labels.Set(svcPod.Labels)) {
		t.Errorf("the test NetworkPolicy admits %v, not the service check's Pod %v", from.PodSelector, svcPod.Labels)
	}
}

func TestHookChecksAtRenderTime(t *testing.T) {
	mustContain(t, "the error", renderErr(t, "tests: {timeout: 10m}"), "tests.timeout: 10m is out of range; want 1s to 5m (--timeout)")
	mustContain(t, "the error", renderErr(t, "config: {excludedNamespaces: [graceguard-selftest]}"),
		"config.excludedNamespaces: lists graceguard-selftest, the namespace `helm test` creates its dry-run Pod in")
	mustContain(t, "the error", renderErr(t, "tests: {timeout: 30}"), "at '/tests/timeout': got number, want string")
}

// A hook's name keeps its suffix, so it never becomes the name of the
// webhook's own ClusterRole or ServiceAccount, and stays a DNS label.
func TestHookNamesKeepTheirSuffix(t *testing.T) {
	long := strings.Repeat("g", 63)
	r := render(t, "fullnameOverride: "+long)
	for key := range r.hooks {
		name := key[strings.Index(key, "/")+1:]
		if len(name) > 63 || name == long || !(strings.HasSuffix(name, "-selftest") || strings.HasSuffix(name, "-selftest-service") ||
			strings.HasSuffix(name, "-selftest-mutation") || strings.HasSuffix(name, "-pre-delete")) {
			t.Errorf("hook %s: want at most 63 characters ending in its suffix", key)
		}
	}
}

// The CRD is a template: `helm upgrade` updates it (Helm never upgrades
// crds/), `helm uninstall` keeps it, and it is exactly what controller-gen
// generated.
func TestTheCRDIsATemplateKeptOnUninstall(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if crds := ch.CRDObjects(); len(crds) != 0 {
		t.Errorf("the chart has %d CRDs in crds/, which Helm never upgrades", len(crds))
	}
	r := render(t, "")
	crd := get[*apiextensionsv1.CustomResourceDefinition](t, r, "CustomResourceDefinition", "shutdownreports.graceguard.io")
	if crd.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Errorf("annotations %v: want helm.sh/resource-policy: keep, or helm uninstall deletes every ShutdownReport", crd.Annotations)
	}
	if crd.Labels["app.kubernetes.io/managed-by"] != "Helm" || crd.Labels["app.kubernetes.io/part-of"] != "graceguard" {
		t.Errorf("labels %v, want the chart's", crd.Labels)
	}
	data, err := os.ReadFile(filepath.Join(chartDir, "files", "crds", "graceguard.io_shutdownreports.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	generated := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, generated); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(crd.Spec, generated.Spec) || crd.Annotations["controller-gen.kubebuilder.io/version"] != generated.Annotations["controller-gen.kubebuilder.io/version"] {
		t.Errorf("the rendered CRD's spec differs from files/crds/ (what make generate wrote)")
	}
	if n := len(r.kinds("CustomResourceDefinition")); n != 1 {
		t.Errorf("%d CRDs rendered, want 1", n)
	}
	if r := render(t, "crds: {install: false}"); r.has("CustomResourceDefinition", "shutdownreports.graceguard.io") {
		t.Error("the CRD is rendered with crds.install=false")
	}
}
