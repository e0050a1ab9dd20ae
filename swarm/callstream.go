package swarm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	forwardv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/forward/v1"
	"github.com/mcpswarm/mcpswarm/session"
)

// errNoCallStream means a call could not go over a Calls stream and did not
// run: the caller makes it with a stream of its own (CallTool).
var errNoCallStream = errors.New("no Calls stream to the peer")

// maxQueuedCancels bounds the cancels waiting to be sent on one stream.
const maxQueuedCancels = 1024

// streamProgress bounds the progress events of one call waiting for its
// caller; past it progress is dropped, never the result.
const streamProgress = 16

// callStreams holds this node's Calls stream to each peer, opened on the
// first call forwarded to it and replaced when it ends or the peer's
// connection changes. Its zero value is ready to use.
type callStreams struct {
	mu     sync.Mutex
	byNode map[string]*callStreamSlot

	// opened counts the streams opened and fallbacks the calls made with a
	// stream of their own although the peer advertised the Calls stream.
	opened, fallbacks atomic.Int64
}

// callStreamSlot serializes the opening of one peer's stream, so a peer
// whose connection is still being made holds up only its own calls.
type callStreamSlot struct {
	mu sync.Mutex
	cs *callStream
	// unserved is a connection whose peer answered that it serves no
	// Calls stream: calls over it go without one.
	unserved grpc.ClientConnInterface
}

// callStream is one Calls stream: calls are numbered on it, and its reader
// hands each call's events to the waiting caller.
type callStream struct {
	cc     grpc.ClientConnInterface
	stream grpc.BidiStreamingClient[forwardv1.CallsRequest, forwardv1.CallsResponse]
	cancel context.CancelFunc

	sendMu sync.Mutex // gRPC allows one sender at a time

	mu    sync.Mutex
	next  uint64
	calls map[uint64]*streamCall
	err   error         // why the stream ended
	done  chan struct{} // closed when the stream has ended
	// cancels wait for the cancel sender, which runs while flushing.
	cancels  []uint64
	flushing bool
}

// streamCall is one call's mailbox, filled by the stream's reader.
type streamCall struct {
	progress chan *forwardv1.Progress
	end      chan *forwardv1.CallsResponse // its result or error: one, ever
}

// slot returns node's slot, creating it.
func (c *callStreams) slot(node string) *callStreamSlot {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byNode == nil {
		c.byNode = map[string]*callStreamSlot{}
	}
	sl := c.byNode[node]
	if sl == nil {
		sl = &callStreamSlot{}
		c.byNode[node] = sl
	}
	return sl
}

// get returns a live stream to node over cc, opening one if the last ended
// or rode another connection (the peer restarted).
func (c *callStreams) get(node string, cc grpc.ClientConnInterface) (*callStream, error) {
	sl := c.slot(node)
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if cs := sl.cs; cs != nil && cs.cc == cc && !cs.ended() {
		return cs, nil
	}
	if old := sl.cs; old != nil && old.cc == cc && old.ended() && status.Code(old.err) == codes.Unimplemented {
		sl.unserved = cc
	}
	if sl.unserved == cc {
		return nil, errNoCallStream
	}
	if old := sl.cs; old != nil {
		old.cancel() // a stream on a replaced connection
	}
	// The stream outlives any one call: it ends with the connection, or
	// when a later get replaces it.
	ctx, cancel := context.WithCancel(context.Background())
	st, err := forwardv1.NewForwardServiceClient(cc).Calls(ctx)
	if err != nil {
		cancel()
		sl.cs = nil
		return nil, err
	}
	cs := &callStream{cc: cc, stream: st, cancel: cancel, calls: map[uint64]*streamCall{}, done: make(chan struct{})}
	sl.cs = cs
	c.opened.Add(1)
	go cs.read()
	return cs, nil
}

func (cs *callStream) ended() bool {
	select {
	case <-cs.done:
		return true
	default:
		return false
	}
}

// read hands every event to its call until the stream ends, then fails
// the calls still waiting.
func (cs *callStream) read() {
	for {
		ev, err := cs.stream.Recv()
		if err != nil {
			cs.mu.Lock()
			cs.err = err
			cs.calls = nil
			close(cs.done)
			cs.mu.Unlock()
			cs.cancel()
			return
		}
		_, isProgress := ev.GetEvent().(*forwardv1.CallsResponse_Progress)
		cs.mu.Lock()
		sc := cs.calls[ev.GetId()]
		if !isProgress {
			delete(cs.calls, ev.GetId())
		}
		cs.mu.Unlock()
		if sc == nil {
			continue // a call its caller gave up on, or an id never sent
		}
		if isProgress {
			select {
			case sc.progress <- ev.GetProgress():
			default:
			}
			continue
		}
		sc.end <- ev // buffered, and sent once: the call left the map
	}
}

