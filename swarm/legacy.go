package swarm

// The previous release forwarded client work through the peer service
// (mcpswarm.peer.v1: CallTool, ReadResource and DeliverClientMessage with a
// string kind). For one release a node still speaks it both ways, so a
// rolling upgrade forwards and hands sessions off across versions: it
// serves those RPCs as an adapter onto the forward service's handlers
// (legacyHandler), and makes each forward call through them when the peer
// answers that it has no forward service (legacyClient). All of this goes in
// the next release, with the RPCs.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpswarm/mcpswarm/cluster"
	forwardv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/forward/v1"
	peerv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/peer/v1"
	"github.com/mcpswarm/mcpswarm/session"
)

// The previous release's DeliverClientMessage kinds.
const (
	kindElicitationResponse = "elicitation_response"
	kindCancelled           = "cancelled"
	kindSSEPost             = "sse_post"
	kindSpendState          = "spend_state"
	kindAdoptSession        = "adopt_session"
)

// spendRequest is the previous release's kindSpendState message.
type spendRequest struct {
	Nonce   string `json:"nonce"`
	Expires int64  `json:"expires"`
}

// legacyClient makes forward calls through a previous-release peer's
// peer service.
type legacyClient struct{ pc peerv1.PeerServiceClient }

func newLegacyClient(cc grpc.ClientConnInterface) legacyClient {
	return legacyClient{pc: peerv1.NewPeerServiceClient(cc)}
}

func (l legacyClient) deliver(ctx context.Context, connID, kind string, body []byte) (*peerv1.DeliverClientMessageResponse, error) {
	return l.pc.DeliverClientMessage(ctx, &peerv1.DeliverClientMessageRequest{Connection: connID, Message: body, Kind: kind})
}

func callerToLegacy(c *forwardv1.Caller) *peerv1.Caller {
	return &peerv1.Caller{Principal: c.GetPrincipal(), Roles: c.GetRoles(), Authenticated: c.GetAuthenticated(),
		Connection: c.GetConnection(), Transport: c.GetTransport(), EntryNode: c.GetEntryNode()}
}

func callerFromLegacy(c *peerv1.Caller) *forwardv1.Caller {
	if c == nil {
		return nil
	}
	return &forwardv1.Caller{Principal: c.GetPrincipal(), Roles: c.GetRoles(), Authenticated: c.GetAuthenticated(),
		Connection: c.GetConnection(), Transport: c.GetTransport(), EntryNode: c.GetEntryNode()}
}

// callTool starts req on the peer and returns its events as the forward
// service's.
func (l legacyClient) callTool(ctx context.Context, req *forwardv1.CallToolRequest) (func() (*forwardv1.CallToolResponse, error), error) {
	stream, err := l.pc.CallTool(ctx, &peerv1.CallToolRequest{Caller: callerToLegacy(req.GetCaller()),
		Session: req.GetSession(), Tool: req.GetTool(), Arguments: req.GetArguments()})
	if err != nil {
		return nil, err
	}
	return func() (*forwardv1.CallToolResponse, error) {
		for {
			ev, err := stream.Recv()
			if err != nil {
				return nil, err
			}
			switch e := ev.GetEvent().(type) {
			case *peerv1.CallToolResponse_Progress:
				p := e.Progress
				return &forwardv1.CallToolResponse{Event: &forwardv1.CallToolResponse_Progress{Progress: &forwardv1.Progress{
					Progress: p.GetProgress(), Total: p.GetTotal(), Message: p.GetMessage()}}}, nil
			case *peerv1.CallToolResponse_Result:
				return &forwardv1.CallToolResponse{Event: &forwardv1.CallToolResponse_Result{Result: &forwardv1.ToolResult{
					Result: e.Result.GetResult(), IsError: e.Result.GetIsError()}}}, nil
			}
			// The previous release never sent log events; skip any.
		}
	}, nil
}

func (l legacyClient) readResource(ctx context.Context, req *forwardv1.ReadResourceRequest) ([]byte, error) {
	resp, err := l.pc.ReadResource(ctx, &peerv1.ReadResourceRequest{Caller: callerToLegacy(req.GetCaller()), Session: req.GetSession(), Uri: req.GetUri()})
	return resp.GetContents(), err
}

func (l legacyClient) spendState(ctx context.Context, nonce string, expires time.Time) (already bool, err error) {
	body, err := json.Marshal(spendRequest{Nonce: nonce, Expires: expires.Unix()})
	if err != nil {
		return true, err
	}
	resp, err := l.deliver(ctx, "", kindSpendState, body)
	if err != nil {
		return true, err
	}
	return resp.GetHttpStatus() != http.StatusOK, nil
}

