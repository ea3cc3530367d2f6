package kubeprobe

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/routingprobe"
)

// The probe's names: its Deployment and Service, the port its Pods serve,
// and the labels that find its objects (and a run's leftovers).
const (
	ProbeName    = "probe"
	ProbePort    = 8080
	NSPrefix     = "graceguard-measure-"
	LabelName    = "app.kubernetes.io/name"
	ManagedBy    = "kubectl-graceguard"
	ProbeAppName = "graceguard-routing-probe"
	// ClientAppName labels the in-cluster client's Pod, which the
	// probe's selector must not match.
	ClientAppName = "graceguard-routing-probe-client"
	// PodNameEnv holds each probe Pod's name (the downward API).
	PodNameEnv = "POD_NAME"
	// ServiceURL is the probe's Service as the in-cluster client calls
	// it: its ClusterIP through the cluster's service proxy. The kubelet
	// expands $(ServiceHostEnv) in the Job's arguments from the Service's
	// environment variables, so the client needs no cluster DNS and no
	// lookup adds to a withdrawal.
	ServiceURL = "http://$(" + ServiceHostEnv + ")/"
	// ServiceHostEnv is the variable the kubelet sets to the probe
	// Service's ClusterIP in the Pods created after it.
	ServiceHostEnv = "PROBE_SERVICE_HOST"
)

// Labels are the labels of the probe's namespace, Deployment, Service and
// Pods.
func Labels() map[string]string {
	return map[string]string{"app.kubernetes.io/managed-by": ManagedBy, LabelName: ProbeAppName}
}

// Selector selects the probe's Pods.
const Selector = LabelName + "=" + ProbeAppName

// Settings are a measurement's: what both the plugin and the in-cluster
// client read from their flags.
type Settings struct {
	URL string
	// Host is the Host header of the requests to URL ("": URL's host).
	Host        string
	Replicas    int
	Deletions   int
	Rate        int
	MaxRequests int
	Hold        time.Duration
	Quiet       time.Duration
}

// DefaultSettings are the plugin's defaults.
func DefaultSettings() Settings {
	return Settings{Replicas: 3, Deletions: 10, Rate: 50, MaxRequests: 100_000, Hold: time.Minute, Quiet: 3 * time.Second}
}

// Validate names every wrong value at once, by its flag. urlHint follows
// "required: " when URL is empty.
func (s Settings) Validate(urlHint string) error {
	errs := []error{checkURL(s.URL, urlHint), checkHost(s.Host),
		flags.MeasureReplicas.Check(int64(s.Replicas)),
		flags.MeasureDeletions.Check(int64(s.Deletions)),
		flags.MeasureRate.Check(int64(s.Rate)),
		flags.MeasureMaxRequests.Check(int64(s.MaxRequests)),
		flags.MeasureHold.Check(s.Hold),
		flags.MeasureQuiet.Check(s.Quiet)}
	if s.Hold%time.Second != 0 {
		errs = append(errs, flags.Invalid(flags.MeasureHold.Name, s.Hold.String(), errors.New("want whole seconds (a preStop sleep's unit)")))
	}
	// A round's Pods are the replicas and the deleted one: the load
	// spreads over one more. Quiet ends a round only once it is several
	// gaps between two requests to one Pod long.
	if minQuiet := 5 * routingprobe.Gap(s.Rate, s.Replicas+1); s.Rate > 0 && s.Quiet < minQuiet {
		errs = append(errs, flags.Invalid(flags.MeasureQuiet.Name, s.Quiet.String(),
			fmt.Errorf("want at least %s at --rate=%d over %d Pods (five times the gap between two requests to one Pod): raise --quiet or --rate",
				minQuiet, s.Rate, s.Replicas+1)))
	}
	if s.Quiet*2 > s.Hold {
		errs = append(errs, flags.Invalid(flags.MeasureQuiet.Name, s.Quiet.String(),
			fmt.Errorf("want at most half of --hold=%s, so a withdrawal has time to end before the Pod stops", s.Hold)))
	}
	return errors.Join(errs...)
}

