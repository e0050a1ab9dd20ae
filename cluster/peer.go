package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/mcpswarm/mcpswarm/crdt"
	"github.com/mcpswarm/mcpswarm/crdt/crdtpb"
	peerv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/peer/v1"
)

// batch is one push to every peer: merged own deltas and when the oldest
// write in it happened.
type batch struct {
	req    *peerv1.ReplicateRequest
	deltas []*peerv1.Delta   // while building
	tos    map[string]uint64 // own seq per registry once applied
	since  time.Time         // oldest write
	size   int               // encoded bytes
	count  int               // deltas
	// position marks a heartbeat: tos is the position it announced.
	position bool
}

// link is this node's client side of one peer: the connection, the push
// queue and its sender goroutine.
type link struct {
	// caps are the peer's: its stream gets refs only if it reads them.
	caps Capabilities
	// synced is set once a pull from the peer has succeeded: until every
	// live peer's is, this node does not know the cluster's state.
	synced atomic.Bool
	// beats and answers count the heartbeats sent to the peer and the
	// answers to them received, this link's share of the heartbeats
	// metric (a stream cut with a heartbeat in flight leaves one
	// unanswered).
	beats, answers atomic.Uint64
	name           string
	origin         crdt.Origin
	addr           string
	cc             *grpc.ClientConn
	client         peerv1.PeerServiceClient
	queue          *batchQueue
	ctx            context.Context
	cancel         context.CancelFunc
	r              *replicator

	mu      sync.Mutex
	acked   map[string]uint64 // own seq per registry the peer holds
	fails   int               // consecutive failed attempts
	failing bool              // reported suspect

	// Owned by the replication loop.
	syncing, again, againAll bool
}

func (r *replicator) dial(m Member) (*link, error) {
	cfg := r.c.cfg
	tc := insecure.NewCredentials()
	if cfg.TLS != nil {
		tc = credentials.NewTLS(cfg.TLS)
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(tc),
		grpc.WithPerRPCCredentials(peerCreds{name: cfg.Name, cred: credential(r.c.keys.peer, cfg.Name), secure: cfg.TLS != nil}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(cfg.MaxMessageBytes), grpc.MaxCallSendMsgSize(cfg.MaxMessageBytes)),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: cfg.RetryMin, Multiplier: 1.6, Jitter: 0.2, MaxDelay: cfg.RetryMax},
			MinConnectTimeout: cfg.CatchUpTimeout,
		}),
	}
	opts = append(opts, PeerTransportDialOptions()...)
	if cfg.Dialer != nil {
		opts = append(opts, grpc.WithContextDialer(cfg.Dialer))
	}
	cc, err := grpc.NewClient("passthrough:///"+m.GRPCAddr, opts...)
	if err != nil {
		return nil, fmt.Errorf("creating client for %s: %w", m.GRPCAddr, err)
	}
	ctx, cancel := context.WithCancel(r.ctx)
	return &link{
		caps: m.Capabilities, name: m.Name, origin: m.Origin, addr: m.GRPCAddr, cc: cc, client: peerv1.NewPeerServiceClient(cc),
		queue: newBatchQueue(cfg.PeerQueue), ctx: ctx, cancel: cancel, r: r,
		acked: map[string]uint64{},
	}, nil
}

func (l *link) enqueue(b *batch) {
	if !l.queue.put(b) {
		l.r.c.metrics.queueDrops.Inc()
		l.r.log.Debug("peer queue full, dropping batch", slog.String("peer", l.name))
	}
}

func (l *link) close() {
	l.cancel()
	_ = l.cc.Close()
}

func (l *link) closed() bool { return l.ctx.Err() != nil }

func (l *link) lag(own map[string]uint64) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n uint64
	for reg, s := range own {
		if a := l.acked[reg]; a < s {
			n += s - a
		}
	}
	return n
}

func (l *link) ack(reg string, seq uint64) {
	l.mu.Lock()
	l.acked[reg] = max(l.acked[reg], seq)
	l.mu.Unlock()
	l.r.acknowledged()
}

// ackedSeq is the own sequence of registry reg the peer is known to hold.
func (l *link) ackedSeq(reg string) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acked[reg]
}

