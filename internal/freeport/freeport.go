// Package freeport hands out TCP ports for servers that tests and the demo
// start on this machine.
//
// Ports come from 20000-32767, below Linux's default ephemeral range
// (32768-60999): a port from the ephemeral range can be taken by any
// outgoing connection between the check and the bind, which made servers
// fail with "address already in use" under load. A port is never handed
// out twice by one process.
package freeport

import (
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

const lo, hi = 20000, 32768

var (
	mu   sync.Mutex
	used = map[int]bool{}
)

// Get returns a port that nothing listens on, on any address.
func Get() (int, error) {
	mu.Lock()
	defer mu.Unlock()
	for range 200 {
		p := lo + rand.IntN(hi-lo)
		if used[p] {
			continue
		}
		l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		_ = l.Close()
		used[p] = true
		return p, nil
	}
	return 0, errors.New("no free port in 20000-32767 after 200 tries")
}