// start numbers a call, registers its mailbox and sends it.
func (cs *callStream) start(req *forwardv1.CallToolRequest, timeout time.Duration) (uint64, *streamCall, error) {
	sc := &streamCall{progress: make(chan *forwardv1.Progress, streamProgress), end: make(chan *forwardv1.CallsResponse, 1)}
	cs.mu.Lock()
	if cs.calls == nil {
		cs.mu.Unlock()
		return 0, nil, errNoCallStream
	}
	cs.next++
	id := cs.next
	cs.calls[id] = sc
	cs.mu.Unlock()
	ms := max(timeout.Milliseconds(), 1)
	cs.sendMu.Lock()
	err := cs.stream.Send(&forwardv1.CallsRequest{Id: id, Op: &forwardv1.CallsRequest_Call{Call: req}, TimeoutMs: ms})
	cs.sendMu.Unlock()
	if err != nil {
		// gRPC did not send it (the stream has ended): nothing ran.
		cs.forget(id)
		return 0, nil, errNoCallStream
	}
	return id, sc, nil
}

func (cs *callStream) forget(id uint64) {
	cs.mu.Lock()
	delete(cs.calls, id)
	cs.mu.Unlock()
}

// abandon tells the owner the caller no longer waits for id. The caller
// returns at once: the cancel is queued and sent by the stream's one
// cancel sender, since a send may wait for the stream's flow control (a
// peer that stopped reading). Past maxQueuedCancels a cancel is dropped,
// and the owner ends that call at the deadline it was sent with.
func (cs *callStream) abandon(id uint64) {
	cs.mu.Lock()
	delete(cs.calls, id)
	if len(cs.cancels) < maxQueuedCancels {
		cs.cancels = append(cs.cancels, id)
	}
	start := !cs.flushing
	cs.flushing = true
	cs.mu.Unlock()
	if start {
		go cs.sendCancels()
	}
}

// sendCancels sends the queued cancels until none is left.
func (cs *callStream) sendCancels() {
	for {
		cs.mu.Lock()
		ids := cs.cancels
		cs.cancels = nil
		if len(ids) == 0 {
			cs.flushing = false
			cs.mu.Unlock()
			return
		}
		cs.mu.Unlock()
		cs.sendMu.Lock()
		for _, id := range ids {
			if cs.stream.Send(&forwardv1.CallsRequest{Id: id, Op: &forwardv1.CallsRequest_Cancel{Cancel: true}}) != nil {
				break // the stream has ended: its calls with it
			}
		}
		cs.sendMu.Unlock()
	}
}

// forwardOnStream runs a forwarded call over node's Calls stream. It
// returns errNoCallStream when the call did not reach the owner that way
// (the caller then opens a stream of its own for it).
func (s *Swarm) forwardOnStream(ctx context.Context, node string, cc grpc.ClientConnInterface, req *forwardv1.CallToolRequest) (session.Result, error) {
	deadline, _ := ctx.Deadline() // forward bounded ctx
	cs, err := s.streams.get(node, cc)
	if err != nil {
		return session.Result{}, errNoCallStream
	}
	id, sc, err := cs.start(req, time.Until(deadline))
	if err != nil {
		return session.Result{}, err
	}
	progress := session.ProgressFrom(ctx) // a no-op when the caller wants none
	relay := func(p *forwardv1.Progress) { progress(p.GetProgress(), p.GetTotal(), p.GetMessage()) }
	for {
		select {
		case p := <-sc.progress:
			relay(p)
		case ev := <-sc.end:
			for len(sc.progress) > 0 { // sent before the result
				relay(<-sc.progress)
			}
			return s.streamAnswer(node, ev)
		case <-cs.done:
			select {
			case ev := <-sc.end: // answered just before the stream ended
				return s.streamAnswer(node, ev)
			default:
			}
			if status.Code(cs.err) == codes.Unimplemented {
				return session.Result{}, errNoCallStream // the peer serves no Calls: nothing ran
			}
			return session.Result{}, s.forwardErr(node, notCancelled(ctx, cs.err), true)
		case <-ctx.Done():
			cs.abandon(id)
			return session.Result{}, s.forwardErr(node, status.FromContextError(ctx.Err()).Err(), true)
		}
	}
}

// streamAnswer turns a call's last event into its result or error, as
// CallTool's stream would have ended.
func (s *Swarm) streamAnswer(node string, ev *forwardv1.CallsResponse) (session.Result, error) {
	switch e := ev.GetEvent().(type) {
	case *forwardv1.CallsResponse_Result:
		return decodeForwardResult(node, e.Result.GetResult())
	case *forwardv1.CallsResponse_Error:
		ce := e.Error
		st := status.FromProto(&spb.Status{Code: ce.GetCode(), Message: ce.GetMessage(), Details: ce.GetDetails()})
		if st.Code() == codes.OK {
			return session.Result{}, fmt.Errorf("node %s answered an error without a code: %s", node, ce.GetMessage())
		}
		return session.Result{}, s.forwardErr(node, st.Err(), true)
	default:
		return session.Result{}, fmt.Errorf("node %s answered the call with an event this node does not know: %w", node, ErrMayHaveApplied)
	}
}
