package observer

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/graceguard/graceguard/pkg/api/v1alpha1"
	"github.com/graceguard/graceguard/pkg/mutate"
)

// FailedPreStopHook is the reason of the kubelet's event for a failed hook.
const FailedPreStopHook = "FailedPreStopHook"

// Run observes treated Pods until ctx is cancelled (see the package
// invariant), through the API server restCfg names, with its metrics on reg
// (controller-runtime's metrics.Registry is the one its metrics server
// serves). cfg must have passed Validate. It logs
// with the logger in ctx.
func Run(ctx context.Context, cfg Config, restCfg *rest.Config, reg prometheus.Registerer) error {
	log := logf.FromContext(ctx).WithName("graceguard-observer")
	m, err := NewMetrics(reg, cfg.NamespaceLabel)
	if err != nil {
		return err
	}
	ns := newNamespaces(cfg.excluded())
	scheme := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(scheme))
	utilruntime.Must(discoveryv1.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))

	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
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
				// Only the names of the opted-in namespaces.
				optedInNamespaces(): {
					Label:     labels.SelectorFromSet(labels.Set{mutate.LabelInject: mutate.LabelInjectEnabled}),
					Transform: leanNamespace,
				},
				// Only the Pods labelled treated (by the webhook, or by the
				// chart's mutating floor while it did not answer), and of
				// each a record of bounded size (record, docs/observer.md).
				&corev1.Pod{}: {
					Label:     treatedPods,
					Transform: podTransform(ns),
				},
				// Every EndpointSlice (a Service's slices carry no label
				// of the Pods they list), each reduced to the Pods its
				// endpoints name and whether they are routed to: 17 bytes
				// an endpoint, the key only outside the treated
				// namespaces (endpointSlice).
				&discoveryv1.EndpointSlice{}: {
					Transform: sliceTransform(ns),
				},
				// Only failed preStop hooks (events expire after an hour).
				&corev1.Event{}: {
					Field:     fields.OneTermEqualSelector("reason", FailedPreStopHook),
					Transform: eventTransform(ns),
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
	var reports *reporter
	if cfg.Reports.Kind != ReportsOff {
		if reports, err = reporterFor(restCfg, cfg, ns, log, m); err != nil {
			return err
		}
	}
	if err := mgr.Add(&observer{
		cache:     mgr.GetCache(),
		reader:    mgr.GetAPIReader(),
		writer:    mgr.GetClient(),
		recorder:  mgr.GetEventRecorder("graceguard-observer"),
		metrics:   m,
		cfg:       cfg,
		log:       log,
		ns:        ns,
		deletions: map[types.UID]Deletion{},
		hooks:     map[types.UID][]HookFailure{},
		routes:    newRoutes(),
		now:       time.Now,
		pending:   map[owner]*batch{},
		reports:   reports,
		writes:    flowcontrol.NewTokenBucketRateLimiter(float32(cfg.FlushWritesPerSecond), 1),
	}); err != nil {
		return err
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running the observer: %w", err)
	}
	return nil
}

// optedInNamespaces is the metadata-only Namespace object the cache
// watches (label-selected: the opted-in ones).
func optedInNamespaces() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	return m
}

// reporterFor connects the policy report writer to the API server.
func reporterFor(restCfg *rest.Config, cfg Config, ns *namespaces, log logr.Logger, m *Metrics) (*reporter, error) {
	dyn, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfig(restCfg)
	if err != nil {
		return nil, err
	}
	disco, err := discovery.NewDiscoveryClientForConfig(restCfg)
	if err != nil {
		return nil, err
	}
	return newReporter(dyn, meta, disco, cfg, ns, log, m), nil
}

// treatedPods selects the Pods graceguard treated: by its mutating webhook
// or by the chart's mutating floor (mutate.LabelTreatedByFloor).
var treatedPods = func() labels.Selector {
	r, err := labels.NewRequirement(mutate.LabelTreated, selection.In, []string{mutate.LabelTreatedValue, mutate.LabelTreatedByFloor})
	if err != nil {
		panic(err)
	}
	return labels.NewSelector().Add(*r)
}()
