// Command compare is the side-by-side load generator behind
// `make bench-compare`. It starts, as separate processes, a bare mcp-go
// server and an official go-sdk server (bench/peers), one mcpswarm node and a
// two-node mcpswarm cluster, drives them all with the same client code in
// interleaved rounds at several concurrencies, and reports throughput,
// latency, server CPU per call (from /proc/PID/stat) and RSS per idle
// connection and session, every figure also as a ratio against bare mcp-go
// measured in the same round.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mcpswarm/mcpswarm/bench/internal/hostinfo"
)

// options are the harness's flags.
type options struct {
	mcpswarm    string        // the mcpswarm binary
	mcpswarmB   string        // a second mcpswarm binary for the click-b series (before/after in one run); empty: none
	benchDir    string        // the bench module (peers are built from it)
	docsDir     string        // where BENCHMARKS.md and bench/ live; empty: print the report only
	rounds      int           // interleaved rounds
	dur         time.Duration // measured window per cell
	warm        time.Duration // unmeasured lead-in per cell
	conc        []int         // concurrencies
	idle        int           // idle connections / sessions opened for the memory figures
	profile     string        // directory for CPU and allocation profiles (profile mode)
	profSeries  string        // the load profiled: click, static, replica, forward or spread
	profWaits   bool          // also take mutex and blocking profiles
	profClients int           // clients driving the profiled load
	strict      bool          // fail when any series had a failed call or answered none (smoke runs, CI)
	nodeArgs    []string      // extra `mcpswarm serve` flags for every node (e.g. a durability mode)
	only        []string      // the series measured (keys); empty: all of them
}

