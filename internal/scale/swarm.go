// Package scale runs a swarm of N nodes in one process, on the in-memory
// network (internal/memnet) and a fake clock for the cluster's own timers,
// under a fixed load per node, and measures what a node costs as N grows:
// bytes and messages per registry write, heap per node, how long a write
// takes to reach every node, how long a joining node takes to catch up,
// how long a dead node's sessions stay visible, approvals per second
// through the arbiter, and what a node spends at rest.
//
// bench/scale runs it for N = 3 … 64 and draws the charts of
// docs/bench/scale.md; TestScaleSmoke runs it small.
package scale

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"google.golang.org/grpc"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/internal/memnet"
	"github.com/mcpswarm/mcpswarm/session"
	"github.com/mcpswarm/mcpswarm/session/apps"
	"github.com/mcpswarm/mcpswarm/swarm"
)

var clusterKey = []byte("0123456789abcdef0123456789abcdef")

// node is one swarm member: cluster, swarm, session manager and gRPC
// server, as the contract tests build them (swarm/contract_test.go).
type node struct {
	name string
	cl   *cluster.Cluster
	sw   *swarm.Swarm
	mgr  *session.Manager
	srv  *grpc.Server
	// sessions are the ids of the sessions this node started.
	sessions []string
	dead     bool
}

// fleet is the swarm under test and its clocks.
type fleet struct {
	net *memnet.Network
	// clocks are the nodes' clocks, by index, paused and resumed together
	// by the pacer. One clock per node: a node resets a timer on every
	// message, and the nodes would contend for one clock's lock.
	clocks []*pausableClock
	pace   *pacer
	names  []string
	log    *slog.Logger // nil: discard

	mu    sync.Mutex
	nodes []*node
}

func newFleet(n int, log *slog.Logger) *fleet {
	var names []string
	for i := 1; i <= n; i++ {
		names = append(names, fmt.Sprintf("n%d", i))
	}
	clocks := make([]*pausableClock, n)
	for i := range clocks {
		clocks[i] = newPausableClock()
	}
	return &fleet{net: memnet.NewBuffered(pipeBuffer, names...), clocks: clocks, pace: newPacer(clocks), names: names, log: log}
}

// pipeBuffer is each in-memory gRPC connection's buffer each way. It is
// heap here that a kernel would hold for a socket, so the heap figures
// leave it out (pipeHeap).
const pipeBuffer = 64 << 10

// pipeHeap is the heap the open in-memory connections' buffers take.
func (f *fleet) pipeHeap() float64 { return float64(f.net.Conns()) * 2 * pipeBuffer }

// start starts node i (0-based), joining n1 unless it is n1.
func (f *fleet) start(ctx context.Context, i int) (*node, error) {
	name := f.names[i]
	ep := f.net.Node(name)
	cfg := cluster.LocalConfig()
	cfg.Name, cfg.Key = name, clusterKey
	cfg.GossipAddr, cfg.GRPCAddr = ep.GossipAddr, ep.GRPCAddr
	cfg.Memberlist = func(mc *memberlist.Config) {
		cluster.LocalMemberlist(mc)
		mc.Transport = ep.Transport()
	}
	cfg.Dialer = ep.Dial
	cfg.Clock = f.clocks[i]
	var log *slog.Logger
	if f.log != nil {
		log = f.log.With("node", name)
		cfg.Logger = log
	}
	// A kill must hide the node at once and keep its entries hidden
	// while the harness looks: deletion is not what is measured.
	cfg.DeadGrace = time.Hour
	if i > 0 {
		cfg.Join = []string{f.net.Node(f.names[0]).GossipAddr}
	}
	cl, err := cluster.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating cluster node %s: %w", name, err)
	}
	reg := session.NewRegistry()
	if err := apps.Register(reg); err != nil {
		return nil, err
	}
	mgr, err := session.NewManager(session.ManagerConfig{Registry: reg, Startable: []string{"counter"}})
	if err != nil {
		return nil, err
	}
	sw, err := swarm.New(swarm.Config{Cluster: cl, Manager: mgr, Logger: log})
	if err != nil {
		return nil, err
	}
	srv := grpc.NewServer(cl.ServerOptions()...)
	cl.Register(srv)
	ln, err := ep.Serving()
	if err != nil {
		return nil, err
	}
	go func() { _ = srv.Serve(ln) }()
	if err := cl.Start(ctx); err != nil {
		srv.Stop()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	if err := sw.StartPublishing(ctx); err != nil {
		_ = cl.Stop(ctx)
		srv.Stop()
		return nil, fmt.Errorf("publishing on %s: %w", name, err)
	}
	nd := &node{name: name, cl: cl, sw: sw, mgr: mgr, srv: srv}
	f.mu.Lock()
	f.nodes = append(f.nodes, nd)
	f.mu.Unlock()
	return nd, nil
}

