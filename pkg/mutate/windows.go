package mutate

import "k8s.io/apimachinery/pkg/util/validation/field"

// A Windows Pod (spec.os.name: windows, or a node selector
// kubernetes.io/os: windows) runs images without a sleep command: an exec
// preStop `sleep N` fails at every deletion, and the kubelet then sends
// SIGTERM at once, before routes have converged. graceguard writes the
// sleep action there instead (sleepFor), which the kubelet runs itself
// (GA in 1.34), whether exec came from --prestop-handler or from
// graceguard.io/prestop, and says so: the Pod does not get the handler
// that was asked for.

// windowsSleep reports whether an exec handler is written as the sleep
// action for this Pod.
func (s Settings) windowsSleep() bool { return s.PreStop == PreStopExec && s.windows }

// warnWindowsSleep records, once for the Pod, that its exec handler was
// written as the sleep action, at the annotation that asked for exec or,
// when it is the cluster's --prestop-handler, at the first hook added
// (hook).
func warnWindowsSleep(s Settings, hook *field.Path, r *Report) {
	if !s.windowsSleep() {
		return
	}
	at := hook
	if s.preStopAt != nil {
		at = s.preStopAt
	}
	// Short enough for a Namespace's path and a CronJob's: the reason's
	// docs say the rest.
	r.warn(WarnWindowsSleepAction, at, string(PreStopExec), "Windows: sleep action, not exec (no sleep binary)")
}
