package mutate_test

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/graceguard/graceguard/pkg/mutate"
)

// hookPod is a Pod of image whose app container runs the exec preStop cmd
// (none for a nil cmd).
func hookPod(image string, cmd []string, ann map[string]string) *corev1.Pod {
	p := profilePod(ann)
	c := &p.Spec.Containers[0]
	c.Image = image
	if cmd != nil {
		c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: cmd}}}
	}
	return p
}

func binaryWarnings(r *mutate.Report) []string {
	var out []string
	for _, w := range r.Warnings {
		if w.Reason == mutate.WarnHookBinaryMissing {
			out = append(out, w.Message())
		}
	}
	return out
}

func TestExecHookBinaryTheImageMayLack(t *testing.T) {
	curl := []string{"curl", "-X", "POST", "localhost:8080/drain"}
	for _, tc := range []struct {
		name  string
		image string
		cmd   []string
		ann   map[string]string
		want  string // a part of the warning; "" for none
	}{
		{name: "a bare command in Google's distroless image", image: "gcr.io/distroless/static-debian12:nonroot", cmd: curl,
			want: `spec.containers[0].lifecycle.preStop: "curl" may be missing from a distroless image; use sleep or httpGet`},
		{name: "a distribution's tool by its absolute path", image: "gcr.io/distroless/base", cmd: []string{"/usr/bin/wget", "-q", "localhost/drain"},
			want: `"/usr/bin/wget" may be missing`},
		{name: "a path that only looks absolute is cleaned first", image: "gcr.io/distroless/base", cmd: []string{"/opt/../bin/sh", "-c", "x"},
			want: `"/opt/../bin/sh" may be missing`},
		{name: "a shell, which distroless images do not have", image: "gcr.io/distroless/static", cmd: []string{"sh", "-c", "nginx -s quit"},
			want: `"sh" may be missing`},
		{name: "a project's -distroless tag", image: "docker.io/istio/proxyv2:1.28.0-distroless", cmd: []string{"nginx", "-s", "quit"},
			want: `"nginx" may be missing from a distroless image`},
		{name: "a -distroless repository with a digest", image: "envoyproxy/envoy-distroless@sha256:0123abcd", cmd: curl, want: `"curl" may be missing`},
		{name: "Chainguard's static base", image: "cgr.dev/chainguard/static:latest", cmd: []string{"sleep", "5"},
			want: `"sleep" may be missing from a distroless image; use sleep or httpGet`},
		{name: "the image name is read case-insensitively", image: "GCR.IO/Distroless/Static", cmd: curl, want: `"curl" may be missing`},
		{name: "graceguard's own exec sleep is warned about too, with its own fix", image: "gcr.io/distroless/static", cmd: nil,
			ann: map[string]string{mutate.AnnotationPreStop: "exec"}, want: `"sleep" may be missing from a distroless image; set graceguard.io/prestop: sleep`},
		{name: "a distroless debug tag ships busybox", image: "gcr.io/distroless/base:debug-nonroot", cmd: curl},
		{name: "the app's own binary by its absolute path", image: "gcr.io/distroless/static", cmd: []string{"/app/drain", "--wait"}},
		{name: "a binary under /usr/local/bin (pilot-agent's place)", image: "istio/proxyv2:1.28.0-distroless", cmd: []string{"/usr/local/bin/pilot-agent", "request", "POST", "drain"}},
		{name: "an image whose name says nothing", image: "registry.example/shop/web:1.4", cmd: curl},
		{name: "an image named for a distribution", image: "debian:12", cmd: curl},
		{name: "a name that only contains static", image: "nginx:stable-alpine-static", cmd: curl},
		{name: "graceguard's sleep action needs no binary", image: "gcr.io/distroless/static", cmd: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mutate.Mutate(mutate.ForPod(hookPod(tc.image, tc.cmd, tc.ann)), optedInNS(nil), mutate.DefaultOptions())
			if len(r.Violations) > 0 {
				t.Fatalf("violations: %v", r.Violations)
			}
			got := binaryWarnings(r)
			switch {
			case tc.want == "" && len(got) > 0:
				t.Fatalf("warned %q, want no %s warning", got, mutate.WarnHookBinaryMissing)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Fatalf("warnings %q, want one containing %q", got, tc.want)
			}
			for _, w := range got {
				if strings.HasSuffix(w, "...") {
					t.Errorf("the warning was cut: %q", w)
				}
			}
		})
	}
}

// On a Deployment's template, whose field path is longer, the whole
// warning still fits an admission warning.
func TestExecHookBinaryWarningFitsATemplate(t *testing.T) {
	pod := hookPod("gcr.io/distroless/static", []string{"curl", "localhost/drain"}, nil)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{ObjectMeta: pod.ObjectMeta, Spec: pod.Spec}}}
	tg, err := mutate.ForWorkload(dep)
	if err != nil {
		t.Fatal(err)
	}
	got := binaryWarnings(mutate.Mutate(tg, optedInNS(nil), mutate.DefaultOptions()))
	want := `spec.template.spec.containers[0].lifecycle.preStop: "curl" may be missing from a distroless image; use sleep or httpGet`
	if len(got) != 1 || got[0] != want {
		t.Fatalf("warnings %q, want %q", got, want)
	}
}

// The warning is advice: the same Pod is admitted, and the validating
// webhook's answer carries it as the mutating one does.
func TestExecHookBinaryWarningDoesNotDeny(t *testing.T) {
	pod := hookPod("gcr.io/distroless/static", []string{"curl", "localhost/drain"}, nil)
	opts := mutate.DefaultOptions()
	m := mutate.Mutate(mutate.ForPod(pod), optedInNS(nil), opts)
	if len(binaryWarnings(m)) != 1 || len(m.Violations) > 0 {
		t.Fatalf("mutate: warnings %q, violations %v", binaryWarnings(m), m.Violations)
	}
	v := mutate.Validate(mutate.ForPod(pod), optedInNS(nil), opts)
	if v.Denied() {
		t.Fatalf("denied: %v", v.Err())
	}
	t.Logf("validate's warnings: %q", v.AdmissionWarnings())
}

// A long image name or command is clipped in the warning, which stays
// within the admission warning's bound.
func TestExecHookBinaryWarningIsBounded(t *testing.T) {
	long := strings.Repeat("x", 5000)
	r := mutate.Mutate(mutate.ForPod(hookPod("gcr.io/distroless/static:"+long, []string{long}, nil)), optedInNS(nil), mutate.DefaultOptions())
	got := binaryWarnings(r)
	if len(got) != 1 {
		t.Fatalf("warnings %q, want one", got)
	}
	if f := r.Warnings[len(r.Warnings)-1]; len(f.Err.Detail) > 300 {
		t.Errorf("detail of %d bytes: %q", len(f.Err.Detail), f.Err.Detail)
	}
}
