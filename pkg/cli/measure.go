package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"

	"github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/routingprobe"
)

// measureFlags are measure-routing's flags besides the kubeconfig ones.
type measureFlags struct {
	kube        *genericclioptions.ConfigFlags
	url         string
	image       string
	replicas    int
	deletions   int
	rate        int
	maxRequests int
	hold        time.Duration
	quiet       time.Duration
	margin      time.Duration
	timeout     time.Duration
	profileName string
	dryRun      bool
}

func defaultMeasureFlags() *measureFlags {
	kube := genericclioptions.NewConfigFlags(true)
	// The probe gets a namespace of its own, with a generated name.
	kube.Namespace = nil
	return &measureFlags{kube: kube, replicas: 3, deletions: 10, rate: 50, maxRequests: 100_000,
		hold: time.Minute, quiet: 3 * time.Second, margin: time.Second, timeout: 20 * time.Minute, profileName: "measured"}
}

func newMeasureRoutingCmd() *cobra.Command {
	f := defaultMeasureFlags()
	cmd := &cobra.Command{
		Use:   "measure-routing --url URL --image IMAGE",
		Short: "Measure how long your routing path sends requests to a deleted Pod, and print the routing profile it needs",
		Long: `Measure how long your routing path sends requests to a deleted Pod, and
print the routing profile it needs.

It deploys a probe (graceguard's image, 'webhook probe': each answer names
its Pod) in a namespace of its own, with a Service named probe on port 80.
Route --url to that Service (an Ingress, an HTTPRoute or a load balancer:
the command prints one to create and waits for it). It then sends
--rate requests a second to --url, each on a new connection, deletes the
probe's Pods one at a time (waiting for the replacement to be Ready and
routed), and times each withdrawal: from the delete call to the sending
of the last request that Pod answered. The Pods sleep --hold in preStop,
so they answer whatever the path still sends them.

It prints each withdrawal, min, median, p90 and max, a plot, and a routing
profile: the slowest withdrawal plus --margin, rounded up to whole seconds.
It deletes its namespace at the end: on success, on error and on Ctrl-C.
--dry-run prints the objects and creates nothing.

It needs to create and delete namespaces, and to create Deployments and
Services and to list and delete Pods in them.`,
		Example: `  kubectl graceguard measure-routing --image registry.example/graceguard:v1.4.0 --dry-run
  kubectl graceguard measure-routing --image registry.example/graceguard:v1.4.0 --url http://probe.shop.example/`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			objs := probeObjects(f)
			if f.dryRun {
				return writeDryRun(cmd.OutOrStdout(), objs, f)
			}
			return f.run(cmd.Context(), objs, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	f.kube.AddFlags(fs)
	fs.StringVar(&f.url, flags.MeasureURL, "", "http(s) URL of your path (Ingress, HTTPRoute, load balancer) to the probe's Service, reachable from here")
	fs.StringVar(&f.image, flags.MeasureImage, "", "graceguard's image, as your cluster pulls it (the chart's image.repository:tag)")
	fs.Var(flags.Int(&f.replicas), flags.MeasureReplicas.Name, "probe Pods")
	fs.Var(flags.Int(&f.deletions), flags.MeasureDeletions.Name, "Pods to delete, one at a time: one withdrawal each")
	fs.Var(flags.Int(&f.rate), flags.MeasureRate.Name, "requests per second sent to --url")
	fs.Var(flags.Int(&f.maxRequests), flags.MeasureMaxRequests.Name, "requests sent in all, at most; the run fails when they run out")
	fs.Var(flags.MeasureHold.Value(&f.hold), flags.MeasureHold.Name, "the probe Pods' preStop sleep: how long a deleted Pod still answers (longer than the slowest withdrawal)")
	fs.Var(flags.MeasureQuiet.Value(&f.quiet), flags.MeasureQuiet.Name, "a deletion's measurement ends when the Pod has answered nothing for this long")
	fs.Var(flags.MeasureMargin.Value(&f.margin), flags.MeasureMargin.Name, "added to the slowest withdrawal before rounding up to the profile's routing delay")
	fs.Var(flags.MeasureTimeout.Value(&f.timeout), flags.MeasureTimeout.Name, "give up, clean up and fail after this long")
	fs.StringVar(&f.profileName, flags.MeasureProfileName, f.profileName, "the name of the routing profile printed")
	fs.BoolVar(&f.dryRun, "dry-run", false, "print the objects it would create and what to route to them; create nothing")
	return cmd
}

// validate reports every wrong flag at once.
func (f *measureFlags) validate() error {
	var errs []error
	switch {
	case f.image == "":
		errs = append(errs, flags.Invalid(flags.MeasureImage, "", errors.New("required: graceguard's image, as your cluster pulls it (the chart's image.repository:tag)")))
	case strings.ContainsAny(f.image, " \t\n"):
		errs = append(errs, flags.Invalid(flags.MeasureImage, f.image, errors.New("an image reference has no spaces")))
	}
	if f.url != "" || !f.dryRun {
		if err := checkProbeURL(f.url); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs,
		flags.MeasureReplicas.Check(int64(f.replicas)),
		flags.MeasureDeletions.Check(int64(f.deletions)),
		flags.MeasureRate.Check(int64(f.rate)),
		flags.MeasureMaxRequests.Check(int64(f.maxRequests)),
		flags.MeasureHold.Check(f.hold),
		flags.MeasureQuiet.Check(f.quiet),
		flags.MeasureMargin.Check(f.margin),
		flags.MeasureTimeout.Check(f.timeout))
	if f.hold%time.Second != 0 {
		errs = append(errs, flags.Invalid(flags.MeasureHold.Name, f.hold.String(), errors.New("want whole seconds (a preStop sleep's unit)")))
	}
	if f.quiet*2 > f.hold {
		errs = append(errs, flags.Invalid(flags.MeasureQuiet.Name, f.quiet.String(),
			fmt.Errorf("want at most half of --hold=%s, so a withdrawal has time to end before the Pod stops", f.hold)))
	}
	if msgs := validation.IsDNS1123Label(f.profileName); len(msgs) > 0 {
		errs = append(errs, flags.Invalid(flags.MeasureProfileName, f.profileName, errors.New(strings.Join(msgs, "; "))))
	}
	return errors.Join(errs...)
}

func checkProbeURL(s string) error {
	if s == "" {
		return flags.Invalid(flags.MeasureURL, "", errors.New("required: the http(s) URL of your Ingress, HTTPRoute or load balancer routed to the probe's Service "+
			"(--dry-run prints what to create); the in-cluster Service path is not built yet"))
	}
	u, err := url.Parse(s)
	if err != nil {
		return flags.Invalid(flags.MeasureURL, s, fmt.Errorf("not a URL: %v", errors.Unwrap(err)))
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return flags.Invalid(flags.MeasureURL, s, errors.New("want an http:// or https:// URL with a host"))
	}
	return nil
}

// The probe's objects: labelled so that a person (or a cleanup after a
// killed run) finds them; its namespace's name is generated.
const (
	probeName        = "probe"
	probePort        = 8080
	probeNSPrefix    = "graceguard-measure-"
	labelManagedBy   = "app.kubernetes.io/managed-by"
	labelName        = "app.kubernetes.io/name"
	probeManagedBy   = "kubectl-graceguard"
	probeAppName     = "graceguard-routing-probe"
	probeGraceExtra  = 10 * time.Second
	cleanupTimeout   = time.Minute
	probeFieldPodEnv = "POD_NAME"
)

var probeLabels = map[string]string{labelManagedBy: probeManagedBy, labelName: probeAppName}

// run creates the probe, measures and deletes the namespace whatever
// happens.
func (f *measureFlags) run(ctx context.Context, objs probeSet, out, errOut io.Writer) (err error) {
	cfg, err := f.kube.ToRESTConfig()
	if err != nil {
		return runtimeError{fmt.Errorf("reading the kubeconfig: %w", err)}
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return runtimeError{fmt.Errorf("connecting to the API server: %w", err)}
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	m := &measurement{flags: f, kube: kube, out: out, errOut: errOut, cluster: f.clusterName(), started: time.Now().UTC()}
	defer func() {
		if cerr := m.cleanup(ctx); cerr != nil {
			err = errors.Join(err, cerr)
		}
		if err != nil {
			err = runtimeError{m.explain(ctx, err)}
		}
	}()
	return m.measure(ctx, objs)
}

// clusterName is the kubeconfig's cluster, for the profile's source.
func (f *measureFlags) clusterName() string {
	raw, err := f.kube.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return "unknown"
	}
	name := raw.CurrentContext
	if f.kube.Context != nil && *f.kube.Context != "" {
		name = *f.kube.Context
	}
	if c, ok := raw.Contexts[name]; ok && c.Cluster != "" {
		return c.Cluster
	}
	if f.kube.ClusterName != nil && *f.kube.ClusterName != "" {
		return *f.kube.ClusterName
	}
	return "unknown"
}

// measurement is one run against the cluster.
type measurement struct {
	flags       *measureFlags
	kube        kubernetes.Interface
	out, errOut io.Writer
	cluster     string
	started     time.Time
	namespace   string
}

func (m *measurement) measure(ctx context.Context, objs probeSet) error {
	ns, err := m.kube.CoreV1().Namespaces().Create(ctx, objs.namespace, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating the probe's namespace: %w", err)
	}
	m.namespace = ns.Name
	objs.deployment.Namespace, objs.service.Namespace = ns.Name, ns.Name
	if _, err := m.kube.AppsV1().Deployments(ns.Name).Create(ctx, objs.deployment, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Deployment %s/%s: %w", ns.Name, probeName, err)
	}
	if _, err := m.kube.CoreV1().Services(ns.Name).Create(ctx, objs.service, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Service %s/%s: %w", ns.Name, probeName, err)
	}
	fmt.Fprintf(m.errOut, "Created namespace %s with Deployment %s (%d Pods) and Service %s, port 80.\n", ns.Name, probeName, m.flags.replicas, probeName)
	fmt.Fprintf(m.errOut, "Route %s to Service %s/%s port 80 while this runs, e.g.:\n\n%s\n", m.flags.url, ns.Name, probeName, indent(routeExample(ns.Name, m.flags.url), "  "))

	cluster := &kubeCluster{kube: m.kube, namespace: ns.Name}
	if err := waitReady(ctx, cluster, m.flags.replicas); err != nil {
		return err
	}
	fmt.Fprintf(m.errOut, "%d probe Pods Ready; waiting for %s to reach one.\n", m.flags.replicas, m.flags.url)
	client := probeClient()
	wait := time.Until(deadlineOf(ctx)).Round(time.Second)
	if _, err := routingprobe.WaitServing(ctx, client, m.flags.url, cluster.ReadyPods, wait, 500*time.Millisecond); err != nil {
		return err
	}
	fmt.Fprintf(m.errOut, "%s reaches the probe. Sending %d requests/s and deleting %d Pods, one at a time.\n", m.flags.url, m.flags.rate, m.flags.deletions)
	load := routingprobe.StartLoad(ctx, routingprobe.LoadConfig{URL: m.flags.url, Rate: m.flags.rate, MaxRequests: m.flags.maxRequests, Client: client})
	rounds, err := routingprobe.Measure(ctx, routingprobe.Config{Replicas: m.flags.replicas, Deletions: m.flags.deletions,
		Quiet: m.flags.quiet, Hold: m.flags.hold, RouteWait: 5 * time.Minute, Poll: 50 * time.Millisecond}, cluster, load, m.errOut)
	samples := load.Stop()
	if errors.Is(err, routingprobe.ErrExhausted) {
		err = fmt.Errorf("%w (--max-requests=%d) after %d of %d deletions: raise --max-requests or lower --rate", err, m.flags.maxRequests, len(rounds), m.flags.deletions)
	}
	if err != nil {
		return err
	}
	return writeMeasureReport(m.out, measureReport{URL: m.flags.url, Cluster: m.cluster, Date: m.started, Replicas: m.flags.replicas,
		Rate: m.flags.rate, Rounds: rounds, Samples: samples, Skipped: load.Skipped(), Margin: m.flags.margin, Profile: m.flags.profileName})
}

// cleanup deletes the namespace, with its own time: a run that timed out
// or was interrupted still cleans up.
func (m *measurement) cleanup(ctx context.Context) error {
	if m.namespace == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := m.kube.CoreV1().Namespaces().Delete(ctx, m.namespace, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting the probe's namespace %s: %w; delete it with: kubectl delete namespace %s", m.namespace, err, m.namespace)
	}
	fmt.Fprintf(m.errOut, "Deleted namespace %s.\n", m.namespace)
	return nil
}

// explain says why a run ended early in the user's terms.
func (m *measurement) explain(ctx context.Context, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("--timeout=%s reached: %w", m.flags.timeout, err)
	case errors.Is(ctx.Err(), context.Canceled):
		return fmt.Errorf("interrupted: %w", err)
	}
	return err
}

func deadlineOf(ctx context.Context) time.Time {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Now().Add(time.Hour)
	}
	return d
}

