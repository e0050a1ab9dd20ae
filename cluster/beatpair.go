package cluster

import (
	"errors"
	"time"

	"github.com/mcpswarm/mcpswarm/crdt"
	peerv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/peer/v1"
)

// One heartbeat exchange per pair of nodes (CapBeatPair).
//
// A heartbeat renews one lease: the receiver's on the sender's writes. Its
// acknowledgement used to carry nothing but gaps, so each pair of nodes
// exchanged two heartbeats and two acknowledgements every heartbeat
// period, one exchange per direction: at N nodes, 4(N−1) messages a period
// per node, the cost of a swarm at rest that grows with N
// (docs/bench/idle.md). Between two nodes that both advertise CapBeatPair,
// the acknowledgement of a heartbeat carries the acknowledging node's own
// position (ReplicateResponse.position), and it renews the lease the other
// way. So of the two streams of a pair, the one whose sender has the
// smaller name heartbeats every period, and the other sends a heartbeat
// only to keep itself open (every StreamIdle/2) or while the smaller node's
// heartbeats stop coming (quiet).
//
// The lease argument, for nodes A (heartbeating) and B (answering). A
// renews its lease on B's writes at the instant t2 it received an answer
// of B that carried B's position p, and only if, when it processes the
// answer, it holds every write of B up to p in every registry B named
// (heardPosition). It must then hold, until t2 + Lease, every write B
// answered a client about. B answered a write W (sequence s) only after
// A acknowledged s (A holds W) or after waiting until sent(A) + Lease +
// leaseMargin, sent(A) being the latest send to A recorded when B began to
// wait (awaitLapse), after W was flushed to its links. B records an
// answer's send at t1 as it records a heartbeat's, but before it reads its
// position (answer). Either t1 came before the wait began: then B answered
// W at or after t1 + Lease + leaseMargin ≥ t2 + Lease, the answer's
// transit being within leaseMargin, so after the lease ran out. Or t1 came
// after: then B read its position after W was flushed, p ≥ s, and A
// renewed only because it holds W. This is the heartbeat's argument
// (lease.go) with the answer in the heartbeat's place; it needs no order
// between the answer and B's pushes, as A checks what it holds rather than
// relying on its stream from B being in order. What it does not cover is
// the heartbeat's exception, a message held up longer than leaseMargin:
// A stamps an answer when its stream receives it, not when its loop gets
// to it, so a loop held up by a blocked send adds nothing to it.
//
// What may renew a lease is unchanged: a gap-free message of the writer,
// heartbeat, push or answer, sent after the writer recorded the send.
// What renews it more often: each of a pair's two streams now renews both
// leases, so either one left standing (a link cut one way) keeps both
// fresh, once the smaller node's heartbeats stop and the larger one's
// start (within two periods, inside the lease of two and a half).
//
// A previous-version peer advertises no CapBeatPair: it gets no position
// in answers (it would not read it), and this node heartbeats its stream
// to it every period, as it did, since nothing else renews the lease it
// holds on this node.

// quietFor is how recently this node must have answered a peer's heartbeat
// with its position to leave its own stream to that peer quiet: one period,
// and half another for the peer's clock, its sending and the transit.
func quietFor(every time.Duration) time.Duration { return every + every/2 }

// pairs reports whether this node's stream to l may leave heartbeats to
// l's stream to it: both advertise CapBeatPair and l has the smaller name.
func (r *replicator) pairs(l *link) bool {
	return r.beatPair && l.caps.Has(CapBeatPair) && l.name < r.c.cfg.Name
}

// quiet reports whether this node's stream to l skips the heartbeat of a
// tick at now, its last message having gone out at lastSent: l heartbeats
// its stream to this node and this node answered one within quietFor, and
// the stream has carried a message recently enough to stay open (every
// StreamIdle/2, less half a period for ticks that fall just short: the
// receiver cuts a stream silent for StreamIdle, so one keep-open may come
// late by half of it). That is every other period on loopback timers
// (StreamIdle 3 s, a period of 680 ms) and every eleventh on LAN ones.
func (r *replicator) quiet(l *link, now, lastSent time.Time) bool {
	if !r.pairs(l) {
		return false
	}
	every := r.beat.every
	if now.Sub(lastSent)+every/2 >= r.c.cfg.StreamIdle/2 {
		return false
	}
	r.leases.mu.Lock()
	at, ok := r.leases.answered[l.name]
	r.leases.mu.Unlock()
	return ok && now.Sub(at) < quietFor(every)
}

// answer returns this node's position for the answer to a heartbeat of
// caller, or nil when caller does not read one (CapBeatPair). It records
// the send first, as a heartbeat's: the caller may renew its lease on it.
func (r *replicator) answer(caller string) *peerv1.Position {
	if !r.beatPair {
		return nil
	}
	m, ok := r.c.view.get(caller)
	if !ok || !m.Capabilities.Has(CapBeatPair) {
		return nil
	}
	// The send is recorded before the position is read: a position read
	// before a write was flushed is then covered by any wait for a lapse
	// that began after the flush (see the argument above).
	now := r.c.cfg.Clock.Now()
	r.leases.sentTo(caller, now)
	r.leases.mu.Lock()
	r.leases.answered[caller] = now
	r.leases.mu.Unlock()
	return &peerv1.Position{Deltas: r.position().GetDeltas()}
}

// isHeartbeat reports whether req is a position: no delta puts or removes
// anything (pushes skip empty deltas).
func isHeartbeat(req *peerv1.ReplicateRequest) bool { return nonEmpty(req.GetDeltas()) == 0 }

// heardPosition renews this node's lease on l's writes from l's answer to
// a heartbeat, received at at, carrying l's position: only when this node
// already holds every write of l up to it. owed is the position of l's
// previous answer that this node did not hold yet; if it still does not,
// a push of l's was lost (the answer outran nothing in flight) and it
// pulls l's own writes from l, as a heartbeat with a gap makes it do.
func (r *replicator) heardPosition(l *link, pos *peerv1.Position, at time.Time, owed map[string]uint64) map[string]uint64 {
	clean := true
	var gaps map[string]uint64
	for _, d := range pos.GetDeltas() {
		o := crdt.Origin{Name: d.GetOriginName(), Epoch: d.GetOriginEpoch()}
		if o != l.origin || d.GetFrom() != d.GetTo() || len(d.GetPuts())+len(d.GetRemoves()) > 0 {
			r.reject("malformed position", l.name, errors.New("an answer's position must be the peer's own, empty deltas"))
			return nil
		}
		res, ok := r.c.applyRemote(l.origin, d, "position")
		if !ok || res.Gap {
			clean = false
		}
		if ok && res.Gap {
			if gaps == nil {
				gaps = map[string]uint64{}
			}
			gaps[d.GetRegistry()] = d.GetTo()
		}
	}
	for reg, seq := range owed {
		if g := r.c.registry(reg); g != nil && g.seq(l.origin) < seq {
			r.requestSync(l.name, true)
			break
		}
	}
	if !clean {
		return gaps
	}
	// As for a heartbeat: the lease covers what the layers above see.
	for _, reg := range r.c.registries() {
		reg.settle()
	}
	r.leases.heardFrom(l.origin, at)
	return nil
}
