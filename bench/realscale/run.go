package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/mcpswarm/mcpswarm"
	"github.com/mcpswarm/mcpswarm/bench/internal/hostinfo"
	"github.com/mcpswarm/mcpswarm/bench/internal/mcpconn"
	"github.com/mcpswarm/mcpswarm/bench/internal/procnode"
	"github.com/mcpswarm/mcpswarm/bench/internal/procstat"
	"github.com/mcpswarm/mcpswarm/bench/internal/procwait"
	"github.com/mcpswarm/mcpswarm/bench/internal/swarmproc"
	"github.com/mcpswarm/mcpswarm/deploy"
	"github.com/mcpswarm/mcpswarm/internal/scale"
	adminv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/admin/v1"
)

// token is the one principal's bearer token in the generated policy.
const token = "realscale-bench-token"

// result is one run: N processes on one timer set.
type result struct {
	Timers string `json:"timers"`
	N      int    `json:"n"`
	// Load1 is the machine's 1-minute load average as each phase began.
	Load1 map[string]string `json:"load1"`
	// SeedReady is node 1's time from exec until ready, alone: what a
	// process start costs before any joining.
	SeedReady time.Duration `json:"seed_ready"`
	// ConnBytes and ConnDeltas are the replication bytes and deltas the
	// whole swarm sent per MCP connection opened (initialize and
	// initialized: its connection record), StartBytes and StartDeltas per
	// counter session started; both less the rate at rest.
	ConnBytes   float64 `json:"conn_bytes"`
	ConnDeltas  float64 `json:"conn_deltas"`
	StartBytes  float64 `json:"start_bytes"`
	StartDeltas float64 `json:"start_deltas"`
	// AnswerP50/P99: swarm_start answered (the session's records are
	// acknowledged by every live peer by then). ReachP50/P99/Max: from
	// the call until the last node reported the session.
	AnswerP50 time.Duration `json:"answer_p50"`
	AnswerP99 time.Duration `json:"answer_p99"`
	ReachP50  time.Duration `json:"reach_p50"`
	ReachP99  time.Duration `json:"reach_p99"`
	ReachMax  time.Duration `json:"reach_max"`
	Reaches   int           `json:"reaches"`
	// RestCPU is a node's CPU time over wall time at rest, % of a core:
	// median and maximum over the nodes. RestBytes is replication bytes
	// sent per second per node at rest.
	RestCPU    float64 `json:"rest_cpu"`
	RestCPUMax float64 `json:"rest_cpu_max"`
	RestBytes  float64 `json:"rest_bytes"`
	// HeapMiB is the live heap after a GC, RSSMiB the resident set, at
	// rest: medians over the nodes.
	HeapMiB float64 `json:"heap_mib"`
	RSSMiB  float64 `json:"rss_mib"`
	// JoinReady: a new node's exec until its /readyz (joined, pulled from
	// every live peer); JoinListed: until it lists every session.
	JoinReady  time.Duration `json:"join_ready"`
	JoinListed time.Duration `json:"join_listed"`
	// Hidden: from a kill -9 until every live node reported each of the
	// dead node's sessions changed (hidden); HiddenP50 is the median node.
	Hidden    time.Duration `json:"hidden"`
	HiddenP50 time.Duration `json:"hidden_p50"`
	// Approvals is approved calls per second, every live node but the
	// joiner asking at once through 2026-07-28 input_required rounds, each
	// approval a request state spent at the arbiter; Refused counts
	// approved calls refused.
	Approvals float64 `json:"approvals_per_s"`
	Refused   int     `json:"refused"`
}

