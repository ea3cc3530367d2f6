package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// clock is a fake time the tests move by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

const visibility = 20 * time.Second

func newTestServer(t *testing.T) (*server, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	lg := newLogger(io.Discard)
	lg.now = c.now
	return newServer(visibility, c.now, lg), c
}

func mustLease(t *testing.T, s *server, q, consumer string, limit int) []Leased {
	t.Helper()
	l, err := s.lease(q, consumer, limit)
	if err != nil {
		t.Fatalf("lease(%s, %s, %d): %v", q, consumer, limit, err)
	}
	return l
}

func ids(l []Leased) []string {
	var out []string
	for _, m := range l {
		out = append(out, m.Lease)
	}
	return out
}

func mustLedger(t *testing.T, s *server, q string) Ledger {
	t.Helper()
	l, err := s.ledger(q)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustReport(t *testing.T, s *server, q, lease, what string) {
	t.Helper()
	if err := s.report(q, lease, what); err != nil {
		t.Fatalf("report %s %s: %v", lease, what, err)
	}
}

func TestALeasedMessageGoesToOneConsumerOnly(t *testing.T) {
	s, _ := newTestServer(t)
	s.publish("q", 5)
	if got, want := ids(mustLease(t, s, "q", "a", 3)), []string{"m1.1", "m2.1", "m3.1"}; !slices.Equal(got, want) {
		t.Errorf("first consumer leased %v, want %v (oldest first)", got, want)
	}
	if got, want := ids(mustLease(t, s, "q", "b", 3)), []string{"m4.1", "m5.1"}; !slices.Equal(got, want) {
		t.Errorf("second consumer leased %v, want the two left %v", got, want)
	}
	if got := mustLease(t, s, "q", "c", 3); len(got) != 0 {
		t.Errorf("a third consumer leased %v while every message is leased", ids(got))
	}
}

func TestAnAcknowledgedMessageIsNeverDeliveredAgain(t *testing.T) {
	s, c := newTestServer(t)
	s.publish("q", 2)
	mustLease(t, s, "q", "a", 2)
	c.advance(visibility - time.Millisecond)
	res, err := s.ack("q", []string{"m1.1"})
	if err != nil || !slices.Equal(res.Acked, []string{"m1.1"}) || len(res.Refused) != 0 {
		t.Fatalf("ack m1.1 a millisecond before the timeout: %+v, %v; want it taken", res, err)
	}
	c.advance(time.Hour)
	if got, want := ids(mustLease(t, s, "q", "b", 2)), []string{"m2.2"}; !slices.Equal(got, want) {
		t.Errorf("after the timeout, leased %v; want only the unacknowledged m2, second delivery (%v)", got, want)
	}
}

func TestAMessageNotAcknowledgedWithinTheTimeoutIsDeliveredAgain(t *testing.T) {
	s, c := newTestServer(t)
	s.publish("q", 1)
	first := mustLease(t, s, "q", "a", 1)
	if want := c.t.Add(visibility); !first[0].Expires.Equal(want) {
		t.Errorf("lease expires %s, want %s (the visibility timeout after the lease)", first[0].Expires, want)
	}
	c.advance(visibility - time.Millisecond)
	if got := mustLease(t, s, "q", "b", 1); len(got) != 0 {
		t.Fatalf("leased %v before the lease ran out", ids(got))
	}
	c.advance(time.Millisecond)
	again := mustLease(t, s, "q", "b", 1)
	if len(again) != 1 || again[0].ID != "m1" || again[0].Delivery != 2 {
		t.Fatalf("at the timeout, leased %+v; want m1, delivery 2", again)
	}
	l := mustLedger(t, s, "q")
	if l.Deliveries != 2 || l.Redeliveries != 1 || l.Expired != 1 || l.Pending != 1 || l.Acked != 0 {
		t.Errorf("ledger: %d deliveries, %d redeliveries, %d expired, %d pending, %d acked; want 2, 1, 1, 1, 0",
			l.Deliveries, l.Redeliveries, l.Expired, l.Pending, l.Acked)
	}
}

func TestAcknowledgementsThatCannotHoldAreRefused(t *testing.T) {
	s, c := newTestServer(t)
	s.publish("q", 2)
	mustLease(t, s, "q", "a", 2)
	if res, _ := s.ack("q", []string{"m1.1"}); len(res.Acked) != 1 {
		t.Fatalf("first ack of m1.1 refused: %+v", res)
	}
	c.advance(visibility)
	mustLease(t, s, "q", "b", 2) // m2 again: m2.2
	res, err := s.ack("q", []string{"m1.1", "m2.1", "m2.2", "m9.1"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Acked, []string{"m2.2"}) {
		t.Errorf("acked %v, want only the live lease m2.2", res.Acked)
	}
	for lease, want := range map[string]string{
		"m1.1": "acknowledged already",
		"m2.1": "the lease ran out at 2026-01-02T03:04:25Z (visibility timeout 20s)",
		"m9.1": "no such lease",
	} {
		if got := res.Refused[lease]; got != want {
			t.Errorf("ack %s refused with %q, want %q", lease, got, want)
		}
	}
	l := mustLedger(t, s, "q")
	if l.Acked != 2 || l.Pending != 0 || l.RefusedAcks != 2 {
		t.Errorf("ledger: %d acked, %d pending, %d refused acks; want 2, 0, 2 (the unknown lease names no message)", l.Acked, l.Pending, l.RefusedAcks)
	}
	// An old delivery of a message acknowledged through a newer one.
	s.publish("r", 1)
	mustLease(t, s, "r", "a", 1)
	c.advance(visibility)
	mustLease(t, s, "r", "b", 1)
	if res, _ := s.ack("r", []string{"m1.2"}); len(res.Acked) != 1 {
		t.Fatalf("ack of the live lease m1.2 refused: %+v", res)
	}
	if res, _ := s.ack("r", []string{"m1.1"}); res.Refused["m1.1"] != "the message was acknowledged through another delivery" {
		t.Errorf("ack of the old lease after the message was acknowledged: %+v", res)
	}
}

// The ledger's sums are what the e2e scenario asserts: a message whose
// work two deliveries did, one acknowledged without its work, a delivery
// cut in the middle of its work.
func TestTheLedgerCountsWorkDoneTwiceCutAndLost(t *testing.T) {
	s, c := newTestServer(t)
	s.publish("q", 4)
	mustLease(t, s, "q", "killed", 3)
	// m1: done, then the consumer dies before acknowledging its batch.
	mustReport(t, s, "q", "m1.1", "started")
	mustReport(t, s, "q", "m1.1", "done")
	// m2: cut in the middle of its work. m3: never started.
	mustReport(t, s, "q", "m2.1", "started")
	c.advance(visibility)
	again := mustLease(t, s, "q", "replacement", 4)
	if got, want := ids(again), []string{"m1.2", "m2.2", "m3.2", "m4.1"}; !slices.Equal(got, want) {
		t.Fatalf("replacement leased %v, want %v", got, want)
	}
	for _, m := range []string{"m1.2", "m2.2", "m3.2"} {
		mustReport(t, s, "q", m, "started")
		mustReport(t, s, "q", m, "done")
	}
	// m4: acknowledged without its work (an ack-before-work consumer).
	if res, _ := s.ack("q", ids(again)); len(res.Acked) != 4 {
		t.Fatalf("acks refused: %+v", res)
	}
	l := mustLedger(t, s, "q")
	for _, f := range []struct {
		name      string
		got, want int
	}{
		{"published", l.Published, 4}, {"deliveries", l.Deliveries, 7}, {"redeliveries", l.Redeliveries, 3},
		{"expired leases", l.Expired, 3}, {"acked", l.Acked, 4}, {"pending", l.Pending, 0},
		{"done once (m2, m3)", l.DoneOnce, 2}, {"done twice (m1)", l.DoneTwice, 1}, {"lost (m4)", l.Lost, 1},
		{"work cut (m2's first delivery)", l.WorkCut, 1}, {"refused acks", l.RefusedAcks, 0},
	} {
		if f.got != f.want {
			t.Errorf("ledger %s: %d, want %d", f.name, f.got, f.want)
		}
	}
	m1 := l.Messages[0]
	if m1.ID != "m1" || m1.Done != 2 || len(m1.Deliveries) != 2 || !m1.Deliveries[0].Expired || m1.Deliveries[0].Acked != nil ||
		m1.Deliveries[1].Consumer != "replacement" || m1.Deliveries[1].Acked == nil {
		t.Errorf("m1's history: %+v; want done by both deliveries, the first expired unacknowledged, the second acknowledged by the replacement", m1)
	}
	var events []string
	for _, e := range l.Events {
		if e.ID == "m1" {
			events = append(events, e.Event)
		}
	}
	if want := []string{"published", "delivered", "started", "done", "expired", "delivered", "started", "done", "acked"}; !slices.Equal(events, want) {
		t.Errorf("m1's events: %v, want %v", events, want)
	}
}

func TestReportsNameTheirLease(t *testing.T) {
	s, _ := newTestServer(t)
	s.publish("q", 1)
	mustLease(t, s, "q", "a", 1)
	mustReport(t, s, "q", "m1.1", "done")
	if err := s.report("q", "m1.1", "done"); !errors.Is(err, errReported) || !strings.Contains(err.Error(), "m1.1 reported done at") {
		t.Errorf("second done report: %v; want it refused, naming the lease", err)
	}
	if err := s.report("q", "m1.7", "started"); !errors.Is(err, errNoLease) {
		t.Errorf("report of an unknown lease: %v", err)
	}
	if err := s.report("nope", "m1.1", "started"); !errors.Is(err, errNoQueue) {
		t.Errorf("report to an unknown queue: %v", err)
	}
	if _, err := s.lease("nope", "a", 1); !errors.Is(err, errNoQueue) {
		t.Errorf("lease from an unknown queue: %v", err)
	}
}

// call sends one request to the server's handler and returns the status
// and body.
func call(t *testing.T, h http.Handler, method, target string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec.Code, rec.Body.String()
}

func TestTheHTTPAPIRoundTrip(t *testing.T) {
	s, _ := newTestServer(t)
	h := s.handler()
	steps := []struct {
		method, target string
		code           int
		body           string
	}{
		{"POST", "/queues/jobs/lease?max=1&consumer=pod-a", 404, `queue \"jobs\" does not exist: create it (PUT) or publish to it first`},
		{"PUT", "/queues/jobs", 204, ""},
		{"POST", "/queues/jobs/lease?max=1&consumer=pod-a", 200, `{"messages":[]}`},
		{"PUT", "/queues/jobs", 204, ""},
		{"POST", "/queues/jobs/messages?n=2", 200, `{"ids":["m1","m2"]}`},
		{"POST", "/queues/jobs/lease?max=1&consumer=pod-a", 200, `"lease":"m1.1"`},
		{"POST", "/queues/jobs/started?lease=m1.1", 204, ""},
		{"POST", "/queues/jobs/done?lease=m1.1", 204, ""},
		{"POST", "/queues/jobs/done?lease=m1.1", 409, "m1.1 reported done at"},
		{"POST", "/queues/jobs/ack?lease=m1.1&lease=m2.1", 200, `{"acked":["m1.1"],"refused":{"m2.1":"no such lease"}}`},
		{"GET", "/queues/jobs/ledger", 200, `"doneOnce":1`},
		{"GET", "/healthz", 200, `{"ok":true}`},
	}
	for _, st := range steps {
		code, body := call(t, h, st.method, st.target)
		if code != st.code || !strings.Contains(body, st.body) {
			t.Errorf("%s %s: %d %s; want %d with %s", st.method, st.target, code, body, st.code, st.body)
		}
	}
	_, body := call(t, h, "GET", "/queues/jobs/ledger")
	var l Ledger
	if err := json.Unmarshal([]byte(body), &l); err != nil {
		t.Fatal(err)
	}
	if l.Published != 2 || l.Acked != 1 || l.Pending != 1 || l.Visibility != "20s" || len(l.Messages) != 2 || l.Messages[0].Deliveries[0].Done == nil {
		t.Errorf("ledger through HTTP: %+v", l)
	}
}

func TestBadRequestsSayWhatIsAccepted(t *testing.T) {
	s, _ := newTestServer(t)
	h := s.handler()
	s.publish("jobs", 1)
	for _, c := range []struct {
		target string
		code   int
		want   string
	}{
		{"/queues/jobs/messages?n=0", 400, `n: \"0\" is not a whole number from 1 to 10000`},
		{"/queues/jobs/messages?n=x", 400, `n: \"x\" is not a whole number from 1 to 10000`},
		{"/queues/Jobs/messages?n=1", 400, `queue \"Jobs\": want 1 to 63 characters a-z, 0-9 or -`},
		{"/queues/jobs/lease?max=101&consumer=a", 400, `max: \"101\" is not a whole number from 1 to 100`},
		{"/queues/jobs/lease?max=1", 400, `consumer: \"\": want a name of 1 to 253 bytes`},
		{"/queues/other/lease?max=1&consumer=a", 404, `queue \"other\" does not exist: create it (PUT) or publish to it first`},
		{"/queues/jobs/started?lease=m3.1", 404, `no such lease \"m3.1\" in queue \"jobs\"`},
		{"/queues/jobs/ack", 400, `lease: 0 given: want 1 to 100`},
	} {
		code, body := call(t, h, "POST", c.target)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("POST %s: %d %s; want %d with %s", c.target, code, body, c.code, c.want)
		}
	}
}

func TestServeRejectsAVisibilityOutOfRange(t *testing.T) {
	for _, v := range []time.Duration{0, 50 * time.Millisecond, 2 * time.Hour} {
		err := serveConfig{visibility: v}.validate()
		if err == nil || !strings.Contains(err.Error(), "-visibility: "+v.String()+" is out of range: want 100ms to 1h0m0s") {
			t.Errorf("visibility %s: %v", v, err)
		}
	}
	if err := (serveConfig{visibility: 20 * time.Second}).validate(); err != nil {
		t.Errorf("visibility 20s: %v", err)
	}
}
