package swarm

import (
	"context"

	"github.com/mcpswarm/mcpswarm/crdt"
	"github.com/mcpswarm/mcpswarm/mcp"
)

// onSessionChange turns replicated session changes into front events,
// tracks sessions whose owner is hidden, and resolves duplicate ids.
func (s *Swarm) onSessionChange(ch crdt.Change) {
	var principal string
	switch {
	case ch.New != nil:
		rec, err := decodeSession(ch.New)
		if err != nil {
			s.log.Warn("ignoring malformed session record", "session", ch.Key, "origin", ch.Origin.String(), "err", err)
			return
		}
		principal = rec.Principal
		if ch.Origin != s.cl.Origin() { // own records are written through
			s.idx.setSession(ch.Key, ch.Origin, &rec)
		}
		s.mu.Lock()
		delete(s.unavailable, ch.Key)
		if ch.Origin != s.cl.Origin() {
			delete(s.superseded, ch.Key) // the new owner's record is here
		}
		s.mu.Unlock()
		if ch.Old != nil {
			s.emitRevisions(ch.Key, rec, ch.Old)
		}
		if ch.Origin != s.cl.Origin() {
			s.resolveDuplicate(ch.Key, rec, ch.Origin)
		}
	case ch.Old != nil:
		rec, err := decodeSession(ch.Old)
		if err != nil {
			return
		}
		principal = rec.Principal
		if ch.Origin != s.cl.Origin() {
			if s.sessions.Hidden(ch.Origin) && s.senderLeft(rec) {
				// Keep its tools listed until the adopter's arrive.
				s.idx.awaitAdopter(ch.Key)
			}
			s.idx.setSession(ch.Key, ch.Origin, nil)
		}
		s.mu.Lock()
		if s.sessions.Hidden(ch.Origin) {
			s.unavailable[ch.Key] = rec
			s.failKick.Kick()
		} else {
			delete(s.unavailable, ch.Key)
		}
		s.mu.Unlock()
	}
	if ch.Old == nil || ch.New == nil {
		s.emit(mcp.Event{Kind: mcp.SessionsChanged, Principal: principal, Session: ch.Key})
	}
}

// onHiddenSessionChange takes in a session record that reached this node
// for an owner hidden here (dead, gone or unreachable), relayed by a peer
// that heard it before the owner vanished from this node's view. Such a
// record is newer than what this node kept of the session when the owner
// vanished: a standby that was cut off meanwhile would otherwise act on a
// record that still names it, and promote a stale copy. So the failover
// reads the newest one (the record of the latest epoch), and a local copy
// of an earlier epoch demotes itself, as it does for a visible record.
func (s *Swarm) onHiddenSessionChange(ch crdt.Change) {
	if ch.Origin == s.cl.Origin() {
		return
	}
	if ch.New == nil {
		old, err := decodeSession(ch.Old)
		if err != nil {
			return
		}
		s.mu.Lock()
		if cur, ok := s.unavailable[ch.Key]; ok && cur.Node == old.Node && cur.Handoff == old.Handoff {
			delete(s.unavailable, ch.Key) // the owner stopped it before it vanished
		}
		s.mu.Unlock()
		return
	}
	rec, err := decodeSession(ch.New)
	if err != nil {
		s.log.Warn("ignoring malformed session record", "session", ch.Key, "origin", ch.Origin.String(), "err", err)
		return
	}
	if local, ok := s.mgr.Get(ch.Key); ok {
		s.demoteIfSuperseded(ch.Key, local, rec)
	}
	if _, visible := s.locate(ch.Key); visible {
		return // a live owner serves it: nothing to take over
	}
	s.mu.Lock()
	if cur, ok := s.unavailable[ch.Key]; !ok || rec.Handoff >= cur.Handoff {
		s.unavailable[ch.Key] = rec
		s.failKick.Kick()
	}
	s.mu.Unlock()
}

// emitRevisions reports the resources of a remote session whose revision
// moved, so subscribers on this node hear of changes made on the owner.
// Local sessions are reported with their patches by onLocalEvent.
func (s *Swarm) emitRevisions(id string, rec sessionRecord, oldRaw []byte) {
	if rec.Node == s.self {
		return
	}
	old, err := decodeSession(oldRaw)
	if err != nil {
		return
	}
	for name, rev := range rec.Rev {
		if old.Rev[name] != rev {
			s.emit(mcp.Event{Kind: mcp.ResourceChanged, Principal: rec.Principal, Session: id, Resource: name})
		}
	}
}

// resolveDuplicate stops this node's copy of a session when another origin
// created the same id earlier: the rule every node applies, so exactly one
// copy survives. The loser's owner tells its principal's connections
// through the session-change events that follow.
func (s *Swarm) resolveDuplicate(id string, remote sessionRecord, remoteOrigin crdt.Origin) {
	local, ok := s.mgr.Get(id)
	if !ok {
		return
	}
	if s.demoteIfSuperseded(id, local, remote) {
		return
	}
	// A handoff is an ordered transfer: a sender's record (an earlier
	// generation, or a forwarding record) never stops the adopter's copy.
	if remote.MovedTo != "" || remote.Handoff != local.Handoff {
		return
	}
	if !earlier(remote.Created, remoteOrigin.String(), local.Created, s.cl.Origin().String()) {
		return
	}
	s.log.Warn("session id created concurrently on two nodes; the earlier creation wins, stopping this copy",
		"session", id, "winner", remote.Node, "principal", local.Principal)
	// Stop outside the registry's change callback: stopping writes to the
	// registry.
	go func() {
		if err := s.mgr.Stop(context.Background(), id); err != nil {
			s.log.Warn("stopping the losing copy of a duplicate session", "session", id, "err", err)
		}
		s.emit(mcp.Event{Kind: mcp.ToolsChanged, Principal: local.Principal, Session: id})
	}()
}

// onToolsChange reports a principal's tool set change.
func (s *Swarm) onToolsChange(ch crdt.Change) {
	raw := ch.New
	if raw == nil {
		raw = ch.Old
	}
	if ch.Origin == s.cl.Origin() {
		// This node's own records are written through (writeThrough,
		// unpublish); a registry echo arriving after a newer write-through
		// must not roll the index back.
		return
	}
	rec, err := decodeTools(raw)
	if err != nil {
		s.log.Warn("ignoring malformed tools record", "session", ch.Key, "origin", ch.Origin.String(), "err", err)
		return
	}
	var changed bool
	if ch.New == nil {
		changed = s.idx.setTools(ch.Key, ch.Origin, nil)
	} else {
		changed = s.idx.setTools(ch.Key, ch.Origin, &rec)
	}
	if changed {
		s.emit(mcp.Event{Kind: mcp.ToolsChanged, Principal: rec.Principal, Session: ch.Key})
	}
}

// writeThrough puts a local session's current record and tools into the
// index at once, so the caller that started or changed it reads its own
// write (tools/list right after swarm_start lists the new tools) while the
// registry write follows a moment later.
func (s *Swarm) writeThrough(id string) {
	info, ok := s.mgr.Get(id)
	if !ok {
		return
	}
	own := s.cl.Origin()
	rec := s.record(info)
	s.idx.setSession(id, own, &rec)
	tools, err := s.mgr.Tools(id)
	if err != nil {
		return
	}
	if s.idx.setTools(id, own, &toolsRecord{Principal: info.Principal, Tools: tools}) {
		s.emit(mcp.Event{Kind: mcp.ToolsChanged, Principal: info.Principal, Session: id})
	}
}
