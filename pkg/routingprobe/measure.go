package routingprobe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Cluster is what the rounds need of the cluster: the probe's Ready Pods
// and deleting one. kubeprobe implements it with client-go; tests with HTTP
// servers.
type Cluster interface {
	// ReadyPods names the probe's Pods that are Ready and not deleted.
	ReadyPods(ctx context.Context) ([]string, error)
	// Delete deletes a Pod; it returns once the API server accepted it.
	Delete(ctx context.Context, pod string) error
}

// Config shapes the rounds.
type Config struct {
	// Replicas is how many Ready Pods a round waits for before deleting one.
	Replicas int
	// Deletions is the number of rounds.
	Deletions int
	// Quiet ends a round: this long without a request to the deleted Pod.
	Quiet time.Duration
	// Hold is how long a deleted Pod keeps serving (its preStop sleep): a
	// Pod still routed to after Hold - Quiet cannot be measured.
	Hold time.Duration
	// RouteWait bounds the wait for the path to send requests to every
	// Ready Pod, and for a replacement to become Ready.
	RouteWait time.Duration
	// Recent is how lately the path must have sent each Ready Pod a
	// request before a deletion (RecentWindow).
	Recent time.Duration
	// Poll is how often the rounds look at the load and the cluster.
	Poll time.Duration
}

// Round is one deletion: the Pod, when its delete call was made, how long
// after it the path sent the Pod its last request (0 when it sent none),
// and the requests of the round.
type Round struct {
	Pod     string
	Deleted time.Time
	Delay   time.Duration
	// Served counts the requests the Pod answered that were sent after
	// its delete call.
	Served int
	// Failed counts the round's requests that no probe answered.
	Failed int
}

// Withdrawal is how long after deleted the last request pod answered was
// sent, and how many it answered that were sent after deleted; 0 and 0
// when the path sent it none.
func Withdrawal(samples []Sample, pod string, deleted time.Time) (time.Duration, int) {
	var last time.Time
	n := 0
	for _, s := range samples {
		if s.Pod != pod || s.Sent.Before(deleted) {
			continue
		}
		n++
		if s.Sent.After(last) {
			last = s.Sent
		}
	}
	if n == 0 {
		return 0, 0
	}
	return last.Sub(deleted), n
}

// WaitServing waits until a request to url is answered by one of the Pods
// pods names (nil: any probe Pod). Its error says what the URL answered
// last.
func WaitServing(ctx context.Context, c *http.Client, url string, pods func(context.Context) ([]string, error), timeout, poll time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		s := Get(ctx, c, url)
		switch {
		case s.Err != "":
			last = s.Err
		default:
			names, err := pods(ctx)
			if err != nil {
				last = err.Error()
				break
			}
			if names == nil || slices.Contains(names, s.Pod) {
				return s.Pod, nil
			}
			last = fmt.Sprintf("answered by Pod %s, not one of this run's probe Pods (%s)", s.Pod, strings.Join(names, ", "))
		}
		select {
		case <-ctx.Done():
			if last == "" {
				last = ctx.Err().Error()
			}
			return "", fmt.Errorf("%s never reached a probe Pod in %s; last answer: %s", url, timeout, last)
		case <-time.After(poll):
		}
	}
}

// Gap is the mean time between two requests to one Pod when the load's
// rate is spread over pods Pods.
func Gap(rate, pods int) time.Duration {
	if rate <= 0 {
		return 0
	}
	return time.Duration(pods) * time.Second / time.Duration(rate)
}

// RecentWindow is Config.Recent for a rate over pods Pods: a second, or
// four gaps between two requests to one Pod when that is longer.
func RecentWindow(rate, pods int) time.Duration {
	return max(time.Second, 4*Gap(rate, pods))
}

// ErrExhausted: the load sent all its requests before the rounds ended.
var ErrExhausted = errors.New("the load sent all its requests")

