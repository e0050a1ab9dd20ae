package scale

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/internal/memnet"
	mcpfront "github.com/mcpswarm/mcpswarm/mcp"
)

// Load is the fixed load every node carries, whatever N.
type Load struct {
	// Sessions and Conns are the counter sessions and connection records
	// each node starts and keeps.
	Sessions, Conns int
	// Clicks is button clicks per second per node, on its own sessions,
	// while the load runs.
	Clicks float64
	// Churn is connections initialized and DELETEd per second per node
	// while the load runs (each one a Put and, a moment later, a Delete).
	Churn float64
	// Approvers is how many clients on each node spend fresh request
	// states at once during the approval phase.
	Approvers int
}

// DefaultLoad is the load bench/scale runs with.
func DefaultLoad() Load {
	return Load{Sessions: 5, Conns: 20, Clicks: 1, Churn: 0.5, Approvers: 1}
}

// Options says what to run.
type Options struct {
	N    int
	Load Load
	// Writes is how many connection-record writes measure the bytes and
	// messages of one write (clock frozen, swarm otherwise quiet).
	Writes int
	// LoadFor is how long the load runs while writes are timed to every
	// node (one write every ReachEvery, from a random node).
	LoadFor, ReachEvery time.Duration
	// ApproveFor is how long the approval phase runs.
	ApproveFor time.Duration
	// RestFor is each of the two at-rest windows (clock frozen, clock
	// moving).
	RestFor time.Duration
	// Settle is how long the swarm rests before the heap is read, so
	// what is in flight lands.
	Settle time.Duration
	// Extra is how many extra connection records and sessions measure
	// what one costs on every node's heap.
	Extra int
	// Logf, when set, receives progress.
	Logf func(format string, args ...any)
	// AtRest, when set, is called once the heap at rest is read (a heap
	// profile).
	AtRest func()
	// Logger, when set, receives the nodes' cluster and swarm logs.
	Logger *slog.Logger
}

// Result is what one run measured. Durations are wall time (the
// cluster's clock follows it while the load runs).
type Result struct {
	N    int  `json:"n"`
	Load Load `json:"load"`
	// Cores is GOMAXPROCS; Load1 the machine's 1-minute load average at
	// the start (0 where unknown).
	Cores int     `json:"cores"`
	Load1 float64 `json:"load1"`

	// WriteBytes and WriteMsgs are the gRPC bytes and writes the whole
	// swarm sent per connection-record write (the record, its
	// acknowledgements, and the revision pings they cause); per peer,
	// divide by N−1.
	WriteBytes float64 `json:"write_bytes"`
	WriteMsgs  float64 `json:"write_msgs"`
	// WriteCPU is the process's CPU time per write in that phase (every
	// node's share of one write, the fan-out's whole cost), less the
	// frozen swarm's CPU at rest, and
	// AloneP50, AloneP99 how long those writes took to reach every node:
	// one write at a time, nothing else moving but memberlist's timers.
	WriteCPU time.Duration `json:"write_cpu"`
	AloneP50 time.Duration `json:"alone_p50"`
	AloneP99 time.Duration `json:"alone_p99"`
	// ReachP50 and ReachP99: from a connection-record write until every
	// live node has it (Put answers only then), under the load.
	ReachP50 time.Duration `json:"reach_p50"`
	ReachP99 time.Duration `json:"reach_p99"`
	ReachMax time.Duration `json:"reach_max"`
	Reaches  int           `json:"reaches"`
	// Lagged counts the (write, node) pairs where the write was answered
	// without the node's acknowledgement, after the AckTimeout, once the
	// node's lease had lapsed (it refuses the connection until caught up).
	Lagged int `json:"lagged"`
	// LoadCPU is the process's CPU time over wall time per node while
	// the load ran (the harness's own goroutines included): a fraction
	// of a core.
	LoadCPU float64 `json:"load_cpu"`
	// RestReachP50 and RestReachP99 are the same with no load but the
	// timed writes: what the design costs, where ReachP99 may be what
	// N nodes' load on a few shared cores costs.
	RestReachP50 time.Duration `json:"rest_reach_p50"`
	RestReachP99 time.Duration `json:"rest_reach_p99"`
	// CatchUp: from a new node's Start until it holds every other node's
	// sessions and connection records and is in sync.
	CatchUp time.Duration `json:"catch_up"`
	// Hidden: from a node's kill until no live node shows its sessions
	// as available.
	Hidden time.Duration `json:"hidden"`
	// Approvals per second, every node asking, each decided by the
	// state's holders (swarm.Nonces); Refused counts fresh states refused
	// because a node that must be asked could not be in time (fail
	// closed).
	Approvals float64 `json:"approvals_per_s"`
	Refused   int64   `json:"refused"`
	// Approved counts the states accepted, and SpentHeld the spent-state
	// entries all live nodes hold once they settled: SpentHeld/Approved
	// is what one approval costs the swarm in entries.
	Approved  int64 `json:"approved"`
	SpentHeld int   `json:"spent_held"`

	// HeapPerNode is live heap after GC at rest, divided by N, less what
	// the process held before the swarm started and less the in-memory
	// connections' buffers (a kernel's, with sockets).
	HeapPerNode float64 `json:"heap_per_node"`
	// PeerConns is the gRPC connections a node holds (dialed or
	// accepted), on average.
	PeerConns float64 `json:"peer_conns"`
	// ConnCost and SessionCost are the heap one more connection record
	// or session in the swarm adds to each node, on average over the
	// nodes; SessionActor is what a session costs its owner alone.
	ConnCost float64 `json:"conn_cost"`
	// LinkCost is what one gRPC connection between two nodes costs, both
	// ends; each node holds both ends' worth per peer (it dials every
	// peer and every peer dials it).
	LinkCost     float64 `json:"link_cost"`
	SessionCost  float64 `json:"session_cost"`
	SessionActor float64 `json:"session_actor"`
	// Entries held per node at rest: sessions, connection records,
	// revocations and spent request states (of every node).
	Sessions, Conns, Revocations, Nonces int

	// RestCPU is the process's CPU time over wall time per node at rest
	// with the cluster's clock moving (heartbeats, leases, anti-entropy
	// and memberlist), RestCPUFrozen with it frozen (memberlist and gRPC
	// only); their difference is the cluster's own timers. Fractions of
	// a core.
	RestCPU       float64 `json:"rest_cpu"`
	RestCPUFrozen float64 `json:"rest_cpu_frozen"`
	// RestGRPC and RestGossip are messages per second per node at rest,
	// clock moving.
	RestGRPC   float64 `json:"rest_grpc_msgs"`
	RestGossip float64 `json:"rest_gossip_msgs"`
	RestBytes  float64 `json:"rest_bytes"` // gRPC + gossip bytes per second per node
}

