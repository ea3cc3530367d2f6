package helmhook

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// selftestPod is the name of the mutation check's dry-run Pod.
const selftestPod = "graceguard-selftest"

// checkMutation creates the dry-run Pod and says what graceguard did to it.
func checkMutation(ctx context.Context, c SelftestConfig, kube kubernetes.Interface) ([]string, error) {
	got, err := kube.CoreV1().Pods(c.TestNamespace).Create(ctx, dryRunPod(c), metav1.CreateOptions{
		DryRun: []string{metav1.DryRunAll}, FieldManager: "graceguard-selftest",
	})
	if err != nil {
		return nil, fmt.Errorf("creating a dry-run Pod in namespace %s: %w", c.TestNamespace, err)
	}
	line, err := treated(got)
	if err != nil {
		return nil, fmt.Errorf("the dry-run Pod %s/%s: %w", c.TestNamespace, selftestPod, err)
	}
	return []string{line}, nil
}

// dryRunPod is a Pod the restricted Pod Security Standard admits, with
// nothing graceguard would refuse and no annotation: it gets the cluster's
// defaults.
func dryRunPod(c SelftestConfig) *corev1.Pod {
	no, yes := false, true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: selftestPod, Namespace: c.TestNamespace,
			Labels: map[string]string{"app.kubernetes.io/name": selftestPod}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: &no,
			EnableServiceLinks:           &no,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   &yes,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "app", Image: c.Image,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no,
					ReadOnlyRootFilesystem:   &yes,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

// treated says how graceguard treated p, or why p does not look treated:
// its budget record, the grace that record names, and a preStop hook in
// every container.
func treated(p *corev1.Pod) (string, error) {
	record := p.Annotations[mutate.AnnotationBudget]
	if record == "" {
		return "", fmt.Errorf("came back without %s: graceguard's mutating webhook did not treat it (the API server did not send it there, "+
			"or the call failed and failurePolicy Ignore let it through unchanged, or the namespace is in graceguard.io/mode=warn); "+
			"see the webhook's logs and the namespace's labels", mutate.AnnotationBudget)
	}
	_, grace, err := budget.ParseAnnotation(record)
	if err != nil {
		return "", fmt.Errorf("its %s does not parse: %w", mutate.AnnotationBudget, err)
	}
	if g := p.Spec.TerminationGracePeriodSeconds; g == nil || *g != grace {
		got := "unset"
		if g != nil {
			got = fmt.Sprint(*g)
		}
		return "", fmt.Errorf("terminationGracePeriodSeconds is %s, but %s %q records grace=%ds: something after graceguard changed it", got, mutate.AnnotationBudget, record, grace)
	}
	hooks := make([]string, 0, len(p.Spec.Containers))
	for _, c := range p.Spec.Containers {
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
			return "", fmt.Errorf("container %q has no preStop hook, though %s %q says graceguard treated it", c.Name, mutate.AnnotationBudget, record)
		}
		hooks = append(hooks, c.Name+": "+describeHook(c.Lifecycle.PreStop))
	}
	return fmt.Sprintf("the dry-run Pod %s/%s came back mutated: %s=%q, terminationGracePeriodSeconds=%d, preStop %s",
		p.Namespace, p.Name, mutate.AnnotationBudget, record, grace, strings.Join(hooks, ", ")), nil
}

func describeHook(h *corev1.LifecycleHandler) string {
	switch {
	case h.Sleep != nil:
		return fmt.Sprintf("sleep %ds", h.Sleep.Seconds)
	case h.Exec != nil:
		return fmt.Sprintf("exec %q", h.Exec.Command)
	case h.HTTPGet != nil:
		return "httpGet " + h.HTTPGet.Path
	}
	return "a handler"
}
