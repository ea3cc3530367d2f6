package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"

	"github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/routingprobe"
	"github.com/graceguard/graceguard/pkg/routingprobe/kubeprobe"
)

// measureFlags are measure-routing's flags besides the kubeconfig ones.
type measureFlags struct {
	kube        *genericclioptions.ConfigFlags
	s           kubeprobe.Settings
	image       string
	inCluster   bool
	margin      time.Duration
	timeout     time.Duration
	profileName string
	dryRun      bool
	// ingressClass, when set, has the command route --url to the probe
	// itself: an Ingress of that class for the URL's host.
	ingressClass string
}

func defaultMeasureFlags() *measureFlags {
	kube := genericclioptions.NewConfigFlags(true)
	// The probe gets a namespace of its own, with a generated name.
	kube.Namespace = nil
	return &measureFlags{kube: kube, s: kubeprobe.DefaultSettings(), margin: time.Second, timeout: 20 * time.Minute, profileName: "measured"}
}

func newMeasureRoutingCmd() *cobra.Command {
	f := defaultMeasureFlags()
	cmd := &cobra.Command{
		Use:   "measure-routing (--url URL [--ingress-class CLASS] [--host HOST] | --in-cluster) --image IMAGE",
		Short: "Measure how long your routing path sends requests to a deleted Pod, and print the routing profile it needs",
		Long: `Measure how long your routing path sends requests to a deleted Pod, and
print the routing profile it needs.

It deploys a probe (graceguard's image, 'webhook probe': each answer names
its Pod) in a namespace of its own, with a Service named probe on port 80.

With --url, route that URL to the Service (an Ingress, an HTTPRoute or a
load balancer: the command prints one to create and waits for it), or
name your --ingress-class and it creates the Ingress; the load is sent
from here, with --host as its Host header when --url names an address. With --in-cluster, a Job in the namespace sends
the load to the Service's ClusterIP (kube-proxy, or your CNI's service
proxy) and deletes the Pods itself (a Role lets it); the command prints
what the Job measured.

The load is --rate requests a second, each on a new connection. Pods are
deleted one at a time, each once the replacement is Ready and routed, and
each withdrawal is timed: from the delete call to the sending of the last
request that Pod answered. The Pods sleep --hold in preStop, so they
answer whatever the path still sends them.

It prints each withdrawal, min, median, p90 and max, a plot, and a routing
profile: the slowest withdrawal plus --margin, rounded up to whole seconds.
It deletes its namespace at the end: on success, on error and on Ctrl-C.
--dry-run prints the objects and creates nothing.

It needs to create and delete namespaces, and to create Deployments,
Services and Pods' deletions in them (--in-cluster: also a
ServiceAccount, a Role, a RoleBinding and a Job, and to read Pod logs).`,
		Example: `  kubectl graceguard measure-routing --image registry.example/graceguard:v1.4.0 --url http://probe.shop.example/ --dry-run
  kubectl graceguard measure-routing --image registry.example/graceguard:v1.4.0 --url http://probe.shop.example/
  kubectl graceguard measure-routing --image registry.example/graceguard:v1.4.0 --url http://203.0.113.7/ --host probe.shop.example --ingress-class nginx
  kubectl graceguard measure-routing --image registry.example/graceguard:v1.4.0 --in-cluster`,
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
	for _, fl := range kubeprobe.SettingsFlags(&f.s) {
		fl.Bind(fs)
	}
	fs.StringVar(&f.ingressClass, flags.MeasureIngressClass, "", "with --url: create an Ingress of this IngressClass that routes --url's host (or --host) to the probe, instead of routing it yourself")
	fs.BoolVar(&f.inCluster, "in-cluster", false, "send the load from a Job in the cluster to the probe's Service (ClusterIP), instead of from here to --url")
	fs.StringVar(&f.image, flags.MeasureImage, "", "graceguard's image, as your cluster pulls it (the chart's image.repository:tag)")
	fs.Var(flags.MeasureMargin.Value(&f.margin), flags.MeasureMargin.Name, "added to the slowest withdrawal before rounding up to the profile's routing delay")
	fs.Var(flags.MeasureTimeout.Value(&f.timeout), flags.MeasureTimeout.Name, "give up, clean up and fail after this long")
	fs.StringVar(&f.profileName, flags.MeasureProfileName, f.profileName, "the name of the routing profile printed")
	fs.BoolVar(&f.dryRun, "dry-run", false, "print the objects it would create and what to route to them; create nothing")
	return cmd
}

// urlRequired is what --url must be when missing.
const urlRequired = "the http(s) URL of your Ingress, HTTPRoute or load balancer routed to the probe's Service " +
	"(--dry-run prints what to create), or --in-cluster to measure the Service's ClusterIP from a Job"

// validate reports every wrong flag at once.
func (f *measureFlags) validate() error {
	var errs []error
	switch {
	case f.image == "":
		errs = append(errs, flags.Invalid(flags.MeasureImage, "", errors.New("required: graceguard's image, as your cluster pulls it (the chart's image.repository:tag)")))
	case strings.ContainsAny(f.image, " \t\n"):
		errs = append(errs, flags.Invalid(flags.MeasureImage, f.image, errors.New("an image reference has no spaces")))
	}
	s := f.s
	switch {
	case f.inCluster && s.URL != "":
		errs = append(errs, flags.Invalid(flags.MeasureURL, s.URL, errors.New("--in-cluster sends the load to the probe's Service itself: give one of --url and --in-cluster")))
		s.URL = kubeprobe.ServiceURL
	case f.inCluster:
		s.URL = kubeprobe.ServiceURL
	case f.dryRun && s.URL == "":
		s.URL = "http://probe.example.com/" // only the objects are printed
	}
	if f.inCluster && f.s.Host != "" {
		errs = append(errs, flags.Invalid(flags.MeasureHost, f.s.Host, errors.New("--in-cluster calls the probe's Service by its own name: --host goes with --url")))
	}
	if f.ingressClass != "" {
		if f.inCluster {
			errs = append(errs, flags.Invalid(flags.MeasureIngressClass, f.ingressClass, errors.New("--in-cluster needs no Ingress: --ingress-class goes with --url")))
		} else if msgs := validation.IsDNS1123Subdomain(f.ingressClass); len(msgs) > 0 {
			errs = append(errs, flags.Invalid(flags.MeasureIngressClass, f.ingressClass, fmt.Errorf("not an IngressClass name: %s", strings.Join(msgs, "; "))))
		}
	}
	errs = append(errs, s.Validate(urlRequired),
		flags.MeasureMargin.Check(f.margin),
		flags.MeasureTimeout.Check(f.timeout))
	if msgs := validation.IsDNS1123Label(f.profileName); len(msgs) > 0 {
		errs = append(errs, flags.Invalid(flags.MeasureProfileName, f.profileName, errors.New(strings.Join(msgs, "; "))))
	}
	return errors.Join(errs...)
}

// checkIngressClass fails when the cluster has no IngressClass class,
// naming those it has.
func checkIngressClass(ctx context.Context, kube kubernetes.Interface, class string) error {
	_, err := kube.NetworkingV1().IngressClasses().Get(ctx, class, metav1.GetOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading IngressClass %s: %w", class, err)
	}
	has := "none"
	if list, lerr := kube.NetworkingV1().IngressClasses().List(ctx, metav1.ListOptions{}); lerr == nil && len(list.Items) > 0 {
		names := make([]string, len(list.Items))
		for i, c := range list.Items {
			names[i] = c.Name
		}
		slices.Sort(names)
		has = strings.Join(names, ", ")
	}
	return flags.Invalid(flags.MeasureIngressClass, class, fmt.Errorf("no IngressClass %s in this cluster; it has: %s (kubectl get ingressclass)", class, has))
}

// cleanupTimeout bounds the namespace's deletion, which runs on a context
// of its own: a run that timed out or was interrupted still cleans up.
const cleanupTimeout = time.Minute

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
	if f.ingressClass != "" {
		// Before anything is created: a class the cluster lacks would
		// leave the Ingress unserved until --timeout.
		if err := checkIngressClass(ctx, kube, f.ingressClass); err != nil {
			return runtimeError{err}
		}
	}
	m := &measurement{flags: f, kube: kube, errOut: errOut}
	defer func() {
		if cerr := m.cleanup(ctx); cerr != nil {
			err = errors.Join(err, cerr)
		}
		if err != nil {
			err = runtimeError{m.explain(ctx, err)}
		}
	}()
	started := time.Now().UTC()
	res, err := m.measure(ctx, objs)
	if err != nil {
		return err
	}
	path := f.s.URL
	if f.inCluster {
		path = "Service " + kubeprobe.ProbeName + " (ClusterIP) from a Job in the cluster"
	}
	return writeMeasureReport(out, measureReport{Path: path, Cluster: f.clusterName(), Date: started, Replicas: f.s.Replicas,
		Rate: f.s.Rate, Result: res, Margin: f.margin, Profile: f.profileName})
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
	return "unknown"
}