// result records the outcome of a call to the peer; SuspectAfter failures
// in a row mark it suspect in the view, one success clears that.
func (l *link) result(err error) {
	if l.closed() {
		return
	}
	r := l.r
	l.mu.Lock()
	change := false
	if err != nil {
		if RefusedConn(err) {
			r.leases.refused(l.origin, r.c.cfg.Clock.Now())
		}
		l.fails++
		if l.fails >= r.c.cfg.SuspectAfter && !l.failing {
			l.failing, change = true, true
		}
	} else {
		l.fails = 0
		if l.failing {
			l.failing, change = false, true
		}
	}
	failing := l.failing
	l.mu.Unlock()
	if !change || !r.c.view.setFailing(l.name, l.origin.Epoch, failing) {
		return
	}
	if failing {
		r.c.metrics.suspects.Inc()
		r.log.Warn("peer unreachable over gRPC while memberlist reports it alive: suspect", slog.String("peer", l.origin.String()),
			slog.String("addr", l.addr), slog.String("reason", err.Error()))
	} else {
		r.log.Info("peer reachable over gRPC again", slog.String("peer", l.origin.String()))
	}
}

// RefusedConn reports whether err is a refused connection: nothing
// listens at the peer's address (its process is gone), as opposed to a
// partition, which drops packets and times out. gRPC keeps only the text
// of the dial error.
func RefusedConn(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(err.Error(), syscall.ECONNREFUSED.Error())
}

