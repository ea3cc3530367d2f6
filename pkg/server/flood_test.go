package server

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/graceguard/graceguard/internal/flood"
)

// A flood is hostile connections to the webhook, opened by a child
// process (this test binary, re-run by internal/flood) so that the
// server's memory is all that the test process measures.

// floodKind is one kind of hostile connection (internal/flood).
type floodKind = flood.Kind

const (
	floodTCP         = flood.TCP
	floodHello       = flood.Hello
	floodHandshake   = flood.Handshake
	floodIdle        = flood.Idle
	floodHeaders     = flood.Headers
	floodIdleHeaders = flood.IdleHeaders
	floodActive      = flood.Active
)

var floodKinds = flood.Kinds

func TestMain(m *testing.M) {
	flood.MainIfChild()
	os.Exit(m.Run())
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// The floods are built against this server's bounds: a partial ClientHello
// at the handshake's byte bound, unfinished headers at the header bound.
func TestFloodsAreBuiltAgainstTheServersBounds(t *testing.T) {
	if flood.HandshakeBytes != maxHandshakeBytes || flood.HeaderBytes != maxHeaderBytes {
		t.Errorf("internal/flood builds against %d handshake and %d header bytes; the server bounds them at %d and %d: update internal/flood",
			flood.HandshakeBytes, flood.HeaderBytes, maxHandshakeBytes, maxHeaderBytes)
	}
}

func craftedPartialHello(limit int) []byte { return flood.CraftedPartialHello(limit) }

func raiseFileLimit(n int) error { return flood.RaiseFileLimit(n) }

// flooder is a running flood child, stopped when the test ends.
type flooder struct{ *flood.Flood }

type floodCount struct{ opened, failed int }

// startFlood starts a child opening count connections of kind to addr.
func startFlood(t *testing.T, kind floodKind, addr string, count, rate int) *flooder {
	t.Helper()
	f, err := flood.Start(kind, addr, count, rate)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	return &flooder{f}
}

// wait returns once every connection was opened (or failed to).
func (f *flooder) wait(t *testing.T) floodCount {
	t.Helper()
	c, err := f.Wait(5 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return floodCount{c.Opened, c.Failed}
}

// stop closes the flood's connections and waits for it to exit.
func (f *flooder) stop() { f.Stop() }
