package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// The server's HTTP API; {queue} is a name of 1 to 63 characters [a-z0-9-].
//
//	PUT  /queues/{queue}                               create the queue, empty (if it is not there)
//	POST /queues/{queue}/messages?n=N                  publish N messages (1-10000); creates the queue
//	POST /queues/{queue}/lease?max=K&consumer=NAME     lease up to K visible messages (1-100)
//	POST /queues/{queue}/started?lease=L               the delivery's work began
//	POST /queues/{queue}/done?lease=L                  the delivery's work is done: its effect
//	POST /queues/{queue}/ack?lease=L[&lease=L2...]     acknowledge deliveries
//	GET  /queues/{queue}/ledger                        what happened to every message
//	GET  /healthz
//
// A lease is valid until the visibility timeout after it was granted; an
// acknowledgement with a lease that ran out is refused (the message is
// someone else's, or will be), as is one for a message acknowledged
// already. Reports of started and done are kept whatever the lease's state:
// the work happened, and the ledger says so.

// Bounds of the API's parameters.
const (
	maxPublish   = 10000
	maxLease     = 100
	maxNameBytes = 253
	minVisible   = 100 * time.Millisecond
	maxVisible   = time.Hour
)

var queueName = regexp.MustCompile(`^[a-z0-9-]{1,63}$`)

// Errors of the queue's operations; the HTTP layer maps them to statuses.
var (
	errNoQueue  = errors.New("no such queue")
	errNoLease  = errors.New("no such lease")
	errReported = errors.New("already reported")
)

// server is the queues and their ledgers, in memory: a restart loses them
// (the e2e suite never deletes the server's Pod).
type server struct {
	visibility time.Duration
	now        func() time.Time
	log        *logger

	mu     sync.Mutex
	queues map[string]*queue
}

func newServer(visibility time.Duration, now func() time.Time, log *logger) *server {
	return &server{visibility: visibility, now: now, log: log, queues: map[string]*queue{}}
}

type queue struct {
	name     string
	messages []*message
	leases   map[string]*delivery
	events   []Event
}

type message struct {
	id         string
	deliveries []*delivery
	acked      bool
}

// delivery is one lease of a message to a consumer and what became of it.
type delivery struct {
	msg      *message
	n        int // 1 for the first delivery
	lease    string
	consumer string
	leased   time.Time
	expires  time.Time
	started  time.Time
	done     time.Time
	acked    time.Time
	// expired: the lease ran out before an acknowledgement; the message
	// was visible again from then on.
	expired bool
}

// visible tells whether the message may be leased: not acknowledged, and
// never delivered or its last lease ran out.
func (m *message) visible() bool {
	if m.acked {
		return false
	}
	return len(m.deliveries) == 0 || m.deliveries[len(m.deliveries)-1].expired
}