// measurement is one run against the cluster.
type measurement struct {
	flags     *measureFlags
	kube      kubernetes.Interface
	errOut    io.Writer
	namespace string
}

func (m *measurement) measure(ctx context.Context, objs probeSet) (routingprobe.Result, error) {
	ns, err := m.kube.CoreV1().Namespaces().Create(ctx, objs.namespace, metav1.CreateOptions{})
	if err != nil {
		return routingprobe.Result{}, fmt.Errorf("creating the probe's namespace: %w", err)
	}
	m.namespace = ns.Name
	if err := objs.create(ctx, m.kube, ns.Name); err != nil {
		return routingprobe.Result{}, err
	}
	fmt.Fprintf(m.errOut, "Created namespace %s with Deployment %s (%d Pods) and Service %s, port 80.\n", ns.Name, kubeprobe.ProbeName, m.flags.s.Replicas, kubeprobe.ProbeName)
	if m.flags.inCluster {
		return m.waitClient(ctx)
	}
	if objs.ingress != nil {
		fmt.Fprintf(m.errOut, "Created Ingress %s (class %s) routing %s to it.\n", kubeprobe.ProbeName, m.flags.ingressClass, ingressHostText(objs.ingress))
	} else {
		fmt.Fprintf(m.errOut, "Route %s to Service %s/%s port 80 while this runs, e.g.:\n\n%s\n", m.flags.s.URL, ns.Name, kubeprobe.ProbeName,
			indent(routeExample(ns.Name, m.flags.s.URL), "  "))
	}
	return kubeprobe.Run(ctx, m.flags.s, &kubeprobe.Cluster{Kube: m.kube, Namespace: ns.Name}, m.errOut)
}

