package security

import (
	"bytes"
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/graceguard/graceguard/pkg/mutate"
	"github.com/graceguard/graceguard/pkg/webhook"
)

// strictly decodes b into v, refusing fields v's type does not have: what
// the API server would drop (and so never send the webhook).
func strictly(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// The report sends what it says: every dense object is a real object of
// its kind (checked at a smaller density: the shape is the same), as
// dense as the request it rides in allows and within it.
func TestTheReportsObjectsAreAsDenseAsTheirRequestAllows(t *testing.T) {
	const small = 256 << 10
	for _, s := range shapes {
		pod := s.podJSON("dense", denseNS, denseFill, 'a')
		if len(pod) > apiServerLimit || len(pod) < apiServerLimit*9/10 {
			t.Errorf("%s: a Pod of %d bytes, want 90%% to 100%% of the API server's %d", s.name, len(pod), apiServerLimit)
		}
		if err := strictly(s.podJSON("dense", denseNS, small, 'a'), &corev1.Pod{}); err != nil {
			t.Errorf("%s: not a Pod: %v", s.name, err)
		}
		r := review("CREATE", "", "Pod", "pods", denseNS, s.podJSON("dense", denseNS, directFill, 'a'), nil)
		if len(r) > webhook.MaxReviewBytes || len(r) < webhook.MaxReviewBytes*9/10 {
			t.Errorf("%s: a direct review of %d bytes, want 90%% to 100%% of the webhook's %d", s.name, len(r), webhook.MaxReviewBytes)
		}
		if !s.valid {
			continue
		}
		d, c := &appsv1.Deployment{}, &batchv1.CronJob{}
		if err := strictly(deployment.workloadJSON("dense", denseNS, "1", s, small, 'b'), d); err != nil || len(d.Spec.Template.Spec.Containers) == 0 {
			t.Errorf("%s: not a Deployment: %v", s.name, err)
		}
		if err := strictly(cronJob.workloadJSON("dense", denseNS, "1", s, small, 'b'), c); err != nil || c.Spec.JobTemplate.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("%s: not a CronJob: %v", s.name, err)
		}
	}
	old := deployment.workloadJSON("dense", denseNS, "1", shapes[len(shapes)-1], directFill/2-8<<10, 'a')
	if r := review("UPDATE", "apps", "Deployment", "deployments", denseNS, old, old); len(r) > webhook.MaxReviewBytes {
		t.Errorf("a direct UPDATE review of %d bytes, over the webhook's %d", len(r), webhook.MaxReviewBytes)
	}

	// Every key graceguard reads on a Pod, at 256 KiB, in Pods within the
	// API server's limit.
	seen := map[string]bool{}
	for _, b := range annotatedPods(denseNS, annotationValue) {
		var p corev1.Pod
		if err := json.Unmarshal(b, &p); err != nil || len(b) > apiServerLimit {
			t.Fatalf("an annotated Pod of %d bytes: %v", len(b), err)
		}
		for k, v := range p.Annotations {
			seen[k] = len(v) == annotationValue
		}
		for k, v := range p.Labels {
			seen[k] = len(v) == annotationValue
		}
	}
	for _, k := range mutate.Keys {
		if k.Where&(mutate.PodAnnotation|mutate.PodLabel) != 0 && !seen[k.Name] {
			t.Errorf("no Pod carries %s at 256 KiB", k.Name)
		}
	}
}
