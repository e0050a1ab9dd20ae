package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/mcpswarm/mcpswarm/crdt"
)

// Leases: a node may serve state another node wrote only while it knows it
// is not missing any of that node's writes.
//
// Reader side: each Replicate stream from a peer is in order, and the peer
// heartbeats it every min(StreamIdle, Lease)·2/5. When this node applies a
// message from peer P with no gap and nothing refused, it holds every
// write P made before sending it: it records "heard from P at t". Between
// peers that both advertise CapBeatPair, P's answer to this node's
// heartbeat carries P's position and renews the lease the same way when
// this node holds that much of P's writes, so only one stream of the pair
// heartbeats every period (beatpair.go, with its own argument). While
// t + Lease is in the future for every live member it has heard from, the
// node is in sync; otherwise InSync fails, naming the member.
//
// Writer side: a peer renews its lease only on a message this node sent
// it (a heartbeat, a push, an answer carrying its position), recorded
// before it is sent, so it holds no lease past (the last send to it) +
// transit + Lease. A
// writer whose write P has not acknowledged waits until lastSent(P) +
// Lease + leaseMargin before answering: by then P's lease has lapsed and P
// refuses until its link is back and it has caught up. A sender keeps at
// most one heartbeat unacknowledged, so a silent peer stops renewing the
// bound after one heartbeat period.
//
// The one message this does not cover is one held up in a connection
// longer than leaseMargin and delivered late (TCP retransmitting after a
// partition heals): it renews the receiver's lease, for at most Lease,
// although writes answered meanwhile travel on a later stream. The
// receiver's next heartbeat from the new stream shows the gap and it
// catches up within milliseconds, but until then it may serve without
// them.
//
// Dead members: a node cannot tell a peer's death from its own isolation.
// While members it had heard from are dead but not yet forgotten (the
// DeadGrace), it stays in sync only if it and the members it hears from
// are a strict majority of those plus itself, and it has pulled everything
// those hold (a full pull from each, started after its lease on the dead
// ones lapsed: the replication loop starts one from every live peer then,
// lostMember). One node of three killed: the other two go on once
// memberlist has declared it dead and they have synced; one node cut off
// from two: it refuses until healed, or until the grace forgets the others
// (then it is alone and serves what it has).

// leaseMargin covers what the writer's clock cannot see: a message's
// transit before the reader applies it, and clock rate differences. A
// message delayed longer (held in a broken connection) is the one case the
// lease does not cover; see the writer side above.
const leaseMargin = 250 * time.Millisecond

// leases is both sides' bookkeeping, on the cluster's clock.
type leases struct {
	mu     sync.Mutex
	heard  map[crdt.Origin]time.Time // reader: last gap-free message applied from the origin
	gone   map[crdt.Origin]time.Time // reader: when its gRPC port refused a connection since
	linked map[crdt.Origin]bool      // this node's own stream to it was established once
	hidden map[crdt.Origin]bool      // its entries were hidden here after it was linked, and not shown again yet
	sent   map[string]time.Time      // writer: last message sent to the peer that could renew its lease
	// answered: when this node last answered the peer's heartbeat with its
	// own position (beatpair.go).
	answered map[string]time.Time
	synced   map[crdt.Origin]time.Time // start of the last full pull from the origin that succeeded
	// lost names required members that died (not gone: see refused) and
	// that the view has since forgotten, after the dead grace. They still
	// count against the majority: a node cut off from the rest sees every
	// other member die, and once the grace forgot them it would otherwise
	// look alone, hence a majority, and answer on its own while the real
	// majority promoted its sessions. The members a previous run knew are
	// lost too until heard (remember). A name is struck off when a member
	// of that name is heard from again or leaves. The value is when this
	// node's lease on it lapsed (zero for a member a previous run knew):
	// InSync wants a full pull from each member it hears from since then.
	lost map[string]time.Time
	// outdated names lost members whose writes a peer holds more of than
	// this node, which refuses them (it deleted the member's entries after
	// the grace): what this node kept of them may be out of date
	// (Outdated). A name is struck off when a member of that name is
	// heard from again.
	outdated map[string]bool
	// gen counts the changes that can turn InSync's verdict from in sync
	// to behind (shared with the view, see syncMemo).
	gen *atomic.Uint64
}

