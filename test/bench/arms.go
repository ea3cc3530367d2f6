package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/internal/fixture"
	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/test/bench/policy"
	"github.com/graceguard/graceguard/test/harness/chart"
)

// The arms of the Pod creation phase: ways the same typical Pods are
// admitted by the same API server, measured in one run, interleaved.
const (
	ArmNone         = "none"
	ArmNativePolicy = "native-policy"
	ArmNoopOneCall  = "noop-one-call"
	ArmNoopChart    = "noop-chart"
	ArmNoopPatch    = "noop-chart-patch"
	ArmNoopRecord   = "noop-one-call-record"
	ArmNoopOnePatch = "noop-one-call-patch"
	ArmGraceguard   = "graceguard"
	ArmTwoCalls     = "graceguard-two-calls"
	ArmHTTP2        = "graceguard-http2"
	// The pair measured on Pods without graceguard.io/readiness-path, on
	// which graceguard's whole injection is the native policy's first
	// mutation: that mutation alone, and graceguard.
	ArmNativeOneMutation = "native-one-mutation"
	ArmGraceguardNoProbe = "graceguard-no-probe-pods"
	// ArmWebhookOnly is graceguard without the chart's native floor (its
	// ValidatingAdmissionPolicy): what the floor costs, beside ArmGraceguard
	// (the chart's defaults).
	ArmWebhookOnly = "graceguard-webhook-only"
	// ArmMutatingFloor is the chart with nativeFloor.mutate=true: the
	// MutatingAdmissionPolicy too, which gives Pods their budget while
	// graceguard is down (off by default for what it costs).
	ArmMutatingFloor = "graceguard-mutating-floor"
)

// armLabel selects each arm's namespace: every admission configuration of
// the run matches exactly one arm. graceguard's own configurations (the
// chart's, as installed) keep their selector and exclude the arms that
// reuse their registrations (ArmNoopChart, ArmTwoCalls, ArmHTTP2,
// ArmGraceguardNoProbe: the API server counts calls by webhook name, so an
// arm sharing graceguard's names would add its calls to graceguard's).
const armLabel = "bench.graceguard.io/arm"

// arm is one way of admitting Pods.
type arm struct {
	name string
	// desc says what is registered, for the report.
	desc string
	// optedIn: the namespace carries graceguard.io/inject=enabled (the
	// graceguard arms: graceguard reads the label itself).
	optedIn bool
	// mutates: the stored Pods carry the budget record.
	mutates bool
	// webhook is the process the arm calls ("" for none).
	webhook string
	// hooks are the webhook names the arm registers, for the API server's
	// counts of calls and matchCondition skips.
	hooks []string
	// noProbePath: the arm creates the typical Pod without
	// graceguard.io/readiness-path (noProbePathPod), on which graceguard
	// adds no probe; the other arms create the typical Pod (benchPod).
	noProbePath bool
}

// pod is the Pod the arm creates, named name, in its namespace.
func (a arm) pod(name string) *corev1.Pod {
	if a.noProbePath {
		return noProbePathPod(armNamespace(a.name), name)
	}
	return benchPod(armNamespace(a.name), name)
}

// Process names in CPU accounting.
const (
	procAPIServer  = "kube-apiserver"
	procEtcd       = "etcd"
	procGraceguard = "graceguard"
	procHTTP2      = "graceguard (HTTP/2)"
	procNoop       = "no-op webhook"
	procClient     = "bench client"
)

// procOrder is the order of processes in reports.
var procOrder = []string{procAPIServer, procEtcd, procGraceguard, procHTTP2, procNoop, procClient}

