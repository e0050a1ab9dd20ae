package mcpswarm

import (
	"context"
	"errors"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/mcp"
	adminv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/admin/v1"
	"github.com/mcpswarm/mcpswarm/session"
)

// adminServer serves the operator API from this node's replicas. Callers
// are authenticated by adminGuard before any method runs.
type adminServer struct {
	adminv1.UnimplementedAdminServiceServer
	n *Node
}

// operator is the principal the admin API acts as: it sees every session.
func (a *adminServer) operator() authz.Context {
	return authz.Context{
		Principal: authz.Principal{Subject: "operator", Roles: []string{authz.RoleAdmin}, Authenticated: true},
		Transport: "admin",
		Node:      a.n.cfg.Name,
	}
}

func memberState(s cluster.MemberState) adminv1.MemberState {
	switch s {
	case cluster.StateAlive:
		return adminv1.MemberState_MEMBER_STATE_ALIVE
	case cluster.StateSuspect:
		return adminv1.MemberState_MEMBER_STATE_SUSPECT
	case cluster.StateDraining:
		return adminv1.MemberState_MEMBER_STATE_DRAINING
	case cluster.StateDead:
		return adminv1.MemberState_MEMBER_STATE_DEAD
	case cluster.StateLeft:
		return adminv1.MemberState_MEMBER_STATE_LEFT
	}
	return adminv1.MemberState_MEMBER_STATE_UNSPECIFIED
}

func (a *adminServer) ListMembers(context.Context, *adminv1.ListMembersRequest) (*adminv1.ListMembersResponse, error) {
	var out []*adminv1.Member
	for _, m := range a.n.cluster.Members() {
		out = append(out, &adminv1.Member{
			Name: m.Name, Epoch: m.Epoch, GossipAddress: m.GossipAddr, GrpcAddress: m.GRPCAddr,
			State: memberState(m.State), Version: m.Version, Self: m.Self,
		})
	}
	return &adminv1.ListMembersResponse{Members: out, Lost: a.n.lostMembers()}, nil
}

func (a *adminServer) ListSessions(_ context.Context, req *adminv1.ListSessionsRequest) (*adminv1.ListSessionsResponse, error) {
	var out []*adminv1.Session
	for _, s := range a.n.swarm.Sessions(a.operator().Principal) {
		if req.GetPrincipal() != "" && s.Principal != req.GetPrincipal() {
			continue
		}
		out = append(out, &adminv1.Session{
			Id: s.ID, App: s.App, Principal: s.Principal, OwnerNode: s.Owner,
			Created: timestamppb.New(s.Created), Status: s.Status,
			Epoch: s.Handoff, Standbys: s.Standbys, Behind: timestamps(s.Behind),
		})
	}
	return &adminv1.ListSessionsResponse{Sessions: out}, nil
}

func (a *adminServer) ListTools(_ context.Context, req *adminv1.ListToolsRequest) (*adminv1.ListToolsResponse, error) {
	var out []*adminv1.Tool
	for _, t := range a.n.swarm.Tools(a.operator().Principal) {
		if req.GetSession() != "" && t.Session != req.GetSession() {
			continue
		}
		out = append(out, &adminv1.Tool{Name: t.Name, Session: t.Session, Description: t.Description, Sensitive: t.Sensitive, ReadOnly: t.ReadOnly})
	}
	return &adminv1.ListToolsResponse{Tools: out}, nil
}

func (a *adminServer) ListConnections(context.Context, *adminv1.ListConnectionsRequest) (*adminv1.ListConnectionsResponse, error) {
	var out []*adminv1.Connection
	for _, c := range a.n.swarm.Conns().List() {
		out = append(out, &adminv1.Connection{
			Id: c.ID, HomeNode: c.Node, Principal: c.Principal, ProtocolVersion: c.ProtocolVersion,
		})
	}
	return &adminv1.ListConnectionsResponse{Connections: out}, nil
}

func (a *adminServer) StopSession(ctx context.Context, req *adminv1.StopSessionRequest) (*adminv1.StopSessionResponse, error) {
	if !session.ValidID(req.GetId()) {
		return nil, status.Errorf(codes.InvalidArgument, "%q is not a session id", req.GetId())
	}
	if err := a.n.swarm.Stop(ctx, a.operator(), req.GetId()); err != nil {
		if errors.Is(err, session.ErrNotRunning) {
			return nil, status.Error(codes.NotFound, err.Error())
		}
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	return &adminv1.StopSessionResponse{}, nil
}

func (a *adminServer) Drain(ctx context.Context, _ *adminv1.DrainRequest) (*adminv1.DrainResponse, error) {
	if err := a.n.cluster.SetDraining(true); err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	a.n.swarm.SetDraining(true)
	a.n.log.Info("draining: no new sessions are accepted on this node; handing sessions to peers")
	res, err := a.n.swarm.HandOff(ctx)
	out := &adminv1.DrainResponse{SessionsMoved: int32(res.Moved), SessionsKept: int32(res.Kept), SessionsStopped: int32(res.Stopped), SessionsPromoted: int32(res.Promoted)}
	for _, m := range res.Moves {
		out.Moves = append(out.Moves, &adminv1.SessionMove{Id: m.ID, Node: m.To, Promoted: m.Promoted, Took: durationpb.New(m.Took)})
	}
	if err != nil {
		return out, status.Error(codes.DeadlineExceeded, err.Error())
	}
	a.n.log.Info("drained", "moved", res.Moved, "promoted", res.Promoted, "kept", res.Kept, "lost", res.Stopped)
	return out, nil
}

func (a *adminServer) WatchEvents(_ *adminv1.WatchEventsRequest, stream grpc.ServerStreamingServer[adminv1.WatchEventsResponse]) error {
	events := make(chan *adminv1.WatchEventsResponse, 256)
	push := func(ev *adminv1.WatchEventsResponse) {
		select {
		case events <- ev:
		default: // a slow watcher loses events rather than slowing the node
		}
	}
	stopMembers := a.n.cluster.WatchMembers(func(m cluster.Member) {
		push(&adminv1.WatchEventsResponse{Time: timestamppb.Now(), Kind: "member", Key: m.Name, Change: strings.ToLower(m.State.String()), Detail: m.GRPCAddr})
	})
	defer stopMembers()
	stopSwarm := a.n.swarm.Watch(func(ev mcp.Event) {
		switch ev.Kind {
		case mcp.SessionsChanged:
			push(&adminv1.WatchEventsResponse{Time: timestamppb.Now(), Kind: "session", Key: ev.Session, Change: "changed", Detail: ev.Principal})
		case mcp.ToolsChanged:
			push(&adminv1.WatchEventsResponse{Time: timestamppb.Now(), Kind: "tool", Key: ev.Session, Change: "changed", Detail: ev.Principal})
		}
	})
	defer stopSwarm()
	// The connection's keepalives (cluster.ServerOptions) detect a
	// vanished watcher; nothing else needs to tick here.
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case ev := <-events:
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
}

// timestamps converts a map of times for the wire (nil when empty).
func timestamps(m map[string]time.Time) map[string]*timestamppb.Timestamp {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]*timestamppb.Timestamp, len(m))
	for k, t := range m {
		out[k] = timestamppb.New(t)
	}
	return out
}
