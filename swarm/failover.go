package swarm

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/mcpswarm/mcpswarm/cluster"
	"github.com/mcpswarm/mcpswarm/session"
)

// Standbys is the node's side of session replication, as the swarm needs
// it: the standbys of its own sessions (published in their records) and
// the copies it holds for other owners (promoted when an owner dies). Its
// methods are safe for concurrent use and do not block on the network.
type Standbys interface {
	// InSync lists the standbys that hold local session id's newest
	// snapshot.
	InSync(id string) []string
	// CatchUp ships local session id's last snapshot to its placed
	// standbys if one is out of sync (a drain, before it hands the
	// session to its standby).
	CatchUp(ctx context.Context, id string)
	// Behind says since when each placed standby of local session id
	// that does not hold its newest snapshot has been out of sync.
	Behind(id string) map[string]time.Time
	// Held reports the copy of session id this node holds: the owner that
	// shipped it and its ownership epoch.
	Held(id string) (owner string, epoch uint64, ok bool)
	// Promote takes the copy of session id to run it here as its new
	// owner: the snapshot comes with its epoch (Info.Handoff) raised by
	// one, and the copy's holder refuses the old epoch from then on. undo
	// puts the copy back when the session could not start.
	Promote(id string) (snap session.Snapshot, undo func(), err error)
	// HandOver takes the copy of session id to run it here for its live,
	// draining owner, as Promote does, but only if owner shipped it under
	// epoch and accept takes its snapshot (the owner's final one). undo
	// puts the copy back and lifts the fence, so the owner may keep the
	// session or copy it elsewhere.
	HandOver(id, owner string, epoch uint64, accept func(session.Snapshot) error) (snap session.Snapshot, undo func(), err error)
	// Promoted tells the holder the session runs here now, so its copy
	// can go.
	Promoted(id string)
}

// StandbysChanged republishes local session id's record, whose in-sync
// standbys changed.
func (s *Swarm) StandbysChanged(id string) {
	if _, ok := s.mgr.Get(id); ok {
		s.markDirty(id, true, false)
	}
}

// promoteRetry is how often a pending promotion is tried again while this
// node is not yet in sync with the cluster's majority.
const promoteRetry = 100 * time.Millisecond

// failoverLoop promotes this node's standby copies of sessions whose owner
// died, when kicked (an owner's records were hidden) and then every
// promoteRetry while some promotion still waits for the majority rule.
func (s *Swarm) failoverLoop(ctx context.Context) {
	defer close(s.failDone)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.failKick:
		}
		for s.promoteOrphans(ctx) > 0 {
			if sleepCtx(ctx, promoteRetry) != nil {
				return
			}
		}
	}
}

// promoteOrphans promotes what it may and returns how many promotions
// still wait.
func (s *Swarm) promoteOrphans(ctx context.Context) (waiting int) {
	s.mu.Lock()
	orphans := make(map[string]sessionRecord, len(s.unavailable))
	for id, rec := range s.unavailable {
		orphans[id] = rec
	}
	s.mu.Unlock()
	for id, rec := range orphans {
		switch s.mayPromote(id, rec) {
		case promoteNo:
		case promoteLater:
			waiting++
		case promoteNow:
			s.promote(ctx, id, rec)
		}
	}
	return waiting
}

type promoteVerdict int

const (
	promoteNo promoteVerdict = iota
	promoteLater
	promoteNow
)

// mayPromote applies the failover rule (promotionVerdict) to the last
// record of session id, whose owner is hidden, as this node sees it now.
func (s *Swarm) mayPromote(id string, rec sessionRecord) promoteVerdict {
	if s.standbys == nil {
		return promoteNo
	}
	in := promotion{self: s.self, rec: rec, senderLeft: s.senderLeft(rec), draining: s.isDraining()}
	in.heldOwner, in.heldEpoch, in.held = s.standbys.Held(id)
	in.outdated = s.cl.Outdated(rec.Node)
	_, in.running = s.mgr.Get(id)
	in.alive = func(n string) bool {
		m, ok := s.cl.Member(n)
		return ok && m.State == cluster.StateAlive
	}
	in.inSync = s.cl.InSync
	in.majority = func() bool { return s.deaths.majority(s.cl.Members()) }
	return promotionVerdict(in)
}

// promotion is what the failover rule looks at: the last record of a
// session whose owner is hidden, and this node's view.
type promotion struct {
	self string
	rec  sessionRecord
	// senderLeft: the record's owner handed the session off or is leaving;
	// draining: this node is.
	senderLeft, draining bool
	// held, heldOwner, heldEpoch: the copy this node holds, if any.
	held      bool
	heldOwner string
	heldEpoch uint64
	// running: the session already runs here.
	running bool
	// outdated: a peer holds later writes of the record's owner that this
	// node refuses (cluster.Outdated), so rec may not be its last record.
	outdated bool
	// alive reports whether a member is alive in this node's view.
	alive func(node string) bool
	// inSync is cluster.InSync (majority and caught up); majority reports
	// whether the alive members are a strict majority of themselves and
	// every member seen dying (deaths.majority). Both are asked last, only
	// of the node that would promote.
	inSync   func() error
	majority func() bool
}

