package swarm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/cluster"
	forwardv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/forward/v1"
	"github.com/mcpswarm/mcpswarm/session"
)

// maxNonceBytes bounds a request state's nonce a peer asks to spend.
const maxNonceBytes = 128

// forwardServer serves mcpswarm.forward.v1.ForwardService: the work other
// nodes forward to this one. The cluster registers it under the peer
// credential (cluster.AddService), so only members reach it; the owner still
// checks that the principal a call names owns the session before anything
// runs.
type forwardServer struct {
	forwardv1.UnimplementedForwardServiceServer
	s *Swarm
}

var _ forwardv1.ForwardServiceServer = forwardServer{}

func (f forwardServer) authorize(pb *forwardv1.Caller, id string) (authz.Context, error) {
	c, err := callerFromPB(pb)
	if err != nil {
		return c, status.Error(codes.InvalidArgument, err.Error())
	}
	info, ok := f.s.mgr.Get(id)
	if !ok {
		return c, f.s.ownerStatus(id, fmt.Errorf("session %s is not running on node %s: %w", id, f.s.self, session.ErrNotRunning))
	}
	if !authz.Owns(c.Principal, info.Principal) {
		f.s.log.Info("refused forwarded call: principal does not own the session",
			"principal", c.Principal.Subject, "session", id, "entry_node", c.Node)
		return c, status.Errorf(codes.PermissionDenied, "principal %s does not own session %s", c.Principal.Subject, id)
	}
	return c, nil
}

// CallTool runs a forwarded tools/call on a session this node owns,
// streaming its progress and then its result.
func (f forwardServer) CallTool(req *forwardv1.CallToolRequest, stream grpc.ServerStreamingServer[forwardv1.CallToolResponse]) error {
	return f.callTool(stream.Context(), req, stream.Send)
}

// callTool is CallTool with the stream's send, shared with the previous
// release's peer-service adapter. The call runs on the handler's own
// goroutine; only a call that reports progress gets a sender goroutine
// (progressRelay), so the common call costs no goroutine and no queue.
func (f forwardServer) callTool(ctx context.Context, req *forwardv1.CallToolRequest, send func(*forwardv1.CallToolResponse) error) error {
	if _, err := f.authorize(req.GetCaller(), req.GetSession()); err != nil {
		return err
	}
	var args map[string]any
	if len(req.GetArguments()) > 0 {
		if err := json.Unmarshal(req.GetArguments(), &args); err != nil {
			return status.Errorf(codes.InvalidArgument, "arguments are not a JSON object: %v", err)
		}
	}
	relay := &progressRelay{send: send}
	res, err := f.run(session.WithProgress(ctx, relay.report), req.GetSession(), req.GetTool(), args)
	// The update is over, so no more progress arrives: what is queued is
	// sent before the result.
	if err := relay.close(); err != nil {
		return err
	}
	if err != nil {
		return f.s.ownerStatus(req.GetSession(), err)
	}
	// Its own encoder, not json.Marshal: that would check and compact
	// the encoder's output a second time.
	raw, err := res.MarshalJSON()
	if err != nil {
		return status.Errorf(codes.Internal, "encoding result: %v", err)
	}
	return send(&forwardv1.CallToolResponse{Event: &forwardv1.CallToolResponse_Result{Result: &forwardv1.ToolResult{Result: raw, IsError: res.IsError}}})
}

// progressQueue bounds the progress events waiting to be sent: a full
// queue drops progress, never the result.
const progressQueue = 64

// progressRelay sends a forwarded call's progress back to the entry node.
// Progress is reported from the session's goroutine, which must not wait
// on the network: the first report starts a sender goroutine and a bounded
// queue, and a call that reports none (most) never has either.
type progressRelay struct {
	send func(*forwardv1.CallToolResponse) error

	mu     sync.Mutex
	queue  chan *forwardv1.CallToolResponse // nil until the first report
	closed bool
	done   chan struct{} // closed when the sender has sent or dropped all
	err    error         // the first failed send; read after done
}

func (p *progressRelay) report(progress, total float64, msg string) {
	ev := &forwardv1.CallToolResponse{Event: &forwardv1.CallToolResponse_Progress{Progress: &forwardv1.Progress{Progress: progress, Total: total, Message: msg}}}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return // the call has answered: too late to report
	}
	if p.queue == nil {
		p.queue, p.done = make(chan *forwardv1.CallToolResponse, progressQueue), make(chan struct{})
		go p.sender()
	}
	select {
	case p.queue <- ev:
	default:
	}
}

func (p *progressRelay) sender() {
	defer close(p.done)
	for ev := range p.queue {
		if p.err == nil {
			p.err = p.send(ev) // after a failure, drain: the stream is gone
		}
	}
}

// close stops further reports and waits until the queued ones are sent;
// it returns the first send's failure.
func (p *progressRelay) close() error {
	p.mu.Lock()
	p.closed = true
	q := p.queue
	p.mu.Unlock()
	if q == nil {
		return nil
	}
	close(q)
	<-p.done
	return p.err
}

