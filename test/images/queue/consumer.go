package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

type consumeConfig struct {
	server string
	queue  string
	name   string
	batch  int
	work   time.Duration
	poll   time.Duration
}

func (c consumeConfig) validate() error {
	var errs []error
	if u, err := url.Parse(c.server); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("-server: %q: want the server's URL, http://HOST:PORT", c.server))
	}
	if !queueName.MatchString(c.queue) {
		errs = append(errs, fmt.Errorf("-queue: %q: want 1 to 63 characters a-z, 0-9 or -", c.queue))
	}
	if c.name == "" || len(c.name) > maxNameBytes {
		errs = append(errs, fmt.Errorf("-name: %q: want a name of 1 to %d bytes", c.name, maxNameBytes))
	}
	if c.batch < 1 || c.batch > maxLease {
		errs = append(errs, fmt.Errorf("-batch: %d is out of range: want 1 to %d", c.batch, maxLease))
	}
	if c.work < 0 || c.work > time.Hour {
		errs = append(errs, fmt.Errorf("-work: %s is out of range: want 0s to 1h", c.work))
	}
	if c.poll < 10*time.Millisecond || c.poll > time.Minute {
		errs = append(errs, fmt.Errorf("-poll: %s is out of range: want 10ms to 1m", c.poll))
	}
	return errors.Join(errs...)
}

// consumer takes batches from one queue. It acknowledges a batch once it
// has finished every message in it, as a Kafka consumer commits its offsets
// after the records of a poll and an SQS consumer deletes a batch: a
// message whose work is done waits for the rest of its batch to be
// acknowledged.
type consumer struct {
	cfg    consumeConfig
	client *http.Client
	log    *logger

	mu sync.Mutex
	// inHand counts the messages leased and not acknowledged, unfinished
	// those of them whose work is not done.
	inHand, unfinished int
	done, acked        int
}

func newConsumer(cfg consumeConfig, log *logger) *consumer {
	return &consumer{cfg: cfg, log: log, client: &http.Client{Timeout: 5 * time.Second}}
}

// state is what the consumer holds: leased and not acknowledged, and of
// those, not yet done.
func (c *consumer) state() (inHand, unfinished int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inHand, c.unfinished
}

func (c *consumer) counts() (done, acked int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done, c.acked
}

// run takes batches until stop is closed. Once it is, no new batch is
// taken; the batch in hand is finished and acknowledged first. ctx ends
// everything at once (tests); a SIGTERM only closes stop.
func (c *consumer) run(ctx context.Context, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		batch, err := c.lease(ctx)
		if err != nil {
			c.log.log("lease_failed", "error", err.Error())
		}
		if len(batch) == 0 {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-time.After(c.cfg.poll):
			}
			continue
		}
		if !c.work(ctx, batch) {
			return
		}
		c.ackBatch(ctx, batch)
	}
}

