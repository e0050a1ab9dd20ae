package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// membershipRecheck is how often a waiting AwaitPeers re-reads membership.
const membershipRecheck = 50 * time.Millisecond

// Acknowledged replication: a write the client is told about must be
// readable on every node the client may reach next. A peer acknowledges a
// push (or a position heartbeat without a gap) only after it has applied
// what it covers, so "every live peer acknowledged this registry up to my
// sequence" means every live peer serves the write.

// LaggingError names the live peers that had not acknowledged a write when
// the wait ended.
type LaggingError struct {
	Registry string
	Seq      uint64
	Peers    []string
	Cause    error
}

func (e *LaggingError) Error() string {
	return fmt.Sprintf("%s up to %d not acknowledged by %s: %v", e.Registry, e.Seq, strings.Join(e.Peers, ", "), e.Cause)
}

func (e *LaggingError) Unwrap() error { return e.Cause }

// AwaitPeers waits until every live peer (alive or draining) has applied
// every write this node made to the registry before the call, or ctx ends;
// then it returns a *LaggingError naming the peers still behind. A peer
// that joins or dies meanwhile is counted as the membership is when the
// wait is checked.
//
// Before it returns, with or without an error, every peer that has not
// applied those writes (suspect and dead ones included) has lost its
// lease on this node (lease.go): it refuses to serve until it has caught
// up. That wait ends at most Lease plus a small margin after the peer's
// last acknowledgement, so it adds nothing when the peer was cut off
// longer than that.
func (r *Registry) AwaitPeers(ctx context.Context) error {
	seq := r.seq(r.c.origin)
	err := r.c.repl.awaitAcked(ctx, r.name, seq)
	// Bounded by Lease+leaseMargin by construction, so it needs no
	// deadline of its own and does not inherit ctx's, which has often
	// just ended.
	_ = r.c.repl.awaitLapse(context.WithoutCancel(ctx), r.name, seq)
	return err
}

// ackSignal returns a channel closed at the next acknowledgement.
func (r *replicator) ackSignal() <-chan struct{} {
	r.ackMu.Lock()
	defer r.ackMu.Unlock()
	if r.ackCh == nil {
		r.ackCh = make(chan struct{})
	}
	return r.ackCh
}

// acknowledged wakes every waiter of awaitAcked.
func (r *replicator) acknowledged() {
	r.ackMu.Lock()
	ch := r.ackCh
	r.ackCh = nil
	r.ackMu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// lagging lists the live peers whose link has not acknowledged registry
// reg up to seq, sorted by name.
func (r *replicator) lagging(reg string, seq uint64) []string {
	var out []string
	for _, m := range r.c.view.unsorted() {
		if r.behind(m, reg, seq) {
			out = append(out, m.Name)
		}
	}
	slices.Sort(out)
	return out
}

// behind reports whether m is a live peer that has not acknowledged
// registry reg up to seq.
func (r *replicator) behind(m Member, reg string, seq uint64) bool {
	if m.Self || (m.State != StateAlive && m.State != StateDraining) {
		return false
	}
	r.linksMu.Lock()
	l := r.links[m.Name]
	r.linksMu.Unlock()
	return l == nil || l.origin != m.Origin || l.ackedSeq(reg) < seq
}

// stillBehind drops from the front of names, peers that lagging listed,
// those no longer behind, and stops at the first still behind: a waiter
// woken by an acknowledgement needs to know only whether it may stop, so
// it reads one peer per wake-up, not all of them (with N−1
// acknowledgements per write, reading every member each time made a
// write's wait O(N²)), and each peer once it is at the front.
func (r *replicator) stillBehind(names []string, reg string, seq uint64) []string {
	for len(names) > 0 {
		if m, ok := r.c.view.get(names[0]); ok && r.behind(m, reg, seq) {
			break
		}
		names = names[1:]
	}
	return names
}

func (r *replicator) awaitAcked(ctx context.Context, reg string, seq uint64) error {
	tick := time.NewTicker(membershipRecheck)
	defer tick.Stop()
	behind := r.lagging(reg, seq)
	for {
		wake := r.ackSignal()
		if behind = r.stillBehind(behind, reg, seq); len(behind) == 0 {
			// Everyone awaited has it: a whole recount counts the peers
			// that joined meanwhile.
			if behind = r.lagging(reg, seq); len(behind) == 0 {
				return nil
			}
		}
		select {
		case <-wake:
		case <-tick.C:
			// Membership may have moved (a peer joined or its link was
			// re-dialled): re-count.
			behind = r.lagging(reg, seq)
		case <-ctx.Done():
			return &LaggingError{Registry: reg, Seq: seq, Peers: r.lagging(reg, seq), Cause: ctx.Err()}
		}
	}
}