// run is one swarm of n processes on one timer set, measured phase by
// phase; every process is stopped however it ends.
func run(ctx context.Context, k knobs, timers string, n int) (res result, err error) {
	res = result{Timers: timers, N: n, Load1: map[string]string{"start": hostinfo.LoadAvg()}}
	dir, err := os.MkdirTemp("", "mcpswarm-realscale-")
	if err != nil {
		return res, fmt.Errorf("creating the data directory: %w", err)
	}
	defer os.RemoveAll(dir)
	spec := swarmproc.Spec{Bin: k.bin, Dir: dir, Prefix: "rs", N: n, Token: token, LogDir: k.logDir, DebugAll: true,
		// One copy per session, as the simulation runs it: a dead node's
		// sessions are hidden, not failed over. Every client is
		// 127.0.0.1, so the per-source connection cap is lifted.
		Args: []string{"--session-replicas", "0", "--http-conns-per-source", "0"},
		// One principal holds every node's connections: lift the caps on
		// its live connections (the least recently active would be
		// revoked) and on its initializes per minute.
		Limits: map[string]int{"connections_per_principal": 1 << 20, "initializes_per_minute": 1 << 20},
		// The approvals' tool: a counter session's inc button, asked about.
		Ask: []string{"ask*.inc.click"}}
	if timers == "lan" {
		if spec.GossipHost, err = swarmproc.OffLoopback(); err != nil {
			return res, err
		}
		flags, err := deploy.ManifestTimers()
		if err != nil {
			return res, err
		}
		spec.Args = append(spec.Args, flags...)
	}
	c, err := swarmproc.Start(ctx, spec)
	if err != nil {
		return res, err
	}
	defer c.Stop()
	res.SeedReady = c.Took[0]
	if err := c.AwaitMembers(ctx, 2*time.Minute); err != nil {
		return res, err
	}
	key, err := mcpswarm.LoadClusterKey(c.KeyFile())
	if err != nil {
		return res, err
	}
	r := &runner{k: k, c: c, key: key, hc: &http.Client{Timeout: 30 * time.Second}}
	defer r.close()
	for _, nd := range c.Nodes {
		if err := r.watch(ctx, nd); err != nil {
			return res, err
		}
	}
	if err := r.phases(ctx, &res); err != nil {
		return res, err
	}
	return res, nil
}

// runner holds one run's swarm, its watchers and its MCP connections.
type runner struct {
	k     knobs
	c     *swarmproc.Cluster
	key   []byte
	hc    *http.Client
	ws    []*watcher
	conns []*mcpconn.Conn // one per node (of those it opened), the one that starts sessions
	warm  int
}

func (r *runner) close() {
	for _, w := range r.ws {
		w.close()
	}
}

func (r *runner) watch(ctx context.Context, nd *procnode.Node) error {
	w, err := watch(ctx, nd, r.key)
	if err != nil {
		return err
	}
	r.ws = append(r.ws, w)
	return nil
}

// live is the watchers of the nodes still running.
func (r *runner) live() []*watcher {
	var out []*watcher
	for _, w := range r.ws {
		if w.node.Alive() {
			out = append(out, w)
		}
	}
	return out
}

func (r *runner) phases(ctx context.Context, res *result) error {
	logf := func(msg string, args ...any) {
		slog.Info(msg, append([]any{"timers", res.Timers, "n", res.N}, args...)...)
	}
	// Connections: k.conns per node, their records replicated.
	res.Load1["conns"] = hostinfo.LoadAvg()
	b0, t0, err := r.sent(ctx)
	if err != nil {
		return err
	}
	for _, nd := range r.c.Nodes {
		for i := range r.k.conns {
			cn, err := mcpconn.Dial(ctx, r.hc, nd.BaseURL+"/mcp", token, "bench-realscale")
			if err != nil {
				return fmt.Errorf("%s: %w", nd.Name, err)
			}
			if i == 0 {
				r.conns = append(r.conns, cn)
			}
		}
	}
	connSent, connTook, err := r.since(ctx, b0, t0)
	if err != nil {
		return err
	}
	if err := r.warmUp(ctx); err != nil {
		return err
	}
	for i, cn := range r.conns {
		for s := range r.k.sessions {
			id := fmt.Sprintf("p%02d%d", i+1, s)
			if err := cn.CallTool(ctx, "swarm_start", map[string]any{"app": "counter", "id": id}); err != nil {
				return fmt.Errorf("%s: swarm_start %s: %w", r.c.Nodes[i].Name, id, err)
			}
		}
	}
	logf("load placed; settling", "conns_per_node", r.k.conns, "sessions_per_node", r.k.sessions)
	if err := procwait.Sleep(ctx, r.k.settle); err != nil {
		return err
	}

	// At rest: CPU and replication traffic, then heap and RSS.
	res.Load1["rest"] = hostinfo.LoadAvg()
	if err := r.rest(ctx, res); err != nil {
		return err
	}
	nodes := float64(res.N)
	res.ConnBytes = (connSent.bytes - res.RestBytes*nodes*connTook.Seconds()) / float64(r.k.conns*res.N)
	res.ConnDeltas = connSent.deltas / float64(r.k.conns*res.N)
	logf("at rest", "cpu_pct", res.RestCPU, "heap_mib", res.HeapMiB, "rss_mib", res.RSSMiB, "rest_bytes_per_s", res.RestBytes)

	// Reach: sessions started one at a time from random nodes.
	res.Load1["reach"] = hostinfo.LoadAvg()
	if err := r.reach(ctx, res); err != nil {
		return err
	}
	logf("reach", "p50", res.ReachP50, "p99", res.ReachP99, "answer_p50", res.AnswerP50, "bytes_per_start", res.StartBytes)

	// A node joins.
	res.Load1["join"] = hostinfo.LoadAvg()
	if err := r.join(ctx, res); err != nil {
		return err
	}
	logf("joined", "ready", res.JoinReady, "listed", res.JoinListed)

	// A node dies.
	res.Load1["kill"] = hostinfo.LoadAvg()
	if err := r.kill(ctx, res); err != nil {
		return err
	}
	logf("killed", "hidden", res.Hidden, "hidden_p50", res.HiddenP50)

	// Approvals, once every node has declared the dead one dead (until
	// then a write waits out its lease).
	if err := r.awaitDead(ctx); err != nil {
		return err
	}
	res.Load1["approve"] = hostinfo.LoadAvg()
	if err := r.approvals(ctx, res); err != nil {
		return err
	}
	logf("approvals", "per_s", res.Approvals, "refused", res.Refused)
	return nil
}