func checkURL(s, hint string) error {
	if s == "" {
		return flags.Invalid(flags.MeasureURL, "", errors.New("required: "+hint))
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

// checkHost accepts "" or a DNS name.
func checkHost(h string) error {
	if h == "" {
		return nil
	}
	if msgs := validation.IsDNS1123Subdomain(h); len(msgs) > 0 {
		return flags.Invalid(flags.MeasureHost, h, fmt.Errorf("want a DNS name, the host your path routes by (e.g. probe.shop.example): %s", strings.Join(msgs, "; ")))
	}
	return nil
}

// Cluster is routingprobe.Cluster over the probe's namespace.
type Cluster struct {
	Kube      kubernetes.Interface
	Namespace string
}

func (c *Cluster) pods(ctx context.Context) ([]corev1.Pod, error) {
	list, err := c.Kube.CoreV1().Pods(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: Selector})
	if err != nil {
		return nil, fmt.Errorf("listing the probe's Pods: %w", err)
	}
	return list.Items, nil
}

// ReadyPods names the probe's Pods that are Ready and not deleted.
func (c *Cluster) ReadyPods(ctx context.Context) ([]string, error) {
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

// Delete deletes a probe Pod, with its own grace (--hold + 10 s).
func (c *Cluster) Delete(ctx context.Context, pod string) error {
	return c.Kube.CoreV1().Pods(c.Namespace).Delete(ctx, pod, metav1.DeleteOptions{})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// WaitReady waits for n Ready probe Pods; its error says what the Pods
// are waiting on (ImagePullBackOff, no Pod at all).
func (c *Cluster) WaitReady(ctx context.Context, n int) error {
	for {
		ready, err := c.ReadyPods(ctx)
		if err == nil && len(ready) >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d probe Pods Ready: %s", len(ready), n, PodStates(ctx, c.Kube, c.Namespace, Selector, "deployment "+ProbeName))
		case <-time.After(time.Second):
		}
	}
}

// PodStates describes the Pods selector selects that are not Ready, with a
// context of its own (ctx may have ended). owner names what makes them,
// for the hint when there are none.
func PodStates(ctx context.Context, kube kubernetes.Interface, namespace, selector, owner string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	list, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return fmt.Sprintf("listing Pods: %v", err)
	}
	if len(list.Items) == 0 {
		return fmt.Sprintf("no Pods were created; see kubectl -n %s describe %s", namespace, owner)
	}
	var states []string
	for _, p := range list.Items {
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

// SettingsFlags are the flags that fill s, for the plugin and for
// `webhook measure` alike.
func SettingsFlags(s *Settings) []flags.Flag {
	return []flags.Flag{
		{Name: flags.MeasureURL, Value: flags.String(&s.URL),
			Usage: "http(s) URL of your path (Ingress, HTTPRoute, load balancer) to the probe's Service, reachable from here"},
		{Name: flags.MeasureHost, Value: flags.String(&s.Host),
			Usage: "the Host header of the requests to --url, when your path routes by a host that --url does not name (an address)"},
		{Name: flags.MeasureReplicas.Name, Value: flags.Int(&s.Replicas), Usage: "probe Pods"},
		{Name: flags.MeasureDeletions.Name, Value: flags.Int(&s.Deletions), Usage: "Pods to delete, one at a time: one withdrawal each"},
		{Name: flags.MeasureRate.Name, Value: flags.Int(&s.Rate), Usage: "requests per second sent to the path"},
		{Name: flags.MeasureMaxRequests.Name, Value: flags.Int(&s.MaxRequests), Usage: "requests sent in all, at most; the run fails when they run out"},
		{Name: flags.MeasureHold.Name, Value: flags.MeasureHold.Value(&s.Hold),
			Usage: "the probe Pods' preStop sleep: how long a deleted Pod still answers (longer than the slowest withdrawal)"},
		{Name: flags.MeasureQuiet.Name, Value: flags.MeasureQuiet.Value(&s.Quiet),
			Usage: "a deletion's measurement ends when the Pod has answered nothing for this long"},
	}
}

// Args are the flags that give a Job's client the same settings.
func (s Settings) Args() []string {
	args := []string{
		"--" + flags.MeasureURL + "=" + s.URL,
		fmt.Sprintf("--%s=%d", flags.MeasureReplicas.Name, s.Replicas),
		fmt.Sprintf("--%s=%d", flags.MeasureDeletions.Name, s.Deletions),
		fmt.Sprintf("--%s=%d", flags.MeasureRate.Name, s.Rate),
		fmt.Sprintf("--%s=%d", flags.MeasureMaxRequests.Name, s.MaxRequests),
		"--" + flags.MeasureHold.Name + "=" + flags.MeasureHold.Format(s.Hold),
		"--" + flags.MeasureQuiet.Name + "=" + flags.MeasureQuiet.Format(s.Quiet),
	}
	if s.Host != "" {
		args = append(args, "--"+flags.MeasureHost+"="+s.Host)
	}
	return args
}
