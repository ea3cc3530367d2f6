package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math"
	"net"
	"net/http"
	"slices"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/graceguard/graceguard/test/harness/apiserver"
	"github.com/graceguard/graceguard/test/harness/proc"
)

// target is a webhook server under load: where to send reviews, which
// process answers them, and what a correct answer looks like.
type target struct {
	name string
	url  string
	proc *apiserver.Process
	body []byte
	// wantPatch: a correct answer carries a JSON patch (graceguard
	// mutates the review's Pod); the baseline answers allowed, unpatched.
	wantPatch bool
	// client is shared by all the attacks on this target, so a run's
	// warm-up leaves its keep-alive connections for the run, as an API
	// server keeps its connections to a webhook.
	client *http.Client
}

func newTarget(name, url string, proc *apiserver.Process, body, ca []byte, wantPatch bool) (*target, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s: no CA certificate to trust", name)
	}
	tr := &http.Transport{
		DialContext:     (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		// HTTP/1.1 keep-alive, as the API server talks to graceguard
		// (which serves HTTP/2 only with --enable-http2).
		ForceAttemptHTTP2:   false,
		MaxIdleConnsPerHost: 10000,
		IdleConnTimeout:     90 * time.Second,
	}
	// The chart's timeoutSeconds: after it the API server gives up on the
	// webhook, so a slower answer counts as an error here too.
	return &target{name: name, url: url, proc: proc, body: body, wantPatch: wantPatch,
		client: &http.Client{Transport: tr, Timeout: 5 * time.Second}}, nil
}

// loadSpec is one run: an open-loop constant rate with at most inFlight
// requests in flight, or (rate 0) workers closed-loop workers sending as
// fast as they get answers.
type loadSpec struct {
	rate     int
	inFlight int
	workers  int
	warmup   time.Duration
	duration time.Duration
}

// run warms up, then measures one run: every answer's latency, the errors,
// and the server process's CPU time and peak RSS over the measured part.
func (t *target) run(ctx context.Context, s loadSpec) (LoadRun, error) {
	// Connections to an earlier process of this server are dead.
	t.client.CloseIdleConnections()
	pid := t.proc.PID()
	if s.warmup > 0 {
		t.attack(ctx, s, s.warmup, nil)
	}
	if err := proc.ResetPeak(pid); err != nil {
		return LoadRun{}, fmt.Errorf("resetting the peak RSS of %s: %w", t.name, err)
	}
	cpu0, err := proc.CPUTime(pid)
	if err != nil {
		return LoadRun{}, err
	}
	lr := LoadRun{Server: t.name, Rate: s.rate}
	if s.rate == 0 {
		lr.Workers = s.workers
	}
	var lat []time.Duration
	start := time.Now()
	t.attack(ctx, s, s.duration, func(r *vegeta.Result) {
		lat = append(lat, r.Latency)
		lr.Requests++
		if msg := t.check(r); msg != "" {
			lr.Errors++
			if len(lr.ErrorSamples) < 5 && !slices.Contains(lr.ErrorSamples, msg) {
				lr.ErrorSamples = append(lr.ErrorSamples, msg)
			}
		}
	})
	wall := time.Since(start)
	cpu1, err := proc.CPUTime(pid)
	if err != nil {
		return LoadRun{}, err
	}
	mem, err := proc.ReadMemory(pid)
	if err != nil {
		return LoadRun{}, err
	}
	ok := lr.Requests - lr.Errors
	lr.Seconds = wall.Seconds()
	lr.Throughput = float64(ok) / wall.Seconds()
	lr.Latency = percentiles(lat)
	lr.CPUSeconds = (cpu1 - cpu0).Seconds()
	lr.Cores = lr.CPUSeconds / wall.Seconds()
	if ok > 0 {
		lr.CPUPerRequestUs = lr.CPUSeconds * 1e6 / float64(ok)
	}
	lr.PeakRSSMiB = proc.MiB(mem.HWM)
	lr.RSSMiB = proc.MiB(mem.RSS)
	return lr, ctx.Err()
}

// attack sends reviews for d and hands each result to each (if not nil).
func (t *target) attack(ctx context.Context, s loadSpec, d time.Duration, each func(*vegeta.Result)) {
	opts := []func(*vegeta.Attacker){vegeta.Client(t.client), vegeta.KeepAlive(true)}
	rate := vegeta.Rate{Freq: s.rate, Per: time.Second}
	switch {
	case s.rate == 0:
		// vegeta's "-rate=0 -max-workers=N": N workers, each sending its
		// next request as soon as the previous one is answered.
		opts = append(opts, vegeta.Workers(uint64(s.workers)), vegeta.MaxWorkers(uint64(s.workers)))
	case s.inFlight > 0:
		// Like an API server, which holds at most its in-flight limit of
		// requests (and so webhook calls) at once: past it, vegeta sends
		// late and the offered rate is not reached.
		opts = append(opts, vegeta.MaxWorkers(uint64(s.inFlight)))
	}
	atk := vegeta.NewAttacker(opts...)
	tr := vegeta.NewStaticTargeter(vegeta.Target{
		Method: http.MethodPost, URL: t.url, Body: t.body,
		Header: http.Header{"Content-Type": []string{"application/json"}},
	})
	stop := context.AfterFunc(ctx, func() { atk.Stop() })
	defer stop()
	for r := range atk.Attack(tr, rate, d, t.name) {
		if each != nil {
			each(r)
		}
	}
}

// check returns why an answer is wrong, or "".
func (t *target) check(r *vegeta.Result) string {
	switch {
	case r.Error != "":
		return r.Error
	case r.Code != http.StatusOK:
		return fmt.Sprintf("HTTP %d", r.Code)
	case !bytes.Contains(r.Body, []byte(`"allowed":true`)):
		return "answer is not allowed: " + string(r.Body[:min(len(r.Body), 200)])
	case t.wantPatch && !bytes.Contains(r.Body, []byte(`"patch":`)):
		return "answer carries no patch"
	case !t.wantPatch && bytes.Contains(r.Body, []byte(`"patch":`)):
		return "baseline answer carries a patch"
	}
	return ""
}

// percentiles summarises latencies in milliseconds (nearest rank).
func percentiles(d []time.Duration) Percentile {
	if len(d) == 0 {
		return Percentile{}
	}
	slices.Sort(d)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(d)))) - 1
		return ms(d[max(0, min(i, len(d)-1))])
	}
	var sum time.Duration
	for _, v := range d {
		sum += v
	}
	return Percentile{P50: at(0.50), P90: at(0.90), P99: at(0.99), P999: at(0.999), Max: ms(d[len(d)-1]),
		Mean: ms(sum / time.Duration(len(d)))}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
