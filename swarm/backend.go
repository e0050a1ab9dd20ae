package swarm

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/crdt"
	"github.com/mcpswarm/mcpswarm/mcp"
	"github.com/mcpswarm/mcpswarm/session"
)

// Static operations forwarded to the owner as CallTool with these names.
const (
	opStop       = "swarm_stop"
	opModel      = "swarm_get_model"
	opScreenshot = "swarm_screenshot"
	opSendKey    = "swarm_send_key"
)

// located is a session found in the replicated registry.
type located struct {
	id     string
	rec    sessionRecord
	origin crdt.Origin
}

// locate resolves a session id to its visible record. When several origins
// hold the id (a concurrent creation not yet resolved), the earliest
// creation is the session: the same answer on every node.
func (s *Swarm) locate(id string) (located, bool) { return s.idx.locate(id) }

// resolve finds id for caller c: not running, owner unavailable, and not
// the owner are errors the client sees.
func (s *Swarm) resolve(c authz.Context, id string) (located, error) {
	loc, ok := s.locate(id)
	if !ok {
		s.mu.Lock()
		rec, hidden := s.unavailable[id]
		s.mu.Unlock()
		if hidden && authz.Owns(c.Principal, rec.Principal) {
			// Nothing ran: the session is back once its standby promotes
			// or its owner returns, so the client may retry as it is.
			return loc, fmt.Errorf("%w: node %s (session %s); nothing ran: retry later", ErrOwnerUnavailable, rec.Node, id)
		}
		if s.takenOver(c, id) {
			return loc, errTakenOver(id)
		}
		return loc, fmt.Errorf("session %s: %w", id, session.ErrNotRunning)
	}
	if !authz.Owns(c.Principal, loc.rec.Principal) {
		return loc, fmt.Errorf("session %s: %w", id, ErrNotOwner)
	}
	// A suspect owner (gRPC failing while memberlist says alive) needs no
	// check here: the cluster hides its entries, and PeerConn refuses it.
	return loc, nil
}

// superseded is a local session stopped because another node took it
// over: whose it was and when.
type superseded struct {
	principal string
	at        time.Time
	owner     string // the new owner, when known
}

// Superseded records that local session id, of principal, stops because
// another node owns it under a later epoch (a standby refused this node's
// write): until that owner's record reaches this node, at most movedTTL, a
// call answers a retryable "taken over" instead of "not running", which
// would send the client off to start a new session.
func (s *Swarm) Superseded(id, principal string) {
	s.supersede(id, principal, "")
}

// supersede records the demotion of local session id, of principal, to
// owner ("" when not known).
func (s *Swarm) supersede(id, principal, owner string) {
	s.mu.Lock()
	s.superseded[id] = superseded{principal: principal, at: time.Now(), owner: owner}
	s.mu.Unlock()
}

// supersededLately returns the record of session id's demotion here while
// it is fresh (movedTTL), forgetting it once stale.
func (s *Swarm) supersededLately(id string) (superseded, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.superseded[id]
	if ok && time.Since(t.at) > movedTTL {
		delete(s.superseded, id)
		return superseded{}, false
	}
	return t, ok
}

// errTakenOver answers a call for a session demoted here whose new
// owner's record has not arrived: retryable, since nothing ran.
func errTakenOver(id string) error {
	return fmt.Errorf("session %s: another node took it over and its record has not reached this node yet; nothing ran: retry", id)
}

// takenOver reports whether c's session id was superseded here lately
// and its new owner's record has not arrived.
func (s *Swarm) takenOver(c authz.Context, id string) bool {
	t, ok := s.supersededLately(id)
	return ok && authz.Owns(c.Principal, t.principal)
}

// Apps implements mcp.Backend.
func (s *Swarm) Apps() []session.AppInfo { return s.mgr.Startable() }

