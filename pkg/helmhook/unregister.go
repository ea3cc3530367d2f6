package helmhook

import (
	"context"
	"errors"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Helm's ownership annotations, which it writes on every object of a
// release.
const (
	annotationRelease          = "meta.helm.sh/release-name"
	annotationReleaseNamespace = "meta.helm.sh/release-namespace"
)

// Unregister deletes the release's MutatingWebhookConfiguration and
// ValidatingWebhookConfiguration, so that the API server stops calling
// graceguard before Helm deletes the replicas that answer: a Fail webhook
// left without them would refuse every Pod in opted-in namespaces. It
// prints a line per configuration to out and reports every one it could
// not delete.
func Unregister(ctx context.Context, c UnregisterConfig, kube kubernetes.Interface, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	m := kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	v := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	return errors.Join(
		unregister(ctx, c, out, "MutatingWebhookConfiguration", c.MutatingWebhookConfiguration, m.Get, m.Delete),
		unregister(ctx, c, out, "ValidatingWebhookConfiguration", c.ValidatingWebhookConfiguration, v.Get, v.Delete),
	)
}

func unregister[T metav1.Object](ctx context.Context, c UnregisterConfig, out io.Writer, kind, name string,
	get func(context.Context, string, metav1.GetOptions) (T, error),
	del func(context.Context, string, metav1.DeleteOptions) error,
) error {
	obj, err := get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		fmt.Fprintf(out, "%s %s: already gone\n", kind, name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s %s: %w", kind, name, err)
	}
	a := obj.GetAnnotations()
	if rel, ns := a[annotationRelease], a[annotationReleaseNamespace]; rel != c.Release || ns != c.Namespace {
		return fmt.Errorf("%s %s: left in place: its %s and %s annotations name release %q in namespace %q, not %q in %q",
			kind, name, annotationRelease, annotationReleaseNamespace, rel, ns, c.Release, c.Namespace)
	}
	// Only the object read above: one created again since is not ours to judge.
	uid := obj.GetUID()
	err = del(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case apierrors.IsNotFound(err):
		fmt.Fprintf(out, "%s %s: already gone\n", kind, name)
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("%s %s: replaced while being deleted (its UID is no longer %s); run again", kind, name, uid)
	case err != nil:
		return fmt.Errorf("deleting %s %s: %w", kind, name, err)
	}
	fmt.Fprintf(out, "%s %s: deleted (release %s in %s); the API server no longer calls its webhooks\n", kind, name, c.Release, c.Namespace)
	return nil
}