// kill stops nd as a crash would: no leave, its gRPC port closed.
func (f *fleet) kill(nd *node) {
	nd.dead = true
	nd.sw.StopPublishing()
	nd.cl.Kill()
	nd.srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = nd.mgr.Close(ctx)
}

// stop stops the pacer and every node still running, in parallel; a
// second call does nothing. The clocks stand still first, so nodes still
// running while others stop do not cut their streams as stalled.
func (f *fleet) stop() {
	f.pace.stop()
	f.mu.Lock()
	nodes := f.nodes
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, nd := range nodes {
		if nd.dead {
			continue
		}
		nd.dead = true
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			nd.sw.StopPublishing()
			_ = nd.cl.Stop(ctx)
			nd.srv.Stop()
			_ = nd.mgr.Close(ctx)
		})
	}
	wg.Wait()
}

// live returns the nodes not killed.
func (f *fleet) live() []*node {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*node
	for _, nd := range f.nodes {
		if !nd.dead {
			out = append(out, nd)
		}
	}
	return out
}

// converged reports nil once every live node sees every other alive and
// is in sync.
func (f *fleet) converged() error {
	nodes := f.live()
	for _, a := range nodes {
		for _, b := range nodes {
			if m, ok := a.cl.Member(b.name); !ok || m.State != cluster.StateAlive {
				return fmt.Errorf("%s sees %s as %v", a.name, b.name, m.State)
			}
		}
		if err := a.cl.InSync(); err != nil {
			return fmt.Errorf("%s: %w", a.name, err)
		}
	}
	return nil
}

// noncesSettled returns a condition that holds once the spent states all
// live nodes hold, in sum (set in *held), are the same as at the last
// poll.
func (f *fleet) noncesSettled(held *int) func() error {
	last := -1
	return func() error {
		sum := 0
		for _, nd := range f.live() {
			sum += nd.sw.Footprint().Nonces
		}
		*held = sum
		if sum != last {
			last = sum
			return fmt.Errorf("%d spent states held, still moving", sum)
		}
		return nil
	}
}

// await polls cond every poll until it holds or d of wall time passed.
func await(ctx context.Context, d, poll time.Duration, what string, cond func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not %s after %v: %w", what, d, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// user is the principal of node nd's k-th session.
func user(nd *node, k int) authz.Context {
	return authz.Context{Principal: authz.Principal{Subject: fmt.Sprintf("u-%s-%d", nd.name, k), Authenticated: true}, Node: nd.name}
}

// startSessions starts count counter sessions on nd, each answered once
// every live peer has it.
func startSessions(ctx context.Context, nd *node, count int) error {
	base := len(nd.sessions)
	for k := range count {
		info, err := nd.sw.Start(ctx, user(nd, base+k), "counter", "")
		if err != nil {
			return fmt.Errorf("starting a session on %s: %w", nd.name, err)
		}
		nd.sessions = append(nd.sessions, info.ID)
	}
	return nil
}

// clickTool returns the name of an "inc" button tool of session id.
func clickTool(nd *node, id string) (string, error) {
	tools, err := nd.mgr.Tools(id)
	if err != nil {
		return "", err
	}
	for _, t := range tools {
		if t.Kind == "button" && t.Action != "" {
			return t.Name, nil
		}
	}
	return "", errors.New("the counter offers no button tool")
}

// pacer runs the nodes' clocks together (they follow wall time) or
// stops them all: stopped, the cluster's timers (heartbeats, leases,
// anti-entropy) stand still.
type pacer struct {
	clocks []*pausableClock
	mu     sync.Mutex
}

func newPacer(clocks []*pausableClock) *pacer { return &pacer{clocks: clocks} }

// run starts the clocks (no-op when they run already).
func (p *pacer) run() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.clocks {
		c.resume()
	}
}

// stop stops the clocks.
func (p *pacer) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.clocks {
		c.pause()
	}
}
