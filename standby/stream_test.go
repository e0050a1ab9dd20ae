package standby

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/mcpswarm/mcpswarm/internal/poll"
	standbyv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/standby/v1"
)

// grpcStandby is one standby node served over an in-memory gRPC
// connection, as another member's standby service is reached: the owner's
// Shipper sees it through grpcPeers.
type grpcStandby struct {
	h       *Holder
	cc      *grpc.ClientConn
	unary   atomic.Int64 // unary Hold calls served
	streams atomic.Int64 // HoldStreams opened
	open    atomic.Int64 // HoldStreams not yet ended
	// gate, when set, holds every streamed snapshot until it is closed:
	// a standby too slow to acknowledge.
	gate atomic.Pointer[chan struct{}]
	// drop, when set, ends the next stream that receives a snapshot
	// before it answers: a connection lost under a write.
	drop atomic.Bool
}

// gatedStream delays each request of a HoldStream while its standby's
// gate is shut.
type gatedStream struct {
	standbyv1.StandbyStreamService_HoldStreamServer
	sb *grpcStandby
}

func (g gatedStream) Recv() (*standbyv1.HoldStreamRequest, error) {
	req, err := g.StandbyStreamService_HoldStreamServer.Recv()
	if err == nil && g.sb.drop.CompareAndSwap(true, false) {
		return nil, status.Error(codes.Unavailable, "connection lost")
	}
	if gate := g.sb.gate.Load(); err == nil && gate != nil {
		select {
		case <-*gate:
		case <-g.Context().Done():
			return nil, g.Context().Err()
		}
	}
	return req, err
}

// gatedStreams serves the stream through gatedStream.
type gatedStreams struct {
	standbyv1.StandbyStreamServiceServer
	sb *grpcStandby
}

func (g gatedStreams) HoldStream(s standbyv1.StandbyStreamService_HoldStreamServer) error {
	return g.StandbyStreamServiceServer.HoldStream(gatedStream{s, g.sb})
}

// newGRPCStandby serves a fresh Holder's Service (and, with streams, its
// StandbyStreamService) for owner "node1".
func newGRPCStandby(t *testing.T, streams bool) *grpcStandby {
	t.Helper()
	h, err := OpenHolder(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	sb := &grpcStandby{h: h}
	svc := NewService(h, func(context.Context) string { return "node1" })
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
			sb.unary.Add(1)
			return next(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, next grpc.StreamHandler) error {
			sb.streams.Add(1)
			sb.open.Add(1)
			defer sb.open.Add(-1)
			return next(srv, ss)
		}))
	standbyv1.RegisterStandbyServiceServer(srv, svc)
	if streams {
		standbyv1.RegisterStandbyStreamServiceServer(srv, gatedStreams{svc.Streams(), sb})
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	sb.cc, err = grpc.NewClient("passthrough:///standby",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sb.cc.Close()
		srv.Stop()
		<-served
		_ = h.Close()
	})
	return sb
}

// grpcPeers is node1's view of its gRPC standbys; those in left are
// still reachable but no longer candidates.
type grpcPeers struct {
	by   map[string]*grpcStandby
	left map[string]bool
}

func (p grpcPeers) Self() Candidate { return Candidate{Name: "node1"} }

func (p grpcPeers) Candidates() []Candidate {
	var out []Candidate
	for name := range p.by {
		if !p.left[name] {
			out = append(out, Candidate{Name: name})
		}
	}
	return out
}

func (p grpcPeers) Client(node string) (standbyv1.StandbyServiceClient, error) {
	return standbyv1.NewStandbyServiceClient(p.by[node].cc), nil
}

func (p grpcPeers) StreamClient(node string) (standbyv1.StandbyStreamServiceClient, any, error) {
	cc := p.by[node].cc
	return standbyv1.NewStandbyStreamServiceClient(cc), cc, nil
}

var _ StreamPeers = grpcPeers{}

func newGRPCShipper(t *testing.T, ackTimeout time.Duration, by map[string]*grpcStandby) *Shipper {
	t.Helper()
	return newGRPCShipperOf(t, ackTimeout, grpcPeers{by: by})
}

func newGRPCShipperOf(t *testing.T, ackTimeout time.Duration, p grpcPeers) *Shipper {
	t.Helper()
	s := NewShipper(ShipperConfig{Replicas: len(p.by), Peers: p, AckTimeout: ackTimeout})
	t.Cleanup(s.Close)
	return s
}

