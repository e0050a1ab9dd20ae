package swarm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/cluster"
	forwardv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/forward/v1"
	"github.com/mcpswarm/mcpswarm/session"
)

// ErrMayHaveApplied marks a forwarded write whose answer never came: the
// owner may or may not have applied it. It ends every such answer, so its
// text tells the client both that and what to do: a blind retry could
// apply the write twice.
var ErrMayHaveApplied = errors.New("the update may still have applied; retry once a read of the session shows it did not")

// maxForwardResult bounds a forwarded result (the peer connection's message
// limit bounds it too; this keeps a hostile peer from making us decode more).
const maxForwardResult = 4 << 20

func callerToPB(c authz.Context) *forwardv1.Caller {
	return &forwardv1.Caller{
		Principal:     c.Principal.Subject,
		Roles:         c.Principal.Roles,
		Authenticated: c.Principal.Authenticated,
		Connection:    c.ConnID,
		Transport:     string(c.Transport),
		EntryNode:     c.Node,
	}
}

func callerFromPB(pb *forwardv1.Caller) (authz.Context, error) {
	if pb == nil || pb.GetPrincipal() == "" {
		return authz.Context{}, errors.New("forwarded call names no principal")
	}
	return authz.Context{
		Principal: authz.Principal{Subject: pb.GetPrincipal(), Roles: pb.GetRoles(), Authenticated: pb.GetAuthenticated()},
		ConnID:    pb.GetConnection(),
		Transport: authz.Transport(pb.GetTransport()),
		Node:      pb.GetEntryNode(),
	}, nil
}

// conn returns the cluster's authenticated connection to node; an unknown
// or unreachable node is ErrOwnerUnavailable.
func (s *Swarm) conn(node string) (grpc.ClientConnInterface, error) {
	cc, err := s.cl.PeerConn(node)
	if err != nil {
		return nil, fmt.Errorf("%w: node %s: %v", ErrOwnerUnavailable, node, err)
	}
	return cc, nil
}

// call runs one forward-service call on node. A node of the previous
// release has no forward service (its gRPC gate answers Unimplemented
// before reading anything, so nothing ran): legacy then makes the same call
// through that node's peer service.
func (s *Swarm) call(ctx context.Context, node string, call func(forwardv1.ForwardServiceClient) error, legacy func(legacyClient) error) error {
	cc, err := s.conn(node)
	if err != nil {
		return err
	}
	err = call(forwardv1.NewForwardServiceClient(cc))
	if lacksForwardService(err) && legacy != nil {
		return legacy(newLegacyClient(cc))
	}
	return err
}

// lacksForwardService reports whether err is a peer's answer that it does
// not serve mcpswarm.forward.v1 (a node of the previous release).
func lacksForwardService(err error) bool { return status.Code(err) == codes.Unimplemented }

// bounded gives ctx the forward timeout when the caller set no deadline.
func (s *Swarm) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
}

// forward runs tool on session id at node, relaying progress to the
// reporter in ctx.
func (s *Swarm) forward(ctx context.Context, c authz.Context, node, id, tool string, args map[string]any) (res session.Result, err error) {
	defer func(began time.Time) { s.met.forwarded(began, err) }(time.Now())
	cc, err := s.conn(node)
	if err != nil {
		return session.Result{}, err
	}
	// The client's own bytes when the front kept them: the owner decodes
	// them, nothing in between does.
	argBytes := []byte(session.ArgumentsJSON(ctx, tool))
	if args != nil && argBytes == nil {
		if argBytes, err = json.Marshal(args); err != nil {
			return session.Result{}, fmt.Errorf("encoding arguments: %w", err)
		}
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	req := &forwardv1.CallToolRequest{Caller: callerToPB(c), Session: id, Tool: tool, Arguments: argBytes}
	if s.servesCallStream(node) {
		res, err := s.forwardOnStream(ctx, node, cc, req)
		if !errors.Is(err, errNoCallStream) {
			return res, err
		}
		s.streams.fallbacks.Add(1)
	}
	recv, err := openCallTool(ctx, cc, req)
	if err != nil {
		return session.Result{}, s.forwardErr(node, err, false)
	}
	progress := session.ProgressFrom(ctx)
	for {
		ev, err := recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return session.Result{}, fmt.Errorf("node %s ended the call without a result: %w", node, ErrMayHaveApplied)
			}
			return session.Result{}, s.forwardErr(node, notCancelled(ctx, err), true)
		}
		switch e := ev.GetEvent().(type) {
		case *forwardv1.CallToolResponse_Progress:
			progress(e.Progress.GetProgress(), e.Progress.GetTotal(), e.Progress.GetMessage())
		case *forwardv1.CallToolResponse_Result:
			return decodeForwardResult(node, e.Result.GetResult())
		}
	}
}

