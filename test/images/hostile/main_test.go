package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/graceguard/graceguard/internal/flood"
)

// The dense bodies reach admission whole: valid JSON just under the API
// server's 3 MiB limit, their one list as long as that allows.
func TestDenseBodiesEndJustUnderTheAPIServerLimit(t *testing.T) {
	check := func(s shape, minItems int, limit int) map[string]any {
		t.Helper()
		if len(s.body) > limit || len(s.body) < limit-4096 {
			t.Errorf("%s: %d bytes, want just under %d", s.name, len(s.body), limit)
		}
		if s.items < minItems {
			t.Errorf("%s: %d elements, want at least %d", s.name, s.items, minItems)
		}
		var obj map[string]any
		if err := json.Unmarshal(s.body, &obj); err != nil {
			t.Fatalf("%s: not JSON: %v", s.name, err)
		}
		return obj
	}
	pods := densePods("tenant", "registry.local/drainapp:e2e")
	if len(pods) != 6 {
		t.Fatalf("%d dense Pods, want 6", len(pods))
	}
	for _, s := range pods {
		obj := check(s, 20_000, apiMaxBody)
		meta := obj["metadata"].(map[string]any)
		if meta["namespace"] != "tenant" || meta["labels"].(map[string]any)["hostile"] != "dense" {
			t.Errorf("%s: metadata %v", s.name, meta)
		}
		if strings.HasPrefix(s.name, "command") {
			cmd := obj["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["command"].([]any)
			if len(cmd) < 780_000 || len(cmd) != s.items {
				t.Errorf("the command has %d strings (items %d), want ~785,000", len(cmd), s.items)
			}
		}
	}
	for _, w := range workloads("tenant", "registry.local/drainapp:e2e") {
		if len(w.base.body) > storedLimit || w.base.items < 200_000 {
			t.Errorf("%s: the stored base is %d bytes with %d elements", w.kind, len(w.base.body), w.base.items)
		}
		if len(w.updates) != 2*len(containerShapes) {
			t.Errorf("%s: %d updates, want each shape at two sizes", w.kind, len(w.updates))
		}
		for i, u := range w.updates {
			limit := apiMaxBody
			if i%2 == 1 {
				limit = storedLimit
			}
			obj := check(u, 20_000, limit)
			if obj["kind"] != w.kind || obj["metadata"].(map[string]any)["name"] != w.name {
				t.Errorf("%s: an update of %v %v", u.name, obj["kind"], obj["metadata"])
			}
		}
	}
}

// Each oversized key alone leaves a stored Pod room for graceguard's own
// record, within the API server's 256 KiB of annotations.
func TestOversizedAnnotationsStayWithinTheBoundAlone(t *testing.T) {
	for _, s := range oversizedPods("tenant", "i") {
		var obj struct {
			Metadata struct {
				Annotations     map[string]string `json:"annotations"`
				OwnerReferences []any             `json:"ownerReferences"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(s.body, &obj); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		total := 0
		for k, v := range obj.Metadata.Annotations {
			total += len(k) + len(v)
		}
		switch {
		case s.name == "every key at 256 KiB":
			if total < len(oversizedKeys)*256<<10 {
				t.Errorf("%s: %d bytes of annotations", s.name, total)
			}
		case total != annotationLimit-mutationRoom:
			t.Errorf("%s: %d bytes of annotations, want %d", s.name, total, annotationLimit-mutationRoom)
		}
		if strings.HasPrefix(s.name, "max-work: auto") && (obj.Metadata.Annotations["graceguard.io/max-work"] != "auto" || len(obj.Metadata.OwnerReferences) != 1) {
			t.Errorf("%s: %v", s.name, obj.Metadata)
		}
	}
	p := treatedPod("outside", "treated-0-0", "i", true)
	if len(p.body) > storedLimit || len(p.body) < storedLimit-4096 || !strings.Contains(string(p.body), outsideFinalizer) {
		t.Errorf("the treated Pod is %d bytes", len(p.body))
	}
}

func TestOutcomesNameWhoAnswered(t *testing.T) {
	for _, c := range []struct {
		an   answer
		want string
	}{
		{answer{code: 201}, "admitted"},
		{answer{code: 422, msg: `admission webhook "validate-pods.graceguard.io" denied the request: Pod "x" is invalid`}, "denied by validate-pods"},
		{answer{code: 500, msg: `Internal error occurred: failed calling webhook "validate-workloads.graceguard.io": failed to call webhook: Post ...: context deadline exceeded`}, "call to validate-workloads failed"},
		{answer{code: 500, msg: "etcdserver: request is too large"}, "too large for etcd"},
		{answer{code: 500, msg: "rpc error: code = ResourceExhausted desc = trying to send message larger than max (2359575 vs. 2097152)"}, "too large for etcd"},
		{answer{code: 413, msg: "Request entity too large: limit is 3145728"}, "too large for the API server"},
		{answer{code: 422, msg: `Pod "x" is invalid: metadata.annotations: Too long`}, "invalid (API server validation)"},
		{answer{code: 429}, "throttled by the API server"},
		{answer{code: 404}, "HTTP 404"},
		{answer{err: io.EOF}, "no answer"},
	} {
		if got := outcome(c.an); got != c.want {
			t.Errorf("outcome(%d %q) = %q, want %q", c.an.code, c.an.msg, got, c.want)
		}
	}
}

// A flood reopens what the server closes, keeps at most its target open,
// and counts both.
func TestFloodsReopenWhatTheServerCloses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { time.Sleep(20 * time.Millisecond); c.Close() }()
		}
	}()
	f, err := newFlooder(floodTCP, ln.Addr().String(), "tenant", 5, 500)
	if err != nil {
		t.Fatal(err)
	}
	f.start(2)
	time.Sleep(500 * time.Millisecond)
	f.halt()
	s := f.snapshot()
	if s.Opened <= 5 || s.Closed == 0 || s.HeldPeak > 5 || s.HeldPeak == 0 {
		t.Errorf("flood %+v: want more than 5 opened, some closed by the server, at most 5 held", s)
	}
}

// The idle kind sends one review, reads its answer and holds the
// connection; the headers kind never ends its request.
func TestTLSFloodsSendAReviewOrEndlessHeaders(t *testing.T) {
	reviews := make(chan string, 100)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		reviews <- r.URL.Path + " " + string(b)
		_, _ = io.WriteString(w, `{"response":{"allowed":true}}`)
	}))
	srv.Config.MaxHeaderBytes = serverHeaderBytes
	srv.Config.ReadHeaderTimeout = 300 * time.Millisecond
	srv.StartTLS()
	defer srv.Close()
	addr := srv.Listener.Addr().String()

	open, err := opener(floodIdle, addr, "tenant")
	if err != nil {
		t.Fatal(err)
	}
	c, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := <-reviews; !strings.HasPrefix(got, "/validate-v1-pod ") || !strings.Contains(got, `"namespace":"tenant"`) {
		t.Errorf("the idle connection sent %q", got)
	}

	open, err = opener(floodHeaders, addr, "tenant")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c, err = open()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The server gives up on the headers at its timeout, without an answer
	// (431 would mean they were too long).
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _ := io.Copy(io.Discard, c)
	if d := time.Since(start); d < 250*time.Millisecond || d > 4*time.Second {
		t.Errorf("the headers connection was closed after %s (%d bytes), want at the header timeout", d, n)
	}
	select {
	case r := <-reviews:
		t.Errorf("unfinished headers reached the handler: %q", r)
	default:
	}
	if n := len(flood.UnfinishedHeaders(serverHeaderBytes + 4096)); n >= serverHeaderBytes+4096 || n < serverHeaderBytes+4096-8 {
		t.Errorf("unfinished headers of %d bytes", len(flood.UnfinishedHeaders(serverHeaderBytes+4096)))
	}
}
