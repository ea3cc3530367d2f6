package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// liveServer is the queue server on a real clock behind an HTTP listener.
func liveServer(t *testing.T, visibility time.Duration) (*server, string) {
	t.Helper()
	s := newServer(visibility, time.Now, newLogger(io.Discard))
	hs := httptest.NewServer(s.handler())
	t.Cleanup(hs.Close)
	return s, hs.URL
}

// logLines is a consumer's log, kept for the test to read.
type logLines struct {
	mu    sync.Mutex
	lines []map[string]any
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range strings.Split(strings.TrimSpace(string(p)), "\n") {
		m := map[string]any{}
		if json.Unmarshal([]byte(line), &m) == nil {
			l.lines = append(l.lines, m)
		}
	}
	return len(p), nil
}

// waitFor waits for the consumer to log event about message id.
func (l *logLines) waitFor(t *testing.T, event, id string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		for _, e := range l.events() {
			if e["event"] == event && e["id"] == id {
				return
			}
		}
	}
	t.Fatalf("the consumer never logged %s of %s", event, id)
}

func (l *logLines) events() []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

func startConsumer(t *testing.T, url, name string, work time.Duration, out io.Writer) (c *consumer, stop chan struct{}, kill context.CancelFunc, done chan struct{}) {
	t.Helper()
	cfg := consumeConfig{server: url, queue: "q", name: name, batch: 4, work: work, poll: 10 * time.Millisecond}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	c = newConsumer(cfg, newLogger(out))
	ctx, cancel := context.WithCancel(context.Background())
	stop, done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		c.run(ctx, stop)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return c, stop, cancel, done
}

// waitLedger polls the ledger until cond holds.
func waitLedger(t *testing.T, s *server, what string, cond func(Ledger) bool) Ledger {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if l := mustLedger(t, s, "q"); cond(l) {
			return l
		}
	}
	t.Fatalf("the ledger never showed %s: %+v", what, mustLedger(t, s, "q"))
	return Ledger{}
}

// startedBy: the work of a delivery of message id has started.
func startedBy(l Ledger, id string) bool {
	for _, m := range l.Messages {
		if m.ID == id {
			for _, d := range m.Deliveries {
				if d.Started != nil {
					return true
				}
			}
		}
	}
	return false
}

func TestTheConsumerDoesEachMessageOnceAndAcknowledgesEachBatchAfterIt(t *testing.T) {
	s, url := liveServer(t, time.Minute)
	s.publish("q", 6)
	log := &logLines{}
	_, stop, _, done := startConsumer(t, url, "c1", 5*time.Millisecond, log)
	l := waitLedger(t, s, "every message acknowledged", func(l Ledger) bool { return l.Acked == 6 })
	close(stop)
	<-done
	if l.DoneOnce != 6 || l.DoneTwice != 0 || l.Deliveries != 6 || l.Lost != 0 {
		t.Errorf("ledger: %d done once, %d twice, %d deliveries, %d lost; want 6, 0, 6, 0", l.DoneOnce, l.DoneTwice, l.Deliveries, l.Lost)
	}
	// One acknowledgement per batch, after its last message's work.
	var acks [][]any
	for _, e := range log.events() {
		if e["event"] == "acked" {
			acks = append(acks, e["leases"].([]any))
		}
	}
	if len(acks) != 2 || len(acks[0]) != 4 || len(acks[1]) != 2 {
		t.Errorf("acknowledgements: %v; want a batch of 4, then one of 2", acks)
	}
	for _, m := range l.Messages {
		d := m.Deliveries[0]
		last := l.Messages[3]
		if m.ID > "m4" {
			last = l.Messages[5]
		}
		if d.Acked.Before(*last.Deliveries[0].Done) {
			t.Errorf("%s acknowledged at %s, before its batch's last work was done (%s)", m.ID, d.Acked, last.Deliveries[0].Done)
		}
	}
}

