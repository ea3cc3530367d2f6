package webhook

import (
	"context"
	"regexp"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/pkg/budget"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// EvidenceLookup reads what graceguard's observer recorded for a Pod's
// workload, for graceguard.io/max-work: auto. It returns nil when there is
// nothing to read (no report, no workload, an error): the Pod then gets
// the floor, never a failed admission.
type EvidenceLookup interface {
	Observed(ctx context.Context, pod *corev1.Pod) *mutate.Observed
}

// EvidenceTimeout bounds the read of a report: auto must not make
// admission slow, and the floor is always an answer.
const EvidenceTimeout = 500 * time.Millisecond

// NewEvidenceLookup reads ShutdownReports with a live GET by name from r
// (the manager's GetAPIReader()): one request for each Pod created with
// max-work auto, and no cache of every report in the webhook.
func NewEvidenceLookup(r client.Reader, log logr.Logger) EvidenceLookup {
	return &reportLookup{r: r, log: log, timeout: EvidenceTimeout}
}

type reportLookup struct {
	r       client.Reader
	log     logr.Logger
	timeout time.Duration
}

// cronJobSuffix is the scheduled minute a CronJob appends to its Jobs' names.
var cronJobSuffix = regexp.MustCompile(`^(.+)-[0-9]+$`)

// ReportNames are the names of the report a Pod's workload has, most
// likely first, read from the Pod alone: its controller, and for a
// ReplicaSet the Deployment (or Argo Rollout) whose name it extends with
// the Pod's pod-template-hash (rollouts-pod-template-hash), for a Job the
// CronJob whose name it extends with the scheduled minute.
func ReportNames(pod *corev1.Pod) []string {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return nil
	}
	var names []string
	switch ref.Kind {
	case "ReplicaSet":
		if h := pod.Labels[mutate.LabelPodTemplateHash]; h != "" && strings.HasSuffix(ref.Name, "-"+h) {
			names = append(names, v1alpha1.ReportName("Deployment", strings.TrimSuffix(ref.Name, "-"+h)))
		} else if h := pod.Labels[mutate.LabelRolloutsPodTemplateHash]; h != "" && strings.HasSuffix(ref.Name, "-"+h) {
			// An Argo Rollout's: the observer files its samples under
			// the Rollout (pkg/observer/owner.go).
			names = append(names, v1alpha1.ReportName("Rollout", strings.TrimSuffix(ref.Name, "-"+h)))
		}
	case "Job":
		if m := cronJobSuffix.FindStringSubmatch(ref.Name); m != nil {
			names = append(names, v1alpha1.ReportName("CronJob", m[1]))
		}
	}
	return append(names, v1alpha1.ReportName(ref.Kind, ref.Name))
}

func (l *reportLookup) Observed(ctx context.Context, pod *corev1.Pod) *mutate.Observed {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	for _, name := range ReportNames(pod) {
		var r v1alpha1.ShutdownReport
		err := l.r.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: name}, &r)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			l.log.V(1).Info("reading the shutdown report failed; max-work auto takes the floor", "report", name, "namespace", pod.Namespace, "error", err.Error())
			return nil
		}
		rec := r.Status.Recommendation
		if rec == nil {
			return nil
		}
		w, err := budget.ParseDuration(rec.MaxWork)
		if err != nil {
			return nil
		}
		return &mutate.Observed{Report: r.Name, Work: w, Enough: rec.Enough, Samples: int(r.Status.Summary.Samples)}
	}
	return nil
}
