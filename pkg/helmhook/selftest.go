package helmhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"k8s.io/client-go/kubernetes"
)

// retryInterval is the pause between two attempts of a check.
const retryInterval = 2 * time.Second

// Selftest runs the check c names against the cluster kube reaches,
// retrying until c.Timeout, and prints what it found to out: one line per
// thing checked when it passes, and each new reason while it does not.
func Selftest(ctx context.Context, c SelftestConfig, kube kubernetes.Interface, out io.Writer) error {
	var attempt func(context.Context) ([]string, error)
	switch c.Check {
	case CheckService:
		attempt = func(ctx context.Context) ([]string, error) { return checkService(ctx, c, kube) }
	case CheckMutation:
		attempt = func(ctx context.Context) ([]string, error) { return checkMutation(ctx, c, kube) }
	default:
		return fmt.Errorf("unknown check %q; want one of %s", c.Check, checkNames())
	}
	lines, err := retry(ctx, c.Timeout, retryInterval, out, attempt)
	if err != nil {
		return err
	}
	for _, l := range lines {
		fmt.Fprintln(out, l)
	}
	return nil
}

// retry calls attempt, every interval, until it succeeds or timeout has passed, printing
// each reason it failed for that differs from the one before. The error is
// the last reason that was not the timeout itself cutting an attempt short.
func retry(ctx context.Context, timeout, interval time.Duration, out io.Writer, attempt func(context.Context) ([]string, error)) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	var last error
	for {
		lines, err := attempt(ctx)
		if err == nil {
			return lines, nil
		}
		if ctx.Err() == nil || last == nil {
			if last == nil || err.Error() != last.Error() {
				fmt.Fprintf(out, "not yet (%s): %v\n", time.Since(start).Round(time.Second), err)
			}
			last = err
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, fmt.Errorf("%w (still failing after %s)", last, timeout)
			}
			return nil, fmt.Errorf("%w (stopped: %v)", last, ctx.Err())
		case <-time.After(interval):
		}
	}
}
