// Command soak is the sustained-load test behind `make soak` (issue #13):
// SOAK_CLIENTS concurrent MCP clients (default 500) for SOAK_DURATION
// (default 10m) against three real mcpswarm processes on loopback. Each
// client is its own principal (a bearer token of a generated policy) and
// repeatedly opens an MCP connection on a random node, starts a session
// through a random node, drives it (counter clicks, login typing) through
// random nodes, reads the model back, stops the session and closes the
// connection. Every second it records each node's RSS and goroutines and
// the p99 latency of that second. At the end it asserts: no unexpected
// error, every acknowledged write present in the model read back, and each
// node's goroutines and RSS back within 10% of their pre-load baseline
// after a settle period in which nothing but waiting happens. It writes
// docs/bench/soak.{svg,json,md} and its section of docs/BENCHMARKS.md, and
// exits 1 when an assertion failed.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/mcpswarm/mcpswarm/bench/internal/hostinfo"
	"github.com/mcpswarm/mcpswarm/bench/internal/procwait"
)

// knobs are the soak's settings, from the environment.
type knobs struct {
	clients  int
	duration time.Duration
	think    time.Duration // mean pause between a client's calls
	warmup   time.Duration // load before the baseline, so it is of warm processes
	baseline time.Duration // idle sampling before the load
	settle   time.Duration // longest wait for the nodes to come back
	tol      float64       // allowed distance from the baseline
	logDir   string        // where the nodes' output goes instead of memory (SOAK_LOGDIR)
	profiles string        // where heap profiles before and after the load go (SOAK_PROFILES); empty: none
}

func envKnobs() (knobs, error) {
	k := knobs{clients: 500, duration: 10 * time.Minute, think: time.Second,
		warmup: 30 * time.Second, baseline: 30 * time.Second, settle: 4 * time.Minute, tol: 0.10}
	k.logDir = os.Getenv("SOAK_LOGDIR")
	k.profiles = os.Getenv("SOAK_PROFILES")
	if v := os.Getenv("SOAK_CLIENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 5000 {
			return k, fmt.Errorf("SOAK_CLIENTS=%q: want a client count from 1 to 5000", v)
		}
		k.clients = n
	}
	for _, d := range []struct {
		env string
		to  *time.Duration
	}{{"SOAK_DURATION", &k.duration}, {"SOAK_THINK", &k.think}, {"SOAK_WARMUP", &k.warmup}, {"SOAK_BASELINE", &k.baseline}, {"SOAK_SETTLE", &k.settle}} {
		if v := os.Getenv(d.env); v != "" {
			x, err := time.ParseDuration(v)
			if err != nil || x < 0 {
				return k, fmt.Errorf("%s=%q: want a duration such as 90s or 10m", d.env, v)
			}
			*d.to = x
		}
	}
	if k.duration <= 0 || k.baseline < 5*time.Second {
		return k, fmt.Errorf("SOAK_DURATION must be positive and SOAK_BASELINE at least 5s")
	}
	return k, nil
}

func main() {
	bin := flag.String("mcpswarm", "../bin/mcpswarm", "the mcpswarm binary (built by `make build`)")
	docs := flag.String("docs", "", "docs directory to write docs/bench/soak.* and the soak section of BENCHMARKS.md; empty: print only")
	from := flag.String("from", "", "redraw the plot and rewrite the report from a soak.json of an earlier run instead of running")
	flag.Parse()
	if *from != "" {
		if err := rewrite(*from, *docs); err != nil {
			fmt.Fprintln(os.Stderr, "soak:", err)
			os.Exit(1)
		}
		return
	}
	k, err := envKnobs()
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx, *bin, k)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
	if err := rep.write(*docs); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
	if fails := rep.failures(); len(fails) > 0 {
		for _, f := range fails {
			fmt.Fprintln(os.Stderr, "soak: FAIL:", f)
		}
		os.Exit(1)
	}
	fmt.Println("soak: PASS: every assertion held")
}

// rewrite writes the report of an earlier run's soak.json again, e.g. after
// a change of the plot or the wording, without the hour of load.
func rewrite(path, docs string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	return rep.write(docs)
}