func arms() []arm {
	chartHooks := func(prefix string) []string {
		return []string{prefix + "mutate-pods.graceguard.io", prefix + "validate-pods.graceguard.io"}
	}
	return []arm{
		{name: ArmNone, desc: "no admission policy or webhook"},
		{name: ArmNativePolicy, desc: "a native MutatingAdmissionPolicy doing graceguard's injection in CEL (test/bench/policy), no webhook", mutates: true},
		{name: ArmNativeOneMutation, desc: "the native policy's first mutation alone (test/bench/policy/graceguard-in-cel-one-mutation.yaml: preStop sleep, grace, " +
			"the budget record; no probe), no webhook, on the typical Pod without `graceguard.io/readiness-path`",
			mutates: true, noProbePath: true},
		{name: ArmNoopOneCall, desc: "a no-op webhook (controller-runtime's admission.Webhook, allows, no patch): one mutating call",
			webhook: procNoop, hooks: []string{"noop-one-call.bench.graceguard.io"}},
		{name: ArmNoopRecord, desc: "the one-call no-op registration answering every Pod with the smallest mutation: one patch operation adding graceguard's " +
			"budget record, nothing else (the API server's cost of any mutation, beside the cost of graceguard's larger patch)",
			mutates: true, webhook: procNoop, hooks: []string{"noop-one-call-record.bench.graceguard.io"}},
		{name: ArmNoopOnePatch, desc: "the one-call no-op registration answering every Pod with graceguard's patch of the typical Pod: the cost of the patch's size, " +
			"beside the record alone, without graceguard's registrations (their matchConditions, reinvocation)",
			mutates: true, webhook: procNoop, hooks: []string{"noop-one-call-patch.bench.graceguard.io"}},
		{name: ArmNoopChart, desc: "the no-op webhook behind graceguard's chart registrations: it writes no record, so validate-pods is called too",
			optedIn: true, webhook: procNoop, hooks: chartHooks("noop-chart-")},
		{name: ArmNoopPatch, desc: "the no-op webhook behind graceguard's chart registrations answering every Pod with the patch graceguard makes of the " +
			"typical Pod (computed once): graceguard's admission path through the API server (the patch applied, the record read by CEL, validate-pods skipped), without graceguard's own work",
			optedIn: true, mutates: true, webhook: procNoop, hooks: chartHooks("noop-patch-")},
		{name: ArmGraceguard, desc: "graceguard as its chart installs it: its webhooks and its native floor (a ValidatingAdmissionPolicy, docs/admission.md)",
			optedIn: true, mutates: true, webhook: procGraceguard, hooks: chartHooks("")},
		{name: ArmWebhookOnly, desc: "graceguard's webhooks alone (a copy of its registrations, limited to this arm), without the native floor (`nativeFloor.enabled=false`): what the floor costs",
			optedIn: true, mutates: true, webhook: procGraceguard, hooks: chartHooks("webhook-only-")},
		{name: ArmMutatingFloor, desc: "graceguard with the mutating floor too (`nativeFloor.mutate=true`, a copy of its registrations and policies, limited to this arm): " +
			"the API server gives each Pod its budget before graceguard's webhook refines it",
			optedIn: true, mutates: true, webhook: procGraceguard, hooks: chartHooks("mutating-floor-")},
		{name: ArmGraceguardNoProbe, desc: "graceguard as its chart registers it (a copy of its registrations, limited to this arm) on the typical Pod without " +
			"`graceguard.io/readiness-path`: it adds no probe, so its injection is the one-mutation policy's (and it answers each Pod with a warning that its serving container has no readiness probe, which the policy cannot)",
			optedIn: true, mutates: true, webhook: procGraceguard, hooks: chartHooks("no-probe-"), noProbePath: true},
		{name: ArmTwoCalls, desc: "graceguard with `webhooks.validatePods.skipProven=false`: validate-pods called for every Pod, as before",
			optedIn: true, mutates: true, webhook: procGraceguard, hooks: chartHooks("two-calls-")},
		{name: ArmHTTP2, desc: "graceguard as the chart registers it, served with `--enable-http2` (the API server then calls it over HTTP/2)",
			optedIn: true, mutates: true, webhook: procHTTP2, hooks: chartHooks("http2-")},
	}
}

func armNamespace(a string) string { return "bench-arm-" + a }

