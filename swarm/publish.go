package swarm

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/mcpswarm/mcpswarm/internal/coalesce"
	"github.com/mcpswarm/mcpswarm/mcp"
	"github.com/mcpswarm/mcpswarm/session"
)

// dirty says what of a local session must be written to the registries.
type dirty struct{ record, tools bool }

// markDirty records that session id needs publishing and wakes the
// publisher. It never blocks: session events come from the session's own
// goroutine, which must not wait for a bbolt write or a replication push.
func (s *Swarm) markDirty(id string, record, tools bool) {
	s.mu.Lock()
	d := s.pending[id]
	d.record = d.record || record
	d.tools = d.tools || tools
	s.pending[id] = d
	s.mu.Unlock()
	s.wakePublisher()
}

// wakePublisher makes the publisher run a round soon.
func (s *Swarm) wakePublisher() {
	s.kick.Kick()
}

// publishDelay is how long the publisher gathers changes before it
// writes: the replication layer batches for a few milliseconds anyway, and
// a session updated ten times within it is written once.
const publishDelay = 2 * time.Millisecond

// publishLoop writes what markDirty and the connection table recorded,
// coalescing bursts (see package coalesce): a session that changed ten
// times since the last round is written once, with its state as it is now.
// Beside it, a sweep forgets old connection records once a minute.
func (s *Swarm) publishLoop(ctx context.Context) {
	defer close(s.loopDone)
	sweepDone := make(chan struct{})
	go func() {
		defer close(sweepDone)
		sweep := time.NewTicker(time.Minute)
		defer sweep.Stop()
		for {
			select {
			case now := <-sweep.C:
				s.conns.sweep(now, s.connMaxAge)
				s.sweepHandoffs(now)
			case <-ctx.Done():
				return
			}
		}
	}()
	s.mu.Lock()
	s.revs.stopped = false
	s.mu.Unlock()
	coalesce.Run(ctx.Done(), s.kick, publishDelay, func() {
		if ctx.Err() != nil {
			s.stopRevisions() // the last round also writes what the gate held
		}
		s.flush()
		s.conns.flush()
		s.nonces.flushCopies() // other nodes' spent states, copied so they outlive their writer
	})
	<-sweepDone
}

// revisionGap is the shortest time between two writes of a session's
// record for resource revisions alone: a session's first revision after a
// quiet gap is written in the next round (publishDelay), later ones within
// the gap are merged and written when it ends. Other nodes hear of a
// resource change within the gap plus replication; before, every click
// rewrote and replicated the record (a marshal, a crdt write with its delta
// log copy and a replication batch per click, about a seventh of a click's
// allocated bytes), though a subscriber elsewhere only needs to learn that
// the revision moved.
const revisionGap = 25 * time.Millisecond

// revThrottle holds back revision-only record writes (see revisionGap).
// Guarded by Swarm.mu.
type revThrottle struct {
	gate    revGate
	timer   *time.Timer // releases the held revisions when a gap ends
	armed   bool
	stopped bool // the publisher stopped: every revision is written at once
}

// admitLocked reports whether a revision of id is written in the next
// round; otherwise it is held until the gap ends. release is the timer's
// callback.
func (t *revThrottle) admitLocked(id string, now time.Time, release func()) bool {
	if t.stopped {
		return true
	}
	ok := t.gate.admit(id, now, revisionGap)
	if !t.armed {
		t.armed = true
		if t.timer == nil {
			t.timer = time.AfterFunc(revisionGap, release)
		} else {
			t.timer.Reset(revisionGap)
		}
	}
	return ok
}

// releaseRevisions marks the held sessions dirty at the end of a gap and
// keeps the timer running while any session wrote within the last gap.
func (s *Swarm) releaseRevisions() {
	s.mu.Lock()
	if s.revs.stopped {
		s.mu.Unlock()
		return
	}
	ids, more := s.revs.gate.release(time.Now(), revisionGap)
	for _, id := range ids {
		d := s.pending[id]
		d.record = true
		s.pending[id] = d
	}
	s.revs.armed = more
	if more {
		s.revs.timer.Reset(revisionGap)
	}
	s.mu.Unlock()
	if len(ids) > 0 {
		s.wakePublisher()
	}
}

// stopRevisions marks every held session dirty and stops holding.
func (s *Swarm) stopRevisions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revs.stopped, s.revs.armed = true, false
	if s.revs.timer != nil {
		s.revs.timer.Stop()
	}
	ids, _ := s.revs.gate.release(time.Now(), 0)
	for _, id := range ids {
		d := s.pending[id]
		d.record = true
		s.pending[id] = d
	}
}