// send keeps a Replicate stream to the peer open and feeds it the queue,
// re-opening it with jittered exponential backoff.
func (r *replicator) send(l *link) {
	wait := r.c.cfg.RetryMin
	for !l.closed() {
		established, err := r.stream(l)
		if l.closed() {
			return
		}
		if established {
			wait = r.c.cfg.RetryMin
			r.c.metrics.streamRestarts.Inc()
			r.log.Debug("replicate stream ended", slog.String("peer", l.name), slog.Any("reason", err))
		} else {
			l.result(err)
		}
		d := wait/2 + rand.N(wait)
		wait = min(wait*2, r.c.cfg.RetryMax)
		t := time.NewTimer(d)
		select {
		case <-l.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

type ackMsg struct {
	resp *peerv1.ReplicateResponse
	err  error
	at   time.Time // received, on the cluster's clock: a position's answer renews a lease from then
}

// stream runs one Replicate stream until it fails. It reports whether the
// stream was established (the peer acknowledged the opening position).
func (r *replicator) stream(l *link) (bool, error) {
	cfg := r.c.cfg
	ctx, cancel := context.WithCancel(l.ctx)
	defer cancel()
	st, err := l.client.Replicate(ctx)
	if err != nil {
		return false, fmt.Errorf("opening replicate stream: %w", err)
	}
	acks := newAckBox()
	go func() {
		for {
			resp, err := st.Recv()
			acks.put(ackMsg{resp, err, cfg.Clock.Now()})
			if err != nil {
				return
			}
		}
	}()
	// The watchdog cuts the stream when the peer stops acknowledging: a Send
	// blocked by flow control returns once ctx is cancelled.
	watchdog := cfg.Clock.AfterFunc(cfg.StreamIdle, cancel) // on the heartbeats' clock
	defer watchdog.Stop()
	var inflight []*batch // in send order; heartbeats are position batches
	// The stream declares each origin and registry once (the opening
	// position declares this node's origin and every registry) and then
	// names them by ref. Batches are shared by all links, so each stream
	// sends its own rewritten copy.
	var enc crdtpb.StreamEncoder
	var lastSent time.Time     // the stream's last message, for quiet
	var owed map[string]uint64 // the peer's last answered position not held yet (heardPosition)
	sendReq := func(b *batch, req *peerv1.ReplicateRequest) error {
		if len(inflight) == 0 {
			watchdog.Reset(cfg.StreamIdle)
		}
		wire := req
		if l.caps.Has(CapStreamRefs) {
			wire = enc.Encode(req)
		}
		// Before the send: the peer may renew its lease on it (lease.go).
		lastSent = cfg.Clock.Now()
		r.leases.sentTo(l.name, lastSent)
		if err := st.Send(wire); err != nil {
			return fmt.Errorf("sending to %s: %w", l.name, err)
		}
		if b.position {
			r.c.metrics.beatsSent.Inc()
			l.beats.Add(1)
		}
		inflight = append(inflight, b)
		r.c.metrics.bytesSent.Add(float64(proto.Size(wire)))
		r.c.metrics.deltasSent.Add(float64(nonEmpty(wire.GetDeltas())))
		return nil
	}
	if err := sendReq(r.positionBatch()); err != nil {
		return false, err
	}
	established := false
	// The node's one heartbeat clock (beat.go). The stream keeps the
	// channel of the tick it waits for until it has handled that tick, so
	// a tick that came while it was busy is handled once it is free, as a
	// ticker's buffered tick was.
	tick := r.beat.next()
	for {
		// Queued batches go before heartbeats.
		if b := l.queue.pop(); b != nil {
			if err := sendReq(b, b.req); err != nil {
				return established, err
			}
			continue
		}
		select {
		case <-ctx.Done():
			if l.closed() {
				return established, ctx.Err()
			}
			return established, fmt.Errorf("peer %s stopped acknowledging for %s", l.name, cfg.StreamIdle)
		case <-l.queue.ready:
			// Popped at the top of the loop.
		case <-tick:
			tick = r.beat.next()
			if slices.ContainsFunc(inflight, func(b *batch) bool { return b.position }) {
				// The last heartbeat is unanswered: another one would only
				// stretch how long writers wait out this peer's lease.
				continue
			}
			if r.quiet(l, cfg.Clock.Now(), lastSent) {
				// The peer's heartbeats and this node's answers renew
				// both leases (beatpair.go).
				continue
			}
			if err := sendReq(r.positionBatch()); err != nil {
				return established, err
			}
		case <-acks.ready:
			for _, a := range acks.take() {
				if a.err != nil {
					return established, fmt.Errorf("receiving from %s: %w", l.name, a.err)
				}
				r.c.metrics.bytesRecv.Add(float64(proto.Size(a.resp)))
				if !established {
					established = true
					l.result(nil)
					r.leases.linkedTo(l.origin)
				}
				if len(inflight) == 0 {
					return established, fmt.Errorf("unexpected acknowledgement from %s", l.name)
				}
				var b *batch
				b, inflight = answered(inflight)
				if len(inflight) == 0 {
					watchdog.Stop()
				} else {
					watchdog.Reset(cfg.StreamIdle)
				}
				r.acked(l, b, a.resp)
				if b.position {
					r.c.metrics.beatsAnswered.Inc()
					l.answers.Add(1)
				}
				if p := a.resp.GetPosition(); p != nil && r.beatPair {
					owed = r.heardPosition(l, p, a.at, owed)
				}
			}
		}
	}
}

// acked records a peer's acknowledgement of b (nil: a position).
func (r *replicator) acked(l *link, b *batch, resp *peerv1.ReplicateResponse) {
	gapped := map[string]bool{}
	for _, g := range resp.GetGaps() {
		vs, err := versionsFromPB(g, r.c.lim)
		if err != nil {
			continue
		}
		for _, v := range vs {
			if v.Origin == r.c.origin {
				gapped[g.GetRegistry()] = true
				l.ack(g.GetRegistry(), v.Seq)
			}
		}
	}
	if b == nil {
		return
	}
	if b.position {
		// A position without a gap: the peer holds at least that much.
		for reg, to := range b.tos {
			if !gapped[reg] {
				l.ack(reg, to)
			}
		}
		return
	}
	for reg, to := range b.tos {
		if !gapped[reg] {
			l.ack(reg, to)
		}
	}
	r.c.metrics.convergence.Observe(time.Since(b.since).Seconds())
}

// positionBatch wraps a position so its acknowledgement records what the
// peer holds.
func (r *replicator) positionBatch() (*batch, *peerv1.ReplicateRequest) {
	req := r.position()
	b := &batch{req: req, position: true, tos: map[string]uint64{}}
	for _, d := range req.GetDeltas() {
		b.tos[d.GetRegistry()] = d.GetTo()
	}
	return b, req
}

// position is a request carrying, per registry, an empty delta at this
// node's flushed sequence: a peer behind it finds a gap and catches up.
func (r *replicator) position() *peerv1.ReplicateRequest {
	req := &peerv1.ReplicateRequest{Sender: r.c.origin.String()}
	for _, reg := range r.c.registries() {
		r.pmu.Lock()
		s := r.flushed[reg.name]
		r.pmu.Unlock()
		req.Deltas = append(req.Deltas, &peerv1.Delta{Registry: reg.name, OriginName: r.c.origin.Name, OriginEpoch: r.c.origin.Epoch, From: s, To: s})
	}
	return req
}

// syncWith exchanges digests with the peer and pulls what this node lacks
// (only the peer's own origin when ownOnly).
func (r *replicator) syncWith(ctx context.Context, l *link, ownOnly bool) error {
	ctx, cancel := context.WithTimeout(ctx, r.c.cfg.CatchUpTimeout)
	defer cancel()
	started := r.c.cfg.Clock.Now()
	complete := !ownOnly
	err := r.pull(ctx, l, ownOnly, &complete)
	for _, reg := range r.c.registries() {
		reg.settle()
	}
	if err == nil && complete {
		r.leases.syncedWith(l.origin, started)
		r.c.Settled() // latch the first time the node is in sync
	}
	return err
}

// pull is syncWith's exchange. It clears complete when the peer holds
// data of some origin this node is behind on and refuses (a dead one).
func (r *replicator) pull(ctx context.Context, l *link, ownOnly bool, complete *bool) error {
	sender := r.c.origin.String()
	req := &peerv1.ExchangeDigestRequest{Sender: sender}
	regs := r.c.registries()
	for _, reg := range regs {
		req.Digests = append(req.Digests, versionsToPB(reg.name, reg.Digest()))
	}
	r.c.metrics.bytesSent.Add(float64(proto.Size(req)))
	resp, err := l.client.ExchangeDigest(ctx, req)
	l.result(err)
	if err != nil {
		if !l.closed() {
			r.log.Debug("exchanging digests", slog.String("peer", l.name), slog.String("reason", err.Error()))
		}
		return fmt.Errorf("exchanging digests with %s: %w", l.name, err)
	}
	r.c.metrics.bytesRecv.Add(float64(proto.Size(resp)))
	var wants []*peerv1.Digest
	for _, d := range resp.GetDigests() {
		reg := r.c.registry(d.GetRegistry())
		if reg == nil {
			continue
		}
		vs, err := versionsFromPB(d, r.c.lim)
		if err != nil {
			r.reject("malformed digest", l.name, err)
			return err
		}
		var want []crdt.Version
		for _, v := range vs {
			if v.Origin == r.c.origin {
				l.ack(reg.name, v.Seq)
				continue
			}
			if ownOnly && v.Origin != l.origin {
				continue
			}
			if ok, _ := r.c.accept(v.Origin, l.origin); !ok || reg.dropped(v.Origin) {
				// A member this node lost, whose entries it deleted, is
				// hidden everywhere: its later writes matter only to a
				// failover, which Outdated stops. Waiting for the peer to
				// delete them too would keep this node out of sync for
				// the peer's whole grace.
				if v.Seq > reg.seq(v.Origin) && !r.leases.markOutdated(v.Origin.Name) {
					*complete = false
				}
				continue
			}
			if have := reg.seq(v.Origin); v.Seq > have {
				want = append(want, crdt.Version{Origin: v.Origin, Seq: have})
			}
		}
		if len(want) > 0 {
			wants = append(wants, versionsToPB(reg.name, want))
		}
	}
	if len(wants) == 0 {
		return nil
	}
	r.c.metrics.catchUps.WithLabelValues("client").Inc()
	cu := &peerv1.CatchUpRequest{Sender: sender, Wants: wants}
	r.c.metrics.bytesSent.Add(float64(proto.Size(cu)))
	st, err := l.client.CatchUp(ctx, cu)
	if err != nil {
		l.result(err)
		return fmt.Errorf("catching up from %s: %w", l.name, err)
	}
	return r.receiveCatchUp(l, st)
}

type snapKey struct {
	reg    string
	origin crdt.Origin
}

// receiveCatchUp applies the deltas and snapshots of a catch-up stream.
func (r *replicator) receiveCatchUp(l *link, st grpc.ServerStreamingClient[peerv1.CatchUpResponse]) error {
	receivers := map[snapKey]*crdt.SnapshotReceiver{}
	for {
		item, err := st.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			l.result(err)
			return fmt.Errorf("receiving catch-up from %s: %w", l.name, err)
		}
		r.c.metrics.bytesRecv.Add(float64(proto.Size(item)))
		switch x := item.GetItem().(type) {
		case *peerv1.CatchUpResponse_Delta:
			r.c.metrics.deltasRecv.Inc()
			r.c.applyRemote(l.origin, x.Delta, "catch-up")
		case *peerv1.CatchUpResponse_Snapshot:
			if err := r.receiveChunk(l, receivers, x.Snapshot); err != nil {
				r.reject("malformed snapshot", l.name, err)
				return err
			}
		}
	}
}

func (r *replicator) receiveChunk(l *link, receivers map[snapKey]*crdt.SnapshotReceiver, pb *peerv1.SnapshotChunk) error {
	reg := r.c.registry(pb.GetRegistry())
	if reg == nil {
		return fmt.Errorf("snapshot for unknown registry %q", pb.GetRegistry())
	}
	c, err := chunkFromPB(pb, r.c.lim)
	if err != nil {
		return err
	}
	if ok, why := r.c.accept(c.Origin, l.origin); !ok {
		if c.Index == 0 {
			r.log.Debug("ignoring snapshot", slog.String("origin", c.Origin.String()), slog.String("reason", why))
		}
		return nil
	}
	k := snapKey{reg.name, c.Origin}
	rcv := receivers[k]
	if c.Index == 0 {
		reg.with(func(m *crdt.Map) { rcv = m.NewSnapshotReceiver(c.Origin, c.Seq) })
		receivers[k] = rcv
	}
	if rcv == nil {
		return fmt.Errorf("snapshot of %s starts at chunk %d", c.Origin, c.Index)
	}
	if err := rcv.Add(c); err != nil {
		delete(receivers, k)
		return err
	}
	if !c.Last {
		return nil
	}
	delete(receivers, k)
	var ok bool
	reg.with(func(m *crdt.Map) {
		r.c.hideIfGone(m, c.Origin)
		ok, err = rcv.Commit()
	})
	if err != nil {
		return err
	}
	if ok {
		r.c.metrics.snapshots.WithLabelValues("client").Inc()
		r.log.Debug("installed snapshot", slog.String("registry", reg.name), slog.String("origin", c.Origin.String()), slog.Uint64("seq", c.Seq))
	}
	return nil
}

func (r *replicator) reject(reason, peer string, err error) {
	r.c.metrics.rejected.WithLabelValues(reason).Inc()
	r.log.Warn("rejecting peer input", slog.String("peer", peer), slog.String("reason", reason), slog.String("error", err.Error()))
}

// The peer connection's flow-control windows. Set, they replace gRPC's
// bandwidth estimator, which answers every data frame it receives with a
// PING to measure the link (one per forwarded call and per replication
// batch, on both nodes, to discover what a cluster network never lacks).
// One stream may have a whole message in flight (MaxMessageBytes' default,
// 4 MiB, arrives in four windows), and a connection four such streams; at
// 1 ms round trips that is 1 GB/s per stream, above what a node sends.
const (
	peerStreamWindow = 1 << 20
	peerConnWindow   = 4 << 20
)

// peerReadBuffer is each peer connection end's read buffer. gRPC's
// default, 32 KiB, is held by every connection for its whole life where
// the connection cannot read into a pooled buffer on demand (TLS, and the
// in-memory connections of tests and internal/scale; a plain TCP socket
// can), and a node holds two ends per peer (it dials every peer and every
// peer dials it). Heartbeats and pushes are frames of a few hundred bytes,
// which 1 KiB still reads in one call; a larger frame's payload is read
// straight into its own buffer once this one is empty, so catch-ups lose
// nothing to a small one. 4 KiB cost a node 8 KiB per peer at rest, 1 KiB
// costs it 2.
const peerReadBuffer = 1 << 10

// peerWriteBuffer is how many bytes a peer connection batches into one
// write. gRPC takes the buffer from a process-wide pool when a connection
// starts writing and returns it once flushed, but a connection's writer
// yields before flushing a small batch, and a node's streams all
// heartbeat on one clock (beat.go): every connection then holds its own
// buffer at once, and the pool keeps that many between two collections.
// With gRPC's default, 32 KiB, that was ~20 KiB of a node's heap per peer
// at rest (internal/scale, N = 24), a quarter of it at 8 KiB. A message
// larger than the buffer goes out in several writes of 8 KiB instead of
// 32 KiB, which a catch-up's megabytes do not notice
// (BenchmarkColdJoin100k).
const peerWriteBuffer = 8 << 10

// PeerTransportDialOptions are the transport options (flow-control windows,
// read and write buffers) of this node's connections to its peers: what a peer link
// costs in memory depends on them (internal/scale measures it).
func PeerTransportDialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithInitialWindowSize(peerStreamWindow),
		grpc.WithInitialConnWindowSize(peerConnWindow),
		grpc.WithReadBufferSize(peerReadBuffer),
		grpc.WithWriteBufferSize(peerWriteBuffer),
	}
}