// promotionVerdict is the failover rule, with no I/O: this node promotes
// its copy only if the record names it as the first of the owner's in-sync
// standbys that is alive (so exactly one node acts), its copy is of the
// record's owner and epoch (it holds every write the owner acknowledged),
// the owner did not hand the session off, this node is not draining, and
// it is in the cluster's majority and caught up (the rule the leases use):
// a node cut off with a dead owner's copy waits (promoteLater). A node that
// deleted the owner's records while cut off, and then found a peer holding
// later ones it can no longer take in, never promotes from what it kept:
// the record that names the right standby is on the peers.
func promotionVerdict(in promotion) promoteVerdict {
	if in.senderLeft || in.draining || in.outdated {
		return promoteNo
	}
	if !in.held || in.heldOwner != in.rec.Node || in.heldEpoch != in.rec.Handoff {
		return promoteNo
	}
	if in.running {
		return promoteNo
	}
	first := ""
	for _, n := range in.rec.Standbys {
		if in.alive(n) {
			first = n
			break
		}
	}
	if first != in.self {
		return promoteNo
	}
	if in.inSync() != nil || !in.majority() {
		return promoteLater
	}
	return promoteNow
}

// deaths remembers the members that died without leaving, after the
// cluster's grace has forgotten them: a node cut off from the rest sees
// them all die, and once the grace forgets them it looks alone and in
// sync. Only a strict majority of the alive and the dead together may
// promote, so the cut-off node never does. A member is forgotten here when
// it comes back or leaves gracefully.
type deaths struct {
	mu   sync.Mutex
	dead map[string]bool
}

// note records a membership change.
func (d *deaths) note(m cluster.Member) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead == nil {
		d.dead = map[string]bool{}
	}
	switch m.State {
	case cluster.StateDead:
		d.dead[m.Name] = true
	case cluster.StateAlive, cluster.StateLeft, cluster.StateDraining:
		delete(d.dead, m.Name)
	}
}

// forget strikes member name off on an operator's word that it is gone
// for good (Swarm.ForgetDeath), and reports whether it was recorded.
func (d *deaths) forget(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	had := d.dead[name]
	delete(d.dead, name)
	return had
}

// names returns the members recorded dead, sorted.
func (d *deaths) names() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Sorted(maps.Keys(d.dead))
}

// Deaths returns the members this node saw die that have neither come
// back nor left, sorted: they count against the majority a failover needs
// (the dead ones still listed by the view among them).
func (s *Swarm) Deaths() []string { return s.deaths.names() }

// ForgetDeath strikes member name off the deaths on an operator's word
// that it is gone for good (cluster.Cluster.Forget does the same for the
// leases), and reports whether it was recorded. A member of that name that
// dies later is recorded again.
func (s *Swarm) ForgetDeath(name string) bool { return s.deaths.forget(name) }

// majority reports whether the alive members of view are a strict
// majority of themselves and every member seen dying.
func (d *deaths) majority(view []cluster.Member) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	alive := 0
	total := len(d.dead)
	for _, m := range view {
		if m.State == cluster.StateAlive && !d.dead[m.Name] {
			alive++
			total++
		}
	}
	return 2*alive > total
}

// promote starts the session here from this node's copy under the next
// epoch; the new record supersedes the dead owner's on every node.
func (s *Swarm) promote(ctx context.Context, id string, rec sessionRecord) {
	snap, undo, err := s.standbys.Promote(id)
	if err != nil {
		s.log.Warn("promoting a standby copy", "session", id, "err", err)
		return
	}
	if _, err := s.mgr.Adopt(ctx, snap); err != nil {
		undo()
		s.log.Error("promoting a standby copy: the session did not start", "session", id, "old_owner", rec.Node, "err", err)
		return
	}
	s.standbys.Promoted(id)
	s.mu.Lock()
	delete(s.unavailable, id)
	s.mu.Unlock()
	s.met.failover()
	s.log.Warn("promoted: took over a session whose owner died", "session", id, "old_owner", rec.Node, "new_owner", s.self, "epoch", snap.Info.Handoff)
}

// isDraining reports whether this node is draining (it takes nothing over).
func (s *Swarm) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// demoteIfSuperseded stops this node's copy of session id when another
// origin publishes it under a later epoch without having it handed over
// (a standby promoted while this node was dead, cut off or paused): the
// old owner never serves it again, and its snapshot goes with it.
func (s *Swarm) demoteIfSuperseded(id string, local session.Info, remote sessionRecord) bool {
	if remote.MovedTo != "" || remote.Handoff <= local.Handoff {
		return false
	}
	s.log.Warn("demoted: another node took this session over under a later epoch; stopping the local copy",
		"session", id, "new_owner", remote.Node, "epoch", remote.Handoff, "local_epoch", local.Handoff)
	// Until the new owner's record is visible here (it may still be hidden,
	// its node unreachable from this one), calls answer "taken over:
	// retry", not "not running".
	s.supersede(id, local.Principal, remote.Node)
	go func() {
		if err := s.mgr.Stop(context.Background(), id); err != nil {
			s.log.Warn("stopping a demoted session", "session", id, "err", err)
		}
	}()
	return true
}

// failover counts a promotion.
func (m *metrics) failover() {
	if m != nil {
		m.promotions.Inc()
	}
}