// excludeArms keeps graceguard's own configurations, its native floors'
// bindings included, off the arms that reuse its registrations: an
// opted-in namespace of one of those arms would otherwise meet both.
func excludeArms(w chart.Webhooks, arms ...string) {
	req := metav1.LabelSelectorRequirement{Key: armLabel, Operator: metav1.LabelSelectorOpNotIn, Values: arms}
	for _, b := range w.Bindings {
		b.Spec.MatchResources.NamespaceSelector.MatchExpressions = append(b.Spec.MatchResources.NamespaceSelector.MatchExpressions, req)
	}
	for _, b := range w.MutatingBindings {
		b.Spec.MatchResources.NamespaceSelector.MatchExpressions = append(b.Spec.MatchResources.NamespaceSelector.MatchExpressions, req)
	}
	for _, m := range w.Mutating {
		for i := range m.Webhooks {
			m.Webhooks[i].NamespaceSelector.MatchExpressions = append(m.Webhooks[i].NamespaceSelector.MatchExpressions, req)
		}
	}
	for _, v := range w.Validating {
		for i := range v.Webhooks {
			v.Webhooks[i].NamespaceSelector.MatchExpressions = append(v.Webhooks[i].NamespaceSelector.MatchExpressions, req)
		}
	}
}

// onlyArm renames a rendered copy of the chart's configurations (prefix on
// every name), points it at url with the run's CA, and limits it to arm's
// namespace.
func onlyArm(w chart.Webhooks, prefix, url string, ca []byte, armName string) {
	w.PointAt(url)
	req := metav1.LabelSelectorRequirement{Key: armLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{armName}}
	fix := func(name *string, cc *admissionregv1.WebhookClientConfig, sel **metav1.LabelSelector) {
		*name = prefix + *name
		cc.CABundle = ca
		if *sel == nil {
			*sel = &metav1.LabelSelector{}
		}
		(*sel).MatchExpressions = append((*sel).MatchExpressions, req)
	}
	for _, m := range w.Mutating {
		m.Name = prefix + m.Name
		for i := range m.Webhooks {
			h := &m.Webhooks[i]
			fix(&h.Name, &h.ClientConfig, &h.NamespaceSelector)
		}
	}
	for _, v := range w.Validating {
		v.Name = prefix + v.Name
		for i := range v.Webhooks {
			h := &v.Webhooks[i]
			fix(&h.Name, &h.ClientConfig, &h.NamespaceSelector)
		}
	}
	// The native floors: renamed, each binding limited to the arm.
	limit := func(rules **admissionregv1.MatchResources) {
		if *rules == nil {
			*rules = &admissionregv1.MatchResources{}
		}
		if (*rules).NamespaceSelector == nil {
			(*rules).NamespaceSelector = &metav1.LabelSelector{}
		}
		(*rules).NamespaceSelector.MatchExpressions = append((*rules).NamespaceSelector.MatchExpressions, req)
	}
	for _, p := range w.Policies {
		p.Name = prefix + p.Name
	}
	for _, b := range w.Bindings {
		b.Name, b.Spec.PolicyName = prefix+b.Name, prefix+b.Spec.PolicyName
		limit(&b.Spec.MatchResources)
	}
	for _, p := range w.MutatingPolicies {
		p.Name = prefix + p.Name
	}
	for _, b := range w.MutatingBindings {
		b.Name, b.Spec.PolicyName = prefix+b.Name, prefix+b.Spec.PolicyName
		limit(&b.Spec.MatchResources)
	}
}

// The native policies, each with its binding to its arm's namespace.
var (
	nativePolicyYAML      = policy.TwoMutations
	oneMutationPolicyYAML = policy.OneMutation
)