// PeerTransportServerOptions are PeerTransportDialOptions' counterparts
// for the connections peers open to this node, part of ServerOptions.
func PeerTransportServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.InitialWindowSize(peerStreamWindow),
		grpc.InitialConnWindowSize(peerConnWindow),
		grpc.ReadBufferSize(peerReadBuffer),
		grpc.WriteBufferSize(peerWriteBuffer),
	}
}

func serverOptions(c *Cluster) []grpc.ServerOption {
	return append(PeerTransportServerOptions(),
		grpc.MaxRecvMsgSize(c.cfg.MaxMessageBytes),
		grpc.MaxSendMsgSize(c.cfg.MaxMessageBytes),
		grpc.ChainUnaryInterceptor(c.UnaryInterceptor()),
		grpc.ChainStreamInterceptor(c.StreamInterceptor()),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.StatsHandler(refusalLogger{c}),
		grpc.NumStreamWorkers(peerStreamWorkers),
	)
}

// peerStreamWorkers is how many goroutines the peer server keeps to run
// streams. Without them grpc-go starts one per stream, and a forwarded
// call's handler grew that fresh goroutine's stack on every call
// (runtime.newstack/copystack: 9% of BenchmarkForwardedClick's CPU); a
// worker keeps its grown stack. A stream that finds every worker busy
// (long-lived Replicate streams, calls waiting on a session) gets its own
// goroutine as before, so none waits for a worker.
const peerStreamWorkers = 16

// refusalLogger logs peer calls that gRPC itself refused for their size,
// before any handler or interceptor ran.
type refusalLogger struct{ c *Cluster }

type methodKey struct{}

func (h refusalLogger) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, methodKey{}, info.FullMethodName)
}

func (h refusalLogger) HandleRPC(ctx context.Context, s stats.RPCStats) {
	end, ok := s.(*stats.End)
	if !ok || end.Client || status.Code(end.Error) != codes.ResourceExhausted {
		return
	}
	method, _ := ctx.Value(methodKey{}).(string)
	if !strings.HasPrefix(method, peerMethodPrefix) {
		return
	}
	h.c.repl.reject("oversized message", callerName(ctx), fmt.Errorf("%s: %w", method, end.Error))
}

func (refusalLogger) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (refusalLogger) HandleConn(context.Context, stats.ConnStats) {}

// nonEmpty counts the deltas that carry puts or removals (not positions).
func nonEmpty(ds []*peerv1.Delta) int {
	n := 0
	for _, d := range ds {
		if len(d.GetPuts())+len(d.GetRemoves()) > 0 {
			n++
		}
	}
	return n
}
