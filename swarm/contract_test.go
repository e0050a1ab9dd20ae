package swarm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/jonboulle/clockwork"
	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/grpc"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/internal/memnet"
	"github.com/mcpswarm/mcpswarm/internal/poll"
	mcpfront "github.com/mcpswarm/mcpswarm/mcp"
	"github.com/mcpswarm/mcpswarm/session"
)

// The consistency contract (docs/ARCHITECTURE.md, "Consistency of
// connection state"), on the in-memory network and a fake clock: no
// sockets, and the cluster's timers (the
// acknowledgement bound, leases, heartbeats) move only when the test
// advances the clock. memberlist's own timers stay on wall time.

var contractKey = []byte("0123456789abcdef0123456789abcdef")

// lease is the cluster lease the contract tests run with (the default).
const lease = 1500 * time.Millisecond

type contractNode struct {
	name string
	cl   *cluster.Cluster
	sw   *Swarm
	srv  *grpc.Server
}

// startContract starts a swarm of n nodes (n1…) on one in-memory network
// and one fake clock, and waits until every node sees every other alive
// and in sync.
func startContract(t *testing.T, n int) (*memnet.Network, *clockwork.FakeClock, []*contractNode) {
	t.Helper()
	return startContractWith(t, n, nil)
}

// startContractWith is startContract with configure (when set) called on
// each node's cluster configuration, by index, before it starts.
func startContractWith(t *testing.T, n int, configure func(i int, cfg *cluster.Config)) (*memnet.Network, *clockwork.FakeClock, []*contractNode) {
	t.Helper()
	var names []string
	for i := 1; i <= n; i++ {
		names = append(names, fmt.Sprintf("n%d", i))
	}
	net := memnet.New(names...)
	clock := clockwork.NewFakeClock()
	var nodes []*contractNode
	for i, name := range names {
		ep := net.Node(name)
		cfg := cluster.LocalConfig()
		cfg.Name, cfg.Key = name, contractKey
		cfg.GossipAddr, cfg.GRPCAddr = ep.GossipAddr, ep.GRPCAddr
		cfg.Memberlist = func(mc *memberlist.Config) {
			cluster.LocalMemberlist(mc)
			mc.Transport = ep.Transport()
		}
		cfg.Dialer = ep.Dial
		cfg.Clock = clock
		cfg.Lease = lease
		cfg.DeadGrace = time.Hour // nobody forgets anybody during a test
		if i > 0 {
			cfg.Join = []string{net.Node(names[0]).GossipAddr}
		}
		if configure != nil {
			configure(i, &cfg)
		}
		cl, err := cluster.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		mgr, err := session.NewManager(session.ManagerConfig{Registry: session.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		sw, err := New(Config{Cluster: cl, Manager: mgr})
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer(cl.ServerOptions()...)
		cl.Register(srv)
		ln, _ := ep.ListenGRPC()
		go func() { _ = srv.Serve(ln) }()
		if err := cl.Start(t.Context()); err != nil {
			srv.Stop()
			t.Fatal(err)
		}
		nd := &contractNode{name: name, cl: cl, sw: sw, srv: srv}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = cl.Stop(ctx)
			srv.Stop()
			_ = mgr.Close(ctx)
		})
		nodes = append(nodes, nd)
	}
	awaitContract(t, clock, 20*time.Second, "every node sees every other alive and is in sync", func() error {
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
	})
	return net, clock, nodes
}

// awaitContract polls cond until it holds, advancing the fake clock by a
// heartbeat period between polls when clock is set (the cluster's timers
// only move then); it fails the test after d of wall time (memberlist
// and gRPC run on wall time).
func awaitContract(t *testing.T, clock *clockwork.FakeClock, d time.Duration, what string, cond func() error) {
	t.Helper()
	poll.Until(t, d, what, func() error {
		err := cond()
		if err != nil && clock != nil {
			clock.Advance(lease / 3) // the other goroutines act on it before the next poll
		}
		return err
	})
}