func newLeases(gen *atomic.Uint64) *leases {
	return &leases{gen: gen, heard: map[crdt.Origin]time.Time{}, gone: map[crdt.Origin]time.Time{}, linked: map[crdt.Origin]bool{}, hidden: map[crdt.Origin]bool{}, sent: map[string]time.Time{}, answered: map[string]time.Time{}, synced: map[crdt.Origin]time.Time{}, lost: map[string]time.Time{}, outdated: map[string]bool{}}
}

// lose records that the view forgets dead member o: if it was required
// and its process was not seen gone while the lease on it ran, it keeps
// counting against the majority (lost).
func (l *leases) lose(o crdt.Origin, lease time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, heard := l.heard[o]
	if !heard || !l.linked[o] {
		return
	}
	if diedAt, ok := l.gone[o]; ok && !at.Add(lease).Before(diedAt) {
		return // its process is gone: it runs nothing
	}
	l.lost[o.Name] = at.Add(lease)
	l.gen.Add(1)
}

// Lost returns the members that count against the majority though the view
// no longer lists them (forgotten after the dead grace, or known to a
// previous run and not heard from yet), sorted.
func (c *Cluster) Lost() []string {
	l := c.repl.leases
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostNames()
}

// remember counts members a previous run of this node knew as lost until
// heard from.
func (l *leases) remember(names []string) {
	l.mu.Lock()
	for _, n := range names {
		l.lost[n] = time.Time{}
	}
	l.gen.Add(1)
	l.mu.Unlock()
}

// found strikes member name off the lost ones: it is back, or it left.
func (l *leases) found(name string) {
	l.mu.Lock()
	delete(l.lost, name)
	l.mu.Unlock()
}

// lostNames returns the lost members' names, sorted. Caller holds l.mu.
func (l *leases) lostNames() []string {
	if len(l.lost) == 0 {
		return nil // InSync's usual case: no allocation
	}
	return slices.Sorted(maps.Keys(l.lost))
}

// syncedWith records a full pull (every origin) from o, started at at,
// that succeeded: this node holds everything o held then.
func (l *leases) syncedWith(o crdt.Origin, at time.Time) {
	l.mu.Lock()
	l.synced[o] = at
	l.mu.Unlock()
}

// linkedTo records that this node's stream to o was established: from
// then on o is required (a member whose gRPC is not up yet, e.g. one just
// restarting, makes nobody refuse).
func (l *leases) linkedTo(o crdt.Origin) {
	l.mu.Lock()
	l.linked[o] = true
	l.gen.Add(1)
	l.mu.Unlock()
}

// setHidden records that the replication loop hid o's entries (suspect
// or dead) or showed them again. Only a required member's hiding counts: a
// member starting up is hidden until its gRPC answers, before anybody
// depends on it.
func (l *leases) setHidden(o crdt.Origin, hidden bool) {
	l.mu.Lock()
	if !hidden {
		delete(l.hidden, o)
	} else if l.linked[o] {
		l.hidden[o] = true
		l.gen.Add(1)
	}
	l.mu.Unlock()
}

// refused records that o's gRPC port refused a connection at at: its
// process is gone (a partition drops packets, it does not refuse them).
func (l *leases) refused(o crdt.Origin, at time.Time) {
	l.mu.Lock()
	if _, ok := l.heard[o]; ok {
		if _, already := l.gone[o]; !already {
			l.gone[o] = at
			l.gen.Add(1)
		}
	}
	l.mu.Unlock()
}