// Start implements mcp.Backend: sessions are created on the node that
// receives the request. An id already visible anywhere in the swarm is
// refused; a concurrent creation elsewhere is resolved when the records
// meet (see onSessionChange).
func (s *Swarm) Start(ctx context.Context, c authz.Context, app, id string) (mcp.SessionInfo, error) {
	s.mu.Lock()
	draining := s.draining
	s.mu.Unlock()
	if draining {
		return mcp.SessionInfo{}, fmt.Errorf("node %s is draining and takes no new sessions: %w", s.self, ErrDraining)
	}
	if id != "" {
		if _, ok := s.locate(id); ok {
			return mcp.SessionInfo{}, fmt.Errorf("session %s: %w", id, ErrExists)
		}
		// An id whose owner is unreachable is still taken: the owner may
		// come back with it.
		s.mu.Lock()
		rec, hidden := s.unavailable[id]
		s.mu.Unlock()
		if hidden {
			return mcp.SessionInfo{}, fmt.Errorf("session %s (owner node %s is unavailable): %w", id, rec.Node, ErrExists)
		}
	}
	info, err := s.mgr.Start(ctx, id, app, c.Principal.Subject)
	if err != nil {
		return mcp.SessionInfo{}, err
	}
	// The Started event publishes too; publishing here as well makes the
	// session visible in the registry before Start answers, and the index
	// shows it to this node's next request at once.
	s.writeThrough(info.ID)
	err = s.publishRecord(info)
	if err == nil {
		err = s.publishTools(info.ID, info.Principal)
	}
	if err != nil {
		s.log.Warn("publishing new session", "session", info.ID, "err", err)
	} else {
		// Answered once every live peer has the session and its tools:
		// the caller's next call may reach any node (toolshare.go).
		s.awaitPeers(s.sessions, "sessions", info.ID)
		s.awaitPeers(s.tools, "tools", info.ID)
	}
	return mcp.SessionInfo{Info: info, Owner: s.self, Available: true}, nil
}

// Stop implements mcp.Backend.
func (s *Swarm) Stop(ctx context.Context, c authz.Context, id string) error {
	_, err := viaOwner(ctx, s, c, id, func(node string) (struct{}, error) {
		if node == s.self {
			return struct{}{}, s.handingOff(id, s.mgr.Stop(ctx, id))
		}
		_, err := s.forward(ctx, c, node, id, opStop, nil)
		return struct{}{}, err
	})
	return err
}

// Sessions implements mcp.Backend. A duplicate id (a concurrent creation
// not yet resolved) is listed once, as the earliest creation.
func (s *Swarm) Sessions(p authz.Principal) []mcp.SessionInfo {
	if p.Subject == "" {
		return nil // owns nothing
	}
	var ids []string
	if p.IsAdmin() {
		ids = s.idx.ids()
	} else {
		ids = s.idx.idsNaming(p.Subject)
	}
	var out []mcp.SessionInfo
	for _, id := range ids {
		loc, ok := s.locate(id)
		if !ok || !authz.Owns(p, loc.rec.Principal) {
			continue
		}
		out = append(out, mcp.SessionInfo{Info: loc.rec.info(id), Owner: route(loc.rec), Available: true, Standbys: loc.rec.Standbys, Behind: loc.rec.behind()})
	}
	return out
}

// CountSessions implements mcp.Backend: the sessions whose winning
// record names principal, counted through the principal index without
// building their listing.
func (s *Swarm) CountSessions(principal string) int { return s.idx.owned(principal) }

// Lookup implements mcp.Backend.
func (s *Swarm) Lookup(id string) (mcp.SessionInfo, bool) {
	loc, ok := s.locate(id)
	if ok {
		return mcp.SessionInfo{Info: loc.rec.info(id), Owner: route(loc.rec), Available: true, Standbys: loc.rec.Standbys, Behind: loc.rec.behind()}, true
	}
	s.mu.Lock()
	rec, hidden := s.unavailable[id]
	s.mu.Unlock()
	if hidden {
		// A sender that left after handing the session off: the adopter's
		// record is on its way, and calls wait for it (viaOwner).
		available := s.adopterPending(id)
		return mcp.SessionInfo{Info: rec.info(id), Owner: route(rec), Available: available}, true
	}
	if t, taken := s.supersededLately(id); taken {
		// Demoted here; the new owner's record has not reached this node
		// (its node may still be hidden here): unavailable, not gone.
		owner := t.owner
		if owner == "" {
			owner = "(the new owner)"
		}
		return mcp.SessionInfo{Info: session.Info{ID: id, Principal: t.principal}, Owner: owner}, true
	}
	return mcp.SessionInfo{}, false
}

