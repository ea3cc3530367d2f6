// Command hostile is the hostile tenant of the e2e suite
// (registry.local/hostile:e2e, test/e2e scenario 8). Run in a Pod whose
// ServiceAccount may act only in its own namespaces, it sends, all at once
// for -duration:
//
//   - dense Pods through the API server, each body just under its 3 MiB
//     request limit: ~785,000 one-character strings in a command, args or a
//     preStop exec, or hundreds of thousands of ports, probe headers,
//     annotation keys or containers (-pod-streams at a time);
//   - UPDATEs of a Deployment and a CronJob stored with a megabyte template,
//     each with a template of three megabytes or one (object and oldObject);
//   - Pods with values of the annotations graceguard reads at the API
//     server's bound (each key alone) and at 256 KiB (all at once), and
//     max-work: auto under a ReplicaSet;
//   - Pods labelled graceguard.io/treated=true with a megabyte preStop exec
//     in -outside, a namespace that did not opt in: created, updated,
//     deleted, every other one kept terminating by a finalizer and updated
//     so, then released;
//   - connection floods at each of -webhooks: TCP connections that send
//     nothing, partial TLS ClientHellos, TLS connections idle after one
//     review, and requests whose headers never end; each closed one is
//     reopened, up to -connections held at once in all and -conn-rate new
//     ones a second in all.
//
// Its Pods carry a scheduling gate, its workloads are paused or suspended:
// admission, not the node, is under attack. Every line on stdout is one JSON
// object with "ts" (RFC 3339, nanoseconds) and "event": started,
// attack_started, progress (every 10 s), attack_ended, then result, whose
// "attack" is an evidence.Attack. Before it exits it deletes what it
// created and releases what its finalizer held.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/graceguard/graceguard/test/e2e/evidence"
)

type config struct {
	duration     time.Duration
	namespace    string
	outside      string
	webhooks     []string
	connections  int
	connRate     int
	podStreams   int
	workStreams  int
	annotStreams int
	outsidePods  int
	image        string
}

func main() {
	var cfg config
	var webhooks string
	flag.DurationVar(&cfg.duration, "duration", 65*time.Second, "how long every class runs at once")
	flag.StringVar(&cfg.namespace, "namespace", "", "the tenant's opted-in namespace (default: the Pod's)")
	flag.StringVar(&cfg.outside, "outside", "", "the tenant's namespace that did not opt in (treated Pods there)")
	flag.StringVar(&webhooks, "webhooks", "", "comma-separated host:port of the webhook replicas to flood")
	flag.IntVar(&cfg.connections, "connections", 10000, "connections to hold open at once, over every kind and address")
	flag.IntVar(&cfg.connRate, "conn-rate", 1000, "new connections a second, over every kind and address")
	flag.IntVar(&cfg.podStreams, "pod-streams", 3, "concurrent streams of dense Pod creates")
	flag.IntVar(&cfg.workStreams, "workload-streams", 1, "concurrent streams of dense workload updates")
	flag.IntVar(&cfg.annotStreams, "annotation-streams", 1, "concurrent streams of Pods with oversized annotations")
	flag.IntVar(&cfg.outsidePods, "outside-pods", 40, "treated Pods in the outside namespace at once")
	flag.StringVar(&cfg.image, "image", "registry.local/drainapp:e2e", "the image the tenant's Pods name (they never run)")
	flag.Parse()
	for _, w := range strings.Split(webhooks, ",") {
		if w = strings.TrimSpace(w); w != "" {
			cfg.webhooks = append(cfg.webhooks, w)
		}
	}
	if cfg.namespace == "" {
		b, err := os.ReadFile(saDir + "/namespace")
		if err != nil {
			fatal(err)
		}
		cfg.namespace = strings.TrimSpace(string(b))
	}
	a, err := inCluster()
	if err != nil {
		fatal(err)
	}
	res := attack(a, cfg)
	logEvent("result", "attack", res)
}

var logMu sync.Mutex

func logEvent(event string, kv ...any) {
	m := map[string]any{"ts": time.Now().UTC().Format(time.RFC3339Nano), "event": event}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	logMu.Lock()
	defer logMu.Unlock()
	_ = json.NewEncoder(os.Stdout).Encode(m)
}

func fatal(err error) {
	logEvent("error", "error", err.Error())
	os.Exit(1)
}

