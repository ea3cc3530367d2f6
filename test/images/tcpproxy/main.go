// Command tcpproxy is the naive proxy sidecar of the e2e suite
// (registry.local/tcpproxy:e2e): it accepts TCP connections on $LISTEN
// (default :8081) and relays each, byte for byte, to $TARGET (default
// 127.0.0.1:8080, the app in the same Pod). In scenario 6 it stands in for
// a mesh proxy that does not drain; in scenario 16 for a database proxy the
// app connects out through (LISTEN=127.0.0.1:5432, TARGET the database), as
// cloud-sql-proxy without --max-sigterm-delay. Either way, on SIGTERM it
// exits at once, and every connection through it is cut.
//
// Every line on stdout is one JSON object with "ts" (RFC 3339, nanoseconds)
// and "event": listening, sigterm {active}; "active" counts the
// connections open at that moment.
package main

import (
	"encoding/json"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	listen, target := env("LISTEN", ":8081"), env("TARGET", "127.0.0.1:8080")
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	logEvent := func(event string, kv ...any) {
		m := map[string]any{"ts": time.Now().UTC().Format(time.RFC3339Nano), "event": event}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(m)
	}

	ln, err := net.Listen("tcp", listen)
	if err != nil {
		logEvent("error", "error", err.Error())
		os.Exit(1)
	}
	var active atomic.Int64
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		// A naive proxy: no drain, no waiting for the app.
		logEvent("sigterm", "active", active.Load())
		os.Exit(0)
	}()
	logEvent("listening", "listen", listen, "target", target)
	for {
		c, err := ln.Accept()
		if err != nil {
			continue
		}
		go func() {
			active.Add(1)
			defer active.Add(-1)
			relay(c, target)
		}()
	}
}

// relay copies both ways until either side closes.
func relay(c net.Conn, target string) {
	defer c.Close()
	up, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
