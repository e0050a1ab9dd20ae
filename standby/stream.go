package standby

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	standbyv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/standby/v1"
)

// StreamPeers are Peers that can also reach a member's
// StandbyStreamService. A Shipper whose Peers implement it ships every
// snapshot over one long-lived HoldStream per standby instead of a unary
// Hold per snapshot: a unary call opens and closes a stream on the
// write's path (headers, trailers, a handler scheduled on the standby),
// which made a replicated write cost several round trips where one is
// needed (docs/bench/replication.md).
type StreamPeers interface {
	Peers
	// StreamClient returns the stream client of the named member and the
	// connection it calls over: when a later call returns another
	// connection, the stream over the old one is replaced.
	StreamClient(node string) (client standbyv1.StandbyStreamServiceClient, conn any, err error)
}

// unaryFor is how long a Shipper keeps calling the unary Hold on a node
// that answered a HoldStream UNIMPLEMENTED (a node of an older release)
// before it tries a stream again.
const unaryFor = time.Minute

// errNotSent marks a stream that broke before the snapshot was sent on
// it: the snapshot may go on a new stream.
var errNotSent = errors.New("the hold stream broke before the snapshot was sent")

// brokenStream is a stream's transport failing under a snapshot in
// flight (the standby died, the connection dropped): whether the standby
// holds it is unknown, and the snapshot is sent once more on a new stream.
// Holding is idempotent (the same epoch and number are acknowledged and
// kept), and the new stream reports what a new call would: a standby
// that died refuses the connection, which lets the owner answer on its
// own durability (Verdict) rather than refuse the write.
type brokenStream struct{ err error }

func (b brokenStream) Error() string { return b.err.Error() }
func (b brokenStream) Unwrap() error { return b.err }

// errShipperClosed is what a ship gets after Close.
var errShipperClosed = errors.New("the shipper is closed")

// links are a Shipper's HoldStreams, one per standby node.
type links struct {
	mu     sync.Mutex
	by     map[string]*link
	closed bool
}

// link is the stream to one standby node.
type link struct {
	mu         sync.Mutex // held while the stream is (re)opened
	hs         *holdStream
	unaryUntil time.Time // the node answered UNIMPLEMENTED: unary until then
	gone       error     // set when the link was pruned or closed: no new stream on it
}

func (ls *links) get(node string) (*link, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		return nil, errShipperClosed
	}
	if ls.by == nil {
		ls.by = map[string]*link{}
	}
	l := ls.by[node]
	if l == nil {
		l = &link{}
		ls.by[node] = l
	}
	return l, nil
}

// prune ends and forgets the streams to nodes no longer among the
// candidates (a member that left: its name may never come back).
func (ls *links) prune(candidates []Candidate) {
	ls.mu.Lock()
	var gone []*link
	for node, l := range ls.by {
		if !slices.ContainsFunc(candidates, func(c Candidate) bool { return c.Name == node }) {
			gone = append(gone, l)
			delete(ls.by, node)
		}
	}
	ls.mu.Unlock()
	for _, l := range gone {
		l.end(errors.New("the standby is no longer a candidate"))
	}
}

// close ends every stream; later ships fail.
func (ls *links) close() {
	ls.mu.Lock()
	ls.closed = true
	all := ls.by
	ls.by = nil
	ls.mu.Unlock()
	for _, l := range all {
		l.end(errShipperClosed)
	}
}

// end breaks l's stream, and any a ship that already holds l would open.
func (l *link) end(why error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gone = why
	if l.hs != nil {
		l.hs.fail(why)
	}
}

// holdOverStream ships req to node on its HoldStream. ok is false when
// the node is to be called with the unary Hold instead (it does not serve
// the stream); err then says nothing.
func (s *Shipper) holdOverStream(ctx context.Context, sp StreamPeers, node string, req *standbyv1.HoldRequest) (resp *standbyv1.HoldResponse, ok bool, err error) {
	l, err := s.links.get(node)
	if err != nil {
		return nil, true, err
	}
	// A stream found broken before the snapshot went out, or whose
	// transport failed under it, is replaced once (see brokenStream).
	for range 2 {
		hs, unary, err := s.openLink(ctx, sp, node, l)
		if unary {
			return nil, false, nil
		}
		if err != nil {
			return nil, true, err
		}
		resp, err = hs.hold(ctx, req)
		var broken brokenStream
		switch {
		case status.Code(err) == codes.Unimplemented && resp == nil:
			l.mu.Lock()
			l.unaryUntil = s.cfg.Now().Add(unaryFor)
			l.mu.Unlock()
			return nil, false, nil
		case errors.Is(err, errNotSent), errors.As(err, &broken) && ctx.Err() == nil:
			continue
		}
		return resp, true, err
	}
	return nil, true, errNotSent
}