func (l legacyClient) adopt(ctx context.Context, from string, snap session.Snapshot) error {
	body, err := json.Marshal(adoption{From: from, Snapshot: snap})
	if err != nil {
		return fmt.Errorf("encoding snapshot: %w", err)
	}
	resp, err := l.deliver(ctx, "", kindAdoptSession, body)
	if err != nil {
		return err
	}
	if code := resp.GetHttpStatus(); code != http.StatusOK {
		return fmt.Errorf("it answered %d: %s", code, resp.GetBody())
	}
	return nil
}

// legacyHandler serves the previous release's forwarding RPCs of the peer
// service with the forward service's handlers.
type legacyHandler struct{ f forwardServer }

var _ cluster.ForwardHandler = legacyHandler{}

// CallTool implements cluster.ForwardHandler.
func (h legacyHandler) CallTool(req *peerv1.CallToolRequest, stream grpc.ServerStreamingServer[peerv1.CallToolResponse]) error {
	fr := &forwardv1.CallToolRequest{Caller: callerFromLegacy(req.GetCaller()), Session: req.GetSession(), Tool: req.GetTool(), Arguments: req.GetArguments()}
	return h.f.callTool(stream.Context(), fr, func(ev *forwardv1.CallToolResponse) error {
		switch e := ev.GetEvent().(type) {
		case *forwardv1.CallToolResponse_Progress:
			p := e.Progress
			return stream.Send(&peerv1.CallToolResponse{Event: &peerv1.CallToolResponse_Progress{Progress: &peerv1.Progress{
				Progress: p.GetProgress(), Total: p.GetTotal(), Message: p.GetMessage()}}})
		case *forwardv1.CallToolResponse_Result:
			return stream.Send(&peerv1.CallToolResponse{Event: &peerv1.CallToolResponse_Result{Result: &peerv1.ToolResult{
				Result: e.Result.GetResult(), IsError: e.Result.GetIsError()}}})
		}
		return nil
	})
}

// ReadResource implements cluster.ForwardHandler.
func (h legacyHandler) ReadResource(ctx context.Context, req *peerv1.ReadResourceRequest) (*peerv1.ReadResourceResponse, error) {
	resp, err := h.f.ReadResource(ctx, &forwardv1.ReadResourceRequest{Caller: callerFromLegacy(req.GetCaller()), Session: req.GetSession(), Uri: req.GetUri()})
	if err != nil {
		return nil, err
	}
	return &peerv1.ReadResourceResponse{MimeType: resp.GetMimeType(), Contents: resp.GetContents()}, nil
}

// DeliverClientMessage implements cluster.ForwardHandler: each kind goes to
// the forward service's typed handler.
func (h legacyHandler) DeliverClientMessage(ctx context.Context, req *peerv1.DeliverClientMessageRequest) (*peerv1.DeliverClientMessageResponse, error) {
	conn, msg := req.GetConnection(), req.GetMessage()
	var code int32
	switch req.GetKind() {
	case kindElicitationResponse:
		resp, err := h.f.DeliverResponse(ctx, &forwardv1.DeliverResponseRequest{Connection: conn, Message: msg})
		if err != nil {
			return nil, err
		}
		code = resp.GetHttpStatus()
	case kindCancelled:
		resp, err := h.f.DeliverCancel(ctx, &forwardv1.DeliverCancelRequest{Connection: conn, Message: msg})
		if err != nil {
			return nil, err
		}
		code = resp.GetHttpStatus()
	case kindSSEPost:
		resp, err := h.f.DeliverSseMessage(ctx, &forwardv1.DeliverSseMessageRequest{Connection: conn, Message: msg})
		if err != nil {
			return nil, err
		}
		code = resp.GetHttpStatus()
	case kindSpendState:
		var sr spendRequest
		if err := json.Unmarshal(msg, &sr); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "decoding a request state to arbitrate: %v", err)
		}
		resp, err := h.f.SpendState(ctx, &forwardv1.SpendStateRequest{Nonce: sr.Nonce, ExpiresUnix: sr.Expires})
		if err != nil {
			return nil, err
		}
		code = http.StatusOK
		if resp.GetAlreadySpent() {
			code = http.StatusConflict
		}
	case kindAdoptSession:
		var a adoption
		if err := json.Unmarshal(msg, &a); err != nil {
			return &peerv1.DeliverClientMessageResponse{HttpStatus: http.StatusBadRequest, Body: []byte("adoption is not JSON: " + err.Error())}, nil
		}
		c, why := h.f.s.adopt(ctx, a.From, a.Snapshot)
		return &peerv1.DeliverClientMessageResponse{HttpStatus: int32(c), Body: []byte(why)}, nil
	default:
		return nil, status.Error(codes.FailedPrecondition, errors.New("unknown client message kind "+fmt.Sprintf("%q", req.GetKind())).Error())
	}
	return &peerv1.DeliverClientMessageResponse{HttpStatus: code}, nil
}
