package kubeprobe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/graceguard/graceguard/pkg/routingprobe"
)

// Run measures once the probe is deployed: it waits for s.Replicas Ready
// Pods and for s.URL to reach one, then sends the load and deletes Pods
// one at a time. progress gets a line per step; the Result is for the
// report.
func Run(ctx context.Context, s Settings, c *Cluster, progress io.Writer) (routingprobe.Result, error) {
	if err := c.WaitReady(ctx, s.Replicas); err != nil {
		return routingprobe.Result{}, err
	}
	fmt.Fprintf(progress, "%d probe Pods Ready; waiting for %s to reach one.\n", s.Replicas, s.URL)
	client := routingprobe.NewClientFor(s.Host)
	wait := time.Hour
	if d, ok := ctx.Deadline(); ok {
		wait = time.Until(d).Round(time.Second)
	}
	if _, err := routingprobe.WaitServing(ctx, client, s.URL, c.ReadyPods, wait, 500*time.Millisecond); err != nil {
		return routingprobe.Result{}, err
	}
	fmt.Fprintf(progress, "%s reaches the probe. Sending %d requests/s and deleting %d Pods, one at a time.\n", s.URL, s.Rate, s.Deletions)
	load := routingprobe.StartLoad(ctx, routingprobe.LoadConfig{URL: s.URL, Rate: s.Rate, MaxRequests: s.MaxRequests, Client: client})
	rounds, err := routingprobe.Measure(ctx, routingprobe.Config{Replicas: s.Replicas, Deletions: s.Deletions,
		Quiet: s.Quiet, Hold: s.Hold, RouteWait: 5 * time.Minute, Poll: 50 * time.Millisecond,
		Recent: routingprobe.RecentWindow(s.Rate, s.Replicas+1)}, c, load, progress)
	samples := load.Stop()
	if errors.Is(err, routingprobe.ErrExhausted) {
		err = fmt.Errorf("%w (--max-requests=%d) after %d of %d deletions: raise --max-requests or lower --rate", err, s.MaxRequests, len(rounds), s.Deletions)
	}
	if err != nil {
		return routingprobe.Result{}, err
	}
	return routingprobe.ResultOf(rounds, samples, load.Skipped()), nil
}