// warmUp starts sessions on node 1 until every live watcher reported
// one: the event streams are live from then on.
func (r *runner) warmUp(ctx context.Context) error {
	for range 5 {
		r.warm++
		id := fmt.Sprintf("w%d", r.warm)
		since := time.Now()
		if err := r.conns[0].CallTool(ctx, "swarm_start", map[string]any{"app": "counter", "id": id}); err != nil {
			return fmt.Errorf("swarm_start %s: %w", id, err)
		}
		if _, err := lastChange(ctx, r.live(), []string{id}, since, 3*time.Second); err == nil {
			return nil
		}
	}
	return fmt.Errorf("the admin event streams never all reported a new session")
}

// traffic is replication bytes and deltas sent, summed over live nodes.
type traffic struct{ bytes, deltas float64 }

func (r *runner) sent(ctx context.Context) (traffic, time.Time, error) {
	var t traffic
	for _, nd := range r.c.Live() {
		m, err := swarmproc.Metrics(ctx, r.hc, nd)
		if err != nil {
			return t, time.Time{}, err
		}
		t.bytes += m["mcpswarm_cluster_bytes_sent_total"]
		t.deltas += m["mcpswarm_cluster_deltas_sent_total"]
	}
	return t, time.Now(), nil
}

// since is the traffic since before (read at t0) and the time passed.
func (r *runner) since(ctx context.Context, before traffic, t0 time.Time) (traffic, time.Duration, error) {
	after, t1, err := r.sent(ctx)
	return traffic{after.bytes - before.bytes, after.deltas - before.deltas}, t1.Sub(t0), err
}

// rest measures k.rest of nothing happening: every node's CPU time and
// the swarm's replication traffic, then each node's live heap (after a
// GC it is asked for) and RSS.
func (r *runner) rest(ctx context.Context, res *result) error {
	nodes := r.c.Live()
	ticks0 := make([]int64, len(nodes))
	for i, nd := range nodes {
		var err error
		if ticks0[i], err = procstat.CPUTicks(nd.PID()); err != nil {
			return fmt.Errorf("%s: %w", nd.Name, err)
		}
	}
	b0, t0, err := r.sent(ctx)
	if err != nil {
		return err
	}
	if err := procwait.Sleep(ctx, r.k.rest); err != nil {
		return err
	}
	sent, took, err := r.since(ctx, b0, t0)
	if err != nil {
		return err
	}
	var cpu, heap, rss []float64
	for i, nd := range nodes {
		ticks, err := procstat.CPUTicks(nd.PID())
		if err != nil {
			return fmt.Errorf("%s: %w", nd.Name, err)
		}
		cpu = append(cpu, 100*float64(ticks-ticks0[i])/procstat.UserHZ/took.Seconds())
	}
	for _, nd := range nodes {
		h, err := r.liveHeap(ctx, nd)
		if err != nil {
			return err
		}
		kb, err := procstat.RSSKB(nd.PID())
		if err != nil {
			return fmt.Errorf("%s: %w", nd.Name, err)
		}
		heap, rss = append(heap, h/(1<<20)), append(rss, float64(kb)/1024)
	}
	res.RestCPU, res.RestCPUMax = median(cpu), slices.Max(cpu)
	res.RestBytes = sent.bytes / took.Seconds() / float64(len(nodes))
	res.HeapMiB, res.RSSMiB = median(heap), median(rss)
	return nil
}

