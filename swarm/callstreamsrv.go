package swarm

import (
	"context"
	"errors"
	"io"
	"slices"
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

// maxParkedReaders bounds the goroutines one Calls stream keeps parked
// between calls (each holds its grown stack), and readerLinger how long
// one stays parked with no call to read.
const (
	maxParkedReaders = 16
	readerLinger     = 250 * time.Millisecond
)

// Calls runs the tool calls a peer forwards over one long-lived stream.
// Each call runs on a goroutine of its own, as CallTool's handler would;
// its events go back tagged with the peer's number for it. When the peer
// closes its side, the running calls finish and the stream ends; when the
// stream breaks, they are cancelled, as CallTool's are when its stream
// does.
func (f forwardServer) Calls(stream grpc.BidiStreamingServer[forwardv1.CallsRequest, forwardv1.CallsResponse]) error {
	cs := &callsServer{f: f, stream: stream, running: map[uint64]context.CancelFunc{}, ended: make(chan error, 1)}
	go cs.read(stream.Context()) // its readers come and go; this goroutine waits for the end
	err := <-cs.ended
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
	// ended receives why the stream ended (io.EOF when the peer closed its
	// side), once: only the reader whose Recv failed sends it.
	ended chan error

	readersMu   sync.Mutex
	parked      []chan bool // goroutines waiting for their turn to read
	readersDone bool        // the stream has ended: no goroutine parks
}

// read reads the peer's messages until the stream ends, or until one is a
// call it may run: it then hands the reading on (handOff) and runs that
// call itself. The call so starts at once, on the goroutine that received
// it, rather than after a second goroutine is scheduled (on an otherwise
// idle node that wake-up was ~9 µs of a forward's latency). After the
// call the goroutine parks, ready to read again, so readers run on stacks
// already grown: a fresh goroutine grew its stack in every message's
// decoding (5.6% of a node's CPU under the spread load). One goroutine
// reads at a time.
func (cs *callsServer) read(ctx context.Context) {
	turn := make(chan bool, 1)
	for {
		req, err := cs.stream.Recv()
		if err != nil {
			cs.releaseReaders()
			cs.ended <- err
			return
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
			cctx, cancel, ok := cs.admit(ctx, id, req.GetTimeoutMs())
			if !ok {
				continue
			}
			cs.handOff(ctx)
			cs.run(cctx, cancel, id, op.Call)
			if !cs.park(turn) {
				return
			}
		default:
			cs.refuse(id, status.Errorf(codes.InvalidArgument, "call %d on the Calls stream is neither a call nor a cancel", id))
		}
	}
}

// handOff makes a parked goroutine the reader, or a new one when none is
// parked.
func (cs *callsServer) handOff(ctx context.Context) {
	cs.readersMu.Lock()
	if n := len(cs.parked); n > 0 {
		turn := cs.parked[n-1]
		cs.parked = cs.parked[:n-1]
		cs.readersMu.Unlock()
		turn <- true // buffered: it reads once it wakes
		return
	}
	cs.readersMu.Unlock()
	go cs.read(ctx)
}

// park waits, after a call, until the goroutine is made the reader again
// (true), or the stream has ended, enough others are parked or it has
// waited readerLinger (false: the goroutine ends). The linger gives back
// what a burst of concurrent calls left parked, as the session workers
// do, so a node at rest keeps no more goroutines than before the burst.
func (cs *callsServer) park(turn chan bool) bool {
	cs.readersMu.Lock()
	if cs.readersDone || len(cs.parked) >= maxParkedReaders {
		cs.readersMu.Unlock()
		return false
	}
	cs.parked = append(cs.parked, turn)
	cs.readersMu.Unlock()
	t := time.NewTimer(readerLinger)
	defer t.Stop()
	select {
	case read := <-turn:
		return read
	case <-t.C:
	}
	cs.readersMu.Lock()
	if i := slices.Index(cs.parked, turn); i >= 0 {
		cs.parked = slices.Delete(cs.parked, i, i+1)
		cs.readersMu.Unlock()
		return false
	}
	cs.readersMu.Unlock()
	return <-turn // taken just as it timed out: its turn is on the way
}

// releaseReaders ends the parked goroutines, and any that would park
// later: the stream has ended.
func (cs *callsServer) releaseReaders() {
	cs.readersMu.Lock()
	parked := cs.parked
	cs.parked, cs.readersDone = nil, true
	cs.readersMu.Unlock()
	for _, turn := range parked {
		turn <- false
	}
}

// admit registers call id as running with its timeout, unless its id is
// already running on this stream or the stream has maxStreamCalls running
// (then it answers the refusal and reports false).
func (cs *callsServer) admit(ctx context.Context, id uint64, timeoutMs int64) (context.Context, context.CancelFunc, bool) {
	timeout := cs.f.s.timeout
	if timeoutMs > 0 {
		timeout = min(time.Duration(timeoutMs)*time.Millisecond, maxStreamCallTimeout)
	}
	cs.mu.Lock()
	if _, dup := cs.running[id]; dup {
		cs.mu.Unlock()
		cs.refuse(id, status.Errorf(codes.InvalidArgument, "call %d is already running on this Calls stream", id))
		return nil, nil, false
	}
	if len(cs.running) >= cs.f.s.callsLimit {
		cs.mu.Unlock()
		cs.refuse(id, status.Errorf(codes.ResourceExhausted, "%d calls are already running on this Calls stream", cs.f.s.callsLimit))
		return nil, nil, false
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	cs.running[id] = cancel
	cs.wg.Add(1)
	cs.mu.Unlock()
	return cctx, cancel, true
}

// run runs admitted call id and answers it.
func (cs *callsServer) run(ctx context.Context, cancel context.CancelFunc, id uint64, req *forwardv1.CallToolRequest) {
	defer cs.wg.Done()
	err := cs.f.callTool(ctx, req, func(ev *forwardv1.CallToolResponse) error {
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