// attack runs every class at once for cfg.duration and returns what it
// sent.
func attack(a *api, cfg config) *evidence.Attack {
	res := &evidence.Attack{Connections: cfg.connections, ConnRate: cfg.connRate}
	noFile, soft, err := raiseFileLimit()
	res.NoFile = noFile
	if err != nil {
		res.Errors = append(res.Errors, err.Error())
	}
	// Connections per kind and address, within the open-file limit (less
	// room for the API streams and the runtime).
	perFlood := 0
	if n := len(floodKinds) * len(cfg.webhooks); n > 0 {
		total := cfg.connections
		if soft > 0 && uint64(total)+256 > soft {
			total = int(soft) - 256
			res.Errors = append(res.Errors, fmt.Sprintf("the open-file limit (%d) holds only %d of %d connections", soft, total, cfg.connections))
		}
		perFlood = max(total/n, 1)
	}

	pods := densePods(cfg.namespace, cfg.image)
	annotated := oversizedPods(cfg.namespace, cfg.image)
	works := workloads(cfg.namespace, cfg.image)
	logEvent("started", "namespace", cfg.namespace, "outside", cfg.outside, "webhooks", cfg.webhooks, "noFile", noFile, "connectionsPerKindAndTarget", perFlood)

	var updates []shape
	for _, w := range works {
		updates = append(updates, w.updates...)
	}
	// The stored workloads first: their templates are the UPDATEs' oldObject.
	setup := newClass("setup", 1, time.Now())
	var stored []string
	for _, w := range works {
		base, err := a.ensureWorkload(setup, w)
		if err != nil {
			res.Errors = append(res.Errors, err.Error())
			continue
		}
		stored = append(stored, "stored first: "+base)
	}

	t0 := time.Now()
	podsC := newClass("dense Pods", cfg.podStreams, t0, pods)
	workC := newClass("dense workload UPDATEs (object and oldObject)", cfg.workStreams, t0, updates)
	workC.ev.Shapes = append(stored, workC.ev.Shapes...)
	annotC := newClass("oversized annotations on Pods", cfg.annotStreams, t0, annotated)
	var outsideC *class
	var out *outside
	if cfg.outside != "" {
		outsideC = newClass("treated Pods outside (megabyte preStop exec, not opted in)", 1, t0)
		out = newOutside(a, outsideC, cfg.outside, cfg.image, cfg.outsidePods)
		outsideC.ev.Shapes = []string{out.shapes[true].String() + ", every other one held by a finalizer"}
	}

	var floods []*flooder
	for _, addr := range cfg.webhooks {
		for _, kind := range floodKinds {
			f, err := newFlooder(kind, addr, cfg.namespace, perFlood, cfg.connRate/(len(floodKinds)*len(cfg.webhooks)))
			if err != nil {
				fatal(err)
			}
			floods = append(floods, f)
		}
	}

	logEvent("attack_started", "duration", cfg.duration.String())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	run := func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	for _, f := range floods {
		f.start(8)
	}
	podPath := "/api/v1/namespaces/" + cfg.namespace + "/pods"
	for i := range cfg.podStreams {
		run(func() {
			cycle(stop, i*len(pods)/max(cfg.podStreams, 1), pods, func(s shape) { a.send(podsC, "POST", podPath, jsonType, s.body) })
		})
	}
	for i := range cfg.annotStreams {
		run(func() {
			cycle(stop, i, annotated, func(s shape) { a.send(annotC, "POST", podPath, jsonType, s.body) })
		})
	}
	for i := range cfg.workStreams {
		run(func() {
			cycle(stop, i, updates, func(s shape) {
				for _, w := range works {
					if strings.HasPrefix(s.name, w.kind+" ") {
						a.send(workC, "PUT", w.path+"/"+w.name, jsonType, s.body)
					}
				}
			})
		})
	}
	if out != nil {
		run(func() { out.run(stop) })
	}
	// A janitor: whatever of the tenant's own was admitted goes again.
	run(func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			a.do(ctx, "DELETE", podPath+"?labelSelector=hostile", "", nil, false)
			cancel()
		}
	})
	classes := []*class{podsC, workC, annotC}
	if outsideC != nil {
		classes = append(classes, outsideC)
	}
	progress := time.NewTicker(10 * time.Second)
	end := time.After(cfg.duration)
loop:
	for {
		select {
		case <-end:
			break loop
		case <-progress.C:
			var sent []string
			for _, c := range classes {
				s := c.snapshot()
				sent = append(sent, fmt.Sprintf("%s: %d", s.Name, s.Sent))
			}
			var conns []string
			for _, f := range floods {
				s := f.snapshot()
				conns = append(conns, fmt.Sprintf("%s@%s opened %d closed %d held %d", s.Kind, s.Target, s.Opened, s.Closed, f.held.Load()))
			}
			logEvent("progress", "seconds", time.Since(t0).Seconds(), "sent", sent, "connections", conns)
		}
	}
	progress.Stop()
	close(stop)
	res.Duration = evidence.S(time.Since(t0))
	logEvent("attack_ended", "seconds", float64(res.Duration))
	// Flood figures as they stood at the end, before the attacker closes its
	// own connections.
	for _, f := range floods {
		res.Floods = append(res.Floods, f.snapshot())
	}
	for _, f := range floods {
		f.halt()
	}
	wg.Wait()
	for _, c := range classes {
		s := c.snapshot()
		res.Classes = append(res.Classes, &s)
	}
	res.Errors = append(res.Errors, a.cleanup(cfg.namespace, cfg.outside)...)
	return res
}
