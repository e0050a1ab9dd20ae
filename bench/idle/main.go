// Command idle measures what a swarm at rest costs (issue 40): it starts N
// real mcpswarm processes on loopback, starts a few sessions on each
// through MCP for one principal, lets the swarm settle, and then reads
// every node's CPU time (utime+stime from /proc/PID/stat) and RSS over a
// window in which nothing but waiting happens. CPU time is what the
// process itself spent, so other load on the machine inflates it little.
// It prints one row per node and a summary, and stops every process it
// started however it ends (an overall -timeout bounds the run).
//
//	cd bench && go run ./idle -mcpswarm ../bin/mcpswarm -n 3 -sessions 5
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mcpswarm/mcpswarm/bench/internal/hostinfo"
	"github.com/mcpswarm/mcpswarm/bench/internal/procwait"
)

// knobs are the run's settings.
type knobs struct {
	bin      string
	timers   string // loopback or lan
	n        int
	sessions int           // per node, all of one principal
	settle   time.Duration // after the last session started, before measuring
	window   time.Duration // the measured rest
	profile  string        // file for a CPU profile of node 1 over the window; "" for none
	logDir   string        // where the nodes' output goes; "" keeps it in memory
}

func main() {
	var k knobs
	flag.StringVar(&k.bin, "mcpswarm", "../bin/mcpswarm", "the mcpswarm binary (built by `make build`)")
	flag.StringVar(&k.timers, "timers", "loopback", "timer set: loopback (gossip on 127.0.0.1: cluster.LocalConfig) or lan (gossip on this machine's own address with the Kubernetes manifest's flags: cluster.DefaultConfig)")
	flag.IntVar(&k.n, "n", 3, "nodes to start (1 to 64)")
	flag.IntVar(&k.sessions, "sessions", 5, "counter sessions to start on each node, all of one principal")
	flag.DurationVar(&k.settle, "settle", 30*time.Second, "wait after the sessions started, before measuring")
	flag.DurationVar(&k.window, "window", 60*time.Second, "how long the rest is measured")
	flag.StringVar(&k.profile, "cpuprofile", "", "write a CPU profile of node 1 over the window to this file (node 1 then serves --debug-addr)")
	flag.StringVar(&k.logDir, "logdir", "", "write each node's output to DIR/NAME.log instead of keeping it in memory")
	timeout := flag.Duration("timeout", 10*time.Minute, "bound on the whole run; every node is stopped when it passes")
	flag.Parse()
	if err := k.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "idle:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := run(ctx, k); err != nil {
		fmt.Fprintln(os.Stderr, "idle:", err)
		os.Exit(1)
	}
}

func (k knobs) validate() error {
	switch {
	case k.timers != "loopback" && k.timers != "lan":
		return fmt.Errorf("-timers %q: want loopback or lan", k.timers)
	case k.n < 1 || k.n > 64:
		return fmt.Errorf("-n %d: want 1 to 64 nodes", k.n)
	case k.sessions < 0 || k.sessions > 100:
		return fmt.Errorf("-sessions %d: want 0 to 100 per node", k.sessions)
	case k.window < 5*time.Second:
		return errors.New("-window must be at least 5s: CPU time moves in 10 ms ticks")
	case k.settle < 0:
		return errors.New("-settle must not be negative")
	}
	return nil
}

func run(ctx context.Context, k knobs) error {
	dir, err := os.MkdirTemp("", "mcpswarm-idle-")
	if err != nil {
		return fmt.Errorf("creating the data directory: %w", err)
	}
	defer os.RemoveAll(dir)
	loadBefore := hostinfo.LoadAvg()
	start := time.Now()
	c, err := startCluster(ctx, k, dir)
	if err != nil {
		return err
	}
	defer c.Stop()
	slog.Info("nodes ready", "n", k.n, "took", time.Since(start).Round(time.Millisecond))
	if err := c.AwaitMembers(ctx, 2*time.Minute); err != nil {
		return err
	}
	if err := c.startSessions(ctx, k.sessions); err != nil {
		return err
	}
	slog.Info("sessions started; settling", "per_node", k.sessions, "settle", k.settle)
	if err := procwait.Sleep(ctx, k.settle); err != nil {
		return err
	}
	rows, err := c.measure(ctx, k)
	if err != nil {
		return err
	}
	report(os.Stdout, k, loadBefore, rows)
	return nil
}