// liveHeap asks nd for a heap profile with a GC first (pprof's gc=1) and
// then reads go_memstats_heap_alloc_bytes: the heap still reachable.
func (r *runner) liveHeap(ctx context.Context, nd *procnode.Node) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+nd.Debug+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return 0, fmt.Errorf("building the heap request: %w", err)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("collecting %s's garbage: %w", nd.Name, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	m, err := swarmproc.Metrics(ctx, r.hc, nd)
	if err != nil {
		return 0, err
	}
	return m["go_memstats_heap_alloc_bytes"], nil
}

// reach starts k.writes sessions one at a time, each through a random
// node, and times each until every live node reported it.
func (r *runner) reach(ctx context.Context, res *result) error {
	b0, t0, err := r.sent(ctx)
	if err != nil {
		return err
	}
	ws := r.live()
	var answer, reach []time.Duration
	for w := range r.k.writes {
		i := rand.IntN(len(r.conns))
		id := fmt.Sprintf("r%03d", w)
		began := time.Now()
		if err := r.conns[i].CallTool(ctx, "swarm_start", map[string]any{"app": "counter", "id": id}); err != nil {
			return fmt.Errorf("%s: swarm_start %s: %w", r.c.Nodes[i].Name, id, err)
		}
		answer = append(answer, time.Since(began))
		seen, err := lastChange(ctx, ws, []string{id}, began, 30*time.Second)
		if err != nil {
			return err
		}
		reach = append(reach, slices.MaxFunc(seen, time.Time.Compare).Sub(began))
	}
	sent, took, err := r.since(ctx, b0, t0)
	if err != nil {
		return err
	}
	res.StartBytes = (sent.bytes - res.RestBytes*float64(res.N)*took.Seconds()) / float64(r.k.writes)
	res.StartDeltas = sent.deltas / float64(r.k.writes)
	res.AnswerP50, res.AnswerP99 = scale.Quantile(answer, 0.5), scale.Quantile(answer, 0.99)
	res.ReachP50, res.ReachP99, res.ReachMax, res.Reaches = scale.Quantile(reach, 0.5), scale.Quantile(reach, 0.99), scale.Quantile(reach, 1), len(reach)
	return nil
}

// join starts one more node and times it until ready and until it lists
// every session.
func (r *runner) join(ctx context.Context, res *result) error {
	want, err := r.sessions(ctx, r.ws[0])
	if err != nil {
		return err
	}
	began := time.Now()
	nd, err := r.c.Add(ctx)
	if err != nil {
		return err
	}
	res.JoinReady = time.Since(began)
	if err := r.watch(ctx, nd); err != nil {
		return err
	}
	w := r.ws[len(r.ws)-1]
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		got, err := r.sessions(ctx, w)
		if err == nil && len(got) >= len(want) {
			break
		}
		if err := procwait.Sleep(ctx, 2*time.Millisecond); err != nil {
			return fmt.Errorf("%s lists %d of %d sessions (%v): %w", nd.Name, len(got), len(want), err, ctx.Err())
		}
	}
	res.JoinListed = time.Since(began)
	return r.warmUp(ctx)
}

// sessions lists the sessions w's node shows.
func (r *runner) sessions(ctx context.Context, w *watcher) ([]*adminv1.Session, error) {
	resp, err := w.admin.ListSessions(ctx, &adminv1.ListSessionsRequest{})
	return resp.GetSessions(), err
}

// kill kills node 2 with SIGKILL and times until every live node reported
// each of its sessions hidden; then checks that none lists them.
func (r *runner) kill(ctx context.Context, res *result) error {
	victim := r.c.Nodes[1]
	all, err := r.sessions(ctx, r.ws[0])
	if err != nil {
		return err
	}
	var ids []string
	for _, s := range all {
		if s.GetOwnerNode() == victim.Name {
			ids = append(ids, s.GetId())
		}
	}
	if len(ids) == 0 {
		return fmt.Errorf("%s owns no session to hide", victim.Name)
	}
	began := time.Now()
	victim.Kill()
	ws := r.live()
	seen, err := lastChange(ctx, ws, ids, began, time.Minute)
	if err != nil {
		return err
	}
	var took []time.Duration
	for _, t := range seen {
		took = append(took, t.Sub(began))
	}
	res.Hidden, res.HiddenP50 = scale.Quantile(took, 1), scale.Quantile(took, 0.5)
	for _, w := range ws {
		listed, err := r.sessions(ctx, w)
		if err != nil {
			return err
		}
		for _, s := range listed {
			if s.GetOwnerNode() == victim.Name {
				return fmt.Errorf("%s reported %s changed but still lists it on %s", w.node.Name, s.GetId(), victim.Name)
			}
		}
	}
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
