package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestGetReturnsDistinctBindablePortsOutsideTheEphemeralRange(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		p, err := Get()
		if err != nil {
			t.Fatal(err)
		}
		if p < lo || p >= hi || seen[p] {
			t.Fatalf("port %d: outside %d-%d or handed out twice", p, lo, hi-1)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		l.Close()
	}
}