func (c *consumer) lease(ctx context.Context) ([]Leased, error) {
	body, err := c.post(ctx, "lease", url.Values{"max": {fmt.Sprint(c.cfg.batch)}, "consumer": {c.cfg.name}}, false)
	if err != nil {
		return nil, err
	}
	var res struct {
		Messages []Leased `json:"messages"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return nil, fmt.Errorf("lease: the server's answer: %w", err)
	}
	if len(res.Messages) == 0 {
		return nil, nil
	}
	c.mu.Lock()
	c.inHand += len(res.Messages)
	c.unfinished += len(res.Messages)
	c.mu.Unlock()
	var ids []string
	var deliveries []int
	for _, m := range res.Messages {
		ids, deliveries = append(ids, m.ID), append(deliveries, m.Delivery)
	}
	c.log.log("leased", "ids", ids, "deliveries", deliveries)
	return res.Messages, nil
}

// work works on each message of the batch in turn; false when ctx ended.
func (c *consumer) work(ctx context.Context, batch []Leased) bool {
	for _, m := range batch {
		c.report(ctx, "started", m)
		c.log.log("work_started", "id", m.ID, "delivery", m.Delivery)
		select {
		case <-time.After(c.cfg.work):
		case <-ctx.Done():
			return false
		}
		// The work's effect: written to the server, as to the consumer's
		// database.
		c.report(ctx, "done", m)
		c.mu.Lock()
		c.unfinished--
		c.done++
		c.mu.Unlock()
		c.log.log("work_done", "id", m.ID, "delivery", m.Delivery)
	}
	return true
}

func (c *consumer) report(ctx context.Context, what string, m Leased) {
	if _, err := c.post(ctx, what, url.Values{"lease": {m.Lease}}, true); err != nil {
		c.log.log("report_failed", "id", m.ID, "delivery", m.Delivery, "report", what, "error", err.Error())
	}
}

func (c *consumer) ackBatch(ctx context.Context, batch []Leased) {
	q := url.Values{}
	for _, m := range batch {
		q.Add("lease", m.Lease)
	}
	body, err := c.post(ctx, "ack", q, true)
	var res AckResult
	if err == nil {
		err = json.Unmarshal(body, &res)
	}
	c.mu.Lock()
	c.inHand -= len(batch)
	c.acked += len(res.Acked)
	c.mu.Unlock()
	if err != nil {
		c.log.log("ack_failed", "leases", q["lease"], "error", err.Error())
		return
	}
	c.log.log("acked", "leases", res.Acked, "refused", res.Refused)
}

// post calls the queue's endpoint; with retry, a failed call (no answer,
// or a 5xx) is tried twice more, 200 ms apart.
func (c *consumer) post(ctx context.Context, endpoint string, q url.Values, retry bool) ([]byte, error) {
	u := strings.TrimRight(c.cfg.server, "/") + "/queues/" + c.cfg.queue + "/" + endpoint + "?" + q.Encode()
	tries := 1
	if retry {
		tries = 3
	}
	var err error
	for i := range tries {
		if i > 0 {
			select {
			case <-time.After(200 * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		var body []byte
		var code int
		body, code, err = c.call(ctx, u)
		switch {
		case err != nil:
			continue
		case code >= 500:
			err = fmt.Errorf("%s: %d %s", endpoint, code, strings.TrimSpace(string(body)))
			continue
		case code >= 300:
			return nil, fmt.Errorf("%s: %d %s", endpoint, code, strings.TrimSpace(string(body)))
		}
		return body, nil
	}
	return nil, err
}

func (c *consumer) call(ctx context.Context, u string) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return b, resp.StatusCode, err
}

func consumeMain(args []string, stdout, stderr io.Writer) int {
	// Signals first, so a SIGTERM right after start is never the default
	// action (exit with the batch in hand).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	fs := flag.NewFlagSet("queue consume", flag.ContinueOnError)
	fs.SetOutput(stderr)
	host, _ := os.Hostname()
	var cfg consumeConfig
	fs.StringVar(&cfg.server, "server", "", "the queue server's URL, http://HOST:PORT")
	fs.StringVar(&cfg.queue, "queue", "", "the queue to consume")
	fs.StringVar(&cfg.name, "name", host, "the consumer's name in the ledger (default: the host name, a Pod's name)")
	fs.IntVar(&cfg.batch, "batch", 4, "messages leased at once")
	fs.DurationVar(&cfg.work, "work", 3*time.Second, "work per message")
	fs.DurationVar(&cfg.poll, "poll", 500*time.Millisecond, "wait before leasing again when the queue had nothing")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintf(stderr, "queue consume: %v\n", err)
		return 2
	}
	lg := newLogger(stdout)
	c := newConsumer(cfg, lg)
	stop := make(chan struct{})
	go func() {
		<-sigs
		inHand, unfinished := c.state()
		lg.log("sigterm", "in_hand", inHand, "unfinished", unfinished)
		close(stop)
	}()
	lg.log("consumer_started", "name", cfg.name, "queue", cfg.queue, "batch", cfg.batch, "work", cfg.work.String())
	c.run(context.Background(), stop)
	done, acked := c.counts()
	lg.log("shutdown_complete", "done", done, "acked", acked)
	return 0
}
