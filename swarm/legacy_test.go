package swarm

import (
	"bytes"
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/internal/poll"
	forwardv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/forward/v1"
	"github.com/mcpswarm/mcpswarm/session"
	"github.com/mcpswarm/mcpswarm/session/apps"
)

// withoutService registers every service but one: a node built so serves
// what a node of the previous release served.
type withoutService struct {
	grpc.ServiceRegistrar
	skip string
}

func (w withoutService) RegisterService(d *grpc.ServiceDesc, impl any) {
	if d.ServiceName != w.skip {
		w.ServiceRegistrar.RegisterService(d, impl)
	}
}

type testNode struct {
	sw  *Swarm
	mgr *session.Manager
	cl  *cluster.Cluster
	srv *grpc.Server
}

// startTestNode runs a swarm over a real cluster on loopback. previous
// leaves the forward service out, as a node of the previous release.
func startTestNode(t testing.TB, name string, previous bool, join ...string) testNode {
	t.Helper()
	return startTestNodeWith(t, name, nodeOptions{previous: previous}, join...)
}

// nodeOptions shapes a test node: previous leaves the forward service
// out; caps, when not nil, is what it advertises; apps registers more
// apps (and makes them startable) beside the demo ones.
type nodeOptions struct {
	previous bool
	caps     []string
	apps     map[string]func() session.App
	// store and standbys, when set, are the manager's snapshot store and
	// the swarm's standbys.
	store    session.Store
	standbys Standbys
	// spent, when set, is where the swarm keeps the spent request states
	// it holds (a restarted node's disk).
	spent cluster.Storage
}

func startTestNodeWith(t testing.TB, name string, opt nodeOptions, join ...string) testNode {
	t.Helper()
	reg := session.NewRegistry()
	if err := apps.Register(reg); err != nil {
		t.Fatal(err)
	}
	var startable []string
	if len(opt.apps) > 0 {
		startable = reg.DefaultStartable()
		for app, mk := range opt.apps {
			if err := reg.Register(app, "", mk); err != nil {
				t.Fatal(err)
			}
			startable = append(startable, app)
		}
	}
	mgr, err := session.NewManager(session.ManagerConfig{Registry: reg, Startable: startable, Store: opt.store})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := cluster.LocalConfig()
	cfg.Name, cfg.GRPCAddr, cfg.Key, cfg.Join = name, lis.Addr().String(), bytes.Repeat([]byte{3}, 32), join
	cfg.Capabilities = opt.caps
	cl, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sw, err := New(Config{Cluster: cl, Manager: mgr, Standbys: opt.standbys, Storage: opt.spent})
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(cl.ServerOptions()...)
	if opt.previous {
		cl.Register(withoutService{srv, forwardv1.ForwardService_ServiceDesc.ServiceName})
	} else {
		cl.Register(srv)
	}
	go func() { _ = srv.Serve(lis) }()
	ctx := context.Background()
	if err := cl.Start(ctx); err != nil {
		srv.Stop()
		t.Fatal(err)
	}
	if err := sw.StartPublishing(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		sw.StopPublishing()
		_ = mgr.Close(ctx)
		_ = cl.Stop(ctx)
		srv.Stop()
	})
	return testNode{sw: sw, mgr: mgr, cl: cl, srv: srv}
}

// awaitPeers waits until a and b each hold a connection to the other. A
// node connects only to a member it knows, so each then knows the other's
// capabilities too.
func awaitPeers(t testing.TB, a, b testNode) {
	t.Helper()
	await(t, "both nodes reach each other", func() bool {
		_, e1 := a.cl.PeerConn(b.cl.Self().Name)
		_, e2 := b.cl.PeerConn(a.cl.Self().Name)
		return e1 == nil && e2 == nil
	})
}

func await(t testing.TB, what string, cond func() bool) {
	t.Helper()
	poll.True(t, 20*time.Second, what, cond)
}

// TestMixedVersionsForwardBothWays: during a rolling upgrade a node of this
// release forwards calls, reads and request-state arbitration to a node of
// the previous release (which has no forward service) through the peer
// service's deprecated RPCs, and serves those RPCs itself for the previous
// release's nodes.
func TestMixedVersionsForwardBothWays(t *testing.T) {
	// The previous release keeps spent states by the arbiter's rule.
	prevCaps := slices.DeleteFunc(cluster.DefaultCapabilities(), func(c string) bool { return c == cluster.CapSpentHolders })
	old := startTestNodeWith(t, "old", nodeOptions{previous: true, caps: prevCaps})
	cur := startTestNode(t, "cur", false, old.cl.Self().GossipAddr)
	awaitPeers(t, old, cur)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	alice := authz.Context{Principal: authz.Principal{Subject: "alice", Authenticated: true}, Transport: authz.TransportStreamableHTTP}

	// This release → the previous one.
	if _, err := old.sw.Start(ctx, alice, "counter", "lg"); err != nil {
		t.Fatal(err)
	}
	await(t, "the current node sees the old node's session", func() bool { _, ok := cur.sw.locate("lg"); return ok })
	if res, err := cur.sw.Call(ctx, alice, "lg", "lg.inc.click", nil); err != nil || res.IsError {
		t.Fatalf("a call forwarded to the previous release: %+v %v", res, err)
	}
	if m, err := cur.sw.Model(ctx, alice, "lg"); err != nil || !strings.Contains(string(m), `"count":1`) {
		t.Fatalf("the model read through the previous release: %s %v", m, err)
	}
	exp := time.Now().Add(time.Minute)
	if cur.sw.nonces.Spend(ctx, "lg.inc.click", "nonce-1", exp) {
		t.Fatal("a fresh request state counted as spent by the previous release's arbiter")
	}
	if !cur.sw.nonces.Spend(ctx, "lg.inc.click", "nonce-1", exp) {
		t.Fatal("a spent request state was accepted again by the previous release's arbiter")
	}

	// The previous release → this one: its peer-service calls reach the
	// forward service's handlers.
	if _, err := cur.sw.Start(ctx, alice, "counter", "nw"); err != nil {
		t.Fatal(err)
	}
	cc, err := old.cl.PeerConn("cur")
	if err != nil {
		t.Fatal(err)
	}
	lc := newLegacyClient(cc)
	recv, err := lc.callTool(ctx, &forwardv1.CallToolRequest{Caller: callerToPB(alice), Session: "nw", Tool: "nw.inc.click"})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := recv(); err != nil || ev.GetResult() == nil {
		t.Fatalf("a previous-release forwarded call: %v %v", ev, err)
	}
	if m, _ := cur.mgr.Model("nw"); !strings.Contains(string(m), `"count":1`) {
		t.Fatalf("model after the previous release's forwarded click: %s", m)
	}
	if already, err := lc.spendState(ctx, "nonce-2", exp); err != nil || already {
		t.Fatalf("the previous release asking this one to arbitrate: %v %v", already, err)
	}
	if already, err := lc.spendState(ctx, "nonce-2", exp); err != nil || !already {
		t.Fatalf("the previous release spending a state twice: %v %v", already, err)
	}
	// A session handed off by a node of the previous release.
	snap, err := old.mgr.Detach(ctx, "lg")
	if err != nil {
		t.Fatal(err)
	}
	if err := lc.adopt(ctx, "old", snap); err != nil {
		t.Fatalf("adopting a session from the previous release: %v", err)
	}
	if m, _ := cur.mgr.Model("lg"); !strings.Contains(string(m), `"count":1`) {
		t.Fatalf("adopted model: %s", m)
	}
}
