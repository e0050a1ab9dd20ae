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
	peerv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/peer/v1"
	"github.com/mcpswarm/mcpswarm/session"
)

// ErrMayHaveApplied marks a forwarded write whose answer never came: the
// owner may or may not have applied it.
var ErrMayHaveApplied = errors.New("the update may still have applied")

// maxForwardResult bounds a forwarded result (the peer connection's message
// limit bounds it too; this keeps a hostile peer from making us decode more).
const maxForwardResult = 4 << 20

func callerToPB(c authz.Context) *peerv1.Caller {
	return &peerv1.Caller{
		Principal:     c.Principal.Subject,
		Roles:         c.Principal.Roles,
		Authenticated: c.Principal.Authenticated,
		Connection:    c.ConnID,
		Transport:     string(c.Transport),
		EntryNode:     c.Node,
	}
}

func callerFromPB(pb *peerv1.Caller) (authz.Context, error) {
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

// peer returns a client of node's peer service; an unknown or unreachable
// node is ErrOwnerUnavailable.
func (s *Swarm) peer(node string) (peerv1.PeerServiceClient, error) {
	conn, err := s.cl.PeerConn(node)
	if err != nil {
		return nil, fmt.Errorf("%w: node %s: %v", ErrOwnerUnavailable, node, err)
	}
	return peerv1.NewPeerServiceClient(conn), nil
}

// bounded gives ctx the forward timeout when the caller set no deadline.
func (s *Swarm) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
}

// deliver hands a client message of kind (or an adoption) to node.
func (s *Swarm) deliver(ctx context.Context, node, connID, kind string, body []byte) (*peerv1.DeliverClientMessageResponse, error) {
	pc, err := s.peer(node)
	if err != nil {
		return nil, err
	}
	return pc.DeliverClientMessage(ctx, &peerv1.DeliverClientMessageRequest{Connection: connID, Message: body, Kind: kind})
}

// forward runs tool on session id at node, relaying progress to the
// reporter in ctx.
func (s *Swarm) forward(ctx context.Context, c authz.Context, node, id, tool string, args map[string]any) (res session.Result, err error) {
	defer func(began time.Time) { s.met.forwarded(began, err) }(time.Now())
	pc, err := s.peer(node)
	if err != nil {
		return session.Result{}, err
	}
	var argBytes []byte
	if args != nil {
		if argBytes, err = json.Marshal(args); err != nil {
			return session.Result{}, fmt.Errorf("encoding arguments: %w", err)
		}
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	stream, err := pc.CallTool(ctx, &peerv1.CallToolRequest{
		Caller: callerToPB(c), Session: id, Tool: tool, Arguments: argBytes,
	})
	if err != nil {
		return session.Result{}, s.forwardErr(node, err, false)
	}
	progress := session.ProgressFrom(ctx)
	for {
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return session.Result{}, fmt.Errorf("node %s ended the call without a result: %w", node, ErrMayHaveApplied)
			}
			return session.Result{}, s.forwardErr(node, err, true)
		}
		switch e := ev.GetEvent().(type) {
		case *peerv1.CallToolResponse_Progress:
			if progress != nil {
				progress(e.Progress.GetProgress(), e.Progress.GetTotal(), e.Progress.GetMessage())
			}
		case *peerv1.CallToolResponse_Result:
			raw := e.Result.GetResult()
			if len(raw) > maxForwardResult {
				return session.Result{}, fmt.Errorf("node %s answered %d bytes, over the %d byte limit", node, len(raw), maxForwardResult)
			}
			var res session.Result
			if err := json.Unmarshal(raw, &res); err != nil {
				return session.Result{}, fmt.Errorf("decoding result from node %s: %w", node, err)
			}
			return res, nil
		}
	}
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
	pc, err := s.peer(node)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	resp, err := pc.ReadResource(ctx, &peerv1.ReadResourceRequest{
		Caller: callerToPB(c), Session: id, Uri: name,
	})
	if err != nil {
		return nil, s.forwardErr(node, err, false)
	}
	return json.RawMessage(resp.GetContents()), nil
}

// ownerHandler serves forwarded work on the owner node. Peers are
// authenticated by the cluster credential, but the owner still checks that
// the principal they name owns the session before anything runs.
type ownerHandler struct{ s *Swarm }

func (h ownerHandler) authorize(pb *peerv1.Caller, id string) (authz.Context, error) {
	c, err := callerFromPB(pb)
	if err != nil {
		return c, status.Error(codes.InvalidArgument, err.Error())
	}
	info, ok := h.s.mgr.Get(id)
	if !ok {
		return c, h.s.ownerStatus(id, fmt.Errorf("session %s is not running on node %s: %w", id, h.s.self, session.ErrNotRunning))
	}
	if !authz.Owns(c.Principal, info.Principal) {
		h.s.log.Info("refused forwarded call: principal does not own the session",
			"principal", c.Principal.Subject, "session", id, "entry_node", c.Node)
		return c, status.Errorf(codes.PermissionDenied, "principal %s does not own session %s", c.Principal.Subject, id)
	}
	return c, nil
}

