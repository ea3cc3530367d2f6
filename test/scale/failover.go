package scale

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/graceguard/graceguard/pkg/flags"
	"github.com/graceguard/graceguard/pkg/observer"
)

// failoverAfter is how long into a failover's churn the leader is
// stopped: Pods are shutting down and some are gone.
const failoverAfter = 5 * time.Second

// failovers repeats the churn with the observer's leader stopped by
// SIGTERM, then by SIGKILL, a standby replica started beside it first.
func (rn *runner) failovers(ctx context.Context) error {
	for i, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		name := fmt.Sprintf("observer failover (%s)", signalName(sig))
		err := rn.phase(name, func() (int, error) {
			f, err := rn.failover(ctx, i+1, sig)
			if f == nil {
				return 0, err
			}
			rn.r.Failovers = append(rn.r.Failovers, *f)
			return f.Shutdowns, err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	}
	return sig.String()
}

// failover runs one churn during which the leader is stopped by sig. It
// returns what it measured even with an error once the leader was stopped.
func (rn *runner) failover(ctx context.Context, n int, sig syscall.Signal) (*Failover, error) {
	o, c, w := rn.o, rn.c, rn.w
	leader, err := rn.waitLeader(ctx, "")
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	standby, err := c.startObserver(fmt.Sprintf("graceguard observer (standby %d)", n), ports[0])
	if err != nil {
		return nil, err
	}
	standbyMetrics := metricsURL(ports[0])
	if err := waitMetrics(ctx, standbyMetrics, standby.Exited); err != nil {
		return nil, err
	}
	if h, err := c.leaseHolder(ctx); err != nil {
		return nil, err
	} else if h != leader {
		return nil, fmt.Errorf("the Lease %s/%s changed hands to %q before the leader was stopped (was %q)", releaseNamespace, observerLease, h, leader)
	}
	rec0, kills0, _, err := c.reports(ctx, rn.o)
	if err != nil {
		return nil, err
	}

	f := &Failover{Signal: signalName(sig)}
	w.resetShutdowns()
	// The churn goes on while the leader is stopped: its deletions are
	// sent from here, its Pods shut down meanwhile.
	disrupted := make(chan error, 1)
	go func() {
		_, _, err := rn.disrupt(ctx, restartSet(o))
		disrupted <- err
	}()
	first, err := w.waitFor(ctx, o.Timeout, "the failover churn's first deletion", func(n counts) bool { return !n.firstDelete.IsZero() }, c.exited)
	if err != nil {
		return nil, errors.Join(err, <-disrupted)
	}
	time.Sleep(time.Until(first.firstDelete.Add(failoverAfter)))
	old := c.observer
	c.observer, c.observerMetrics = standby, standbyMetrics
	stopped := time.Now()
	f.StoppedAfterSeconds = stopped.Sub(first.firstDelete).Seconds()
	if err := old.Signal(sig); err != nil {
		return nil, errors.Join(err, <-disrupted)
	}
	rn.logf("observer failover: the leader %s got %s %.1f s into the churn", leader, f.Signal, f.StoppedAfterSeconds)
	if _, err := rn.waitLeader(ctx, leader); err != nil {
		return f, errors.Join(err, <-disrupted)
	}
	f.LeaderlessSeconds = time.Since(stopped).Seconds()
	// The new leader observes once its Pod cache is filled (the gauge of
	// cached Pods; some treated Pods always run).
	if err := waitObserving(ctx, standbyMetrics, o.Timeout, c.exited); err != nil {
		return f, errors.Join(err, <-disrupted)
	}
	observing := time.Now()
	f.UnobservedSeconds = observing.Sub(stopped).Seconds()
	if err := <-disrupted; err != nil {
		return f, err
	}
	select {
	case <-old.Done():
	case <-time.After(30 * time.Second):
		return f, fmt.Errorf("the old leader did not exit within 30s of %s", f.Signal)
	}

	shutdowns, err := rn.settle(ctx, workloadNamespaces(o))
	last := w.snapshot()
	f.Shutdowns, f.Kills = shutdowns, last.kills
	if last.lastGone.After(last.firstDelete) {
		f.ChurnSeconds = last.lastGone.Sub(last.firstDelete).Seconds()
	}
	f.GoneUnobserved = w.goneBetween(stopped, observing)
	if err != nil {
		return f, err
	}
	// The new leader writes each workload's samples within a flush
	// interval of the last Pod going; wait three, and stop early once
	// every shutdown is counted.
	deadline := maxTime(last.lastGone, observing).Add(3*rn.flushInterval() + 5*time.Second)
	for {
		rec, kills, _, err := c.reports(ctx, rn.o)
		if err != nil {
			return f, err
		}
		f.Recorded, f.RecordedKills = rec-rec0, kills-kills0
		if f.Recorded >= f.Shutdowns || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	f.LagSeconds = time.Since(last.lastGone).Seconds()
	rn.logf("observer failover (%s): Lease taken after %.1f s, observing after %.1f s; %d shutdowns (%d killed), %d of them gone meanwhile; %d recorded (%d killed): %d lost",
		f.Signal, f.LeaderlessSeconds, f.UnobservedSeconds, f.Shutdowns, f.Kills, f.GoneUnobserved, f.Recorded, f.RecordedKills, f.Lost())
	if f.Recorded > f.Shutdowns {
		return f, fmt.Errorf("the reports gained %d samples for %d shutdowns: some were recorded twice", f.Recorded, f.Shutdowns)
	}
	return f, nil
}

// waitObserving waits until the observer at url caches treated Pods.
func waitObserving(ctx context.Context, url string, timeout time.Duration, exited func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		m, err := scrape(ctx, url)
		if err == nil && m.sum("graceguard_observer_pods", nil) > 0 {
			return nil
		}
		if err := exited(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the new leader at %s cached no treated Pod within %s (%v)", url, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitLeader waits until an observer other than not holds the Lease, and
// returns its identity.
func (rn *runner) waitLeader(ctx context.Context, not string) (string, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		h, err := rn.c.leaseHolder(ctx)
		if err != nil {
			return "", err
		}
		if h != "" && h != not {
			return h, nil
		}
		if err := rn.c.exited(); err != nil {
			return "", err
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no observer other than %q took the Lease %s/%s within 2 minutes (holder %q)", not, releaseNamespace, observerLease, h)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// flushInterval is the observer's --flush-interval as the chart sets it,
// or its default.
func (rn *runner) flushInterval() time.Duration {
	for _, a := range rn.c.observerArgs {
		if v, ok := strings.CutPrefix(a, "--"+flags.FlushInterval.Name+"="); ok {
			if d, err := time.ParseDuration(v); err == nil {
				return d
			}
		}
	}
	return observer.Default().FlushInterval
}

// waitMetrics waits up to a minute until url answers.
func waitMetrics(ctx context.Context, url string, exited func() error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		if err := exited(); err != nil {
			return err
		}
		if _, err := scrape(ctx, url); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("no metrics at %s within a minute: %v", url, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// workloadNamespaces are the namespaces of the Deployments.
func workloadNamespaces(o Options) []string {
	out := make([]string, o.Namespaces)
	for i := range out {
		out[i] = workloadNamespace(i)
	}
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