func main() {
	var o options
	var conc string
	quick := flag.Bool("quick", false, "a short smoke run: 1 round of 1 s windows, 100 idle connections, report printed only")
	flag.StringVar(&o.mcpswarm, "mcpswarm", "../bin/mcpswarm", "the mcpswarm binary (built by `make build`)")
	flag.StringVar(&o.mcpswarmB, "mcpswarm-b", "", "a second mcpswarm binary: adds the series click-b, the click series on a lone node of this binary, so a change is measured against its base in the same rounds")
	flag.StringVar(&o.benchDir, "bench", ".", "the bench module directory (peers are built from bench/peers)")
	flag.StringVar(&o.docsDir, "docs", "", "docs directory to write BENCHMARKS.md's bench-compare section and docs/bench/compare-*; empty prints the report")
	flag.IntVar(&o.rounds, "rounds", 3, "interleaved rounds")
	flag.DurationVar(&o.dur, "dur", 3*time.Second, "measured window per series, concurrency and round")
	flag.DurationVar(&o.warm, "warm", 500*time.Millisecond, "unmeasured lead-in before each window")
	flag.StringVar(&conc, "conc", "1,16,64", "comma-separated client counts")
	flag.IntVar(&o.idle, "idle", 500, "idle connections (and sessions) opened for the memory figures")
	only := flag.String("series", "", "comma-separated series keys to measure, e.g. `replica,process` (the rtt is always measured); the others are skipped and the report is printed only. A light run of the replicated click's gap: -series replica,process -conc 1 -idle 20")
	nodeArgs := flag.String("node-args", "", "extra space-separated `mcpswarm serve` flags for every mcpswarm node, e.g. to measure another durability mode beside the default")
	flag.StringVar(&o.profile, "profile", "", "profile mode: take CPU and allocation profiles of a node under the 16-client click load and write `go tool pprof -top` text into this directory")
	flag.IntVar(&o.profClients, "profile-clients", 16, "clients driving the load in profile mode")
	flag.BoolVar(&o.profWaits, "profile-waits", false, "with -profile: also record where calls wait (mutex and blocking profiles; the node records them only then)")
	flag.StringVar(&o.profSeries, "profile-series", "click", "the load profiled: click (one node), static (one node, swarm_list: the front's own cost), replica (clients on A, sessions on A, their standby B: both nodes profiled), forward (clients on B, sessions on A: both nodes profiled) or spread (clients on both, every call forwarded)")
	flag.Parse()
	if *quick {
		o.rounds, o.dur, o.warm, o.idle, o.docsDir, o.strict = 1, time.Second, 300*time.Millisecond, 100, "", true
	}
	o.nodeArgs = strings.Fields(*nodeArgs)
	if *only != "" {
		o.only = strings.Split(*only, ",")
		o.docsDir = "" // a partial report is never the run of record
	}
	for f := range strings.SplitSeq(conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1024 {
			fmt.Fprintf(os.Stderr, "compare: -conc: %q is not a client count from 1 to 1024\n", f)
			os.Exit(2)
		}
		o.conc = append(o.conc, n)
	}
	if o.rounds < 1 || o.dur <= 0 || o.warm < 0 || o.idle < 1 {
		fmt.Fprintln(os.Stderr, "compare: -rounds and -idle must be at least 1 and -dur positive")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	if o.profile != "" {
		err = runProfile(ctx, o)
	} else {
		err = run(ctx, o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// fleet is every server process of one run.
type fleet struct {
	mcpgo, gosdk, single, nodeA, nodeB *proc // the load series' servers
	// mcpgoDurable is bare mcp-go whose tool puts a record into mcpswarm's
	// journal (Sync mode) before answering: the durable click's ceiling.
	mcpgoDurable *proc
	singleB      *proc // a lone node of the -mcpswarm-b binary (click-b); nil without it
	// process and processPeer are a two-node cluster like A and B, in
	// `process` durability with no standbys: the reference of the
	// replicated click, which differs from it only by the standby.
	process, processPeer *proc
	memMcpgo, memGosdk   *proc // fresh peers for the memory figures
	crowded              *proc // an mcpswarm node left holding the idle connections and sessions
}

func (f *fleet) stop() {
	for _, p := range []*proc{f.nodeB, f.nodeA, f.processPeer, f.process, f.single, f.gosdk, f.mcpgoDurable, f.singleB, f.mcpgo, f.crowded, f.memGosdk, f.memMcpgo} {
		if p != nil {
			p.stop()
		}
	}
}

func run(ctx context.Context, o options) error {
	t0 := time.Now()
	tmp, err := os.MkdirTemp("", "bench-compare-")
	if err != nil {
		return fmt.Errorf("creating a scratch directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	bins, err := buildPeers(ctx, o, tmp)
	if err != nil {
		return err
	}
	f := &fleet{}
	defer f.stop()
	rep := report{Started: t0.UTC(), Source: describeSource(ctx, o.benchDir), Options: o.describe(), Machine: hostinfo.Now()}
	// Memory is measured on fresh processes of their own, and the mcpswarm
	// one then stays as the "crowded" node: idle connections and sessions
	// left on the load series' servers would change what those measure.
	if err := f.startMemory(ctx, bins, tmp, o.nodeArgs); err != nil {
		return err
	}
	for _, p := range []*proc{f.memMcpgo, f.memGosdk, f.crowded} {
		rep.Startup = append(rep.Startup, startupFig{Server: p.name, Ms: float64(p.startup.Microseconds()) / 1000})
	}
	slog.Info("measuring idle memory", "connections", o.idle)
	for _, p := range []*proc{f.memMcpgo, f.memGosdk, f.crowded} {
		m, err := idleMemory(ctx, p, o.idle, p == f.crowded)
		if err != nil {
			return err
		}
		rep.Memory = append(rep.Memory, m)
	}
	f.memMcpgo.stop()
	f.memGosdk.stop()
	if err := f.start(ctx, bins, tmp, o.nodeArgs); err != nil {
		return err
	}

	all := allSeries(f, o.idle)
	if len(o.only) > 0 {
		all = slices.DeleteFunc(all, func(s series) bool { return !slices.Contains(o.only, s.key) })
		if len(all) == 0 {
			return fmt.Errorf("-series %s: no such series", strings.Join(o.only, ","))
		}
	}
	maxConc := 0
	for _, c := range o.conc {
		maxConc = max(maxConc, c)
	}
	workers := map[string][]worker{}
	for _, s := range all {
		slog.Info("connecting clients", "series", s.key, "clients", maxConc)
		ws, err := s.connect(ctx, maxConc)
		if err != nil {
			return fmt.Errorf("preparing series %s: %w", s.key, err)
		}
		workers[s.key] = ws
	}

	rtt, err := newPeerRTT(f.nodeB)
	if err != nil {
		return err
	}
	defer rtt.close()
	for r := range o.rounds {
		// One peer round trip, measured in every round beside the series
		// it is compared with (the replicated click's extra latency).
		cl, err := measure(ctx, rtt.workers(), []*proc{f.nodeB}, o.warm, o.dur)
		if err != nil {
			return err
		}
		cl.Round, cl.Series = r, rttSeries
		slog.Info("cell", "round", r, "series", rttSeries, "p50_us", int(cl.P50us), "p99_us", int(cl.P99us), "errors", cl.Errors)
		rep.Cells = append(rep.Cells, cl)
		for ci, c := range o.conc {
			n := len(all)
			for k := range n {
				s := all[(k+r+ci)%n] // rotate the order so no series always goes first
				cl, err := measure(ctx, workers[s.key][:c], s.servers, o.warm, o.dur)
				if err != nil {
					return err
				}
				cl.Round, cl.Series = r, s.key
				slog.Info("cell", "round", r, "clients", c, "series", s.key, "calls/s", int(cl.Throughput),
					"p50_us", int(cl.P50us), "p99_us", int(cl.P99us), "cpu_us", int(cl.CPUus), "errors", cl.Errors)
				rep.Cells = append(rep.Cells, cl)
				if ctx.Err() != nil {
					return ctx.Err()
				}
			}
		}
	}
	rep.Series = describeSeries(all)
	rep.Conc = o.conc
	rep.Elapsed = time.Since(t0).Round(time.Second).String()
	rep.Machine.LoadAfter = hostinfo.LoadAvg()
	if err := rep.write(o.docsDir); err != nil {
		return err
	}
	if o.strict {
		return rep.check()
	}
	return nil
}

// bins are the executables of one run.
type bins struct{ mcpgo, gosdk, mcpswarm, mcpswarmB string }

// buildPeers builds the two peer servers from the bench module, and
// mcpswarm when its binary is missing.
func buildPeers(ctx context.Context, o options, tmp string) (bins, error) {
	b := bins{mcpgo: filepath.Join(tmp, "peer-mcpgo"), gosdk: filepath.Join(tmp, "peer-gosdk"), mcpswarm: o.mcpswarm, mcpswarmB: o.mcpswarmB}
	for pkg, out := range map[string]string{"./peers/mcpgo": b.mcpgo, "./peers/gosdk": b.gosdk} {
		if err := goBuild(ctx, o.benchDir, pkg, out); err != nil {
			return b, err
		}
	}
	if _, err := os.Stat(b.mcpswarm); err != nil {
		return b, fmt.Errorf("the mcpswarm binary %s is missing (run `make build`, or pass -mcpswarm): %w", b.mcpswarm, err)
	}
	return b, nil
}

func goBuild(ctx context.Context, dir, pkg, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// startMemory runs fresh peers and one fresh mcpswarm node for the memory
// figures.
func (f *fleet) startMemory(ctx context.Context, b bins, tmp string, extra []string) error {
	var err error
	if f.memMcpgo, err = startPeer(ctx, "mcp-go", b.mcpgo); err != nil {
		return err
	}
	if f.memGosdk, err = startPeer(ctx, "go-sdk", b.gosdk); err != nil {
		return err
	}
	f.crowded, _, err = startNode(ctx, b.mcpswarm, tmp, "benchcrowd", "", extra)
	return err
}

// startPeer starts a peer server on a fresh loopback port, with extra
// flags.
func startPeer(ctx context.Context, name, bin string, extra ...string) (*proc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	return startProc(ctx, name, bin, "http://"+addr, append([]string{"-addr", addr}, extra...)...)
}

// start runs every server: the peers, one mcpswarm node, and a two-node
// cluster whose second node joins the first (both on the public dev key,
// so a connection id minted by one is valid on the other).
func (f *fleet) start(ctx context.Context, b bins, tmp string, extra []string) error {
	var err error
	if f.mcpgo, err = startPeer(ctx, "mcp-go", b.mcpgo); err != nil {
		return err
	}
	if f.gosdk, err = startPeer(ctx, "go-sdk", b.gosdk); err != nil {
		return err
	}
	if f.mcpgoDurable, err = startPeer(ctx, "mcp-go durable", b.mcpgo, "-journal", filepath.Join(tmp, "mcpgo-journal")); err != nil {
		return err
	}
	if f.single, _, err = startNode(ctx, b.mcpswarm, tmp, "bench1", "", extra); err != nil {
		return err
	}
	if b.mcpswarmB != "" {
		if f.singleB, _, err = startNode(ctx, b.mcpswarmB, tmp, "bench1b", "", extra); err != nil {
			return err
		}
	}
	// After extra, so that these flags win over ones given there.
	noStandby := append(slices.Clone(extra), "--durability", "process", "--session-replicas", "0")
	var gossipP string
	if f.process, gossipP, err = startNode(ctx, b.mcpswarm, tmp, "benchP", "", noStandby); err != nil {
		return err
	}
	if f.processPeer, _, err = startNode(ctx, b.mcpswarm, tmp, "benchQ", gossipP, noStandby); err != nil {
		return err
	}
	var gossipA string
	if f.nodeA, gossipA, err = startNode(ctx, b.mcpswarm, tmp, "benchA", "", extra); err != nil {
		return err
	}
	if f.nodeB, _, err = startNode(ctx, b.mcpswarm, tmp, "benchB", gossipA, extra); err != nil {
		return err
	}
	return nil
}

// startNode starts `mcpswarm serve --dev` on fresh loopback ports and
// returns it with its gossip address.
func startNode(ctx context.Context, bin, tmp, name, join string, extra []string) (*proc, string, error) {
	var addrs [3]string
	for i := range addrs {
		a, err := freeAddr()
		if err != nil {
			return nil, "", err
		}
		addrs[i] = a
	}
	args := []string{"serve", "--dev", "--name", name, "--http", addrs[0], "--grpc", addrs[1], "--gossip", addrs[2],
		"--data-dir", filepath.Join(tmp, name), "--log-format", "text", "--log-level", "warn"}
	if join != "" {
		args = append(args, "--join", join)
	}
	args = append(args, extra...)
	p, err := startProc(ctx, "mcpswarm "+name, bin, "http://"+addrs[0], args...)
	if p != nil {
		p.grpc = addrs[1]
	}
	return p, addrs[2], err
}

func (o options) describe() string {
	d := fmt.Sprintf("%d rounds × %v windows (after %v warm-up) at %v clients; %d idle connections",
		o.rounds, o.dur, o.warm, o.conc, o.idle)
	if len(o.nodeArgs) > 0 {
		d += fmt.Sprintf("; mcpswarm nodes started with `%s`", strings.Join(o.nodeArgs, " "))
	}
	if len(o.only) > 0 {
		d += "; only the series " + strings.Join(o.only, ", ")
	}
	return d
}
