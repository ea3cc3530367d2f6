package apiserver

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// echoServer answers each line with its own name and the line.
func echoServer(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					fmt.Fprintf(c, "%s %s", name, line)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func ask(t *testing.T, c net.Conn, r *bufio.Reader, line string) string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintln(c, line); err != nil {
		t.Fatal(err)
	}
	got, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(got)
}

func TestBalancerSpreadsConnectionsAndKeepsEachOnItsBackend(t *testing.T) {
	a, b := echoServer(t, "a"), echoServer(t, "b")
	lb, err := NewBalancer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lb.Close() })

	// No backend yet: a connection is dropped and counted.
	c, err := net.Dial("tcp", lb.Addr())
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes through a balancer without backends", n)
	}
	c.Close()

	lb.SetBackends(a, b)
	seen := map[string]int{}
	var conns []net.Conn
	for i := range 40 {
		c, err := net.Dial("tcp", lb.Addr())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		r := bufio.NewReader(c)
		first := ask(t, c, r, fmt.Sprint(i))
		name, _, _ := strings.Cut(first, " ")
		seen[name]++
		// Later requests on the connection reach the same backend.
		if again := ask(t, c, r, "again"); again != name+" again" {
			t.Fatalf("connection %d: first answered by %q, then %q", i, name, again)
		}
	}
	if seen["a"] == 0 || seen["b"] == 0 || seen["a"]+seen["b"] != 40 {
		t.Fatalf("40 connections over two backends went %v", seen)
	}
	stats, failed := lb.Stats()
	if failed != 1 {
		t.Errorf("failed = %d, want 1 (the connection made without backends)", failed)
	}
	if len(stats) != 2 {
		t.Fatalf("stats for %d backends, want 2: %+v", len(stats), stats)
	}
	for _, s := range stats {
		want := seen["a"]
		if s.Addr == b {
			want = seen["b"]
		}
		if s.Connections != want || s.Open != want || s.PeakOpen != want {
			t.Errorf("%s: %+v, want %d connections, all open", s.Addr, s, want)
		}
	}

	// Closing the balancer's side ends every tunnel; a new arm starts
	// with fresh counts and only the backends set now.
	lb.CloseConnections()
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("a connection stayed open after CloseConnections")
		}
		c.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		stats, _ = lb.Stats()
		if stats[0].Open+stats[1].Open == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	lb.ResetStats()
	lb.SetBackends(b)
	for i := range 5 {
		c, err := net.Dial("tcp", lb.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if got := ask(t, c, bufio.NewReader(c), "x"); got != "b x" {
			t.Fatalf("connection %d with backend b only: %q", i, got)
		}
		c.Close()
	}
	stats, failed = lb.Stats()
	for _, s := range stats {
		want := 0
		if s.Addr == b {
			want = 5
		}
		if s.Connections != want || s.PeakOpen > want || (want > 0 && s.PeakOpen == 0) {
			t.Errorf("after the reset, %s: %+v, want %d connections", s.Addr, s, want)
		}
	}
	if failed != 0 {
		t.Errorf("failed = %d after the reset, want 0", failed)
	}
}
