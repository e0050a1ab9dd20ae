package mcpswarm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpswarm/mcpswarm/cluster"
	adminv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/admin/v1"
)

// Striking off lost members. A member that dies without leaving keeps
// counting against the majority after the view forgot it: in the leases
// (cluster.Lost: no node answers on its own when it might be the one cut
// off) and in the failover rule (swarm.Deaths: no node promotes). A
// cluster that lost a majority for good therefore acknowledges nothing
// until an operator declares those members gone (mcpswarm forget-member).
//
// The declaration reaches the cluster through the admin API itself: the
// node asked passes it on to every live peer, each checking the admin
// token and its own view. A replicated registry entry would reach a node
// that was down at the time as well, but it is refused whole by a peer of
// the previous version (an unknown registry), whose leases on this node
// would then lapse during a rolling upgrade; and an entry outlives the loss
// it was meant for, so a node restarting later would strike off a later
// loss of the same name. The reply names every node and what it did; the
// operator runs the command again against a node that was down.

// lostMembers returns the members that count against a majority on this
// node though its view no longer lists them, sorted.
func (n *Node) lostMembers() []string {
	if n.cluster == nil {
		return nil
	}
	listed := map[string]bool{}
	for _, m := range n.cluster.Members() {
		listed[m.Name] = true
	}
	names := n.cluster.Lost()
	if n.swarm != nil {
		names = append(names, n.swarm.Deaths()...)
	}
	names = slices.DeleteFunc(names, func(name string) bool { return listed[name] })
	slices.Sort(names)
	return slices.Compact(names)
}

// registerLostMetric exports the number of lost members: an alert on it
// tells the operator before writes stop.
func (n *Node) registerLostMetric() error {
	g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "mcpswarm_cluster_lost_members",
		Help: "Members that died without leaving and that the view no longer lists: they count against the majority until heard from again or struck off (mcpswarm forget-member).",
	}, func() float64 { return float64(len(n.lostMembers())) })
	if err := n.metrics.Register(g); err != nil {
		return fmt.Errorf("registering the lost members gauge: %w", err)
	}
	return nil
}

// forgetLost strikes lost member name off on this node, and reports
// whether it was lost here. It refuses (FailedPrecondition) a member the
// view lists, whether or not it counts it lost.
func (n *Node) forgetLost(name string) (bool, error) {
	lost := slices.Contains(n.lostMembers(), name)
	if _, listed := n.cluster.Member(name); !lost && !listed && name != n.cfg.Name {
		return false, nil
	}
	// Forget refuses a listed member before it changes anything.
	if _, err := n.cluster.Forget(name); err != nil {
		if _, ok := errors.AsType[*cluster.ListedError](err); ok {
			return false, status.Errorf(codes.FailedPrecondition, "refusing to forget %s on %s: %v", name, n.cfg.Name, err)
		}
		if errors.Is(err, cluster.ErrNotStarted) || errors.Is(err, cluster.ErrStopped) {
			return false, status.Errorf(codes.Unavailable, "forgetting %s on %s: %v", name, n.cfg.Name, err)
		}
		return false, status.Errorf(codes.Internal, "forgetting %s on %s: %v", name, n.cfg.Name, err)
	}
	n.swarm.ForgetDeath(name)
	n.log.Warn("lost member struck off on the operator's word: it no longer counts against the majority; a member of that name that joins later is a new member",
		"member", name)
	return true, nil
}

// forgetOnPeers passes ForgetMember for name on to every peer the view
// lists (but those that left), with local set, and returns what each did.
func (n *Node) forgetOnPeers(ctx context.Context, name string) []*adminv1.ForgetOutcome {
	var peers []cluster.Member
	for _, m := range n.cluster.Members() {
		if !m.Self && m.State != cluster.StateLeft {
			peers = append(peers, m)
		}
	}
	out := make([]*adminv1.ForgetOutcome, len(peers))
	creds := grpc.PerRPCCredentials(AdminCredentials{Token: AdminToken(n.key), Secure: n.tlsClient != nil})
	var wg sync.WaitGroup
	for i, m := range peers {
		wg.Go(func() { out[i] = n.forgetOn(ctx, m, name, creds) })
	}
	wg.Wait()
	return out
}

// forgetOn asks peer m to strike name off.
func (n *Node) forgetOn(ctx context.Context, m cluster.Member, name string, creds grpc.CallOption) *adminv1.ForgetOutcome {
	failed := func(detail string) *adminv1.ForgetOutcome {
		return &adminv1.ForgetOutcome{Node: m.Name, Result: adminv1.ForgetResult_FORGET_RESULT_FAILED, Detail: detail}
	}
	if m.State != cluster.StateAlive && m.State != cluster.StateDraining {
		return failed(fmt.Sprintf("not reached: %s (run forget-member against it once it is back)", m.State))
	}
	cc, err := n.cluster.PeerConn(m.Name)
	if err != nil {
		return failed(fmt.Sprintf("not reached: %v", err))
	}
	_, err = adminv1.NewAdminServiceClient(cc).ForgetMember(ctx, &adminv1.ForgetMemberRequest{Name: name, Local: true}, creds)
	switch status.Code(err) {
	case codes.OK:
		return &adminv1.ForgetOutcome{Node: m.Name, Result: adminv1.ForgetResult_FORGET_RESULT_FORGOTTEN}
	case codes.NotFound:
		return &adminv1.ForgetOutcome{Node: m.Name, Result: adminv1.ForgetResult_FORGET_RESULT_NOT_LOST}
	case codes.Unimplemented:
		return failed("its version has no forget-member: run it there once it is upgraded")
	}
	return failed(status.Convert(err).Message())
}

// ForgetMember strikes a lost member off here and, unless the request is
// local, on every peer (see forgetOnPeers).
func (a *adminServer) ForgetMember(ctx context.Context, req *adminv1.ForgetMemberRequest) (*adminv1.ForgetMemberResponse, error) {
	name := req.GetName()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "forget-member needs the name of a lost member")
	}
	self := a.n.cfg.Name
	forgot, err := a.n.forgetLost(name)
	if err != nil {
		return nil, err
	}
	here := &adminv1.ForgetOutcome{Node: self, Result: adminv1.ForgetResult_FORGET_RESULT_NOT_LOST}
	if forgot {
		here.Result = adminv1.ForgetResult_FORGET_RESULT_FORGOTTEN
	}
	resp := &adminv1.ForgetMemberResponse{Nodes: []*adminv1.ForgetOutcome{here}}
	if !req.GetLocal() {
		resp.Nodes = append(resp.Nodes, a.n.forgetOnPeers(ctx, name)...)
	}
	if slices.ContainsFunc(resp.Nodes, func(o *adminv1.ForgetOutcome) bool {
		return o.GetResult() != adminv1.ForgetResult_FORGET_RESULT_NOT_LOST
	}) {
		return resp, nil
	}
	lost := "none"
	if names := a.n.lostMembers(); len(names) > 0 {
		lost = strings.Join(names, ", ")
	}
	where := "on " + self
	if !req.GetLocal() {
		where = "on any node reached"
	}
	return nil, status.Errorf(codes.NotFound, "%s is not a lost member %s (lost on %s: %s)", name, where, self, lost)
}
