package webhook

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestReportNamesFollowTheWorkload(t *testing.T) {
	owned := func(kind, name string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: labels, OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "Other", Name: "not-the-controller"},
			{APIVersion: "apps/v1", Kind: kind, Name: name, Controller: ptr.To(true)},
		}}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want []string
	}{
		{"a Deployment's Pod: the Deployment's report first, then its ReplicaSet's",
			owned("ReplicaSet", "web-7d9f8c6b5", map[string]string{"pod-template-hash": "7d9f8c6b5"}),
			[]string{"deployment-web", "replicaset-web-7d9f8c6b5"}},
		{"a ReplicaSet of its own (no pod-template-hash)", owned("ReplicaSet", "web", nil), []string{"replicaset-web"}},
		{"an Argo Rollout's Pod: the Rollout's report first, then its ReplicaSet's",
			owned("ReplicaSet", "web-6b7c8d9f5", map[string]string{"rollouts-pod-template-hash": "6b7c8d9f5"}),
			[]string{"rollout-web", "replicaset-web-6b7c8d9f5"}},
		{"a Rollout hash that is not the name's suffix", owned("ReplicaSet", "web-abc", map[string]string{"rollouts-pod-template-hash": "xyz"}), []string{"replicaset-web-abc"}},
		{"a hash that is not the name's suffix", owned("ReplicaSet", "web-abc", map[string]string{"pod-template-hash": "xyz"}), []string{"replicaset-web-abc"}},
		{"a StatefulSet's Pod", owned("StatefulSet", "db", nil), []string{"statefulset-db"}},
		{"a CronJob's Job: the CronJob's report first", owned("Job", "nightly-29371460", nil), []string{"cronjob-nightly", "job-nightly-29371460"}},
		{"a Job of its own", owned("Job", "migrate", nil), []string{"job-migrate"}},
		{"a Pod without a controller", &corev1.Pod{}, nil},
	} {
		if got := ReportNames(tc.pod); !slices.Equal(got, tc.want) {
			t.Errorf("%s: ReportNames = %q, want %q", tc.name, got, tc.want)
		}
	}
}