// Measure deletes cfg.Deletions Pods one at a time while load runs, and
// returns one Round per deletion. Before each it waits for cfg.Replicas
// Ready Pods, every one of them answering through the path within the last
// second; after it, until the deleted Pod has answered nothing for
// cfg.Quiet. progress gets a line per round.
func Measure(ctx context.Context, cfg Config, cluster Cluster, load *Load, progress io.Writer) ([]Round, error) {
	var rounds []Round
	for i := range cfg.Deletions {
		pods, err := waitRouted(ctx, cfg, cluster, load)
		if err != nil {
			return rounds, fmt.Errorf("before deletion %d: %w", i+1, err)
		}
		victim := pods[i%len(pods)]
		before := len(load.Samples())
		t0 := time.Now()
		if err := cluster.Delete(ctx, victim); err != nil {
			return rounds, fmt.Errorf("deletion %d: deleting Pod %s: %w", i+1, victim, err)
		}
		if err := waitQuiet(ctx, cfg, load, victim, t0); err != nil {
			return rounds, fmt.Errorf("deletion %d: %w", i+1, err)
		}
		samples := load.Samples()
		r := Round{Pod: victim, Deleted: t0}
		r.Delay, r.Served = Withdrawal(samples, victim, t0)
		for _, s := range samples[before:] {
			if s.Err != "" {
				r.Failed++
			}
		}
		rounds = append(rounds, r)
		failed := ""
		if r.Failed > 0 {
			failed = fmt.Sprintf("; %d requests of the round failed", r.Failed)
		}
		fmt.Fprintf(progress, "deletion %d of %d: Pod %s answered %d requests sent after its delete call, the last %s after it%s\n",
			i+1, cfg.Deletions, victim, r.Served, FormatDelay(r.Delay), failed)
	}
	return rounds, nil
}

// waitRouted waits for cfg.Replicas Ready Pods, each answering through the
// path within cfg.Recent.
func waitRouted(ctx context.Context, cfg Config, cluster Cluster, load *Load) ([]string, error) {
	deadline := time.Now().Add(cfg.RouteWait)
	for {
		if load.Exhausted() {
			return nil, ErrExhausted
		}
		pods, err := cluster.ReadyPods(ctx)
		if err != nil {
			return nil, err
		}
		var stale []string
		for _, p := range pods {
			if time.Since(load.LastServed(p)) > cfg.Recent {
				stale = append(stale, p)
			}
		}
		if len(pods) >= cfg.Replicas && len(stale) == 0 {
			slices.Sort(pods)
			return pods, nil
		}
		if time.Now().After(deadline) {
			if len(pods) < cfg.Replicas {
				return nil, fmt.Errorf("%d of %d probe Pods Ready after %s", len(pods), cfg.Replicas, cfg.RouteWait)
			}
			return nil, fmt.Errorf("the path sent no request to Pod %s in the last %s, %s after it was Ready: does the route reach every probe Pod?",
				strings.Join(stale, ", "), cfg.Recent, cfg.RouteWait)
		}
		if err := sleep(ctx, cfg.Poll); err != nil {
			return nil, err
		}
	}
}

// waitQuiet waits until pod has answered nothing for cfg.Quiet. A Pod
// still answering within cfg.Quiet of the end of its preStop sleep cannot
// be told apart from one the path never withdrew: an error, not a figure.
func waitQuiet(ctx context.Context, cfg Config, load *Load, pod string, deleted time.Time) error {
	for {
		last := load.LastServed(pod)
		if last.Before(deleted) {
			last = deleted
		}
		quiet := time.Since(last) >= cfg.Quiet
		if last.Sub(deleted) > cfg.Hold-cfg.Quiet || (!quiet && time.Since(deleted) >= cfg.Hold) {
			return fmt.Errorf("the path still sent Pod %s requests %s after its delete call, within --quiet=%s of the end of its --hold=%s preStop sleep: raise --hold",
				pod, FormatDelay(last.Sub(deleted)), cfg.Quiet, cfg.Hold)
		}
		if quiet {
			return nil
		}
		if load.Exhausted() {
			return ErrExhausted
		}
		if err := sleep(ctx, cfg.Poll); err != nil {
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// FormatDelay prints a delay to the millisecond: 2.077s.
func FormatDelay(d time.Duration) string {
	return fmt.Sprintf("%.3fs", d.Seconds())
}
