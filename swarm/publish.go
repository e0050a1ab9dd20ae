package swarm

import (
	"context"
	"errors"
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
	coalesce.Run(ctx.Done(), s.kick, publishDelay, func() {
		s.flush()
		s.conns.flush()
		s.nonces.flushCopies() // other nodes' spent states, copied so they outlive their writer
	})
	<-sweepDone
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
			if err := s.publishRecord(info); err != nil {
				s.log.Warn("publishing session", "session", id, "err", err)
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
		s.mu.Unlock()
		s.markDirty(ev.Session, true, false)
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
