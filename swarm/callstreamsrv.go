package swarm

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	forwardv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/forward/v1"
)

// Bounds of a Calls stream a peer opened: the calls it may have running at
// once (a call past it is refused, and nothing runs), and the longest a
// call may run whatever timeout the peer asks for.
const (
	maxStreamCalls       = 1024
	maxStreamCallTimeout = time.Hour
)

// Calls runs the tool calls a peer forwards over one long-lived stream.
// Each call runs on a goroutine of its own, as CallTool's handler would;
// its events go back tagged with the peer's number for it. When the peer
// closes its side, the running calls finish and the stream ends; when the
// stream breaks, they are cancelled, as CallTool's are when its stream
// does.
func (f forwardServer) Calls(stream grpc.BidiStreamingServer[forwardv1.CallsRequest, forwardv1.CallsResponse]) error {
	cs := &callsServer{f: f, stream: stream, running: map[uint64]context.CancelFunc{}}
	err := cs.serve(stream.Context())
	if errors.Is(err, io.EOF) {
		cs.wg.Wait() // the peer closed its side: its calls finish
		return nil
	}
	cs.cancelAll()
	cs.wg.Wait()
	return err
}

// callsServer is the owner's side of one Calls stream.
type callsServer struct {
	f      forwardServer
	stream grpc.BidiStreamingServer[forwardv1.CallsRequest, forwardv1.CallsResponse]

	sendMu sync.Mutex // gRPC allows one sender at a time

	mu      sync.Mutex
	running map[uint64]context.CancelFunc
	wg      sync.WaitGroup
}

// serve reads the peer's messages until the stream ends, and returns why
// (io.EOF when the peer closed its side).
func (cs *callsServer) serve(ctx context.Context) error {
	for {
		req, err := cs.stream.Recv()
		if err != nil {
			return err
		}
		id := req.GetId()
		switch op := req.GetOp().(type) {
		case *forwardv1.CallsRequest_Cancel:
			cs.mu.Lock()
			if cancel := cs.running[id]; cancel != nil {
				cancel()
			}
			cs.mu.Unlock()
		case *forwardv1.CallsRequest_Call:
			cs.start(ctx, id, op.Call, req.GetTimeoutMs())
		default:
			cs.refuse(id, status.Errorf(codes.InvalidArgument, "call %d on the Calls stream is neither a call nor a cancel", id))
		}
	}
}

// start runs one call on its own goroutine, unless its id is already
// running on this stream or the stream has maxStreamCalls running.
func (cs *callsServer) start(ctx context.Context, id uint64, req *forwardv1.CallToolRequest, timeoutMs int64) {
	timeout := cs.f.s.timeout
	if timeoutMs > 0 {
		timeout = min(time.Duration(timeoutMs)*time.Millisecond, maxStreamCallTimeout)
	}
	cs.mu.Lock()
	if _, dup := cs.running[id]; dup {
		cs.mu.Unlock()
		cs.refuse(id, status.Errorf(codes.InvalidArgument, "call %d is already running on this Calls stream", id))
		return
	}
	if len(cs.running) >= cs.f.s.callsLimit {
		cs.mu.Unlock()
		cs.refuse(id, status.Errorf(codes.ResourceExhausted, "%d calls are already running on this Calls stream", cs.f.s.callsLimit))
		return
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	cs.running[id] = cancel
	cs.wg.Add(1)
	cs.mu.Unlock()
	go func() {
		defer cs.wg.Done()
		err := cs.f.callTool(cctx, req, func(ev *forwardv1.CallToolResponse) error {
			out := &forwardv1.CallsResponse{Id: id}
			switch e := ev.GetEvent().(type) {
			case *forwardv1.CallToolResponse_Progress:
				out.Event = &forwardv1.CallsResponse_Progress{Progress: e.Progress}
			case *forwardv1.CallToolResponse_Result:
				out.Event = &forwardv1.CallsResponse_Result{Result: e.Result}
			}
			return cs.send(out)
		})
		cs.mu.Lock()
		delete(cs.running, id)
		cs.mu.Unlock()
		cancel()
		if err != nil {
			cs.refuse(id, err)
		}
	}()
}

// refuse answers call id with err, as the status CallTool would end with.
func (cs *callsServer) refuse(id uint64, err error) {
	st := status.Convert(err).Proto()
	_ = cs.send(&forwardv1.CallsResponse{Id: id, Event: &forwardv1.CallsResponse_Error{Error: &forwardv1.CallError{
		Code: st.GetCode(), Message: st.GetMessage(), Details: st.GetDetails(),
	}}})
}

func (cs *callsServer) send(ev *forwardv1.CallsResponse) error {
	cs.sendMu.Lock()
	defer cs.sendMu.Unlock()
	return cs.stream.Send(ev)
}

func (cs *callsServer) cancelAll() {
	cs.mu.Lock()
	for _, cancel := range cs.running {
		cancel()
	}
	cs.mu.Unlock()
}