// Event is one line of a queue's ledger.
type Event struct {
	TS    time.Time `json:"ts"`
	Event string    `json:"event"` // published, delivered, started, done, acked, ack_refused, expired
	ID    string    `json:"id"`
	// Delivery is the delivery's number (1 for the first); 0 for published.
	Delivery int    `json:"delivery,omitempty"`
	Consumer string `json:"consumer,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// record appends an event to the ledger and logs it; the caller holds mu.
func (s *server) record(q *queue, e Event) {
	q.events = append(q.events, e)
	kv := []any{"queue", q.name, "id", e.ID}
	if e.Delivery > 0 {
		kv = append(kv, "delivery", e.Delivery)
	}
	if e.Consumer != "" {
		kv = append(kv, "consumer", e.Consumer)
	}
	if e.Reason != "" {
		kv = append(kv, "reason", e.Reason)
	}
	s.log.log(e.Event, kv...)
}

// expire makes visible again every message whose lease ran out before an
// acknowledgement; the caller holds mu.
func (s *server) expire(q *queue, now time.Time) {
	for _, m := range q.messages {
		if m.acked || len(m.deliveries) == 0 {
			continue
		}
		d := m.deliveries[len(m.deliveries)-1]
		if !d.expired && d.acked.IsZero() && !now.Before(d.expires) {
			d.expired = true
			s.record(q, Event{TS: d.expires, Event: "expired", ID: m.id, Delivery: d.n, Consumer: d.consumer})
		}
	}
}

// create makes an empty queue, unless it is there; the caller holds mu.
func (s *server) create(name string) *queue {
	q := s.queues[name]
	if q == nil {
		q = &queue{name: name, leases: map[string]*delivery{}}
		s.queues[name] = q
	}
	return q
}

// publish adds n messages to the queue, creating it, and returns their IDs.
func (s *server) publish(name string, n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.create(name)
	now := s.now()
	ids := make([]string, 0, n)
	for range n {
		m := &message{id: "m" + strconv.Itoa(len(q.messages)+1)}
		q.messages = append(q.messages, m)
		ids = append(ids, m.id)
		s.record(q, Event{TS: now, Event: "published", ID: m.id})
	}
	return ids
}

// Leased is one message handed to a consumer.
type Leased struct {
	ID       string    `json:"id"`
	Delivery int       `json:"delivery"`
	Lease    string    `json:"lease"`
	Expires  time.Time `json:"expires"`
}

// lease hands up to limit visible messages, oldest first, to consumer.
func (s *server) lease(name, consumer string, limit int) ([]Leased, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[name]
	if q == nil {
		return nil, errNoQueue
	}
	now := s.now()
	s.expire(q, now)
	out := []Leased{}
	for _, m := range q.messages {
		if len(out) == limit {
			break
		}
		if !m.visible() {
			continue
		}
		d := &delivery{msg: m, n: len(m.deliveries) + 1, consumer: consumer, leased: now, expires: now.Add(s.visibility)}
		d.lease = fmt.Sprintf("%s.%d", m.id, d.n)
		m.deliveries = append(m.deliveries, d)
		q.leases[d.lease] = d
		s.record(q, Event{TS: now, Event: "delivered", ID: m.id, Delivery: d.n, Consumer: consumer})
		out = append(out, Leased{ID: m.id, Delivery: d.n, Lease: d.lease, Expires: d.expires})
	}
	return out, nil
}

// report records that a delivery's work started or is done (what is
// "started" or "done"), once each.
func (s *server) report(name, lease, what string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[name]
	if q == nil {
		return errNoQueue
	}
	d := q.leases[lease]
	if d == nil {
		return errNoLease
	}
	at := &d.started
	if what == "done" {
		at = &d.done
	}
	if !at.IsZero() {
		return fmt.Errorf("%w: lease %s reported %s at %s", errReported, lease, what, at.Format(time.RFC3339Nano))
	}
	*at = s.now()
	s.record(q, Event{TS: *at, Event: what, ID: d.msg.id, Delivery: d.n, Consumer: d.consumer})
	return nil
}

// AckResult is the answer to an acknowledgement: the leases acknowledged,
// and each refused one with the reason.
type AckResult struct {
	Acked   []string          `json:"acked"`
	Refused map[string]string `json:"refused,omitempty"`
}

// ack acknowledges deliveries by their leases; each is taken or refused on
// its own.
func (s *server) ack(name string, leases []string) (AckResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[name]
	if q == nil {
		return AckResult{}, errNoQueue
	}
	now := s.now()
	s.expire(q, now)
	res := AckResult{Acked: []string{}}
	refuse := func(lease, reason string, d *delivery) {
		if res.Refused == nil {
			res.Refused = map[string]string{}
		}
		res.Refused[lease] = reason
		if d != nil {
			s.record(q, Event{TS: now, Event: "ack_refused", ID: d.msg.id, Delivery: d.n, Consumer: d.consumer, Reason: reason})
		}
	}
	for _, l := range leases {
		d := q.leases[l]
		switch {
		case d == nil:
			refuse(l, "no such lease", nil)
		case !d.acked.IsZero():
			refuse(l, "acknowledged already", d)
		case d.msg.acked:
			refuse(l, "the message was acknowledged through another delivery", d)
		case d.expired:
			refuse(l, fmt.Sprintf("the lease ran out at %s (visibility timeout %s)", d.expires.UTC().Format(time.RFC3339Nano), s.visibility), d)
		default:
			d.acked, d.msg.acked = now, true
			s.record(q, Event{TS: now, Event: "acked", ID: d.msg.id, Delivery: d.n, Consumer: d.consumer})
			res.Acked = append(res.Acked, l)
		}
	}
	return res, nil
}

// Ledger is what happened to every message of a queue, and its sums.
type Ledger struct {
	Queue      string `json:"queue"`
	Visibility string `json:"visibilityTimeout"`
	Published  int    `json:"published"`
	// Deliveries counts every lease granted, Redeliveries those of a
	// message delivered before, Expired the leases that ran out before an
	// acknowledgement.
	Deliveries   int `json:"deliveries"`
	Redeliveries int `json:"redeliveries"`
	Expired      int `json:"expiredLeases"`
	// Acked and Pending count messages acknowledged and not (yet).
	Acked   int `json:"acked"`
	Pending int `json:"pending"`
	// DoneOnce and DoneTwice count messages whose work was done by one
	// delivery and by more than one; Lost the messages acknowledged without
	// any delivery's work done (gone from the queue, never worked on).
	DoneOnce  int `json:"doneOnce"`
	DoneTwice int `json:"doneTwice"`
	Lost      int `json:"lost"`
	// WorkCut counts deliveries whose work started and never finished,
	// and whose lease ran out: the consumer died at it, or gave up.
	WorkCut int `json:"workCut"`
	// RefusedAcks counts acknowledgements refused.
	RefusedAcks int              `json:"refusedAcks"`
	Messages    []MessageHistory `json:"messages"`
	Events      []Event          `json:"events"`
}

// MessageHistory is one message's deliveries.
type MessageHistory struct {
	ID    string `json:"id"`
	Acked bool   `json:"acked"`
	// Done counts the deliveries whose work was done.
	Done       int               `json:"done"`
	Deliveries []DeliveryHistory `json:"deliveries"`
}

// DeliveryHistory is one delivery: times are nil when it never happened.
type DeliveryHistory struct {
	N        int        `json:"n"`
	Lease    string     `json:"lease"`
	Consumer string     `json:"consumer"`
	Leased   time.Time  `json:"leased"`
	Expires  time.Time  `json:"expires"`
	Started  *time.Time `json:"started,omitempty"`
	Done     *time.Time `json:"done,omitempty"`
	Acked    *time.Time `json:"acked,omitempty"`
	Expired  bool       `json:"expired"`
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// ledger sums up a queue; leases that ran out by now count as expired.
func (s *server) ledger(name string) (Ledger, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[name]
	if q == nil {
		return Ledger{}, errNoQueue
	}
	s.expire(q, s.now())
	l := Ledger{Queue: name, Visibility: s.visibility.String(), Published: len(q.messages),
		Messages: []MessageHistory{}, Events: append([]Event{}, q.events...)}
	for _, m := range q.messages {
		h := MessageHistory{ID: m.id, Acked: m.acked, Deliveries: []DeliveryHistory{}}
		for _, d := range m.deliveries {
			l.Deliveries++
			if d.n > 1 {
				l.Redeliveries++
			}
			if d.expired {
				l.Expired++
			}
			if !d.done.IsZero() {
				h.Done++
			}
			if d.expired && !d.started.IsZero() && d.done.IsZero() {
				l.WorkCut++
			}
			h.Deliveries = append(h.Deliveries, DeliveryHistory{N: d.n, Lease: d.lease, Consumer: d.consumer, Leased: d.leased, Expires: d.expires,
				Started: timeOrNil(d.started), Done: timeOrNil(d.done), Acked: timeOrNil(d.acked), Expired: d.expired})
		}
		switch {
		case h.Done == 1:
			l.DoneOnce++
		case h.Done > 1:
			l.DoneTwice++
		}
		if m.acked {
			l.Acked++
			if h.Done == 0 {
				l.Lost++
			}
		} else {
			l.Pending++
		}
		l.Messages = append(l.Messages, h)
	}
	for _, e := range q.events {
		if e.Event == "ack_refused" {
			l.RefusedAcks++
		}
	}
	return l, nil
}

// ---- HTTP -------------------------------------------------------------

func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /queues/{queue}", s.handleCreate)
	mux.HandleFunc("POST /queues/{queue}/messages", s.handlePublish)
	mux.HandleFunc("POST /queues/{queue}/lease", s.handleLease)
	mux.HandleFunc("POST /queues/{queue}/started", s.handleReport("started"))
	mux.HandleFunc("POST /queues/{queue}/done", s.handleReport("done"))
	mux.HandleFunc("POST /queues/{queue}/ack", s.handleAck)
	mux.HandleFunc("GET /queues/{queue}/ledger", s.handleLedger)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	})
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, format string, a ...any) {
	writeJSON(w, code, map[string]string{"error": fmt.Sprintf(format, a...)})
}

// queueOf is the request's queue name, or "" after answering 400.
func queueOf(w http.ResponseWriter, r *http.Request) string {
	q := r.PathValue("queue")
	if !queueName.MatchString(q) {
		writeError(w, http.StatusBadRequest, "queue %q: want 1 to 63 characters a-z, 0-9 or -", clip(q))
		return ""
	}
	return q
}

// intParam reads a whole number from lo to hi, or answers 400 naming the
// parameter, the value and the range.
func intParam(w http.ResponseWriter, r *http.Request, key string, lo, hi int) (int, bool) {
	v := r.URL.Query().Get(key)
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		writeError(w, http.StatusBadRequest, "%s: %q is not a whole number from %d to %d", key, clip(v), lo, hi)
		return 0, false
	}
	return n, true
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// answerErr maps an operation's error to a status.
func answerErr(w http.ResponseWriter, queue string, err error) {
	switch {
	case errors.Is(err, errNoQueue):
		writeError(w, http.StatusNotFound, "queue %q does not exist: create it (PUT) or publish to it first", queue)
	case errors.Is(err, errNoLease):
		writeError(w, http.StatusNotFound, "%v", err)
	case errors.Is(err, errReported):
		writeError(w, http.StatusConflict, "%v", err)
	default:
		writeError(w, http.StatusInternalServerError, "%v", err)
	}
}

func (s *server) handleCreate(w http.ResponseWriter, r *http.Request) {
	q := queueOf(w, r)
	if q == "" {
		return
	}
	s.mu.Lock()
	s.create(q)
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) handlePublish(w http.ResponseWriter, r *http.Request) {
	q := queueOf(w, r)
	if q == "" {
		return
	}
	n, ok := intParam(w, r, "n", 1, maxPublish)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ids": s.publish(q, n)})
}

func (s *server) handleLease(w http.ResponseWriter, r *http.Request) {
	q := queueOf(w, r)
	if q == "" {
		return
	}
	limit, ok := intParam(w, r, "max", 1, maxLease)
	if !ok {
		return
	}
	c := r.URL.Query().Get("consumer")
	if c == "" || len(c) > maxNameBytes {
		writeError(w, http.StatusBadRequest, "consumer: %q: want a name of 1 to %d bytes", clip(c), maxNameBytes)
		return
	}
	msgs, err := s.lease(q, c, limit)
	if err != nil {
		answerErr(w, q, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": msgs})
}

func (s *server) handleReport(what string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := queueOf(w, r)
		if q == "" {
			return
		}
		lease := r.URL.Query().Get("lease")
		if err := s.report(q, lease, what); err != nil {
			if errors.Is(err, errNoLease) {
				err = fmt.Errorf("%w %q in queue %q", errNoLease, clip(lease), q)
			}
			answerErr(w, q, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *server) handleAck(w http.ResponseWriter, r *http.Request) {
	q := queueOf(w, r)
	if q == "" {
		return
	}
	leases := r.URL.Query()["lease"]
	if len(leases) == 0 || len(leases) > maxLease {
		writeError(w, http.StatusBadRequest, "lease: %d given: want 1 to %d", len(leases), maxLease)
		return
	}
	res, err := s.ack(q, leases)
	if err != nil {
		answerErr(w, q, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *server) handleLedger(w http.ResponseWriter, r *http.Request) {
	q := queueOf(w, r)
	if q == "" {
		return
	}
	l, err := s.ledger(q)
	if err != nil {
		answerErr(w, q, err)
		return
	}
	writeJSON(w, http.StatusOK, l)
}

// ---- serve ------------------------------------------------------------

type serveConfig struct {
	listen     string
	visibility time.Duration
}

func (c serveConfig) validate() error {
	if c.visibility < minVisible || c.visibility > maxVisible {
		return fmt.Errorf("-visibility: %s is out of range: want %s to %s", c.visibility, minVisible, maxVisible)
	}
	return nil
}

func serveMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("queue serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg serveConfig
	fs.StringVar(&cfg.listen, "listen", ":8080", "address to listen on")
	fs.DurationVar(&cfg.visibility, "visibility", 20*time.Second, "visibility timeout: how long a leased message stays invisible without an acknowledgement")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintf(stderr, "queue serve: %v\n", err)
		return 2
	}
	lg := newLogger(stdout)
	s := newServer(cfg.visibility, time.Now, lg)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		lg.log("listen_failed", "error", err.Error())
		return 1
	}
	srv := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	lg.log("listening", "addr", ln.Addr().String(), "visibility", cfg.visibility.String())
	select {
	case err := <-errc:
		lg.log("serve_failed", "error", err.Error())
		return 1
	case <-sigs:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	lg.log("shutdown_complete")
	return 0
}