// TestContractReadYourWrites: once a change to a connection's state is
// answered on one node, every other node serves it at once, whichever kind
// of change it is.
func TestContractReadYourWrites(t *testing.T) {
	_, _, nodes := startContract(t, 3)
	a, others := nodes[0], nodes[1:]
	hello := mcpfront.ConnInfo{ID: "c1", Node: a.name, Principal: "alice", ProtocolVersion: "2025-11-25",
		ClientInfo:   mcp.Implementation{Name: "e2e", Version: "1"},
		Capabilities: mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}, Sampling: &mcp.SamplingCapability{}}}
	steps := []struct {
		name  string
		write func()
		check func(got mcpfront.ConnInfo, ok bool) error
	}{
		{"initialize facts and client capabilities", func() { a.sw.Conns().Put(hello) }, func(got mcpfront.ConnInfo, ok bool) error {
			if !ok || got.Principal != "alice" || got.ProtocolVersion != "2025-11-25" || got.ClientInfo.Name != "e2e" ||
				got.Capabilities.Elicitation == nil || got.Capabilities.Sampling == nil {
				return fmt.Errorf("got %+v (known %v)", got, ok)
			}
			return nil
		}},
		{"log level", func() {
			c := hello
			c.LogLevel = mcp.LoggingLevelDebug
			a.sw.Conns().Put(c)
		}, func(got mcpfront.ConnInfo, ok bool) error {
			if got.LogLevel != mcp.LoggingLevelDebug {
				return fmt.Errorf("log level %q", got.LogLevel)
			}
			return nil
		}},
		{"subscriptions", func() {
			c := hello
			c.LogLevel = mcp.LoggingLevelDebug
			c.Subscriptions = []string{"swarm://sessions", "swarm://me"}
			a.sw.Conns().Put(c)
		}, func(got mcpfront.ConnInfo, ok bool) error {
			if !slices.Contains(got.Subscriptions, "swarm://sessions") || !slices.Contains(got.Subscriptions, "swarm://me") {
				return fmt.Errorf("subscriptions %v", got.Subscriptions)
			}
			return nil
		}},
		{"unsubscribe", func() {
			c := hello
			c.LogLevel = mcp.LoggingLevelDebug
			c.Subscriptions = []string{"swarm://me"}
			a.sw.Conns().Put(c)
		}, func(got mcpfront.ConnInfo, ok bool) error {
			if slices.Contains(got.Subscriptions, "swarm://sessions") {
				return fmt.Errorf("subscriptions %v after unsubscribing", got.Subscriptions)
			}
			return nil
		}},
		{"DELETE (revocation)", func() { a.sw.Conns().Delete("c1") }, func(got mcpfront.ConnInfo, ok bool) error {
			if ok {
				return fmt.Errorf("revoked connection still known: %+v", got)
			}
			return nil
		}},
	}
	for _, st := range steps {
		st.write()
		for _, b := range others {
			if err := b.sw.Conns().CanServe("c1"); err != nil {
				t.Fatalf("after %s: %s refuses: %v", st.name, b.name, err)
			}
			got, ok := b.sw.Conns().Get("c1")
			if err := st.check(got, ok); err != nil {
				t.Fatalf("after %s was answered on %s, %s serves: %v", st.name, a.name, b.name, err)
			}
		}
	}
	for _, b := range others {
		if !b.sw.Conns().Revoked("c1") {
			t.Fatalf("%s does not hold the revocation", b.name)
		}
	}

	// A spent request state: held by both its holders before Spend
	// answers (TestSpentStateStaysSpentWhenItsHoldersDieAndRejoin shows it
	// outlives them), and refused everywhere.
	expires := time.Now().Add(time.Hour)
	if already := a.sw.Nonces().Spend(t.Context(), "tool", "nonce-1", expires); already {
		t.Fatal("a fresh request state counted as spent")
	}
	for _, name := range spentHolders("nonce-1", []string{"n1", "n2", "n3"}, spentCopies) {
		if i := slices.IndexFunc(nodes, func(nd *contractNode) bool { return nd.name == name }); !nodes[i].sw.nonces.held.has("nonce-1") {
			t.Fatalf("holder %s has not got the spent request state once Spend answered", name)
		}
	}
	for _, b := range others {
		if already := b.sw.Nonces().Spend(t.Context(), "tool", "nonce-1", expires); !already {
			t.Fatalf("the request state was accepted again on %s", b.name)
		}
	}
}