// Writes of many sessions shipped at once to a standby all travel on one
// long-lived stream, each answered only once the standby holds it.
func TestShipperShipsEveryWriteOverOneStream(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after the cleanups registered below
	sb := newGRPCStandby(t, true)
	s := newGRPCShipper(t, 5*time.Second, map[string]*grpcStandby{"node2": sb})
	const sessions, writes = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, sessions*writes)
	for i := range sessions {
		wg.Go(func() {
			id := fmt.Sprintf("s%d", i)
			for n := 1; n <= writes; n++ {
				out := s.Ship(context.Background(), id, 1, fmt.Appendf(nil, `{"n":%d}`, n))
				if !out.Replicated() {
					errs <- fmt.Errorf("%s write %d: not replicated: %v", id, n, out.Missed)
					return
				}
				if c, ok := sb.h.Get(id); !ok || string(c.Snapshot) != fmt.Sprintf(`{"n":%d}`, n) {
					errs <- fmt.Errorf("%s write %d acknowledged, but the standby holds %q", id, n, c.Snapshot)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := sb.streams.Load(); got != 1 {
		t.Errorf("%d HoldStreams opened for %d writes, want 1", got, sessions*writes)
	}
	if got := sb.unary.Load(); got != 0 {
		t.Errorf("%d unary Hold calls, want none", got)
	}
}

// A refusal (an older epoch than the standby holds) comes back on the
// stream as the unary call's would, and the stream goes on serving.
func TestShipperStreamCarriesARefusalAndStaysOpen(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after the cleanups registered below
	sb := newGRPCStandby(t, true)
	s := newGRPCShipper(t, 5*time.Second, map[string]*grpcStandby{"node2": sb})
	if out := s.Ship(context.Background(), "ct", 2, []byte(`{"n":2}`)); !out.Replicated() {
		t.Fatalf("epoch 2 not replicated: %+v", out)
	}
	out := s.Ship(context.Background(), "ct", 1, []byte(`{"n":1}`))
	if !errors.Is(out.Stale, ErrStale) {
		t.Fatalf("a snapshot of epoch 1 over a held epoch 2: Stale = %v, want ErrStale", out.Stale)
	}
	if out := s.Ship(context.Background(), "other", 1, []byte(`{"n":1}`)); !out.Replicated() {
		t.Fatalf("after a refusal: not replicated: %+v", out)
	}
	if got := sb.streams.Load(); got != 1 {
		t.Errorf("%d HoldStreams opened, want the one stream kept across the refusal", got)
	}
}

// A standby of a release without the stream is shipped to with the unary
// Hold.
func TestShipperFallsBackToUnaryHoldWhereNoStreamIsServed(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after the cleanups registered below
	sb := newGRPCStandby(t, false)
	s := newGRPCShipper(t, 5*time.Second, map[string]*grpcStandby{"node2": sb})
	for n := range 3 {
		if out := s.Ship(context.Background(), "ct", 1, fmt.Appendf(nil, `{"n":%d}`, n)); !out.Replicated() {
			t.Fatalf("write %d not replicated: %+v", n, out)
		}
	}
	if got := sb.unary.Load(); got != 3 {
		t.Errorf("%d unary Hold calls for 3 writes, want 3", got)
	}
	if c, _ := sb.h.Get("ct"); string(c.Snapshot) != `{"n":2}` {
		t.Errorf("standby holds %q, want the last write", c.Snapshot)
	}
}

// A standby that does not acknowledge within the bound misses the write;
// the stream it was sent on is dropped, and the next write goes on a new
// one once the standby answers again.
func TestShipperReplacesAStreamThatMissedItsBound(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after the cleanups registered below
	sb := newGRPCStandby(t, true)
	s := newGRPCShipper(t, time.Second, map[string]*grpcStandby{"node2": sb})
	if out := s.Ship(context.Background(), "ct", 1, []byte(`{"n":1}`)); !out.Replicated() {
		t.Fatalf("first write not replicated: %+v", out)
	}
	gate := make(chan struct{})
	sb.gate.Store(&gate)
	out := s.Ship(context.Background(), "ct", 1, []byte(`{"n":2}`))
	if out.Replicated() || !errors.Is(out.Missed["node2"], context.DeadlineExceeded) {
		t.Fatalf("a write the standby sat on: %+v, want node2 missed with a deadline", out)
	}
	sb.gate.Store(nil)
	close(gate)
	out = s.Ship(context.Background(), "ct", 1, []byte(`{"n":3}`))
	if !out.Replicated() {
		t.Fatalf("after the standby answers again: %+v, want replicated", out)
	}
	if c, _ := sb.h.Get("ct"); string(c.Snapshot) != `{"n":3}` {
		t.Errorf("standby holds %q, want the last write", c.Snapshot)
	}
	if got := sb.streams.Load(); got != 2 {
		t.Errorf("%d HoldStreams opened, want 2 (the one that missed its bound replaced once)", got)
	}
}

// After Close a ship fails at once and the streams are gone.
func TestShipperCloseEndsItsStreams(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // after the cleanups registered below
	sb := newGRPCStandby(t, true)
	s := newGRPCShipper(t, 5*time.Second, map[string]*grpcStandby{"node2": sb})
	if out := s.Ship(context.Background(), "ct", 1, []byte(`{"n":1}`)); !out.Replicated() {
		t.Fatalf("not replicated: %+v", out)
	}
	s.Close()
	out := s.Ship(context.Background(), "ct", 1, []byte(`{"n":2}`))
	if !errors.Is(out.Missed["node2"], errShipperClosed) {
		t.Fatalf("a ship after Close: %+v, want node2 missed: closed", out)
	}
}

// A standby that is no longer a candidate (it left the cluster) has its
// stream ended at the next rebalance, not kept open for a name that may
// never come back.
func TestShipperEndsTheStreamOfAStandbyThatLeft(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	sb := newGRPCStandby(t, true)
	left := map[string]bool{}
	s := newGRPCShipperOf(t, 5*time.Second, grpcPeers{by: map[string]*grpcStandby{"node2": sb}, left: left})
	if out := s.Ship(context.Background(), "ct", 1, []byte(`{"n":1}`)); !out.Replicated() {
		t.Fatalf("not replicated: %+v", out)
	}
	if got := sb.open.Load(); got != 1 {
		t.Fatalf("%d open streams after a write, want 1", got)
	}
	left["node2"] = true
	s.Rebalance(context.Background())
	poll.True(t, 5*time.Second, "the stream to the standby that left closes after the rebalance", func() bool { return sb.open.Load() == 0 })
}

// A stream lost under a write (the standby's transport failed before it
// answered) does not make the write miss: it is sent again on a new
// stream, and the standby acknowledges it there.
func TestShipperResendsAWriteWhoseStreamBrokeUnderIt(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	sb := newGRPCStandby(t, true)
	s := newGRPCShipper(t, 5*time.Second, map[string]*grpcStandby{"node2": sb})
	if out := s.Ship(context.Background(), "ct", 1, []byte(`{"n":1}`)); !out.Replicated() {
		t.Fatalf("first write not replicated: %+v", out)
	}
	sb.drop.Store(true)
	if out := s.Ship(context.Background(), "ct", 1, []byte(`{"n":2}`)); !out.Replicated() {
		t.Fatalf("a write whose stream broke under it: %+v, want it replicated on a new stream", out)
	}
	if c, _ := sb.h.Get("ct"); string(c.Snapshot) != `{"n":2}` {
		t.Errorf("standby holds %q, want the write sent again", c.Snapshot)
	}
	if got := sb.streams.Load(); got != 2 {
		t.Errorf("%d HoldStreams opened, want 2", got)
	}
}

// A write that misses its bound does not take down the writes queued
// behind it on the same stream: they are sent again on a new one and
// acknowledged within their own bound.
func TestShipperResendsTheWritesBehindOneThatMissedItsBound(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	sb := newGRPCStandby(t, true)
	s := newGRPCShipper(t, 10*time.Second, map[string]*grpcStandby{"node2": sb})
	if out := s.Ship(context.Background(), "first", 1, []byte(`{"n":0}`)); !out.Replicated() {
		t.Fatalf("first write not replicated: %+v", out)
	}
	gate := make(chan struct{})
	sb.gate.Store(&gate)
	short, cancel := context.WithCancel(context.Background())
	missed := make(chan Outcome, 1)
	go func() { missed <- s.Ship(short, "first", 1, []byte(`{"n":1}`)) }()
	// The second write is sent once the first one holds the stream's
	// receive token, so it queues behind it on the same stream.
	poll.True(t, 5*time.Second, "the first write reaches the stream", func() bool { return streamBusy(s) })
	behind := make(chan Outcome, 1)
	go func() { behind <- s.Ship(context.Background(), "second", 1, []byte(`{"n":2}`)) }()
	poll.True(t, 5*time.Second, "the second write queues on the stream", func() bool { return pendingOn(s) >= 2 })
	cancel()
	if out := <-missed; out.Replicated() {
		t.Fatalf("the write whose context ended: %+v, want it missed", out)
	}
	sb.gate.Store(nil)
	close(gate)
	if out := <-behind; !out.Replicated() {
		t.Fatalf("the write queued behind the one that missed: %+v, want it replicated on a new stream", out)
	}
	if c, _ := sb.h.Get("second"); string(c.Snapshot) != `{"n":2}` {
		t.Errorf("standby holds %q for the second session", c.Snapshot)
	}
}

// pendingOn is how many writes wait on s's stream to node2.
func pendingOn(s *Shipper) int {
	l, err := s.links.get("node2")
	if err != nil {
		return 0
	}
	l.mu.Lock()
	hs := l.hs
	l.mu.Unlock()
	if hs == nil {
		return 0
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return len(hs.pending)
}

// streamBusy reports whether a write waits on s's stream to node2.
func streamBusy(s *Shipper) bool { return pendingOn(s) > 0 }