// Tools implements mcp.Backend: the sticky tools of p's visible sessions,
// from the index (no decoding per request). The slice is shared.
func (s *Swarm) Tools(p authz.Principal) []session.Tool {
	return s.idx.toolsOf(p.Subject, p.IsAdmin())
}

// Call implements mcp.Backend: local sessions run here, others on their
// owner.
func (s *Swarm) Call(ctx context.Context, c authz.Context, id, tool string, args map[string]any) (session.Result, error) {
	return viaOwner(ctx, s, c, id, func(node string) (session.Result, error) {
		if node == s.self {
			res, err := s.callLocal(id, func() (session.Result, error) { return s.mgr.Call(ctx, id, tool, args) })
			return res, s.handingOff(id, err)
		}
		return s.forward(ctx, c, node, id, tool, args)
	})
}

// SendKey implements mcp.Backend.
func (s *Swarm) SendKey(ctx context.Context, c authz.Context, id string, k session.Key) (session.Result, error) {
	return viaOwner(ctx, s, c, id, func(node string) (session.Result, error) {
		if node == s.self {
			res, err := s.callLocal(id, func() (session.Result, error) { return s.mgr.SendKey(ctx, id, k) })
			return res, s.handingOff(id, err)
		}
		return s.forward(ctx, c, node, id, opSendKey, map[string]any{"key": k.Key, "ctrl": k.Ctrl, "alt": k.Alt, "shift": k.Shift})
	})
}

// Model implements mcp.Backend.
func (s *Swarm) Model(ctx context.Context, c authz.Context, id string) (json.RawMessage, error) {
	return viaOwner(ctx, s, c, id, func(node string) (json.RawMessage, error) {
		if node == s.self {
			raw, err := s.mgr.Model(id)
			return raw, s.handingOff(id, err)
		}
		res, err := s.forward(ctx, c, node, id, opModel, nil)
		if err != nil {
			return nil, err
		}
		return json.RawMessage(res.Text), nil
	})
}

// Screenshot implements mcp.Backend.
func (s *Swarm) Screenshot(ctx context.Context, c authz.Context, id string) (string, error) {
	return viaOwner(ctx, s, c, id, func(node string) (string, error) {
		if node == s.self {
			txt, err := s.mgr.Screenshot(id, session.ScreenWidth, session.ScreenHeight)
			return txt, s.handingOff(id, err)
		}
		res, err := s.forward(ctx, c, node, id, opScreenshot, nil)
		if err != nil {
			return "", err
		}
		return res.Text, nil
	})
}

// ReadResource implements mcp.Backend.
func (s *Swarm) ReadResource(ctx context.Context, c authz.Context, id, name string) (json.RawMessage, error) {
	return viaOwner(ctx, s, c, id, func(node string) (json.RawMessage, error) {
		if node == s.self {
			raw, err := s.mgr.ReadResource(id, name)
			return raw, s.handingOff(id, err)
		}
		return s.forwardRead(ctx, c, node, id, name)
	})
}

// ResourceNames implements mcp.Backend for local sessions; remote
// sessions offer the names their owner published revisions for.
func (s *Swarm) ResourceNames(id string) ([]string, error) {
	if _, ok := s.mgr.Get(id); ok {
		return s.mgr.ResourceNames(id)
	}
	loc, ok := s.locate(id)
	if !ok {
		return nil, fmt.Errorf("session %s: %w", id, session.ErrNotRunning)
	}
	names := []string{session.ResourceWidgets, session.ResourceContext}
	for k := range loc.rec.Rev {
		if strings.HasPrefix(k, "model/") {
			names = append(names, k)
		}
	}
	sort.Strings(names[2:])
	return names, nil
}

// Members implements mcp.Backend.
func (s *Swarm) Members() []mcp.Member {
	ms := s.cl.Members()
	out := make([]mcp.Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, mcp.Member{Name: m.Name, State: m.State.String(), GRPCAddr: m.GRPCAddr, Version: m.Version, Self: m.Self})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Watch implements mcp.Backend.
func (s *Swarm) Watch(fn func(mcp.Event)) (cancel func()) { return s.watchers.Add(fn) }

func (s *Swarm) emit(ev mcp.Event) { s.watchers.Notify(ev) }

var _ mcp.Backend = (*Swarm)(nil)