// openLink returns l's working stream, opening one when there is none,
// it broke, or the connection to node changed. unary is set while node is
// known not to serve the stream.
func (s *Shipper) openLink(ctx context.Context, sp StreamPeers, node string, l *link) (hs *holdStream, unary bool, err error) {
	c, conn, err := sp.StreamClient(node)
	if err != nil {
		return nil, false, fmt.Errorf("reaching it: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone != nil {
		return nil, false, l.gone
	}
	if s.cfg.Now().Before(l.unaryUntil) {
		return nil, true, nil
	}
	if l.hs != nil && l.hs.conn == conn && l.hs.broken() == nil {
		return l.hs, false, nil
	}
	if l.hs != nil {
		l.hs.fail(brokenStream{errors.New("replaced by a new hold stream")})
	}
	// The stream outlives this ship, but opening it (which waits for a
	// connection) is bounded by the ship's deadline.
	sctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	st, err := c.HoldStream(sctx)
	if !stop() || err != nil {
		cancel()
		if err == nil {
			err = ctx.Err()
		}
		return nil, false, fmt.Errorf("opening a hold stream: %w", err)
	}
	l.hs = &holdStream{conn: conn, st: st, cancel: cancel, recv: make(chan struct{}, 1), pending: map[uint64]*holdCall{}}
	return l.hs, false, nil
}

// holdStream is one HoldStream. Its snapshots are sent by the goroutines
// that ship them, and their acknowledgements received by the same
// goroutines, whichever holds the receive token: no goroutine of its own
// stands between the transport and the write waiting for its
// acknowledgement (a hand-off is a wake-up on the write's path).
type holdStream struct {
	conn   any
	st     standbyv1.StandbyStreamService_HoldStreamClient
	cancel context.CancelFunc
	sendMu sync.Mutex    // one Send at a time, as gRPC requires
	recv   chan struct{} // the receive token (capacity 1): its holder calls Recv

	mu      sync.Mutex
	next    uint64
	pending map[uint64]*holdCall
	err     error // why the stream broke; nil while it works
}

// holdCall is one snapshot waiting for its acknowledgement.
type holdCall struct {
	done chan struct{} // closed once resp or err is set
	resp *standbyv1.HoldStreamResponse
	err  error
}

func (hs *holdStream) broken() error {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.err
}

// hold sends req and waits for its acknowledgement, until ctx ends: then
// the stream is torn down (an acknowledgement left behind would hold up
// the ones after it), which ends a Recv in progress too, and the writes
// waiting behind it go again on a new stream.
func (hs *holdStream) hold(ctx context.Context, req *standbyv1.HoldRequest) (*standbyv1.HoldResponse, error) {
	c := &holdCall{done: make(chan struct{})}
	hs.mu.Lock()
	if hs.err != nil {
		hs.mu.Unlock()
		return nil, errNotSent
	}
	hs.next++
	id := hs.next
	hs.pending[id] = c
	hs.mu.Unlock()
	// The writes queued behind this one are sent again on a new stream,
	// each within its own deadline (brokenStream); this one is not.
	stop := context.AfterFunc(ctx, func() { hs.fail(brokenStream{fmt.Errorf("no acknowledgement in time: %w", ctx.Err())}) })
	defer stop()
	hs.sendMu.Lock()
	err := hs.st.Send(&standbyv1.HoldStreamRequest{Id: id, Request: req})
	hs.sendMu.Unlock()
	// io.EOF: the standby ended the stream, and Recv says why (a node
	// without the stream answers UNIMPLEMENTED there).
	if err != nil && !errors.Is(err, io.EOF) {
		hs.fail(brokenStream{err})
	}
	hs.await(c)
	if c.err != nil {
		return nil, c.err
	}
	if code := codes.Code(c.resp.GetCode()); code != codes.OK {
		return nil, status.Error(code, c.resp.GetMessage())
	}
	return c.resp.GetResponse(), nil
}

// await returns once c is answered, receiving acknowledgements (its own
// or earlier writes') whenever no other waiter is.
func (hs *holdStream) await(c *holdCall) {
	for {
		select {
		case <-c.done:
			return
		case hs.recv <- struct{}{}:
		}
		select {
		case <-c.done: // answered while this goroutine took the token
			<-hs.recv
			return
		default:
		}
		resp, err := hs.st.Recv()
		<-hs.recv
		if err != nil {
			hs.fail(brokenStream{err})
			continue
		}
		hs.deliver(resp)
	}
}

// deliver answers the call resp acknowledges.
func (hs *holdStream) deliver(resp *standbyv1.HoldStreamResponse) {
	hs.mu.Lock()
	c := hs.pending[resp.GetId()]
	delete(hs.pending, resp.GetId())
	hs.mu.Unlock()
	if c != nil {
		c.resp = resp
		close(c.done)
	}
}

// fail breaks the stream: every call waiting on it gets err (the first
// cause, when it had broken already) and later calls errNotSent.
func (hs *holdStream) fail(err error) {
	hs.mu.Lock()
	if hs.err == nil {
		hs.err = err
	}
	err = hs.err
	pending := hs.pending
	hs.pending = nil
	hs.mu.Unlock()
	hs.cancel()
	for _, c := range pending {
		c.err = err
		close(c.done)
	}
}
