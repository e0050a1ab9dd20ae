// Command realscale is `make bench-scale-real`: the scale figures of
// internal/scale (docs/bench/scale.md) measured on real processes. For
// each timer set (loopback: gossip on 127.0.0.1, cluster.LocalConfig;
// lan: gossip on an address of this machine off loopback with the
// Kubernetes manifest's flags, cluster.DefaultConfig) and each N it starts
// N `mcpswarm serve` processes, places a fixed load per node (MCP
// connections and counter sessions of one principal) and measures from
// outside: replication bytes per write from /metrics, CPU and RSS at rest
// from /proc, the live heap after a GC through pprof, the time a started
// session takes to reach every node and a dead node's sessions to be
// hidden everywhere from each node's admin event stream (WatchEvents),
// a joining node's catch-up from its /readyz and admin API, and approvals
// per second through the arbiter from 2026-07-28 clients. Every
// process it started is stopped however the run ends.
//
//	cd bench && go run ./realscale -mcpswarm ../bin/mcpswarm -n 3,12 -docs ../docs
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mcpswarm/mcpswarm/bench/internal/hostinfo"
)

// knobs are the run's settings.
type knobs struct {
	bin      string
	sizes    []int
	timers   []string
	conns    int // MCP connections per node, left open
	sessions int // counter sessions per node
	writes   int // sessions started one at a time to time the reach
	settle   time.Duration
	rest     time.Duration
	approve  time.Duration // how long the approvals run
	logDir   string
}

func main() {
	var k knobs
	sizes := flag.String("n", "3,12", "swarm sizes, comma-separated (3 to 32)")
	timers := flag.String("timers", "loopback,lan", "timer sets, comma-separated: loopback, lan")
	flag.StringVar(&k.bin, "mcpswarm", "../bin/mcpswarm", "the mcpswarm binary (built by `make build`)")
	flag.IntVar(&k.conns, "conns", 20, "MCP connections each node holds (connection records)")
	flag.IntVar(&k.sessions, "sessions", 5, "counter sessions each node owns")
	flag.IntVar(&k.writes, "writes", 50, "sessions started one at a time, each timed until every node reports it")
	flag.DurationVar(&k.settle, "settle", 10*time.Second, "wait after the load is placed, before the rest is measured")
	flag.DurationVar(&k.rest, "rest", 30*time.Second, "the measured rest (CPU, traffic)")
	flag.DurationVar(&k.approve, "approve", 5*time.Second, "how long every node's client approves calls")
	flag.StringVar(&k.logDir, "logdir", "", "write each node's output to DIR/NAME.log instead of keeping it in memory")
	docs := flag.String("docs", "", "the docs directory to write bench/scale-real.md and .json into; empty: print only")
	timeout := flag.Duration("timeout", 30*time.Minute, "bound on the whole run; every node is stopped when it passes")
	flag.Parse()
	if err := k.parse(*sizes, *timers); err != nil {
		fmt.Fprintln(os.Stderr, "realscale:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := runAll(ctx, k, *docs); err != nil {
		fmt.Fprintln(os.Stderr, "realscale:", err)
		os.Exit(1)
	}
}

func (k *knobs) parse(sizes, timers string) error {
	for s := range strings.SplitSeq(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 3 || n > 32 {
			return fmt.Errorf("-n: swarm size %q: want 3 to 32", s)
		}
		k.sizes = append(k.sizes, n)
	}
	for t := range strings.SplitSeq(timers, ",") {
		if t = strings.TrimSpace(t); t != "loopback" && t != "lan" {
			return fmt.Errorf("-timers: %q is neither loopback nor lan", t)
		}
		k.timers = append(k.timers, t)
	}
	switch {
	case k.conns < 1 || k.sessions < 1 || k.writes < 1:
		return fmt.Errorf("-conns, -sessions and -writes must be at least 1")
	case k.approve <= 0:
		return fmt.Errorf("-approve must be positive")
	case k.rest < 5*time.Second:
		return fmt.Errorf("-rest must be at least 5s: CPU time moves in 10 ms ticks")
	}
	return nil
}

// runAll runs every timer set at every size, prints the report and, with
// docs, writes it.
func runAll(ctx context.Context, k knobs, docs string) error {
	rep := report{Started: time.Now().UTC(), Machine: hostinfo.Now(), Conns: k.conns, Sessions: k.sessions, Writes: k.writes, Rest: k.rest}
	for _, t := range k.timers {
		for _, n := range k.sizes {
			res, err := run(ctx, k, t, n)
			if err != nil {
				return fmt.Errorf("%s timers, N = %d: %w", t, n, err)
			}
			rep.Results = append(rep.Results, res)
		}
	}
	rep.Machine.LoadAfter = hostinfo.LoadAvg()
	md := rep.markdown()
	fmt.Print(md)
	if docs == "" {
		return nil
	}
	dir := filepath.Join(docs, "bench")
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "scale-real.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "scale-real.md"), []byte(md), 0o644)
}
