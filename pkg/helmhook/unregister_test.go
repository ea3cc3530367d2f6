package helmhook

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

var unregisterRelease = UnregisterConfig{Release: "graceguard", Namespace: "graceguard-system",
	MutatingWebhookConfiguration: "graceguard", ValidatingWebhookConfiguration: "graceguard", Timeout: time.Second}

func owned(release, ns string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: "graceguard", UID: "uid-1",
		Annotations: map[string]string{"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": ns}}
}

func TestUnregisterDeletesTheReleasesConfigurations(t *testing.T) {
	kube := fake.NewClientset(
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: owned("graceguard", "graceguard-system")},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: owned("graceguard", "graceguard-system")},
	)
	var uids []string
	kube.PrependReactor("delete", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if p := a.(k8stesting.DeleteActionImpl).DeleteOptions.Preconditions; p != nil && p.UID != nil {
			uids = append(uids, string(*p.UID))
		}
		return false, nil, nil
	})
	var out bytes.Buffer
	if err := Unregister(context.Background(), unregisterRelease, kube, &out); err != nil {
		t.Fatal(err)
	}
	want := "MutatingWebhookConfiguration graceguard: deleted (release graceguard in graceguard-system); the API server no longer calls its webhooks\n" +
		"ValidatingWebhookConfiguration graceguard: deleted (release graceguard in graceguard-system); the API server no longer calls its webhooks\n"
	if out.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
	}
	if strings.Join(uids, ",") != "uid-1,uid-1" {
		t.Errorf("deletes with UID preconditions %v, want each the object read", uids)
	}
	ms, _ := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(context.Background(), metav1.ListOptions{})
	vs, _ := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(context.Background(), metav1.ListOptions{})
	if len(ms.Items)+len(vs.Items) != 0 {
		t.Errorf("left %d and %d configurations", len(ms.Items), len(vs.Items))
	}
}

func TestUnregisterOfWhatIsGoneSucceeds(t *testing.T) {
	var out bytes.Buffer
	if err := Unregister(context.Background(), unregisterRelease, fake.NewClientset(), &out); err != nil {
		t.Fatal(err)
	}
	if want := "MutatingWebhookConfiguration graceguard: already gone\nValidatingWebhookConfiguration graceguard: already gone\n"; out.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
	}
}

func TestUnregisterLeavesAnotherReleasesConfiguration(t *testing.T) {
	kube := fake.NewClientset(
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: owned("other", "graceguard-system")},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "graceguard"}},
	)
	var out bytes.Buffer
	err := Unregister(context.Background(), unregisterRelease, kube, &out)
	for _, want := range []string{
		`MutatingWebhookConfiguration graceguard: left in place: its meta.helm.sh/release-name and meta.helm.sh/release-namespace annotations name release "other" in namespace "graceguard-system", not "graceguard" in "graceguard-system"`,
		`ValidatingWebhookConfiguration graceguard: left in place: its meta.helm.sh/release-name and meta.helm.sh/release-namespace annotations name release "" in namespace ""`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to say %q", err, want)
		}
	}
	if _, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), "graceguard", metav1.GetOptions{}); err != nil {
		t.Errorf("another release's configuration was deleted: %v", err)
	}
}

func TestUnregisterDoesNotDeleteAReplacedConfiguration(t *testing.T) {
	kube := fake.NewClientset(
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: owned("graceguard", "graceguard-system")},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: owned("graceguard", "graceguard-system")},
	)
	// The API server refuses a delete whose UID precondition fails with 409.
	kube.PrependReactor("delete", "mutatingwebhookconfigurations", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"}, "graceguard", nil)
	})
	var out bytes.Buffer
	err := Unregister(context.Background(), unregisterRelease, kube, &out)
	if err == nil || !strings.Contains(err.Error(), "MutatingWebhookConfiguration graceguard: replaced while being deleted (its UID is no longer uid-1); run again") {
		t.Errorf("error %v", err)
	}
	if !strings.Contains(out.String(), "ValidatingWebhookConfiguration graceguard: deleted") {
		t.Errorf("the other configuration must still be deleted:\n%s", out.String())
	}
}