func run(ctx context.Context, bin string, k knobs) (*report, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("the mcpswarm binary %s is missing (run `make build`, or pass -mcpswarm): %w", bin, err)
	}
	dir, err := os.MkdirTemp("", "mcpswarm-soak-")
	if err != nil {
		return nil, fmt.Errorf("creating a scratch directory: %w", err)
	}
	defer os.RemoveAll(dir)
	t0 := time.Now()
	cl, err := startCluster(ctx, bin, dir, k.logDir, 3, k.clients, k.profiles != "")
	if err != nil {
		return nil, err
	}
	defer cl.stop()
	var urls []string
	for _, n := range cl.nodes {
		urls = append(urls, n.BaseURL+"/mcp")
	}
	if err := awaitMembers(ctx, cl, urls); err != nil {
		return nil, err
	}
	rep := &report{Started: t0.UTC(), Knobs: k.describe(), Machine: hostinfo.Now(), Tolerance: k.tol, SessionReplicas: sessionReplicas}
	for _, n := range cl.nodes {
		rep.Nodes = append(rep.Nodes, n.Name)
	}
	lat := &latencies{}
	// The sampler scrapes every node's /metrics each second, so it must not
	// be what it measures: asked for gzip, promhttp makes a compress/flate
	// writer (~1 MB) per scrape, and an idle node then cycles its GC every
	// few seconds on that garbage alone, its heap and RSS swinging by
	// megabytes between samples.
	smp := &sampler{nodes: cl.nodes, lat: lat, t0: time.Now(),
		hc: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableCompression: true}}}

	// The cold figures are of processes that have served nothing yet: the
	// first load makes code and the bbolt file's pages resident and sizes
	// the runtime's pools once. That one-time growth is not what a leak
	// check asks about, so the baseline the assertion uses is taken after
	// a short warm-up load and a rest; the cold figures are reported beside
	// it.
	if err := smp.sampleFor(ctx, "cold", 5*time.Second); err != nil {
		return nil, err
	}
	rep.Cold = smp.baseline(5)
	if k.warmup > 0 {
		slog.Info("warm-up", "clients", k.clients, "for", k.warmup)
		wt := &tally{}
		if err := load(ctx, smp, "warm-up", 'w', cl, urls, k, k.warmup, wt, t0); err != nil {
			return nil, err
		}
		rep.WarmUnexpected, rep.WarmLost = wt.nUnexp, wt.nLost
		rep.WarmExamples = append(wt.unexpected, wt.lost...)
		lat.reset() // the warm-up's latencies are not the load's
	}
	slog.Info("baseline: sampling the idle cluster", "for", k.baseline)
	if err := smp.sampleFor(ctx, "baseline", k.baseline); err != nil {
		return nil, err
	}
	rep.Baseline = smp.baseline(int(k.baseline/time.Second) / 2)
	if k.profiles != "" {
		if err := saveHeapProfiles(ctx, cl.nodes, k.profiles, "baseline"); err != nil {
			return nil, err
		}
	}

	slog.Info("load", "clients", k.clients, "for", k.duration, "think", k.think)
	t := &tally{}
	loadStart := time.Now()
	if err := load(ctx, smp, "load", 's', cl, urls, k, k.duration, t, t0); err != nil {
		return nil, err
	}
	rep.LoadSeconds = time.Since(loadStart).Seconds()
	rep.fill(t, lat)

	slog.Info("settle: waiting for goroutines and RSS to return", "at most", k.settle)
	settleStart := time.Now()
	back, err := smp.settle(ctx, rep.Baseline, k.tol, k.settle)
	if err != nil {
		return nil, err
	}
	rep.SettleSeconds = time.Since(settleStart).Seconds()
	if k.profiles != "" {
		if err := saveHeapProfiles(ctx, cl.nodes, k.profiles, "after"); err != nil {
			return nil, err
		}
	}
	rep.After = back
	rep.Series = smp.series
	for _, n := range cl.nodes {
		if !n.Alive() {
			rep.Dead = append(rep.Dead, fmt.Sprintf("%s exited: %v\n%s", n.Name, n.Exit(), procwait.Tail(n.Log(), 20)))
		}
	}
	rep.Elapsed = time.Since(t0).Round(time.Second).String()
	return rep, nil
}

// load runs k.clients soak clients for d (each finishing the cycle under
// way), sampling every second.
func load(ctx context.Context, smp *sampler, phase string, tag byte, cl *cluster, urls []string, k knobs, d time.Duration, t *tally, t0 time.Time) error {
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for i := range k.clients {
		w := &worker{idx: i, token: cl.tokens[i], urls: urls, think: k.think, lat: smp.lat, t: t, tag: tag,
			rng: rand.New(rand.NewPCG(uint64(i)<<8|uint64(tag), uint64(t0.UnixNano()))),
			hc: &http.Client{Timeout: 60 * time.Second,
				Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}}
		wg.Go(func() { w.run(ctx, deadline) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return smp.sampleUntil(ctx, phase, done)
}

// awaitMembers waits until every node lists all three members, so the load
// does not begin on a cluster still forming.
func awaitMembers(ctx context.Context, cl *cluster, urls []string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	hc := &http.Client{Timeout: 5 * time.Second}
	for _, u := range urls {
		c := &conn{hc: hc, token: cl.tokens[0]}
		if err := c.initialize(ctx, u); err != nil {
			return fmt.Errorf("connecting to %s: %w", u, err)
		}
		for {
			var ms struct {
				Members []struct {
					Name string `json:"name"`
				} `json:"members"`
			}
			raw, err := c.callTool(ctx, u, "swarm_members", nil)
			if err == nil {
				if err := jsonUnmarshal(raw, &ms); err == nil && len(ms.Members) == len(cl.nodes) {
					break
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s never saw %d members (last: %s, %v): %w", u, len(cl.nodes), raw, err, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
		if err := c.close(ctx, u); err != nil {
			return err
		}
	}
	return nil
}
