package mcpswarm_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/mcpswarm/mcpswarm"
	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/internal/memnet"
	adminv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/admin/v1"
	forwardv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/forward/v1"
	peerv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/peer/v1"
)

// dial opens a gRPC client to node n's gRPC address as an outsider would
// (over the in-memory network when n runs on one), in plaintext unless
// opts say otherwise.
func dial(t *testing.T, n *mcpswarm.Node, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	base := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if ep, ok := mcpswarm.NetworkOf(n).(*memnet.Node); ok {
		base = append(base, grpc.WithContextDialer(ep.Network().DialClient))
	}
	cc, err := grpc.NewClient("passthrough:///"+n.GRPCAddr(), append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// forwardClick calls CallTool on the node behind cc as if forwarded for
// principal: through the forward service, or (legacy) through the previous
// release's peer-service RPC that nodes still serve for one release.
func forwardClick(ctx context.Context, cc grpc.ClientConnInterface, principal string, legacy bool) error {
	if legacy {
		stream, err := peerv1.NewPeerServiceClient(cc).CallTool(ctx, &peerv1.CallToolRequest{
			Caller:  &peerv1.Caller{Principal: principal, Authenticated: true, EntryNode: "node2", Transport: "streamable-http"},
			Session: "fg", Tool: "fg.inc.click",
		})
		if err != nil {
			return err
		}
		for {
			if _, err := stream.Recv(); err != nil {
				return err
			}
		}
	}
	stream, err := forwardv1.NewForwardServiceClient(cc).CallTool(ctx, &forwardv1.CallToolRequest{
		Caller:  &forwardv1.Caller{Principal: principal, Authenticated: true, EntryNode: "node2", Transport: "streamable-http"},
		Session: "fg", Tool: "fg.inc.click",
	})
	if err != nil {
		return err
	}
	for {
		if _, err := stream.Recv(); err != nil {
			return err
		}
	}
}

// Traffic from outside the cluster, or lying inside it, changes nothing.
func TestForgedTrafficIsRefused(t *testing.T) {
	e := newSwarmEnv(t)
	n1 := e.cluster(1)[0]
	alice := connect(t, n1, connOpts{token: aliceToken})
	if res := alice.call("swarm_start", map[string]any{"app": "counter", "id": "fg"}); res.IsError {
		t.Fatal(textOf(res))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	key, err := mcpswarm.LoadClusterKey(e.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, legacy := range []bool{false, true} {
		// No cluster credential: refused before anything runs.
		err := forwardClick(ctx, dial(t, n1), "alice", legacy)
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("forward (legacy %v) without credential: %v, want Unauthenticated", legacy, err)
		}
		// A credential from another cluster's key: refused too.
		otherKey, _ := mcpswarm.GenerateClusterKey()
		k, _ := mcpswarm.ParseClusterKey(otherKey)
		wrong, _ := cluster.PeerCredentials(k, "node2")
		err = forwardClick(ctx, dial(t, n1, grpc.WithPerRPCCredentials(wrong)), "alice", legacy)
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("forward (legacy %v) with another cluster's credential: %v, want Unauthenticated", legacy, err)
		}
		// A genuine peer credential claiming a principal that does not own
		// the session: the owner re-checks and refuses.
		creds, _ := cluster.PeerCredentials(key, "node2")
		err = forwardClick(ctx, dial(t, n1, grpc.WithPerRPCCredentials(creds)), "mallory", legacy)
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("forward (legacy %v) claiming mallory: %v, want PermissionDenied", legacy, err)
		}
	}
	// The forward service's other calls need the credential too.
	anon := forwardv1.NewForwardServiceClient(dial(t, n1))
	if _, err := anon.SpendState(ctx, &forwardv1.SpendStateRequest{Nonce: "n", ExpiresUnix: time.Now().Add(time.Hour).Unix()}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("SpendState without credential: %v, want Unauthenticated", err)
	}
	if _, err := anon.AdoptSession(ctx, &forwardv1.AdoptSessionRequest{From: "node2", Snapshot: []byte(`{}`)}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("AdoptSession without credential: %v, want Unauthenticated", err)
	}
	// The Calls stream, without a credential and with another cluster's:
	// refused before it reads a call.
	otherKey, _ := mcpswarm.GenerateClusterKey()
	k, _ := mcpswarm.ParseClusterKey(otherKey)
	wrong, _ := cluster.PeerCredentials(k, "node2")
	for name, fc := range map[string]forwardv1.ForwardServiceClient{
		"without a credential":   anon,
		"with another cluster's": forwardv1.NewForwardServiceClient(dial(t, n1, grpc.WithPerRPCCredentials(wrong))),
	} {
		st, err := fc.Calls(ctx)
		if err == nil {
			err = st.Send(&forwardv1.CallsRequest{Id: 1, Op: &forwardv1.CallsRequest_Call{Call: &forwardv1.CallToolRequest{
				Caller:  &forwardv1.Caller{Principal: "alice", Authenticated: true, EntryNode: "node2", Transport: "streamable-http"},
				Session: "fg", Tool: "fg.inc.click",
			}}})
			if err == nil || errors.Is(err, io.EOF) {
				_, err = st.Recv()
			}
		}
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("a Calls stream %s: %v, want Unauthenticated", name, err)
		}
	}
	if m := textOf(alice.call("swarm_get_model", map[string]any{"id": "fg"})); !strings.Contains(m, `"count":0`) {
		t.Fatalf("a refused forward changed the model: %s", m)
	}

	// A session id sealed by another cluster's key is unknown here.
	other := newSwarmEnv(t)
	foreign := connect(t, other.start("elsewhere"), connOpts{token: aliceToken})
	if code := postStatus(t, n1, foreign.id); code != http.StatusNotFound {
		t.Fatalf("a foreign cluster's session id answered %d, want 404", code)
	}
}

