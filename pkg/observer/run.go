package observer

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// Option changes how Run wires the observer; the defaults are production's.
type Option func(*options)

type options struct {
	rest     *rest.Config
	registry prometheus.Registerer
}

// WithRESTConfig sets the API server connection; the default is
// controller-runtime's GetConfig (in-cluster, or $KUBECONFIG).
func WithRESTConfig(c *rest.Config) Option { return func(o *options) { o.rest = c } }

// WithRegistry sets where the observer's metrics are registered; the
// default is controller-runtime's metrics.Registry, which its metrics
// server serves.
func WithRegistry(r prometheus.Registerer) Option { return func(o *options) { o.registry = r } }

// FailedPreStopHook is the reason of the kubelet's event for a failed hook.
const FailedPreStopHook = "FailedPreStopHook"

// Run observes treated Pods until ctx is cancelled (see the package
// invariant). cfg must have passed Validate. It logs with the logger in ctx.
func Run(ctx context.Context, cfg Config, opts ...Option) error {
	o := options{registry: metrics.Registry}
	for _, opt := range opts {
		opt(&o)
	}
	log := logf.FromContext(ctx).WithName("graceguard-observer")
	if o.rest == nil {
		c, err := ctrl.GetConfig()
		if err != nil {
			return fmt.Errorf("connecting to the API server: %w", err)
		}
		o.rest = c
	}
	m, err := NewMetrics(o.registry, cfg.NamespaceLabel)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))

	mgr, err := ctrl.NewManager(o.rest, ctrl.Options{
		Scheme:                        scheme,
		Logger:                        log,
		Metrics:                       metricsserver.Options{BindAddress: cfg.MetricsBindAddress},
		HealthProbeBindAddress:        cfg.HealthProbeBindAddress,
		LeaderElection:                cfg.LeaderElection,
		LeaderElectionID:              "graceguard-observer",
		LeaderElectionNamespace:       cfg.Namespace,
		LeaderElectionReleaseOnCancel: true,
		Cache: cache.Options{
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				// Only the Pods graceguard treated, and of them only what a
				// sample reads (6.5 KiB of heap per Pod, docs/observer.md).
				&corev1.Pod{}: {
					Label:     labels.SelectorFromSet(labels.Set{mutate.LabelTreated: mutate.LabelTreatedValue}),
					Transform: leanPod,
				},
				// Only failed preStop hooks (events expire after an hour).
				&corev1.Event{}: {
					Field:     fields.OneTermEqualSelector("reason", FailedPreStopHook),
					Transform: leanEvent,
				},
			},
		},
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.Add(&observer{
		cache:     mgr.GetCache(),
		reader:    mgr.GetAPIReader(),
		writer:    mgr.GetClient(),
		recorder:  mgr.GetEventRecorder("graceguard-observer"),
		metrics:   m,
		cfg:       cfg,
		log:       log,
		deletions: map[types.UID]Deletion{},
		hooks:     map[types.UID][]HookFailure{},
		pending:   map[owner]*batch{},
		workloads: map[types.UID]workload{},
	}); err != nil {
		return err
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running the observer: %w", err)
	}
	return nil
}

// leanPod keeps what Observe and the observer read of a Pod: names, owner,
// deletion, the budget and containers annotations, each container's name,
// preStop hook and final state. Everything else (env, volumes, probes,
// conditions, managedFields) is dropped before the cache stores it.
func leanPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
		OwnerReferences:            p.OwnerReferences,
		DeletionTimestamp:          p.DeletionTimestamp,
		DeletionGracePeriodSeconds: p.DeletionGracePeriodSeconds,
	}}
	if h, ok := p.Labels["pod-template-hash"]; ok {
		out.Labels = map[string]string{"pod-template-hash": h}
	}
	for _, k := range []string{mutate.AnnotationBudget, mutate.AnnotationContainers} {
		if v, ok := p.Annotations[k]; ok {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	lean := func(cs []corev1.Container) []corev1.Container {
		if len(cs) == 0 {
			return nil
		}
		l := make([]corev1.Container, len(cs))
		for i, c := range cs {
			l[i] = corev1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy}
			if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
				l[i].Lifecycle = &corev1.Lifecycle{PreStop: c.Lifecycle.PreStop}
			}
		}
		return l
	}
	out.Spec.Containers, out.Spec.InitContainers = lean(p.Spec.Containers), lean(p.Spec.InitContainers)
	out.Spec.TerminationGracePeriodSeconds = p.Spec.TerminationGracePeriodSeconds
	leanStatus := func(ss []corev1.ContainerStatus) []corev1.ContainerStatus {
		var l []corev1.ContainerStatus
		for _, s := range ss {
			if s.State.Terminated != nil {
				t := *s.State.Terminated
				t.Message, t.ContainerID = "", ""
				l = append(l, corev1.ContainerStatus{Name: s.Name, State: corev1.ContainerState{Terminated: &t}})
			}
		}
		return l
	}
	out.Status.ContainerStatuses = leanStatus(p.Status.ContainerStatuses)
	out.Status.InitContainerStatuses = leanStatus(p.Status.InitContainerStatuses)
	return out, nil
}

// leanEvent keeps what a HookFailure reads of an Event.
func leanEvent(obj any) (any, error) {
	e, ok := obj.(*corev1.Event)
	if !ok {
		return obj, nil
	}
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: e.Name, Namespace: e.Namespace, UID: e.UID, ResourceVersion: e.ResourceVersion},
		InvolvedObject: e.InvolvedObject,
		Reason:         e.Reason,
		FirstTimestamp: e.FirstTimestamp,
		LastTimestamp:  e.LastTimestamp,
		EventTime:      e.EventTime,
	}, nil
}
