// Command queue is the work queue of the e2e suite (registry.local/queue:e2e,
// test/e2e scenario 11): a small in-memory queue server with lease and
// acknowledgement semantics, and the consumer that works on its messages.
// One static binary, two modes:
//
//	queue serve   [-listen :8080] [-visibility 20s]
//	queue consume -server http://IP:8080 -queue NAME [-batch 4] [-work 3s] [-poll 500ms] [-name POD]
//
// The server (server.go) leases a message to one consumer at a time for the
// visibility timeout; a message not acknowledged within it becomes visible
// again and is delivered anew (at-least-once, as SQS, Pub/Sub or a Kafka
// consumer group without a committed offset). It keeps a ledger of every
// delivery, of what each delivery's work reported (started, done: the
// work's effect, written to the server as to the consumer's database) and
// of every acknowledgement, so that messages lost (acknowledged without
// their work done) and done twice (their work done by two deliveries) are
// counted, not inferred.
//
// The consumer (consumer.go) is the correct one of the seed article: it
// takes a batch, works on each message in turn for a fixed time, and
// acknowledges the batch once it has finished it; on SIGTERM it takes no new
// batch, finishes the messages in hand, acknowledges them and exits 0. It
// has no deadline of its own: the Pod's grace period is its only bound.
//
// Every line either mode writes on stdout is one JSON object with "ts"
// (RFC 3339, nanoseconds, the node's clock) and "event".
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = "usage: queue serve [flags] | queue consume [flags] (-h lists the flags of each)"

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serveMain(args[1:], stdout, stderr)
	case "consume":
		return consumeMain(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "queue: unknown mode %q\n%s\n", args[0], usage)
	return 2
}

// logger writes one JSON object per line; lines never interleave.
type logger struct {
	mu  sync.Mutex
	enc *json.Encoder
	now func() time.Time
}

func newLogger(w io.Writer) *logger {
	return &logger{enc: json.NewEncoder(w), now: time.Now}
}

func (l *logger) log(event string, kv ...any) {
	m := map[string]any{"ts": l.now().UTC().Format(time.RFC3339Nano), "event": event}
	for i := 0; i+1 < len(kv); i += 2 {
		m[fmt.Sprint(kv[i])] = kv[i+1]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.enc.Encode(m)
}