// lapse is when this node's lease on o's writes ran or runs out (the last
// gap-free message from it plus lease); false when o never counted for
// InSync (never heard from, or never linked).
func (l *leases) lapse(o crdt.Origin, lease time.Duration) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, heard := l.heard[o]
	if !heard || !l.linked[o] {
		return time.Time{}, false
	}
	return at.Add(lease), true
}

func (l *leases) heardFrom(o crdt.Origin, at time.Time) {
	l.mu.Lock()
	if _, ok := l.heard[o]; !ok {
		// Only a first hearing can make a member required (with
		// linkedTo); a later one moves its lease forward, which keeps an
		// in-sync verdict true longer than its memo says.
		l.gen.Add(1)
	}
	delete(l.gone, o)
	delete(l.lost, o.Name)
	delete(l.outdated, o.Name)
	// The latest renewal holds: two goroutines renew (the peer's stream to
	// this node, and this node's stream to it with the peer's answers,
	// beatpair.go), each stamping its message on receipt.
	if prev, ok := l.heard[o]; !ok || at.After(prev) {
		l.heard[o] = at
	}
	l.mu.Unlock()
}

// sentTo records a send to peer at at that could renew its lease. Several
// goroutines send to a peer (this node's stream to it, the answers on its
// stream to this node): the latest send is what a writer waits out.
func (l *leases) sentTo(peer string, at time.Time) {
	l.mu.Lock()
	if prev, ok := l.sent[peer]; !ok || at.After(prev) {
		l.sent[peer] = at
	}
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
	// CatchingUp: the members named are unreachable and this node is in
	// the majority, but has not yet pulled what they wrote from the
	// others.
	CatchingUp bool
}

