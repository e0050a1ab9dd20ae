package mcp

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpswarm/mcpswarm/authz"
)

// conn is a connection registered on this node: mcp-go can deliver
// notifications to it here (its home node, or the node holding its GET).
type conn struct {
	principal authz.Principal
	subs      map[string]bool
}

// connTable tracks this node's registered connections and their resource
// subscriptions.
type connTable struct {
	mu    sync.Mutex
	conns map[string]*conn
}

func newConnTable() *connTable { return &connTable{conns: make(map[string]*conn)} }

func (t *connTable) add(id string, p authz.Principal) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.conns[id]; ok {
		c.principal = p
		return
	}
	t.conns[id] = &conn{principal: p, subs: make(map[string]bool)}
}

func (t *connTable) remove(id string) {
	t.mu.Lock()
	delete(t.conns, id)
	t.mu.Unlock()
}

func (t *connTable) subscribe(id string, p authz.Principal, uri string, on bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.conns[id]
	if !ok {
		// Subscribed from a node where the connection is not registered:
		// remember it so a later GET stream here gets the updates.
		c = &conn{principal: p, subs: make(map[string]bool)}
		t.conns[id] = c
	}
	if on {
		c.subs[uri] = true
	} else {
		delete(c.subs, uri)
	}
}

// match returns the connections whose principal passes keep and, when uri
// is not "", that subscribed to uri.
func (t *connTable) match(uri string, keep func(authz.Principal) bool) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for id, c := range t.conns {
		if uri != "" && !c.subs[uri] {
			continue
		}
		if keep(c.principal) {
			out = append(out, id)
		}
	}
	return out
}

// Subscriptions returns the resource URIs connection id subscribed to on
// this node.
func (s *Server) Subscriptions(id string) []string {
	s.conns.mu.Lock()
	defer s.conns.mu.Unlock()
	c, ok := s.conns.conns[id]
	if !ok {
		return nil
	}
	out := make([]string, 0, len(c.subs))
	for u := range c.subs {
		out = append(out, u)
	}
	return out
}

func (s *Server) onRegister(ctx context.Context, cs server.ClientSession) {
	if cs.SessionID() == "" {
		return
	}
	ctx = s.mcp.WithContext(ctx, cs)
	s.conns.add(cs.SessionID(), s.authzContext(ctx).Principal)
}

func (s *Server) onUnregister(_ context.Context, cs server.ClientSession) {
	s.conns.remove(cs.SessionID())
}

func (s *Server) afterSubscribe(ctx context.Context, _ any, req *mcp.SubscribeRequest, _ *mcp.EmptyResult) {
	c := s.authzContext(ctx)
	if c.ConnID == "" {
		return
	}
	s.conns.subscribe(c.ConnID, c.Principal, req.Params.URI, true)
}

func (s *Server) afterUnsubscribe(ctx context.Context, _ any, req *mcp.UnsubscribeRequest, _ *mcp.EmptyResult) {
	c := s.authzContext(ctx)
	if c.ConnID == "" {
		return
	}
	s.conns.subscribe(c.ConnID, c.Principal, req.Params.URI, false)
}

// onEvent turns a backend change into notifications for the affected
// connections registered on this node, one per connection per change.
func (s *Server) onEvent(ev Event) {
	switch ev.Kind {
	case ToolsChanged:
		for _, id := range s.conns.match("", func(p authz.Principal) bool { return p.Subject == ev.Principal }) {
			s.notify(id, string(mcp.MethodNotificationToolsListChanged), nil)
		}
	case ResourceChanged:
		uri := SessionURI(ev.Session, ev.Resource)
		owner := ev.Principal
		if owner == "" {
			if info, ok := s.cfg.Backend.Lookup(ev.Session); ok {
				owner = info.Principal
			}
		}
		params := map[string]any{"uri": uri}
		if len(ev.Patch) > 0 {
			params["_meta"] = map[string]any{MetaPatch: json.RawMessage(ev.Patch)}
		}
		for _, id := range s.conns.match(uri, func(p authz.Principal) bool { return authz.Owns(p, owner) }) {
			s.notify(id, string(mcp.MethodNotificationResourceUpdated), params)
		}
	case SessionsChanged:
		all := func(authz.Principal) bool { return true }
		for _, uri := range []string{URISessions, URIMe} {
			for _, id := range s.conns.match(uri, all) {
				s.notify(id, string(mcp.MethodNotificationResourceUpdated), map[string]any{"uri": uri})
			}
		}
		// The set of concrete session resources changed too.
		for _, id := range s.conns.match("", func(p authz.Principal) bool { return authz.Owns(p, ev.Principal) }) {
			s.notify(id, string(mcp.MethodNotificationResourcesListChanged), nil)
		}
	case MembersChanged:
		for _, id := range s.conns.match(URIMembers, func(authz.Principal) bool { return true }) {
			s.notify(id, string(mcp.MethodNotificationResourceUpdated), map[string]any{"uri": URIMembers})
		}
	}
}

func (s *Server) notify(connID, method string, params map[string]any) {
	if err := s.mcp.SendNotificationToSpecificClient(connID, method, params); err != nil {
		s.log.Debug("notification not delivered", "conn", connID, "method", method, "err", err)
		return
	}
	s.metrics.notified(method)
}