// The admin API answers whoever holds the cluster key, and nobody else.
func TestAdminAPIRequiresTheClusterKey(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(2)
	alice := connect(t, nodes[0], connOpts{token: aliceToken})
	if res := alice.call("swarm_start", map[string]any{"app": "todo", "id": "ad"}); res.IsError {
		t.Fatal(textOf(res))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	anon := adminv1.NewAdminServiceClient(dial(t, nodes[1]))
	if _, err := anon.ListSessions(ctx, &adminv1.ListSessionsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("admin call without a token: %v", err)
	}
	bad := adminv1.NewAdminServiceClient(dial(t, nodes[1], grpc.WithPerRPCCredentials(mcpswarm.AdminCredentials{Token: mcpswarm.AdminToken(mcpswarm.DevClusterKey())})))
	if _, err := bad.ListSessions(ctx, &adminv1.ListSessionsRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("admin call with another key's token: %v", err)
	}

	key, _ := mcpswarm.LoadClusterKey(e.keyFile)
	admin := adminv1.NewAdminServiceClient(dial(t, nodes[1], grpc.WithPerRPCCredentials(mcpswarm.AdminCredentials{Token: mcpswarm.AdminToken(key)})))
	members, err := admin.ListMembers(ctx, &adminv1.ListMembersRequest{})
	if err != nil || len(members.GetMembers()) != 2 {
		t.Fatalf("members: %v %v", members, err)
	}
	eventually(t, 5*time.Second, "node2's admin API lists ad owned by node1", func() bool {
		s, err := admin.ListSessions(ctx, &adminv1.ListSessionsRequest{})
		return err == nil && len(s.GetSessions()) == 1 && s.GetSessions()[0].GetOwnerNode() == "node1" && s.GetSessions()[0].GetPrincipal() == "alice"
	})
	eventually(t, 5*time.Second, "node2's admin API lists alice's connection, homed on node1", func() bool {
		cs, err := admin.ListConnections(ctx, &adminv1.ListConnectionsRequest{})
		if err != nil {
			return false
		}
		for _, c := range cs.GetConnections() {
			if c.GetId() == alice.id && c.GetHomeNode() == "node1" && c.GetPrincipal() == "alice" {
				return true
			}
		}
		return false
	})
	watch, err := admin.WatchEvents(ctx, &adminv1.WatchEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.StopSession(ctx, &adminv1.StopSessionRequest{Id: "ad"}); err != nil {
		t.Fatalf("stop through node2: %v", err)
	}
	eventually(t, 5*time.Second, "ad is gone everywhere", func() bool {
		s, err := admin.ListSessions(ctx, &adminv1.ListSessionsRequest{})
		return err == nil && len(s.GetSessions()) == 0 && len(nodes[0].LocalSessions()) == 0
	})
	for {
		ev, err := watch.Recv()
		if err != nil {
			t.Fatalf("watch ended before reporting the stop: %v", err)
		}
		if ev.GetKind() == "session" && ev.GetKey() == "ad" {
			break
		}
	}
}

// A draining node takes no new sessions and says so; the others see it
// draining.
func TestDrainingNodeRefusesNewSessions(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(2)
	key, _ := mcpswarm.LoadClusterKey(e.keyFile)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin2 := adminv1.NewAdminServiceClient(dial(t, nodes[1], grpc.WithPerRPCCredentials(mcpswarm.AdminCredentials{Token: mcpswarm.AdminToken(key)})))
	if _, err := admin2.Drain(ctx, &adminv1.DrainRequest{}); err != nil {
		t.Fatalf("drain: %v", err)
	}
	alice2 := connect(t, nodes[1], connOpts{token: aliceToken})
	res := alice2.call("swarm_start", map[string]any{"app": "counter", "id": "dr"})
	if !res.IsError || !strings.Contains(textOf(res), "draining") {
		t.Fatalf("swarm_start on a draining node answered %q", textOf(res))
	}
	admin1 := adminv1.NewAdminServiceClient(dial(t, nodes[0], grpc.WithPerRPCCredentials(mcpswarm.AdminCredentials{Token: mcpswarm.AdminToken(key)})))
	eventually(t, 5*time.Second, "node1 sees node2 draining", func() bool {
		m, err := admin1.ListMembers(ctx, &adminv1.ListMembersRequest{})
		if err != nil {
			return false
		}
		for _, x := range m.GetMembers() {
			if x.GetName() == "node2" {
				return x.GetState() == adminv1.MemberState_MEMBER_STATE_DRAINING
			}
		}
		return false
	})
	alice1 := connect(t, nodes[0], connOpts{token: aliceToken})
	if res := alice1.call("swarm_start", map[string]any{"app": "counter", "id": "dr"}); res.IsError {
		t.Fatalf("node1 still takes sessions: %s", textOf(res))
	}
}

// Draining hands every session to the other nodes: each keeps its id,
// principal, model and tools, is listed with its new owner everywhere, and
// the drained node runs none.
func TestDrainHandsSessionsToPeers(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	alice2 := connect(t, nodes[1], connOpts{token: aliceToken})
	for _, id := range []string{"h1", "h2", "h3"} {
		if res := alice2.call("swarm_start", map[string]any{"app": "counter", "id": id}); res.IsError {
			t.Fatal(textOf(res))
		}
		if res := alice2.call(id+".inc.click", nil); res.IsError {
			t.Fatal(textOf(res))
		}
	}
	key, _ := mcpswarm.LoadClusterKey(e.keyFile)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin2 := adminv1.NewAdminServiceClient(dial(t, nodes[1], grpc.WithPerRPCCredentials(mcpswarm.AdminCredentials{Token: mcpswarm.AdminToken(key)})))
	resp, err := admin2.Drain(ctx, &adminv1.DrainRequest{})
	if err != nil {
		t.Fatalf("drain: %v", err)
	}
	if resp.GetSessionsMoved() != 3 || resp.GetSessionsKept() != 0 || resp.GetSessionsStopped() != 0 {
		t.Fatalf("drain moved %d, kept %d, lost %d; want 3, 0, 0", resp.GetSessionsMoved(), resp.GetSessionsKept(), resp.GetSessionsStopped())
	}
	if left := nodes[1].LocalSessions(); len(left) != 0 {
		t.Fatalf("the drained node still runs %v", left)
	}
	alice3 := connect(t, nodes[2], connOpts{token: aliceToken})
	for _, id := range []string{"h1", "h2", "h3"} {
		id := id
		eventually(t, 5*time.Second, id+" is listed with a new owner", func() bool {
			owner := alice3.listed()[id]
			return owner != "" && owner != "node2"
		})
		if m := textOf(alice3.call("swarm_get_model", map[string]any{"id": id})); !strings.Contains(m, `"count":1`) {
			t.Fatalf("%s after the move: %s", id, m)
		}
		// The drained node serves its clients still, routing to the new
		// owner once that owner's record has reached it.
		eventually(t, 5*time.Second, "node2 routes "+id+" to its new owner", func() bool {
			owner := alice2.listed()[id]
			return owner != "" && owner != "node2"
		})
		if res := alice2.call(id+".inc.click", nil); res.IsError {
			t.Fatalf("driving %s through the drained node: %s", id, textOf(res))
		}
	}
}
