package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/mcpswarm/mcpswarm/crdt"
)

// Leases: a node may serve state another node wrote only while it knows it
// is not missing any of that node's writes.
//
// Reader side: each Replicate stream from a peer is in order, and the peer
// heartbeats it every min(StreamIdle, Lease)/3. When this node applies a
// message from peer P with no gap and nothing refused, it holds every
// write P made before sending it: it records "heard from P at t". While
// t + Lease is in the future for every live member it has heard from, the
// node is in sync; otherwise InSync fails, naming the member.
//
// Writer side: P acknowledges a message only after applying it, so the
// writer's time of the last gap-free acknowledgement from P is later than
// P's "heard at". A writer whose write P has not acknowledged waits until
// lastAck(P) + Lease + leaseMargin before answering: by then P's lease has
// lapsed and P refuses until its link is back and it has caught up.
//
// Unreachable members: a node cannot tell a peer's death from its own
// isolation. While members it had heard from are suspect or dead but not
// yet forgotten (the DeadGrace), it stays in sync only if it and the
// members it hears from are a strict majority of those plus itself. One
// node of three killed: the other two go on; one node cut off from two: it
// refuses until healed, or until the grace forgets the others (then it is
// alone and serves what it has).

// leaseMargin covers what the writer's clock cannot see: a message's
// transit before the reader applies it, and clock rate differences.
const leaseMargin = 250 * time.Millisecond

// leases is both sides' bookkeeping, on the cluster's clock.
type leases struct {
	mu    sync.Mutex
	heard map[crdt.Origin]time.Time // reader: last gap-free message applied from the origin
	acked map[string]time.Time      // writer: last gap-free acknowledgement from the peer
}

func newLeases() *leases {
	return &leases{heard: map[crdt.Origin]time.Time{}, acked: map[string]time.Time{}}
}

func (l *leases) heardFrom(o crdt.Origin, at time.Time) {
	l.mu.Lock()
	l.heard[o] = at
	l.mu.Unlock()
}

func (l *leases) ackFrom(peer string, at time.Time) {
	l.mu.Lock()
	l.acked[peer] = at
	l.mu.Unlock()
}

// BehindError says this node may be missing writes of a live member: it
// must not serve connection state until it has heard from it again.
type BehindError struct {
	// Members are the members this node has not heard from within the
	// lease, or the unreachable ones it cannot outvote; sorted.
	Members []string
	// Since is how long ago the freshest of them was heard (0: never
	// relevant, the dead-majority case).
	Since time.Duration
	// Retry is when trying again may succeed: one heartbeat period.
	Retry time.Duration
}

func (e *BehindError) Error() string {
	if e.Since == 0 {
		return fmt.Sprintf("this node cannot reach %s and cannot outvote them: it may be the one cut off; retry in %s",
			strings.Join(e.Members, ", "), e.Retry)
	}
	return fmt.Sprintf("this node may be missing writes of %s (last heard %s ago); retry in %s",
		strings.Join(e.Members, ", "), e.Since.Round(time.Millisecond), e.Retry)
}

// RetryAfter is how long a client should wait before asking again.
func (e *BehindError) RetryAfter() time.Duration { return e.Retry }

// Clock is the clock the cluster's own timers run on (Config.Clock), for
// layers above that bound their waits on the same time.
func (c *Cluster) Clock() clockwork.Clock { return c.cfg.Clock }

// heartbeatEvery is how often a sender heartbeats each stream.
func heartbeatEvery(cfg Config) time.Duration { return min(cfg.StreamIdle, cfg.Lease) / 3 }

// InSync reports whether this node holds, within the lease, every write of
// every member it must hear from; otherwise it returns a *BehindError.
//
// A member is required from its first gap-free message on (so a joining
// node does not make the others refuse before its first link is up) until
// it leaves or the view forgets it. A required member that is alive or
// draining must have been heard within the lease. One that is suspect
// (unreachable over gRPC) or dead may be gone or may be on the other side
// of a partition this node is in: the node goes on only if it and the
// required members it hears from are a strict majority of itself and every
// required member. A lone node, or one whose peers all left, is in sync.
func (c *Cluster) InSync() error {
	now := c.cfg.Clock.Now()
	l := c.repl.leases
	members := c.Members()
	known := make(map[crdt.Origin]bool, len(members))
	var stale, gone []string
	var since time.Duration
	fresh := 1 // this node
	l.mu.Lock()
	for _, m := range members {
		known[m.Origin] = true
		at, heard := l.heard[m.Origin]
		if m.Self || !heard {
			continue
		}
		switch m.State {
		case StateAlive, StateDraining:
			if d := now.Sub(at); d > c.cfg.Lease {
				stale = append(stale, m.Name)
				if since == 0 || d < since {
					since = d
				}
			} else {
				fresh++
			}
		case StateSuspect, StateDead:
			gone = append(gone, m.Name)
		}
	}
	for o := range l.heard {
		if !known[o] {
			delete(l.heard, o) // an incarnation the view has forgotten
		}
	}
	l.mu.Unlock()
	retry := heartbeatEvery(c.cfg)
	if len(stale) > 0 {
		return &BehindError{Members: stale, Since: since, Retry: retry}
	}
	if len(gone) > 0 && fresh <= len(gone) {
		return &BehindError{Members: gone, Retry: retry}
	}
	return nil
}

// awaitLapse waits until every peer that has not acknowledged registry reg
// up to seq has surely lost its lease on this node's writes, or ctx ends.
func (r *replicator) awaitLapse(ctx context.Context, reg string, seq uint64) error {
	clock := r.c.cfg.Clock
	now := clock.Now()
	var until time.Time
	r.leases.mu.Lock()
	for peer, at := range r.leases.acked {
		r.linksMu.Lock()
		l := r.links[peer]
		r.linksMu.Unlock()
		if l != nil && l.ackedSeq(reg) >= seq {
			continue
		}
		t := at.Add(r.c.cfg.Lease + leaseMargin)
		if !t.After(now) {
			delete(r.leases.acked, peer) // lapsed: forget it
			continue
		}
		if t.After(until) {
			until = t
		}
	}
	r.leases.mu.Unlock()
	d := until.Sub(now)
	if d <= 0 {
		return nil
	}
	t := clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.Chan():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for lagging peers' leases to lapse: %w", ctx.Err())
	}
}