// installArms registers what each arm needs beside graceguard's own
// configurations (installed at start), creates the arms' namespaces, and
// waits until each arm admits a Pod the way it should.
func (c *cluster) installArms(ctx context.Context) error {
	create := func(w chart.Webhooks) error {
		for _, m := range w.Mutating {
			if _, err := c.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, m, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating %s: %w", m.Name, err)
			}
		}
		for _, v := range w.Validating {
			if _, err := c.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, v, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating %s: %w", v.Name, err)
			}
		}
		api := c.kube.AdmissionregistrationV1()
		for _, p := range w.Policies {
			if _, err := api.ValidatingAdmissionPolicies().Create(ctx, p, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating %s: %w", p.Name, err)
			}
		}
		for _, b := range w.Bindings {
			if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating %s: %w", b.Name, err)
			}
		}
		for _, p := range w.MutatingPolicies {
			if _, err := api.MutatingAdmissionPolicies().Create(ctx, p, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating %s: %w", p.Name, err)
			}
		}
		for _, b := range w.MutatingBindings {
			if _, err := api.MutatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating %s: %w", b.Name, err)
			}
		}
		return nil
	}
	for _, v := range []struct {
		prefix, url, arm string
		values           map[string]any
	}{
		{"noop-chart-", c.noopURL, ArmNoopChart, nil},
		{"noop-patch-", c.noopURL, ArmNoopPatch, nil},
		{"two-calls-", c.WebhookURL, ArmTwoCalls, map[string]any{"webhooks": map[string]any{"validatePods": map[string]any{"skipProven": false}}}},
		{"http2-", c.http2URL, ArmHTTP2, nil},
		{"no-probe-", c.WebhookURL, ArmGraceguardNoProbe, nil},
		{"webhook-only-", c.WebhookURL, ArmWebhookOnly, map[string]any{"nativeFloor": map[string]any{"enabled": false}}},
		{"mutating-floor-", c.WebhookURL, ArmMutatingFloor, map[string]any{"nativeFloor": map[string]any{"mutate": true}}},
	} {
		w, err := chart.RenderWebhooks("graceguard", releaseNamespace, v.values)
		if err != nil {
			return err
		}
		onlyArm(w, v.prefix, v.url, c.CA, v.arm)
		if v.arm == ArmNoopPatch {
			for _, m := range w.Mutating {
				for i := range m.Webhooks {
					u := c.noopURL + fixture.PathPatchTypical
					m.Webhooks[i].ClientConfig.URL = &u
				}
			}
		}
		if err := create(w); err != nil {
			return err
		}
	}

	// The one-call no-op: a mutating webhook as a typical one is
	// registered, as graceguard's is but for its selector.
	url := c.noopURL + "/mutate-v1-pod"
	none, ignore, never, equivalent := admissionregv1.SideEffectClassNone, admissionregv1.Ignore, admissionregv1.NeverReinvocationPolicy, admissionregv1.Equivalent
	scope, timeout := admissionregv1.NamespacedScope, int32(5)
	one := &admissionregv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-noop-one-call"},
		Webhooks: []admissionregv1.MutatingWebhook{{
			Name:         "noop-one-call.bench.graceguard.io",
			ClientConfig: admissionregv1.WebhookClientConfig{URL: &url, CABundle: c.CA},
			Rules: []admissionregv1.RuleWithOperations{{Operations: []admissionregv1.OperationType{admissionregv1.Create},
				Rule: admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}, Scope: &scope}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{armLabel: ArmNoopOneCall}},
			MatchPolicy:             &equivalent,
			SideEffects:             &none,
			FailurePolicy:           &ignore,
			ReinvocationPolicy:      &never,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if _, err := c.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, one, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating %s: %w", one.Name, err)
	}
	// The same registration answering with one operation, and with
	// graceguard's whole patch.
	for armName, path := range map[string]string{ArmNoopRecord: fixture.PathRecordOnly, ArmNoopOnePatch: fixture.PathPatchTypical} {
		w := one.DeepCopy()
		u := c.noopURL + path
		w.Name = "bench-" + armName
		w.Webhooks[0].Name = armName + ".bench.graceguard.io"
		w.Webhooks[0].ClientConfig.URL = &u
		w.Webhooks[0].NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{armLabel: armName}}
		if _, err := c.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, w, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating %s: %w", w.Name, err)
		}
	}

	for _, doc := range [][]byte{nativePolicyYAML, oneMutationPolicyYAML} {
		if err := policy.Install(ctx, c.kube, doc, nil); err != nil {
			return err
		}
	}

	for _, a := range arms() {
		labels := map[string]string{armLabel: a.name}
		if a.optedIn {
			labels[mutate.LabelInject] = mutate.LabelInjectEnabled
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: armNamespace(a.name), Labels: labels}}
		if _, err := c.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	for _, a := range arms() {
		if err := c.waitArm(ctx, a, 90*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// benchPod is the typical Pod as a client creates it in ns.
func benchPod(ns, name string) *corev1.Pod {
	p := fixture.TypicalPod()
	p.GenerateName, p.Name, p.Namespace = "", name, ns
	// The API server records its own.
	p.ManagedFields = nil
	return p
}

// noProbePathPod is benchPod without graceguard.io/readiness-path: a Pod
// on which graceguard's whole injection is one mutation (hooks, grace, the
// record), what a user writes a one-mutation policy for.
func noProbePathPod(ns, name string) *corev1.Pod {
	p := benchPod(ns, name)
	delete(p.Annotations, mutate.AnnotationReadinessPath)
	return p
}

// waitArm waits until a Pod created (dry run) in the arm's namespace comes
// back as the arm makes it: with the budget record, or without.
func (c *cluster) waitArm(ctx context.Context, a arm, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		got, err := c.kube.CoreV1().Pods(armNamespace(a.name)).Create(ctx, a.pod("probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case err != nil:
			last = err.Error()
		case (got.Annotations[mutate.AnnotationBudget] != "") == a.mutates:
			return nil
		default:
			last = fmt.Sprintf("budget record %q", got.Annotations[mutate.AnnotationBudget])
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return fmt.Errorf("arm %s: Pods not admitted as expected within %s (last: %s)", a.name, timeout, last)
}

// sameAsGraceguard compares the Pods a native policy's arm and graceguard's
// arm make of the same Pod (dry runs, each in its arm's namespace): the
// Pod both arms of the pair create, so that their ratio compares the same
// work. See samePods for what is compared.
func (c *cluster) sameAsGraceguard(ctx context.Context, graceguard, policy arm) (string, error) {
	if graceguard.noProbePath != policy.noProbePath {
		return "", fmt.Errorf("arms %s and %s create different Pods: they cannot be compared", graceguard.name, policy.name)
	}
	made := map[string]*corev1.Pod{}
	for _, a := range []arm{graceguard, policy} {
		got, err := c.kube.CoreV1().Pods(armNamespace(a.name)).Create(ctx, a.pod("compare"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return "", err
		}
		made[a.name] = got
	}
	return samePods(graceguard.pod("compare"), made[graceguard.name], made[policy.name])
}

// samePodsPrefix starts samePods' answer when the Pods agree.
const samePodsPrefix = "the same"

// samePods compares the Pods graceguard (g) and a native policy (n) made
// of sent: the budget record, the grace, each container's lifecycle and
// readiness probe, then every other field (so that a change graceguard
// makes and the policy does not cannot hide), leaving out what the API
// server sets per object (namespace, uid, creation time, managedFields)
// and graceguard's graceguard.io/treated label, which marks the Pod for
// its observer and which the policies do not add. The answer is a
// sentence: "the same (...)" with what both did, or "differ: ..." with
// each difference.
func samePods(sent, g, n *corev1.Pod) (string, error) {
	var diffs []string
	if g.Annotations[mutate.AnnotationBudget] != n.Annotations[mutate.AnnotationBudget] {
		diffs = append(diffs, fmt.Sprintf("budget %q vs %q", g.Annotations[mutate.AnnotationBudget], n.Annotations[mutate.AnnotationBudget]))
	}
	if gg, ng := g.Spec.TerminationGracePeriodSeconds, n.Spec.TerminationGracePeriodSeconds; (gg == nil) != (ng == nil) || gg != nil && *gg != *ng {
		diffs = append(diffs, fmt.Sprintf("grace %s vs %s", int64Of(gg), int64Of(ng)))
	}
	if len(g.Spec.Containers) != len(n.Spec.Containers) || len(g.Spec.Containers) != len(sent.Spec.Containers) {
		return "", fmt.Errorf("containers: sent %d, graceguard made %d, the policy %d", len(sent.Spec.Containers), len(g.Spec.Containers), len(n.Spec.Containers))
	}
	var hooked []string
	var probed []string
	sleep := int64(0)
	for i := range g.Spec.Containers {
		gc, nc, sc := g.Spec.Containers[i], n.Spec.Containers[i], sent.Spec.Containers[i]
		if !equality.Semantic.DeepEqual(gc.Lifecycle, nc.Lifecycle) {
			diffs = append(diffs, gc.Name+" lifecycle differs")
		}
		if !equality.Semantic.DeepEqual(gc.ReadinessProbe, nc.ReadinessProbe) {
			diffs = append(diffs, gc.Name+" readinessProbe differs")
		}
		if (sc.Lifecycle == nil || sc.Lifecycle.PreStop == nil) && gc.Lifecycle != nil && gc.Lifecycle.PreStop != nil && gc.Lifecycle.PreStop.Sleep != nil {
			hooked, sleep = append(hooked, gc.Name), gc.Lifecycle.PreStop.Sleep.Seconds
		}
		if sc.ReadinessProbe == nil && gc.ReadinessProbe != nil {
			probed = append(probed, gc.Name)
		}
	}
	if len(diffs) == 0 {
		rest, err := otherFieldsDiffer(g, n)
		if err != nil {
			return "", err
		}
		diffs = append(diffs, rest...)
	}
	if len(diffs) > 0 {
		return "differ: " + strings.Join(diffs, "; "), nil
	}
	probes := "no readiness probe added"
	if len(probed) > 0 {
		probes = "a readiness probe on " + strings.Join(probed, ", ")
	}
	return fmt.Sprintf("%s (%s; a %ds preStop sleep on each of %d containers, %s; every other field alike but graceguard's %s label)",
		samePodsPrefix, g.Annotations[mutate.AnnotationBudget], sleep, len(hooked), probes, mutate.LabelTreated), nil
}

func int64Of(v *int64) string {
	if v == nil {
		return "unset"
	}
	return fmt.Sprint(*v)
}

// otherFieldsDiffer lists the JSON paths (a few) at which g and n differ,
// without the fields the API server sets per object and graceguard's
// treated label.
func otherFieldsDiffer(g, n *corev1.Pod) ([]string, error) {
	plain := func(p *corev1.Pod) (any, error) {
		p = p.DeepCopy()
		p.Namespace, p.UID, p.ResourceVersion, p.CreationTimestamp, p.ManagedFields, p.Generation = "", "", "", metav1.Time{}, nil, 0
		delete(p.Labels, mutate.LabelTreated)
		if len(p.Labels) == 0 {
			p.Labels = nil
		}
		b, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		var v any
		return v, json.Unmarshal(b, &v)
	}
	gv, err := plain(g)
	if err != nil {
		return nil, err
	}
	nv, err := plain(n)
	if err != nil {
		return nil, err
	}
	var paths, out []string
	jsonDiff("", gv, nv, &paths)
	for _, p := range paths[:min(len(paths), 5)] {
		out = append(out, p+" differs")
	}
	if len(paths) > 5 {
		out = append(out, fmt.Sprintf("and %d more fields", len(paths)-5))
	}
	return out, nil
}

// jsonDiff appends to out the paths at which decoded JSON values a and b
// differ.
func jsonDiff(path string, a, b any, out *[]string) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		for _, k := range slices.Sorted(maps.Keys(am)) {
			jsonDiff(path+"."+k, am[k], bm[k], out)
		}
		for _, k := range slices.Sorted(maps.Keys(bm)) {
			if _, ok := am[k]; !ok {
				jsonDiff(path+"."+k, nil, bm[k], out)
			}
		}
		return
	}
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok && bok && len(as) == len(bs) {
		for i := range as {
			jsonDiff(fmt.Sprintf("%s[%d]", path, i), as[i], bs[i], out)
		}
		return
	}
	if !equality.Semantic.DeepEqual(a, b) {
		*out = append(*out, strings.TrimPrefix(path, "."))
	}
}