// Run builds a swarm of o.N nodes, puts the load on it and measures it.
// The last node starts after the others have their load, to time its
// catch-up; the second is killed before the approvals, which run last,
// on N−1 nodes.
func Run(ctx context.Context, o Options) (res Result, err error) {
	if o.N < 3 {
		return res, fmt.Errorf("scale: N must be at least 3, got %d", o.N)
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	res.N, res.Load, res.Cores, res.Load1 = o.N, o.Load, runtime.GOMAXPROCS(0), loadAverage()
	base := liveHeap()

	f := newFleet(o.N, o.Logger)
	defer f.stop()
	// The clocks stand still while the nodes start one after the other
	// and link up: N nodes joining at once on a few shared cores would
	// otherwise miss heartbeats by seconds, cut their streams as stalled
	// and pull everything again, which the design's timers are not set
	// for and nothing here measures.
	for i := range o.N - 1 {
		if _, err := f.start(ctx, i); err != nil {
			return res, err
		}
	}
	if err := await(ctx, time.Duration(o.N)*time.Second+20*time.Second, 20*time.Millisecond, "converged", f.converged); err != nil {
		return res, err
	}
	f.pace.run()
	logf("N=%d: %d nodes converged", o.N, o.N-1)
	if err := placeLoad(ctx, f.live(), o.Load); err != nil {
		return res, err
	}

	// The joiner: until it holds what the others hold.
	want := (o.N - 1) * o.Load.Sessions
	wantConns := (o.N - 1) * o.Load.Conns
	began := time.Now()
	joiner, err := f.start(ctx, o.N-1)
	if err != nil {
		return res, err
	}
	if err := await(ctx, 60*time.Second, time.Millisecond, "caught up", func() error {
		fp := joiner.sw.Footprint()
		if fp.Sessions < want || fp.Conns < wantConns {
			return fmt.Errorf("%d of %d sessions, %d of %d connections", fp.Sessions, want, fp.Conns, wantConns)
		}
		return joiner.cl.InSync()
	}); err != nil {
		return res, err
	}
	res.CatchUp = time.Since(began)
	logf("N=%d: joiner caught up in %v", o.N, res.CatchUp)
	if err := await(ctx, 30*time.Second, 20*time.Millisecond, "converged with the joiner", f.converged); err != nil {
		return res, err
	}
	if err := placeLoad(ctx, []*node{joiner}, o.Load); err != nil {
		return res, err
	}

	// At rest: heap, then CPU and traffic with the clock frozen and
	// moving.
	time.Sleep(o.Settle)
	res.PeerConns = 2 * float64(f.net.Conns()) / float64(o.N)
	res.HeapPerNode = (liveHeap() - base - f.pipeHeap()) / float64(o.N)
	if o.AtRest != nil {
		o.AtRest()
	}
	fp := f.nodes[0].sw.Footprint()
	res.Sessions, res.Conns = fp.Sessions, fp.Conns
	f.pace.stop()
	res.RestCPUFrozen, _ = restWindow(f, o.RestFor)
	f.pace.run()
	var rest memnet.Traffic
	res.RestCPU, rest = restWindow(f, o.RestFor)
	secs := o.RestFor.Seconds() * float64(o.N)
	res.RestGRPC, res.RestGossip = float64(rest.GRPCWrites)/secs, float64(rest.GossipMessages)/secs
	res.RestBytes = float64(rest.GRPCBytes+rest.GossipBytes) / secs
	logf("N=%d: heap/node %.0f KiB, rest CPU/node %.2f%% (frozen %.2f%%)", o.N, res.HeapPerNode/1024, 100*res.RestCPU, 100*res.RestCPUFrozen)

	// What one more connection record and session cost every node.
	if err := extraCosts(ctx, f, o.Extra, o.Settle, &res); err != nil {
		return res, err
	}

	// Bytes per write, clock frozen: nothing but the writes moves gRPC.
	f.pace.stop()
	before, cpu0, wall0 := f.net.SentTotal(), cpuTime(), time.Now()
	nodes := f.live()
	var alone []time.Duration
	for w := range o.Writes {
		nd := nodes[w%len(nodes)]
		began := time.Now()
		nd.sw.Conns().Put(connInfo(nd, fmt.Sprintf("w-%s-%d", nd.name, w)))
		alone = append(alone, time.Since(began))
	}
	sent := f.net.SentTotal().Sub(before)
	// Less what the frozen swarm spends anyway (memberlist), as measured
	// at rest.
	idle := time.Duration(res.RestCPUFrozen * float64(len(nodes)) * float64(time.Since(wall0)))
	res.WriteCPU = max(cpuTime()-cpu0-idle, 0) / time.Duration(o.Writes)
	res.WriteBytes, res.WriteMsgs = float64(sent.GRPCBytes)/float64(o.Writes), float64(sent.GRPCWrites)/float64(o.Writes)
	res.AloneP50, res.AloneP99 = Quantile(alone, 0.5), Quantile(alone, 0.99)
	f.pace.run()
	logf("N=%d: %.0f bytes, %.1f messages, %v of CPU per write; alone, reach p50 %v p99 %v", o.N, res.WriteBytes, res.WriteMsgs, res.WriteCPU, res.AloneP50, res.AloneP99)

	// At rest: time a write to every node.
	lat, lagged, err := underLoad(ctx, f, o, false)
	if err != nil {
		return res, err
	}
	res.RestReachP50, res.RestReachP99 = Quantile(lat, 0.5), Quantile(lat, 0.99)
	logf("N=%d: at rest, reach p50 %v p99 %v over %d writes; answered without %v", o.N, res.RestReachP50, res.RestReachP99, len(lat), lagged)

	// A dead node: until nobody shows its sessions as available.
	victim := f.nodes[1]
	killed := time.Now()
	f.kill(victim)
	if err := await(ctx, 60*time.Second, time.Millisecond, "the dead node's sessions hidden", func() error {
		for _, nd := range f.live() {
			for _, id := range victim.sessions {
				if info, ok := nd.sw.Lookup(id); ok && info.Available {
					return fmt.Errorf("%s still shows %s", nd.name, id)
				}
			}
		}
		return nil
	}); err != nil {
		return res, err
	}
	res.Hidden = time.Since(killed)
	logf("N=%d: dead node hidden everywhere after %v", o.N, res.Hidden)

	// Until every node has declared it dead: until then, a write waits
	// out its lease (a window the approvals must not measure).
	if err := await(ctx, 60*time.Second, 20*time.Millisecond, "the dead node declared dead", func() error {
		for _, nd := range f.live() {
			if m, ok := nd.cl.Member(victim.name); ok && m.State != cluster.StateDead {
				return fmt.Errorf("%s sees %s as %v", nd.name, victim.name, m.State)
			}
		}
		return nil
	}); err != nil {
		return res, err
	}

	// Approvals, then until no node copies spent states any more (the
	// load must not start behind a backlog of copies).
	res.Approvals, res.Approved, res.Refused = approvals(ctx, f, o)
	if err := await(ctx, 120*time.Second, 200*time.Millisecond, "every spent state copied", f.noncesSettled(&res.SpentHeld)); err != nil {
		return res, err
	}
	logf("N=%d: %.0f approvals/s, %d refused; %d entries held for %d approved", o.N, res.Approvals, res.Refused, res.SpentHeld, res.Approved)
	// Last, under load: time a write to every node. With N nodes'
	// load on the machine's cores the process may saturate: LoadCPU says.
	cpu0, wall0 = cpuTime(), time.Now()
	lat, lagged, err = underLoad(ctx, f, o, true)
	if err != nil {
		return res, err
	}
	res.LoadCPU = cpuTime().Seconds() - cpu0.Seconds()
	res.LoadCPU /= time.Since(wall0).Seconds() * float64(len(f.live()))
	res.Reaches, res.Lagged = len(lat), len(lagged)
	res.ReachP50, res.ReachP99, res.ReachMax = Quantile(lat, 0.5), Quantile(lat, 0.99), Quantile(lat, 1)
	logf("N=%d: reach p50 %v p99 %v max %v over %d writes; answered without %v", o.N, res.ReachP50, res.ReachP99, res.ReachMax, len(lat), lagged)

	fp = f.nodes[0].sw.Footprint()
	res.Revocations = fp.ConnsRevoked + fp.RevokedElsewhere
	res.Nonces = fp.Nonces
	f.stop()

	// A session's actor and a link alone, once the swarm has gone: what
	// they leave behind (package caches, connections gRPC closes in the
	// background) must not count as the swarm's.
	res.SessionActor, err = actorCost(ctx, o.Extra)
	if err != nil {
		return res, err
	}
	res.LinkCost, err = linkCost(ctx, o.Extra/4)
	return res, err
}

// connInfo is a connection record as an initialize writes it.
func connInfo(nd *node, id string) mcpfront.ConnInfo {
	return mcpfront.ConnInfo{ID: id, Node: nd.name, Principal: "u-" + nd.name, ProtocolVersion: "2025-11-25",
		ClientInfo: mcp.Implementation{Name: "scale", Version: "1"}}
}

// placeLoad starts each node's sessions and connection records, the
// nodes in parallel.
func placeLoad(ctx context.Context, nodes []*node, l Load) error {
	errs := make(chan error, len(nodes))
	var wg sync.WaitGroup
	for _, nd := range nodes {
		wg.Go(func() {
			if err := startSessions(ctx, nd, l.Sessions); err != nil {
				errs <- err
				return
			}
			for k := range l.Conns {
				nd.sw.Conns().Put(connInfo(nd, fmt.Sprintf("c-%s-%d", nd.name, k)))
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// restWindow measures CPU per node and traffic over d with nothing but
// timers running.
func restWindow(f *fleet, d time.Duration) (float64, memnet.Traffic) {
	cpu0, t0, sent0 := cpuTime(), time.Now(), f.net.SentTotal()
	time.Sleep(d)
	cpu, wall := cpuTime()-cpu0, time.Since(t0)
	return cpu.Seconds() / wall.Seconds() / float64(len(f.live())), f.net.SentTotal().Sub(sent0)
}

// extraCosts adds o.Extra connection records and sessions on the first
// node and reads what each costs every node's heap.
func extraCosts(ctx context.Context, f *fleet, extra int, settle time.Duration, res *Result) error {
	if extra == 0 {
		return nil
	}
	nd, n := f.nodes[0], float64(len(f.live()))
	h0 := liveHeap() - f.pipeHeap()
	for k := range extra {
		nd.sw.Conns().Put(connInfo(nd, fmt.Sprintf("x-%d", k)))
	}
	time.Sleep(settle)
	h1 := liveHeap() - f.pipeHeap()
	res.ConnCost = (h1 - h0) / float64(extra) / n
	if err := startSessions(ctx, nd, extra); err != nil {
		return err
	}
	time.Sleep(settle)
	h2 := liveHeap() - f.pipeHeap()
	res.SessionCost = (h2 - h1) / float64(extra) / n
	return nil
}

// underLoad runs the clicks and the churn on every node for o.LoadFor and
// times connection-record writes from random nodes meanwhile; without
// load, it only times the writes.
// A node that had not acknowledged a write when it was answered is listed
// in lagged, once per write.
func underLoad(ctx context.Context, f *fleet, o Options, load bool) (lat []time.Duration, lagged []string, err error) {
	if !load {
		o.Load.Clicks, o.Load.Churn = 0, 0
	}
	ctx, cancel := context.WithTimeout(ctx, o.LoadFor)
	defer cancel()
	var wg sync.WaitGroup
	var failed atomic.Value
	for _, nd := range f.live() {
		if o.Load.Clicks > 0 && len(nd.sessions) > 0 {
			wg.Go(func() {
				if err := clicks(ctx, nd, o.Load.Clicks); err != nil {
					failed.Store(err)
				}
			})
		}
		if o.Load.Churn > 0 {
			wg.Go(func() { churn(ctx, nd, o.Load.Churn) })
		}
	}
	nodes := f.live()
	tick := time.NewTicker(o.ReachEvery)
	defer tick.Stop()
	for k := 0; ; k++ {
		select {
		case <-ctx.Done():
			wg.Wait()
			if err, ok := failed.Load().(error); ok {
				return nil, nil, err
			}
			return lat, lagged, nil
		case <-tick.C:
		}
		from := nodes[rand.IntN(len(nodes))]
		id := fmt.Sprintf("r-%s-%d", from.name, k)
		began := time.Now()
		from.sw.Conns().Put(connInfo(from, id))
		took := time.Since(began)
		for _, nd := range nodes {
			if _, ok := nd.sw.Conns().Get(id); ok {
				continue
			}
			// Answered without this node's acknowledgement, once its
			// lease had lapsed: it must refuse the connection until it
			// has caught up (the consistency contract), never serve it
			// without the write.
			if nd.sw.Conns().CanServe(id) == nil {
				return nil, nil, fmt.Errorf("write %s answered on %s, but %s serves the connection without it", id, from.name, nd.name)
			}
			lagged = append(lagged, nd.name)
		}
		lat = append(lat, took)
	}
}

// clicks clicks nd's sessions' buttons at rate per second, in turn.
func clicks(ctx context.Context, nd *node, rate float64) error {
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for k := 0; ; k++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		id := nd.sessions[k%len(nd.sessions)]
		tool, err := clickTool(nd, id)
		if err != nil {
			return err
		}
		if _, err := nd.sw.Call(ctx, user(nd, k%len(nd.sessions)), id, tool, nil); err != nil && ctx.Err() == nil {
			return fmt.Errorf("clicking %s on %s: %w", tool, nd.name, err)
		}
	}
}

// churn initializes a connection and DELETEs the one before, at rate per
// second.
func churn(ctx context.Context, nd *node, rate float64) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	prev := ""
	for k := 0; ; k++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		id := fmt.Sprintf("ch-%s-%d", nd.name, k)
		nd.sw.Conns().Put(connInfo(nd, id))
		if prev != "" {
			nd.sw.Conns().Delete(prev)
		}
		prev = id
	}
}

// approvals has o.Load.Approvers clients on every node spend fresh request
// states for o.ApproveFor and returns how many were accepted per second,
// in all, and how many were refused because a node that decides could not
// be asked.
func approvals(ctx context.Context, f *fleet, o Options) (float64, int64, int64) {
	ctx, cancel := context.WithTimeout(ctx, o.ApproveFor)
	defer cancel()
	var done, refused atomic.Int64
	var wg sync.WaitGroup
	began := time.Now()
	expires := began.Add(time.Hour)
	for _, nd := range f.live() {
		for c := range o.Load.Approvers {
			wg.Go(func() {
				for k := 0; ctx.Err() == nil; k++ {
					// A fresh nonce is never spent: "already" means the
					// arbiter could not be asked (fail closed).
					if nd.sw.Nonces().Spend(context.WithoutCancel(ctx), "scale", fmt.Sprintf("%s-%d-%d", nd.name, c, k), expires) {
						refused.Add(1)
						continue
					}
					done.Add(1)
				}
			})
		}
	}
	wg.Wait()
	return float64(done.Load()) / time.Since(began).Seconds(), done.Load(), refused.Load()
}

// Quantile is the q-quantile of d (nearest rank; 0 for none).
func Quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// liveHeap is the heap in use after two collections.
func liveHeap() float64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc)
}
