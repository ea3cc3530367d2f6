package mutate

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestPreStopLength(t *testing.T) {
	exec := func(cmd ...string) *corev1.LifecycleHandler {
		return &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: cmd}}
	}
	tests := []struct {
		name  string
		h     *corev1.LifecycleHandler
		want  time.Duration
		known bool
	}{
		{"the native sleep action", &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 15}}, 15 * time.Second, true},
		{"exec sleep N", exec("sleep", "10"), 10 * time.Second, true},
		{"exec /bin/sleep with a unit", exec("/bin/sleep", "1m"), time.Minute, true},
		{"GNU sleep sums its operands", exec("sleep", "1m", "30s"), 90 * time.Second, true},
		{"fractional seconds", exec("sleep", "0.5"), 500 * time.Millisecond, true},
		{"sh -c with only a sleep", exec("/bin/sh", "-c", "sleep 12"), 12 * time.Second, true},
		{"bash -ec with sleeps and no-ops", exec("bash", "-ec", "sleep 3; true && sleep 2"), 5 * time.Second, true},
		{"busybox sh -c", exec("busybox", "sh", "-c", "sleep 7"), 7 * time.Second, true},
		{"a sleep followed by other work is a lower bound", exec("sh", "-c", "sleep 5 && nginx -s quit"), 5 * time.Second, false},
		{"sleep infinity never ends", exec("sleep", "infinity"), infinite, true},
		{"a sleep with a bad operand is unknown", exec("sleep", "soon"), 0, false},
		{"a number past the largest double sleeps for ever, as GNU sleep does", exec("sleep", strings.Repeat("9", 400)), infinite, true},
		{"so does +Inf", exec("sleep", "+Inf"), infinite, true},
		{"an exponent", exec("sleep", "1e3"), 1000 * time.Second, true},
		{"a number under the smallest double sleeps not at all", exec("sleep", "1e-400"), 0, true},
		{"another binary is unknown", exec("/drain.sh"), 0, false},
		{"an empty exec is unknown", exec(), 0, false},
		{"sh without -c is unknown", exec("sh", "/drain.sh"), 0, false},
		{"an HTTP hook is unknown", &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/drain"}}, 0, false},
		{"no hook takes no time", nil, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := preStopLength(tt.h)
			if got.D != tt.want || got.Known != tt.known {
				t.Fatalf("preStopLength = %v known=%v, want %v known=%v", got.D, got.Known, tt.want, tt.known)
			}
		})
	}
}

func TestShellFormIsDetected(t *testing.T) {
	for _, tt := range []struct {
		name    string
		command []string
		args    []string
		want    bool
	}{
		{"sh -c running the server", []string{"sh", "-c", "./server"}, nil, true},
		{"shell in command, script in args", []string{"/bin/bash", "-c"}, []string{"./server"}, true},
		{"a script that execs the server", []string{"sh", "-c", "exec ./server"}, nil, false},
		{"exec form", []string{"./server", "--port", "8080"}, nil, false},
		{"image entrypoint", nil, []string{"--port", "8080"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &corev1.Container{Command: tt.command, Args: tt.args}
			if got := isShellForm(c); got != tt.want {
				t.Fatalf("isShellForm(%v %v) = %v, want %v", tt.command, tt.args, got, tt.want)
			}
		})
	}
}

func TestResolveLayersPodOverNamespaceOverCluster(t *testing.T) {
	ns := Namespace{Name: "ns", Annotations: map[string]string{AnnotationMaxWork: "40s", AnnotationCleanup: "4s", AnnotationPreStop: "exec"}}
	pod := map[string]string{AnnotationMaxWork: "25s"}
	s, bad := resolve(pod, ns, DefaultOptions(), newPaths(nil, "ns"))
	if len(bad) > 0 {
		t.Fatalf("unexpected errors: %v", bad)
	}
	if s.Budget.Work != 25*time.Second || s.Sources["work"] != FromPod {
		t.Errorf("work = %v from %s, want 25s from the pod", s.Budget.Work, s.Sources["work"])
	}
	if s.Budget.Cleanup != 4*time.Second || s.Sources["cleanup"] != FromNamespace {
		t.Errorf("cleanup = %v from %s, want 4s from the namespace", s.Budget.Cleanup, s.Sources["cleanup"])
	}
	if s.Budget.Routing != 5*time.Second || s.Sources["routing"] != FromCluster {
		t.Errorf("routing = %v from %s, want the 5s cluster default", s.Budget.Routing, s.Sources["routing"])
	}
	if s.PreStop != PreStopExec {
		t.Errorf("prestop = %s, want the namespace's exec", s.PreStop)
	}
}

// The fix a stop-signal-kills denial offers is one the Pod's OS allows:
// Windows takes only SIGKILL and SIGTERM.
func TestStopSignalFixFitsTheOS(t *testing.T) {
	ns := Namespace{Name: "shop", Labels: map[string]string{LabelInject: LabelInjectEnabled}}
	for _, tc := range []struct {
		os   corev1.OSName
		want string
	}{
		{corev1.Linux, "remove it or use a signal the app drains on (SIGTERM, SIGINT, SIGQUIT)"},
		{corev1.Windows, "remove it or use SIGTERM (Windows allows no other)"},
	} {
		kill := corev1.SIGKILL
		pod := &corev1.Pod{Spec: corev1.PodSpec{OS: &corev1.PodOS{Name: tc.os}, Containers: []corev1.Container{
			{Name: "app", Image: "registry.local/app:1", Lifecycle: &corev1.Lifecycle{StopSignal: &kill}},
		}}}
		pod.Annotations = map[string]string{AnnotationInject: "false"}
		v := Validate(ForPod(pod), ns, DefaultOptions())
		if len(v.Violations) != 1 || v.Violations[0].Reason != DenyStopSignalKills || !strings.HasSuffix(v.Violations[0].Err.Detail, tc.want) {
			t.Errorf("%s: violations %v, want one %s ending %q", tc.os, v.Violations, DenyStopSignalKills, tc.want)
		}
	}
}