func TestAStoppedConsumerFinishesTheBatchInHandAndTakesNoOther(t *testing.T) {
	s, url := liveServer(t, time.Minute)
	s.publish("q", 8)
	log := &logLines{}
	c, stop, _, done := startConsumer(t, url, "c1", 40*time.Millisecond, log)
	log.waitFor(t, "work_done", "m1")
	if inHand, unfinished := c.state(); inHand != 4 || unfinished != 3 {
		t.Errorf("in hand when stopped: %d, unfinished %d; want 4, 3", inHand, unfinished)
	}
	close(stop)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the consumer did not return after its batch")
	}
	l := mustLedger(t, s, "q")
	if l.Acked != 4 || l.DoneOnce != 4 || l.Deliveries != 4 || l.Pending != 4 {
		t.Errorf("ledger: %d acked, %d done once, %d deliveries, %d pending; want the batch in hand done and acknowledged (4, 4, 4) and 4 untouched",
			l.Acked, l.DoneOnce, l.Deliveries, l.Pending)
	}
	leases := 0
	for _, e := range log.events() {
		if e["event"] == "leased" {
			leases++
		}
	}
	if leases != 1 {
		t.Errorf("the consumer leased %d batches, want 1", leases)
	}
}

// What a SIGKILL mid-batch does, and the replacement that picks up after
// the visibility timeout: the work done before the kill is done again.
func TestAConsumerKilledMidBatchLeavesItsDoneWorkToBeDoneAgain(t *testing.T) {
	// Killed once m2's work has started: m1 is done, m2 is cut. Each
	// message takes 200ms, so a loaded machine has that long to kill it
	// before m2 is done too; the leases run out 1s after the batch.
	s, url := liveServer(t, time.Second)
	s.publish("q", 4)
	_, _, kill, done := startConsumer(t, url, "killed", 200*time.Millisecond, io.Discard)
	waitLedger(t, s, "m2 started", func(l Ledger) bool { return startedBy(l, "m2") })
	kill()
	<-done
	startConsumer(t, url, "replacement", time.Millisecond, io.Discard)
	l := waitLedger(t, s, "every message acknowledged", func(l Ledger) bool { return l.Acked == 4 })
	if l.DoneTwice != 1 || l.WorkCut != 1 || l.Redeliveries != 4 || l.Expired != 4 || l.Lost != 0 {
		t.Errorf("ledger: %d done twice, %d cut, %d redeliveries, %d expired, %d lost; want m1 done twice, m2 cut, all 4 redelivered after expiry, none lost",
			l.DoneTwice, l.WorkCut, l.Redeliveries, l.Expired, l.Lost)
	}
}

func TestConsumeRejectsBadFlagsNamingThem(t *testing.T) {
	cfg := consumeConfig{server: "queue:8080", queue: "Q", name: "", batch: 0, work: -time.Second, poll: 0}
	err := cfg.validate()
	for _, want := range []string{
		`-server: "queue:8080": want the server's URL, http://HOST:PORT`,
		`-queue: "Q": want 1 to 63 characters a-z, 0-9 or -`,
		`-name: "": want a name of 1 to 253 bytes`,
		`-batch: 0 is out of range: want 1 to 100`,
		`-work: -1s is out of range: want 0s to 1h`,
		`-poll: 0s is out of range: want 10ms to 1m`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validate: %v; want it to say %s", err, want)
		}
	}
}

// TestTheBinaryFinishesItsBatchOnSIGTERM runs the real binary: SIGTERM in
// the middle of a batch, logged with what is in hand; the batch finished and
// acknowledged, no new lease, shutdown_complete and exit 0.
func TestTheBinaryFinishesItsBatchOnSIGTERM(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "queue")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	s, url := liveServer(t, time.Minute)
	s.publish("q", 8)
	cmd := exec.Command(bin, "consume", "-server", url, "-queue", "q", "-batch", "4", "-work", "150ms", "-name", "pod-a")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var events []map[string]any
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		m := map[string]any{}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("a log line that is not JSON: %s", sc.Text())
		}
		events = append(events, m)
		if m["event"] == "work_done" && m["id"] == "m1" {
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v; want 0", err)
	}
	var order []string
	for _, e := range events {
		switch e["event"] {
		case "leased", "acked", "shutdown_complete":
			order = append(order, fmt.Sprint(e["event"]))
		case "sigterm":
			order = append(order, fmt.Sprintf("sigterm in_hand=%v unfinished=%v", e["in_hand"], e["unfinished"]))
		}
	}
	if want := []string{"leased", "sigterm in_hand=4 unfinished=3", "acked", "shutdown_complete"}; !slices.Equal(order, want) {
		t.Errorf("log: %v; want %v", order, want)
	}
	if l := mustLedger(t, s, "q"); l.Acked != 4 || l.DoneOnce != 4 || l.Pending != 4 {
		t.Errorf("ledger: %d acked, %d done once, %d pending; want 4, 4, 4", l.Acked, l.DoneOnce, l.Pending)
	}
}