// revGate decides which revision-only record writes go out now: at most
// one per session per gap, the rest held and released together when the
// gap ends. It is pure: the caller supplies the time.
type revGate struct {
	last map[string]time.Time // sessions let through within the last gap
	held map[string]bool      // sessions with a revision waiting for its gap to end
}

// admit reports whether a revision of id may be written now; when not, id
// is held for the next release.
func (g *revGate) admit(id string, now time.Time, gap time.Duration) bool {
	if at, ok := g.last[id]; ok && now.Sub(at) < gap {
		if g.held == nil {
			g.held = map[string]bool{}
		}
		g.held[id] = true
		return false
	}
	if g.last == nil {
		g.last = map[string]time.Time{}
	}
	g.last[id] = now
	delete(g.held, id) // this write carries the held revision too
	return true
}

// release returns the held sessions, whose writes go out now and start a
// new gap, and forgets the sessions quiet for a gap; more reports whether
// any session is still within one.
func (g *revGate) release(now time.Time, gap time.Duration) (ids []string, more bool) {
	for id := range g.held {
		ids = append(ids, id)
		g.last[id] = now
	}
	clear(g.held)
	for id, at := range g.last {
		if now.Sub(at) >= gap {
			delete(g.last, id)
		}
	}
	return ids, len(g.last) > 0
}

// flush publishes or unpublishes every dirty session according to whether
// it still runs here.
func (s *Swarm) flush() {
	s.mu.Lock()
	batch := s.pending
	s.pending = map[string]dirty{}
	s.mu.Unlock()
	for id, d := range batch {
		if _, moving := s.handoffs.get(id); moving {
			// HandOff writes this session's records itself: a publish
			// from here could overwrite its forwarding record.
			continue
		}
		info, running := s.mgr.Get(id)
		if !running {
			s.unpublish(id)
			continue
		}
		if d.record {
			rec := s.record(info)
			if err := s.putRecord(id, rec); err != nil {
				s.log.Warn("publishing session", "session", id, "err", err)
			} else {
				// Own records reach the index only written through (a
				// replicated change from this origin is skipped), so this
				// node's own listing shows what it published: its in-sync
				// standbys change with no start or tool change.
				s.idx.setSession(id, s.cl.Origin(), &rec)
			}
		}
		if d.tools {
			if err := s.publishTools(id, info.Principal); err != nil && !errors.Is(err, session.ErrNotRunning) {
				s.log.Warn("publishing tools", "session", id, "err", err)
			}
		}
	}
}

// onLocalEvent mirrors the local manager's events: local watchers hear at
// once (with patches, which remote nodes do not get); the registries are
// written by the publisher.
func (s *Swarm) onLocalEvent(ev session.Event) {
	switch ev.Kind {
	case session.Started, session.Stopped:
		s.markDirty(ev.Session, true, true)
	case session.ToolsChanged:
		g, ok := s.toolGen.Load(ev.Session)
		if !ok {
			g, _ = s.toolGen.LoadOrStore(ev.Session, new(atomic.Uint64))
		}
		g.(*atomic.Uint64).Add(1)
		s.writeThrough(ev.Session)
		s.markDirty(ev.Session, false, true)
	case session.ResourceChanged:
		s.mu.Lock()
		r := s.rev[ev.Session]
		if r == nil {
			r = map[string]uint64{}
			s.rev[ev.Session] = r
		}
		r[ev.Resource]++
		now := s.revs.admitLocked(ev.Session, time.Now(), s.releaseRevisions)
		if now {
			d := s.pending[ev.Session]
			d.record = true
			s.pending[ev.Session] = d
		}
		s.mu.Unlock()
		if now {
			s.wakePublisher()
		}
		s.emit(mcp.Event{Kind: mcp.ResourceChanged, Principal: ev.Principal, Session: ev.Session, Resource: ev.Resource, Patch: ev.Patch})
	}
}

// DerivedRegistries names the registries whose entries of this node are
// derived from the session manager and rebuilt by StartPublishing at
// every start (what did not come back is removed, what runs is written
// afresh), so the node need not store them (cluster.Volatile): the
// durable state is the sessions' snapshots. Storing them cost a bbolt
// transaction with its fsync for every resource revision, a write per
// click that no restart ever read.
func DerivedRegistries() []string { return []string{regSessions, regTools} }