// run dispatches a forwarded operation on the local manager.
func (f forwardServer) run(ctx context.Context, id, tool string, args map[string]any) (session.Result, error) {
	m := f.s.mgr
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
		return f.s.callLocal(id, func() (session.Result, error) { return m.SendKey(ctx, id, k) })
	default:
		return f.s.callLocal(id, func() (session.Result, error) { return m.Call(ctx, id, tool, args) })
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

// ReadResource reads a resource of a session this node owns.
func (f forwardServer) ReadResource(_ context.Context, req *forwardv1.ReadResourceRequest) (*forwardv1.ReadResourceResponse, error) {
	if _, err := f.authorize(req.GetCaller(), req.GetSession()); err != nil {
		return nil, err
	}
	raw, err := f.s.mgr.ReadResource(req.GetSession(), req.GetUri())
	if err != nil {
		return nil, f.s.ownerStatus(req.GetSession(), err)
	}
	return &forwardv1.ReadResourceResponse{MimeType: "application/json", Contents: raw}, nil
}

// attached returns the front, or Unavailable before mcp.New attached it
// (the sender treats that as a node it cannot reach right now).
func (f forwardServer) attached() (frontDelivery, error) {
	fr := f.s.front()
	if fr == nil {
		return nil, status.Error(codes.Unavailable, "the MCP front of node "+f.s.self+" is not attached yet")
	}
	return fr, nil
}

// frontDelivery is the part of mcp.Front forwarded client messages use.
type frontDelivery interface {
	DeliverResponse(ctx context.Context, connID string, body []byte) (int, error)
	DeliverSSE(ctx context.Context, connID string, body []byte) (int, error)
}

// deliver hands a client message to this node's front (its legacy SSE
// path when sse) and returns the HTTP status the front answered.
func (f forwardServer) deliver(ctx context.Context, connID string, msg []byte, sse bool) (int32, error) {
	fr, err := f.attached()
	if err != nil {
		return 0, err
	}
	var code int
	if sse {
		code, err = fr.DeliverSSE(ctx, connID, msg)
	} else {
		code, err = fr.DeliverResponse(ctx, connID, msg)
	}
	if err != nil {
		return 0, status.Error(codes.FailedPrecondition, err.Error())
	}
	return int32(code), nil
}

// DeliverResponse hands a client's response to this node's front.
func (f forwardServer) DeliverResponse(ctx context.Context, req *forwardv1.DeliverResponseRequest) (*forwardv1.DeliverResponseResponse, error) {
	code, err := f.deliver(ctx, req.GetConnection(), req.GetMessage(), false)
	if err != nil {
		return nil, err
	}
	return &forwardv1.DeliverResponseResponse{HttpStatus: code}, nil
}

// DeliverCancel hands a client's notifications/cancelled to this node's
// front, which cancels the call if it is in flight here.
func (f forwardServer) DeliverCancel(ctx context.Context, req *forwardv1.DeliverCancelRequest) (*forwardv1.DeliverCancelResponse, error) {
	code, err := f.deliver(ctx, req.GetConnection(), req.GetMessage(), false)
	if err != nil {
		return nil, err
	}
	return &forwardv1.DeliverCancelResponse{HttpStatus: code}, nil
}

// DeliverSseMessage serves a legacy SSE message for a stream this node
// holds.
func (f forwardServer) DeliverSseMessage(ctx context.Context, req *forwardv1.DeliverSseMessageRequest) (*forwardv1.DeliverSseMessageResponse, error) {
	code, err := f.deliver(ctx, req.GetConnection(), req.GetMessage(), true)
	if err != nil {
		return nil, err
	}
	return &forwardv1.DeliverSseMessageResponse{HttpStatus: code}, nil
}

// SpendState holds a request state's nonce, as one of its holders (hold),
// or decides as the arbiter by the previous rule whether it was spent,
// spending it if not.
func (f forwardServer) SpendState(_ context.Context, req *forwardv1.SpendStateRequest) (*forwardv1.SpendStateResponse, error) {
	if req.GetNonce() == "" || len(req.GetNonce()) > maxNonceBytes {
		return nil, status.Errorf(codes.InvalidArgument, "a request state's nonce must be 1 to %d bytes, got %d", maxNonceBytes, len(req.GetNonce()))
	}
	exp := time.Unix(req.GetExpiresUnix(), 0)
	if req.GetHold() {
		return &forwardv1.SpendStateResponse{AlreadySpent: f.s.nonces.hold(req.GetNonce(), string(req.GetSpend()), exp)}, nil
	}
	already := f.s.nonces.decide(req.GetNonce(), exp)
	return &forwardv1.SpendStateResponse{AlreadySpent: already}, nil
}

// AdoptSession starts a session handed off by another node, from the
// snapshot it sent or from this node's standby copy, and publishes it
// before answering.
func (f forwardServer) AdoptSession(ctx context.Context, req *forwardv1.AdoptSessionRequest) (*forwardv1.AdoptSessionResponse, error) {
	var code int
	var msg string
	if h := req.GetStandby(); h != nil {
		code, msg = f.s.adoptFromStandby(ctx, cluster.PeerName(ctx), req.GetFrom(), h)
	} else {
		var snap session.Snapshot
		if err := json.Unmarshal(req.GetSnapshot(), &snap); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "the snapshot is not JSON: %v", err)
		}
		code, msg = f.s.adopt(ctx, req.GetFrom(), snap)
	}
	switch code {
	case http.StatusOK:
		return &forwardv1.AdoptSessionResponse{}, nil
	case http.StatusServiceUnavailable:
		return nil, status.Error(codes.Unavailable, msg)
	case http.StatusForbidden:
		return nil, status.Error(codes.PermissionDenied, msg)
	case http.StatusBadRequest:
		return nil, status.Error(codes.InvalidArgument, msg)
	case http.StatusPreconditionFailed:
		return nil, status.Error(codes.FailedPrecondition, msg)
	default:
		return nil, status.Error(codes.AlreadyExists, msg)
	}
}
