package mcp

import (
	"maps"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/mcp/task"
)

// listenWants reports whether a 2026-07-28 listen stream with filter f
// gets method (about uri).
func listenWants(f mcp.SubscriptionFilter, method, uri string) bool {
	switch method {
	case string(mcp.MethodNotificationToolsListChanged):
		return f.ToolsListChanged
	case string(mcp.MethodNotificationResourcesListChanged):
		return f.ResourcesListChanged
	case string(mcp.MethodNotificationResourceUpdated):
		return slices.Contains(f.ResourceSubscriptions, uri)
	case task.NotificationStatus:
		return true
	}
	return false
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

// onEvent turns a backend change into notifications for the affected
// connections registered on this node, one per connection per change.
func (s *Server) onEvent(ev Event) {
	if ev.Session != "" && (ev.Kind == ResourceChanged || ev.Kind == SessionsChanged) {
		s.appWaits.Wake(ev.Session)
	}
	switch ev.Kind {
	case ToolsChanged:
		m := string(mcp.MethodNotificationToolsListChanged)
		for _, c := range s.conns.match(m, "", principalOnly(ev.Principal)) {
			s.notify(c, m, nil)
		}
	case ResourceChanged:
		uri := SessionURI(ev.Session, ev.Resource)
		owner := ev.Principal
		if owner == "" {
			if info, ok := s.cfg.Backend.Lookup(ev.Session); ok {
				owner = info.Principal
			}
		}
		targets := s.conns.match(string(mcp.MethodNotificationResourceUpdated), uri, ownerOf(owner))
		var meta map[string]any
		if len(targets) > 0 && ev.Patch != nil {
			if p := ev.Patch(); len(p) > 0 {
				meta = map[string]any{MetaPatch: p}
			}
		}
		for _, c := range targets {
			s.notifyMeta(c, string(mcp.MethodNotificationResourceUpdated), map[string]any{"uri": uri}, meta)
		}
	case SessionsChanged:
		if _, ok := s.cfg.Backend.Lookup(ev.Session); !ok {
			s.tools.forgetSession(ev.Session) // stopped (or moved away)
		}
		for _, uri := range []string{URISessions, URIMe} {
			for _, c := range s.conns.match(string(mcp.MethodNotificationResourceUpdated), uri, everyone) {
				s.notify(c, string(mcp.MethodNotificationResourceUpdated), map[string]any{"uri": uri})
			}
		}
		// The set of concrete session resources changed too.
		m := string(mcp.MethodNotificationResourcesListChanged)
		for _, c := range s.conns.match(m, "", ownerOf(ev.Principal)) {
			s.notify(c, m, nil)
		}
	case MembersChanged:
		for _, c := range s.conns.match(string(mcp.MethodNotificationResourceUpdated), URIMembers, everyone) {
			s.notify(c, string(mcp.MethodNotificationResourceUpdated), map[string]any{"uri": URIMembers})
		}
	}
}

func (s *Server) notify(c *conn, method string, params map[string]any) {
	s.notifyMeta(c, method, params, nil)
}

// notifyMeta queues a notification for connection c.
func (s *Server) notifyMeta(c *conn, method string, params, meta map[string]any) {
	if c.listen != nil {
		tagged := map[string]any{mcp.MetaKeySubscriptionID: c.subID}
		maps.Copy(tagged, meta)
		meta = tagged
	}
	msg, err := notification(method, params, meta)
	if err != nil {
		s.log.Warn("notification not encoded", "conn", c.id, "method", method, "err", err)
		return
	}
	if s.deliver(c, msg) {
		s.metrics.notified(method)
	} else {
		s.log.Warn("notification dropped: the connection's queue is full", "conn", c.id, "method", method)
	}
}