func (e *BehindError) Error() string {
	if e.CatchingUp {
		return fmt.Sprintf("this node lost %s and is catching up on their writes from the others; retry in %s",
			strings.Join(e.Members, ", "), e.Retry)
	}
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

// heartbeatEvery is how often a sender heartbeats each stream: two fifths
// of the lease, so a renewal may come a period and a half late before the
// lease runs out. With DefaultConfig's 1.7 s lease that is every
// 680 ms, and a heartbeat may be 1.02 s late. At rest the heartbeats are
// the work a node does per peer (docs/bench/idle.md), so the period is as
// long as that room for a late one allows.
func heartbeatEvery(cfg Config) time.Duration { return min(cfg.StreamIdle, cfg.Lease) * 2 / 5 }

// InSync reports whether this node holds, within the lease, every write of
// every member it must hear from; otherwise it returns a *BehindError.
//
// A member is required once this node has both applied a gap-free message
// from it and had its own stream to it established (so a joining or
// restarting node makes nobody refuse before its links are up), until it
// leaves or the view forgets it. A required member that is alive or
// draining must have been heard within the lease; one that is suspect
// (memberlist reports it alive, gRPC cannot reach it, its entries are
// hidden here) makes the node refuse. A member whose gRPC port refused a
// connection is gone (a process that is not running writes nothing): if
// this node's lease on it was still running then, it holds every write
// the member answered and needs nothing more from it. One declared dead
// (or refused after the lease ran out) may be gone or may be on the other
// side of a partition this node is in: the node goes on only if it and the
// required members it hears from are a strict majority of itself and every
// required member, and it has pulled everything from each of those since
// it lost the dead ones. A member lost (forgotten after the grace, still
// counted against the majority) asks the same pull: the node may have
// been the one cut off when it lost it, and the member's last writes are
// on the others. A lone node, or one whose peers all left, is in
// sync.
func (c *Cluster) InSync() error {
	now := c.cfg.Clock.Now()
	// Every request asks (CanServe): an in-sync verdict holds, unchanged,
	// until the first required member's lease runs out or something that
	// could make a member required, stale or lost changes (gen), so it is
	// answered from the memo without the leases' lock or a copy of the
	// member list.
	gen := c.syncGen.Load()
	if m := c.syncMemo.Load(); m != nil && m.gen == gen && now.Before(m.until) {
		return nil
	}
	l := c.repl.leases
	members := c.Members()
	known := make(map[crdt.Origin]bool, len(members))
	var stale, gone []string
	var fresh []crdt.Origin
	var since time.Duration
	var lostLast time.Time        // when the lease on the last gone or lost member lapsed
	until := now.Add(c.cfg.Lease) // when the first fresh member's lease runs out
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range members {
		known[m.Origin] = true
		at, heard := l.heard[m.Origin]
		if m.Self || !heard || !l.linked[m.Origin] {
			continue
		}
		state := m.State
		if diedAt, ok := l.gone[m.Origin]; ok {
			if !at.Add(c.cfg.Lease).Before(diedAt) {
				// Its process is gone and this node's lease on it was still
				// running then: every write it answered reached this node
				// (or it would have waited the lease out first).
				continue
			}
			state = StateDead // gone, but this node may have missed its last writes
		}
		switch state {
		case StateSuspect:
			// memberlist reports it alive but this node cannot reach it
			// over gRPC: it may be writing, and this node hides its
			// entries meanwhile, so what it serves may lack them.
			stale = append(stale, m.Name+" (suspect)")
			if d := now.Sub(at); since == 0 || d < since {
				since = d
			}
		case StateAlive, StateDraining:
			// hidden: back from suspect or dead, but the replication loop
			// has not shown its entries again yet.
			hidden := l.hidden[m.Origin]
			if d := now.Sub(at); d > c.cfg.Lease || hidden {
				name := m.Name
				if hidden {
					name += " (entries hidden)"
				}
				stale = append(stale, name)
				if since == 0 || d < since {
					since = d
				}
			} else {
				fresh = append(fresh, m.Origin)
				if t := at.Add(c.cfg.Lease); t.Before(until) {
					until = t
				}
			}
		case StateDead:
			gone = append(gone, m.Name)
			if t := at.Add(c.cfg.Lease); t.After(lostLast) {
				lostLast = t
			}
		}
	}
	for o := range l.heard {
		if !known[o] {
			delete(l.heard, o) // an incarnation the view has forgotten
			delete(l.synced, o)
			delete(l.gone, o)
			delete(l.linked, o)
			delete(l.hidden, o)
		}
	}
	retry := heartbeatEvery(c.cfg)
	if len(stale) > 0 {
		return &BehindError{Members: stale, Since: since, Retry: retry}
	}
	lost := l.lostNames()
	if 1+len(fresh) <= len(gone)+len(lost) {
		return &BehindError{Members: append(gone, lost...), Retry: retry}
	}
	if len(gone) == 0 && len(lost) == 0 {
		c.syncMemo.Store(&syncVerdict{gen: gen, until: until})
		return nil
	}
	// The gone and lost members' last writes reached the members that
	// acknowledged them, not necessarily this node (it may have been the
	// one cut off when it lost them): it must have pulled everything from
	// every member it hears from since its lease on them lapsed.
	for _, t := range l.lost {
		if t.After(lostLast) {
			lostLast = t
		}
	}
	for _, o := range fresh {
		if !l.synced[o].After(lostLast) {
			return &BehindError{Members: append(gone, lost...), Retry: retry, CatchingUp: true}
		}
	}
	if len(gone) == 0 {
		// Pulls only move synced forward: the verdict holds as the
		// memo's does.
		c.syncMemo.Store(&syncVerdict{gen: gen, until: until})
	}
	return nil
}

// maxOutdated bounds the names Outdated remembers: they come from peers'
// digests, and a dead member's records matter to a failover for seconds.
const maxOutdated = 1024

// markOutdated records, if name is a lost member, that a peer holds
// writes of it that this node refuses, and reports whether it was lost.
func (l *leases) markOutdated(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, lost := l.lost[name]; !lost {
		return false
	}
	if !l.outdated[name] && len(l.outdated) >= maxOutdated {
		for n := range l.outdated {
			delete(l.outdated, n)
			break
		}
	}
	l.outdated[name] = true
	return true
}

// Outdated reports whether a peer was found holding writes of member name,
// lost here, that this node no longer takes in (it deleted the member's
// entries after the grace, possibly while it could not hear from the
// others): the records this node kept of that member may not be its last,
// and must not drive a failover.
func (c *Cluster) Outdated(name string) bool {
	l := c.repl.leases
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.outdated[name]
}

// catchingUp reports whether a member was lost, so a new link pulls
// everything from its peer at once (InSync wants that pull).
func (l *leases) catchingUp() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lost) > 0
}