// TestContractCutOffNodeRefusesUntilCaughtUp: with one node's links cut, a
// change is answered only once the cut-off node's lease has lapsed (on the
// cluster's clock), the cut-off node then refuses the connection instead
// of serving its stale state, and it serves again only once healed and
// caught up, never with the old state.
func TestContractCutOffNodeRefusesUntilCaughtUp(t *testing.T) {
	net, clock, nodes := startContract(t, 3)
	a, b, cut := nodes[0], nodes[1], nodes[2]
	a.sw.Conns().Put(mcpfront.ConnInfo{ID: "c1", Node: a.name, Principal: "alice", ProtocolVersion: "2025-11-25"})
	if _, ok := cut.sw.Conns().Get("c1"); !ok {
		t.Fatal("n3 lacks the connection before the cut")
	}

	net.Cut(cut.name, true)
	cutAt := clock.Now()
	done := make(chan struct{})
	go func() { a.sw.Conns().Delete("c1"); close(done) }()
	// The DELETE cannot be answered before n3's lease has lapsed: the
	// cluster's clock has not moved.
	select {
	case <-done:
		t.Fatal("the DELETE was answered while n3 may still serve the connection")
	case <-time.After(100 * time.Millisecond):
	}
	awaitContract(t, clock, 20*time.Second, "answered", func() error {
		select {
		case <-done:
			return nil
		default:
			return errors.New("the DELETE is still waiting")
		}
	})
	waited := clock.Since(cutAt)
	if waited < lease {
		t.Fatalf("the DELETE was answered %v (cluster clock) after the cut, before n3's %v lease lapsed", waited, lease)
	}
	t.Logf("DELETE answered after %v on the cluster clock", waited)
	for _, n := range []*contractNode{a, b} {
		if !n.sw.Conns().Revoked("c1") {
			t.Fatalf("%s does not hold the revocation", n.name)
		}
	}
	if cut.sw.Conns().Revoked("c1") {
		t.Fatal("n3 got the revocation across the cut")
	}
	err := cut.sw.Conns().CanServe("c1")
	var ra interface{ RetryAfter() time.Duration }
	if !errors.As(err, &ra) || ra.RetryAfter() <= 0 {
		t.Fatalf("cut-off n3: CanServe = %v, want an error with a RetryAfter", err)
	}
	// The majority goes on once it has declared n3 unreachable.
	awaitContract(t, clock, 20*time.Second, "serving on n1 and n2", func() error {
		for _, n := range []*contractNode{a, b} {
			if err := n.sw.Conns().CanServe("c1"); err != nil {
				return fmt.Errorf("%s: %w", n.name, err)
			}
		}
		return nil
	})
	if err := cut.sw.Conns().CanServe("c1"); err == nil {
		t.Fatal("cut-off n3 serves again while still cut off")
	}

	net.Cut(cut.name, false)
	awaitContract(t, clock, 30*time.Second, "serving on n3 after healing", func() error {
		err := cut.sw.Conns().CanServe("c1")
		if err == nil && !cut.sw.Conns().Revoked("c1") {
			for _, n := range nodes {
				t.Logf("%s: members %v, digest %v", n.name, n.cl.Members(), n.sw.conns.reg.Digest())
			}
			t.Fatal("n3 serves again with the connection's state from before the DELETE")
		}
		return err
	})
}