// waitClient waits for the in-cluster client's Pod to end and reads its
// result from its log.
func (m *measurement) waitClient(ctx context.Context) (routingprobe.Result, error) {
	fmt.Fprintf(m.errOut, "Job %s measures from inside the cluster; follow it with: kubectl -n %s logs -f job/%s\n", clientName, m.namespace, clientName)
	sel := kubeprobe.LabelName + "=" + kubeprobe.ClientAppName
	for {
		list, err := m.kube.CoreV1().Pods(m.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err == nil {
			for _, p := range list.Items {
				if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
					continue
				}
				log, err := m.kube.CoreV1().Pods(m.namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: clientName}).DoRaw(ctx)
				if err != nil {
					return routingprobe.Result{}, fmt.Errorf("reading the log of the client Pod %s: %w", p.Name, err)
				}
				res, perr := routingprobe.ParseResult(log)
				if perr != nil {
					return routingprobe.Result{}, fmt.Errorf("the client Pod %s ended %s: %w", p.Name, p.Status.Phase, perr)
				}
				return res, nil
			}
		}
		select {
		case <-ctx.Done():
			return routingprobe.Result{}, fmt.Errorf("the client Job %s did not finish: %s", clientName,
				kubeprobe.PodStates(ctx, m.kube, m.namespace, sel, "job "+clientName))
		case <-time.After(2 * time.Second):
		}
	}
}

// cleanup deletes the namespace, with its own time.
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

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}