// syncVerdict is InSync's memo of an in-sync verdict: it holds until
// until, while the cluster's syncGen is still gen.
type syncVerdict struct {
	gen   uint64
	until time.Time
}

// awaitLapse waits until every peer that has not acknowledged registry reg
// up to seq has surely lost its lease on this node's writes, or ctx ends.
func (r *replicator) awaitLapse(ctx context.Context, reg string, seq uint64) error {
	clock := r.c.cfg.Clock
	now := clock.Now()
	var until time.Time
	r.leases.mu.Lock()
	for peer, at := range r.leases.sent {
		r.linksMu.Lock()
		l := r.links[peer]
		r.linksMu.Unlock()
		if l != nil && l.ackedSeq(reg) >= seq {
			continue
		}
		t := at.Add(r.c.cfg.Lease + leaseMargin)
		if !t.After(now) {
			delete(r.leases.sent, peer) // lapsed: forget it
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

// InMajority reports whether this node hears, within the lease, from a
// strict majority of itself and the members it must hear from (as InSync
// counts them); otherwise it returns a *BehindError naming the members it
// does not hear. It asks less than InSync, nothing about catching up: it is
// the rule by which a node that lost a peer may still answer on its own,
// knowing that a node cut off from the majority cannot. A member whose
// process is gone (its gRPC port refused a connection while this node's
// lease on it ran) counts for neither side: it runs nothing.
func (c *Cluster) InMajority() error {
	now := c.cfg.Clock.Now()
	l := c.repl.leases
	members := c.Members()
	l.mu.Lock()
	defer l.mu.Unlock()
	total, fresh := 1, 1
	var missing []string
	for _, m := range members {
		at, heard := l.heard[m.Origin]
		if m.Self || !heard || !l.linked[m.Origin] || m.State == StateLeft {
			continue
		}
		if diedAt, ok := l.gone[m.Origin]; ok && !at.Add(c.cfg.Lease).Before(diedAt) {
			continue
		}
		total++
		live := m.State == StateAlive || m.State == StateDraining
		if live && now.Sub(at) <= c.cfg.Lease && !l.hidden[m.Origin] {
			fresh++
		} else {
			missing = append(missing, m.Name)
		}
	}
	lost := l.lostNames()
	total += len(lost)
	if 2*fresh > total {
		return nil
	}
	return &BehindError{Members: append(missing, lost...), Retry: heartbeatEvery(c.cfg)}
}

// Down reports whether member name is known not to be running: memberlist
// declared it dead or it left, or its gRPC port refused a connection while
// this node's lease on it ran (its process is gone). A member cut off by a
// partition is not down until memberlist declares it dead.
func (c *Cluster) Down(name string) bool {
	m, ok := c.Member(name)
	if !ok || m.State == StateDead || m.State == StateLeft {
		return true
	}
	l := c.repl.leases
	l.mu.Lock()
	defer l.mu.Unlock()
	at, heard := l.heard[m.Origin]
	diedAt, gone := l.gone[m.Origin]
	return gone && heard && !at.Add(c.cfg.Lease).Before(diedAt)
}