// probeClient sends each request on a new connection: a load balancer
// routes connections, and one kept alive would keep reaching a withdrawn
// Pod until the Pod closes it.
func probeClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	return &http.Client{Timeout: 5 * time.Second, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// kubeCluster is routingprobe.Cluster over the probe's namespace.
type kubeCluster struct {
	kube      kubernetes.Interface
	namespace string
}

func (c *kubeCluster) pods(ctx context.Context) ([]corev1.Pod, error) {
	list, err := c.kube.CoreV1().Pods(c.namespace).List(ctx, metav1.ListOptions{LabelSelector: labelName + "=" + probeAppName})
	if err != nil {
		return nil, fmt.Errorf("listing the probe's Pods: %w", err)
	}
	return list.Items, nil
}

func (c *kubeCluster) ReadyPods(ctx context.Context) ([]string, error) {
	pods, err := c.pods(ctx)
	if err != nil {
		return nil, err
	}
	var ready []string
	for _, p := range pods {
		if p.DeletionTimestamp == nil && podReady(&p) {
			ready = append(ready, p.Name)
		}
	}
	slices.Sort(ready)
	return ready, nil
}

func (c *kubeCluster) Delete(ctx context.Context, pod string) error {
	return c.kube.CoreV1().Pods(c.namespace).Delete(ctx, pod, metav1.DeleteOptions{})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitReady waits for n Ready probe Pods; its error says what the Pods
// are waiting on (ImagePullBackOff, no Pod at all).
func waitReady(ctx context.Context, c *kubeCluster, n int) error {
	for {
		ready, err := c.ReadyPods(ctx)
		if err == nil && len(ready) >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d probe Pods Ready: %s", len(ready), n, c.podStates(ctx))
		case <-time.After(time.Second):
		}
	}
}

// podStates describes the probe's Pods that are not Ready.
func (c *kubeCluster) podStates(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	pods, err := c.pods(ctx)
	if err != nil {
		return err.Error()
	}
	if len(pods) == 0 {
		return fmt.Sprintf("no Pods were created; see kubectl -n %s describe deployment %s", c.namespace, probeName)
	}
	var states []string
	for _, p := range pods {
		if podReady(&p) {
			continue
		}
		state := string(p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason != "" {
				state = w.Reason
				if w.Message != "" {
					state += ": " + w.Message
				}
			}
		}
		if state == "" {
			state = "not scheduled"
		}
		states = append(states, p.Name+" "+state)
	}
	return strings.Join(states, "; ")
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}
