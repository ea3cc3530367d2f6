package kubeprobe

import (
	"context"
	"testing"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestPodStatesSayWhatTheProbeWaitsOn(t *testing.T) {
	ctx := context.Background()
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: "gm", Labels: Labels()}
	}
	kube := fake.NewClientset()
	c := &Cluster{Kube: kube, Namespace: "gm"}
	if got := PodStates(ctx, kube, "gm", Selector, "deployment probe"); got != "no Pods were created; see kubectl -n gm describe deployment probe" {
		t.Errorf("no Pods: got %q", got)
	}
	pods := []*corev1.Pod{
		{ObjectMeta: meta("probe-a"), Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "x"`}}}}}},
		{ObjectMeta: meta("probe-b"), Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}},
		{ObjectMeta: meta("probe-c")},
	}
	for _, p := range pods {
		if _, err := kube.CoreV1().Pods("gm").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := `probe-a ImagePullBackOff: Back-off pulling image "x"; probe-c not scheduled`
	if got := PodStates(ctx, kube, "gm", Selector, "deployment probe"); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	ready, err := c.ReadyPods(ctx)
	if err != nil || len(ready) != 1 || ready[0] != "probe-b" {
		t.Errorf("ReadyPods = %v, %v; want [probe-b]", ready, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := c.WaitReady(wctx, 2); err == nil || err.Error() != "1 of 2 probe Pods Ready: "+want {
		t.Errorf("WaitReady: got %v", err)
	}
}

// The Job's client gets the plugin's settings through its flags: what
// Args prints, SettingsFlags reads back unchanged.
func TestArgsRoundTripThroughTheFlags(t *testing.T) {
	want := Settings{URL: ServiceURL, Replicas: 4, Deletions: 7, Rate: 120, MaxRequests: 5000, Hold: 90 * time.Second, Quiet: 2500 * time.Millisecond}
	var got Settings
	fs := pflag.NewFlagSet("measure", pflag.ContinueOnError)
	for _, f := range SettingsFlags(&got) {
		f.Bind(fs)
	}
	if err := fs.Parse(want.Args()); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("got %+v, want %+v (args %v)", got, want, want.Args())
	}
	if err := got.Validate("x"); err != nil {
		t.Errorf("valid settings refused: %v", err)
	}
}
