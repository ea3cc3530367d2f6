package routingprobe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Sample is one request of the load: when it was sent, the Pod that
// answered it ("" when none did) and, for a failure, what went wrong.
type Sample struct {
	Sent time.Time
	Pod  string
	// Err is "" for a probe's answer, else a short reason: "HTTP 502",
	// "not a probe's answer", or the transport's error.
	Err string
}

// LoadConfig is the load's target and bounds.
type LoadConfig struct {
	URL string
	// Rate is the requests sent per second, whatever the answers take
	// (open loop: a slow path does not slow the load).
	Rate int
	// MaxRequests bounds the requests sent in all; then the load stops
	// and Exhausted is true.
	MaxRequests int
	// Client sends the requests; its Timeout bounds each.
	Client *http.Client
}

// maxInFlight bounds the requests waiting for an answer: a path that
// hangs costs skipped ticks, not unbounded goroutines.
const maxInFlight = 256

// Load sends requests through the path at a fixed rate and attributes
// each answer to the Pod named in it.
type Load struct {
	cfg       LoadConfig
	mu        sync.Mutex
	samples   []Sample
	last      map[string]time.Time
	skipped   int
	exhausted bool
	stop      chan struct{}
	done      chan struct{}
	stopOnce  sync.Once
}

// StartLoad starts sending requests; Stop ends it.
func StartLoad(ctx context.Context, cfg LoadConfig) *Load {
	l := &Load{cfg: cfg, last: map[string]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
	go l.run(ctx)
	return l
}

func (l *Load) run(ctx context.Context) {
	defer close(l.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, maxInFlight)
	tick := time.NewTicker(time.Second / time.Duration(l.cfg.Rate))
	defer tick.Stop()
	for sent := 0; ; {
		select {
		case <-ctx.Done():
			return
		case <-l.stop:
			return
		case <-tick.C:
		}
		if sent >= l.cfg.MaxRequests {
			l.mu.Lock()
			l.exhausted = true
			l.mu.Unlock()
			return
		}
		select {
		case sem <- struct{}{}:
		default:
			l.mu.Lock()
			l.skipped++
			l.mu.Unlock()
			continue
		}
		sent++
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s := Get(ctx, l.cfg.Client, l.cfg.URL)
			if ctx.Err() != nil {
				return // a request cut by the end of the run says nothing of the path
			}
			l.record(s)
		}()
	}
}

func (l *Load) record(s Sample) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.samples = append(l.samples, s)
	if s.Pod != "" && s.Sent.After(l.last[s.Pod]) {
		l.last[s.Pod] = s.Sent
	}
}

// Get sends one request and reads whose answer it is.
func Get(ctx context.Context, c *http.Client, url string) Sample {
	s := Sample{Sent: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		s.Err = err.Error()
		return s
	}
	resp, err := c.Do(req)
	if err != nil {
		s.Err = transportError(err)
		return s
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	switch {
	case err != nil:
		s.Err = transportError(err)
	case resp.StatusCode != http.StatusOK:
		s.Err = fmt.Sprintf("HTTP %d", resp.StatusCode)
	default:
		pod, ok := ParsePod(body)
		if !ok {
			s.Err = "not a probe's answer"
		}
		s.Pod = pod
	}
	return s
}

// transportError is the innermost error: "connection refused", not the
// whole chain of Get "http://...": dial tcp ...
func transportError(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}

// LastServed is when the last request pod answered was sent (zero: none).
func (l *Load) LastServed(pod string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last[pod]
}

// Samples are the answers so far, in the order they arrived.
func (l *Load) Samples() []Sample {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.samples)
}

// Exhausted says the load sent MaxRequests and stopped.
func (l *Load) Exhausted() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.exhausted
}

// Skipped counts the ticks no request was sent on, because maxInFlight
// were still waiting.
func (l *Load) Skipped() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.skipped
}

// Stop ends the load, waits for the requests in flight, and returns every
// sample.
func (l *Load) Stop() []Sample {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
	return l.Samples()
}