// CallTool implements cluster.ForwardHandler.
func (h ownerHandler) CallTool(req *peerv1.CallToolRequest, stream grpc.ServerStreamingServer[peerv1.CallToolResponse]) error {
	if _, err := h.authorize(req.GetCaller(), req.GetSession()); err != nil {
		return err
	}
	var args map[string]any
	if len(req.GetArguments()) > 0 {
		if err := json.Unmarshal(req.GetArguments(), &args); err != nil {
			return status.Errorf(codes.InvalidArgument, "arguments are not a JSON object: %v", err)
		}
	}
	sends := make(chan *peerv1.CallToolResponse, 64)
	ctx := session.WithProgress(stream.Context(), func(p, total float64, msg string) {
		// Progress comes from the session's goroutine: queue it without
		// blocking the update; a full queue drops progress, never results.
		select {
		case sends <- &peerv1.CallToolResponse{Event: &peerv1.CallToolResponse_Progress{Progress: &peerv1.Progress{Progress: p, Total: total, Message: msg}}}:
		default:
		}
	})
	type outcome struct {
		res session.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := h.run(ctx, req.GetSession(), req.GetTool(), args)
		done <- outcome{res, err}
	}()
	for {
		select {
		case ev := <-sends:
			if err := stream.Send(ev); err != nil {
				return err
			}
		case o := <-done:
			// The update is over, so no more progress arrives: flush what
			// is queued before the result.
			for len(sends) > 0 {
				if err := stream.Send(<-sends); err != nil {
					return err
				}
			}
			if o.err != nil {
				return h.s.ownerStatus(req.GetSession(), o.err)
			}
			raw, err := json.Marshal(o.res)
			if err != nil {
				return status.Errorf(codes.Internal, "encoding result: %v", err)
			}
			return stream.Send(&peerv1.CallToolResponse{Event: &peerv1.CallToolResponse_Result{Result: &peerv1.ToolResult{Result: raw, IsError: o.res.IsError}}})
		}
	}
}

// run dispatches a forwarded operation on the local manager.
func (h ownerHandler) run(ctx context.Context, id, tool string, args map[string]any) (session.Result, error) {
	m := h.s.mgr
	switch tool {
	case opStop:
		return session.Result{Text: "stopped " + id}, m.Stop(ctx, id)
	case opModel:
		raw, err := m.Model(id)
		return session.Result{Text: string(raw)}, err
	case opScreenshot:
		txt, err := m.Screenshot(id, session.ScreenWidth, session.ScreenHeight)
		return session.Result{Text: txt}, err
	case opSendKey:
		k := session.Key{}
		k.Key, _ = args["key"].(string)
		k.Ctrl, _ = args["ctrl"].(bool)
		k.Alt, _ = args["alt"].(bool)
		k.Shift, _ = args["shift"].(bool)
		return m.SendKey(ctx, id, k)
	default:
		return m.Call(ctx, id, tool, args)
	}
}

// ownerErr maps a local error to a status the entry node understands.
func ownerErr(err error) error {
	switch {
	case errors.Is(err, session.ErrNotRunning):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, session.ErrTimeout):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	default:
		return status.Error(codes.FailedPrecondition, err.Error())
	}
}

// ReadResource implements cluster.ForwardHandler.
func (h ownerHandler) ReadResource(_ context.Context, req *peerv1.ReadResourceRequest) (*peerv1.ReadResourceResponse, error) {
	if _, err := h.authorize(req.GetCaller(), req.GetSession()); err != nil {
		return nil, err
	}
	raw, err := h.s.mgr.ReadResource(req.GetSession(), req.GetUri())
	if err != nil {
		return nil, h.s.ownerStatus(req.GetSession(), err)
	}
	return &peerv1.ReadResourceResponse{MimeType: "application/json", Contents: raw}, nil
}

// DeliverClientMessage implements cluster.ForwardHandler.
func (h ownerHandler) DeliverClientMessage(ctx context.Context, req *peerv1.DeliverClientMessageRequest) (*peerv1.DeliverClientMessageResponse, error) {
	if req.GetKind() == KindAdoptSession {
		code, body := h.s.adopt(ctx, req.GetMessage())
		return &peerv1.DeliverClientMessageResponse{HttpStatus: int32(code), Body: body}, nil
	}
	if req.GetKind() == KindSpendState {
		code, err := h.s.nonces.arbitrate(req.GetMessage())
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		return &peerv1.DeliverClientMessageResponse{HttpStatus: int32(code)}, nil
	}
	h.s.mu.Lock()
	fn := h.s.clientMsgs
	h.s.mu.Unlock()
	if fn == nil {
		return nil, status.Error(codes.Unimplemented, "this node does not accept forwarded client messages")
	}
	code, body, err := fn(ctx, req.GetConnection(), req.GetKind(), req.GetMessage())
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	return &peerv1.DeliverClientMessageResponse{HttpStatus: int32(code), Body: body}, nil
}