// decodeForwardResult decodes the result node answered a forwarded call
// with.
func decodeForwardResult(node string, raw []byte) (session.Result, error) {
	if len(raw) > maxForwardResult {
		return session.Result{}, fmt.Errorf("node %s answered %d bytes, over the %d byte limit", node, len(raw), maxForwardResult)
	}
	// Its own decoder, not json.Unmarshal: that would check the whole
	// result once more before handing it over.
	var res session.Result
	if err := res.UnmarshalJSON(raw); err != nil {
		return session.Result{}, fmt.Errorf("decoding result from node %s: %w", node, err)
	}
	return res, nil
}

// servesCallStream reports whether node advertises the Calls stream.
func (s *Swarm) servesCallStream(node string) bool {
	m, ok := s.cl.Member(node)
	return ok && m.Capabilities.Has(cluster.CapCallStream)
}

// openCallTool starts a forwarded call and returns its event receiver. A
// server stream reports a missing method on its first receive, so that is
// where a node of the previous release is detected and the call made again
// through its peer service (nothing ran on the first attempt).
func openCallTool(ctx context.Context, cc grpc.ClientConnInterface, req *forwardv1.CallToolRequest) (func() (*forwardv1.CallToolResponse, error), error) {
	stream, err := forwardv1.NewForwardServiceClient(cc).CallTool(ctx, req)
	if err != nil {
		return nil, err
	}
	first, err := stream.Recv()
	if lacksForwardService(err) {
		return newLegacyClient(cc).callTool(ctx, req)
	}
	pending := first
	return func() (*forwardv1.CallToolResponse, error) {
		if pending != nil || err != nil {
			ev, e := pending, err
			pending, err = nil, nil
			if e != nil {
				return nil, e
			}
			return ev, nil
		}
		return stream.Recv()
	}, nil
}

// notCancelled turns a Canceled status that the caller did not cause (ctx
// is live) into Unavailable: gRPC ends a call with Canceled when its
// connection closes under it, as when the owner is declared dead
// mid-call, and that is the owner going away, not the client giving up.
func notCancelled(ctx context.Context, err error) error {
	if status.Code(err) == codes.Canceled && ctx.Err() == nil {
		return status.Error(codes.Unavailable, status.Convert(err).Message())
	}
	return err
}

// forwardErr turns a gRPC failure into the error the client sees.
func (s *Swarm) forwardErr(node string, err error, sent bool) error {
	if he := handoffFromStatus(err); he != nil {
		return he // nothing ran: the owner refused before the session saw it
	}
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.DeadlineExceeded:
		if sent {
			return fmt.Errorf("timed out waiting for node %s: %w", node, ErrMayHaveApplied)
		}
		return fmt.Errorf("%w: node %s did not answer in time", ErrOwnerUnavailable, node)
	case codes.Unavailable:
		if sent {
			// The owner had the call and went away before answering.
			return fmt.Errorf("%w: node %s went away during the call (%s): %w", ErrOwnerUnavailable, node, st.Message(), ErrMayHaveApplied)
		}
		return fmt.Errorf("%w: node %s: %s", ErrOwnerUnavailable, node, st.Message())
	case codes.Canceled:
		return fmt.Errorf("call cancelled: %w", context.Canceled)
	case codes.PermissionDenied:
		return fmt.Errorf("node %s refused: %s: %w", node, st.Message(), ErrNotOwner)
	case codes.NotFound:
		return fmt.Errorf("node %s: %s: %w", node, st.Message(), session.ErrNotRunning)
	default:
		return fmt.Errorf("node %s: %s", node, st.Message())
	}
}

func (s *Swarm) forwardRead(ctx context.Context, c authz.Context, node, id, name string) (json.RawMessage, error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	req := &forwardv1.ReadResourceRequest{Caller: callerToPB(c), Session: id, Uri: name}
	var contents []byte
	err := s.call(ctx, node, func(fc forwardv1.ForwardServiceClient) error {
		resp, err := fc.ReadResource(ctx, req)
		contents = resp.GetContents()
		return err
	}, func(lc legacyClient) error {
		var err error
		contents, err = lc.readResource(ctx, req)
		return err
	})
	if errors.Is(err, ErrOwnerUnavailable) {
		return nil, err
	}
	if err != nil {
		return nil, s.forwardErr(node, err, false)
	}
	return json.RawMessage(contents), nil
}
