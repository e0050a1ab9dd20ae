package mcp

import (
	"context"
	"fmt"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func listenWants(cs server.ClientSession, method, uri string) bool {
	fs, ok := cs.(server.SessionWithSubscriptionFilter)
	if !ok {
		return false
	}
	f, active := fs.SubscriptionFilter()
	if !active {
		return false
	}
	switch method {
	case string(mcp.MethodNotificationToolsListChanged):
		return f.ToolsListChanged
	case string(mcp.MethodNotificationResourcesListChanged):
		return f.ResourcesListChanged
	case string(mcp.MethodNotificationResourceUpdated):
		return slices.Contains(f.ResourceSubscriptions, uri)
	}
	return false
}

// beforeListen tracks a 2026-07-28 subscriptions/listen stream of an
// authenticated principal for as long as its request lasts.
func (s *Server) beforeListen(ctx context.Context, _ any, _ *mcp.SubscriptionsListenRequest) {
	c := s.authzContext(ctx)
	cs := server.ClientSessionFromContext(ctx)
	if c.Principal.Subject == "" || cs == nil {
		return
	}
	if vs, ok := cs.(*viewSession); ok {
		// The stream's own session: mcp-go tags what it forwards from it
		// with the subscription id.
		cs = vs.ClientSession
	}
	key := fmt.Sprintf("listen:%p", cs)
	s.conns.addListen(key, c.Principal, cs)
	go func() {
		<-ctx.Done()
		s.conns.remove(key)
	}()
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
	h, replacing := s.conns.session(cs.SessionID()).(*homeSession)
	s.conns.add(cs.SessionID(), s.authzContext(ctx).Principal, cs)
	if replacing && h != cs {
		h.handOver(cs) // a GET's session took the stand-in's place
	}
}

func (s *Server) onUnregister(_ context.Context, cs server.ClientSession) {
	if h, ok := cs.(*homeSession); ok && h.yielding.Load() {
		return // a GET's session takes its place: the connection lives on
	}
	s.conns.remove(cs.SessionID())
	s.posts.forget(cs.SessionID())
	s.init.conns.forget(cs.SessionID())
}

func (s *Server) afterSubscribe(ctx context.Context, _ any, req *mcp.SubscribeRequest, _ *mcp.EmptyResult) {
	c := s.authzContext(ctx)
	if c.ConnID == "" {
		return
	}
	s.conns.subscribe(c.ConnID, c.Principal, req.Params.URI, true)
	s.recordSubscription(c.ConnID, req.Params.URI, true)
}

func (s *Server) afterUnsubscribe(ctx context.Context, _ any, req *mcp.UnsubscribeRequest, _ *mcp.EmptyResult) {
	c := s.authzContext(ctx)
	if c.ConnID == "" {
		return
	}
	s.conns.subscribe(c.ConnID, c.Principal, req.Params.URI, false)
	s.recordSubscription(c.ConnID, req.Params.URI, false)
}

// onEvent turns a backend change into notifications for the affected
// connections registered on this node, one per connection per change.
func (s *Server) onEvent(ev Event) {
	if ev.Session != "" && (ev.Kind == ResourceChanged || ev.Kind == SessionsChanged) {
		s.appWaits.wake(ev.Session)
	}
	switch ev.Kind {
	case ToolsChanged:
		m := string(mcp.MethodNotificationToolsListChanged)
		for _, cs := range s.conns.match(m, "", principalOnly(ev.Principal)) {
			s.notify(cs, m, nil)
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
		for _, cs := range targets {
			s.notifyMeta(cs, string(mcp.MethodNotificationResourceUpdated), map[string]any{"uri": uri}, meta)
		}
	case SessionsChanged:
		if _, ok := s.cfg.Backend.Lookup(ev.Session); !ok {
			s.tools.forgetSession(ev.Session) // stopped (or moved away)
		}
		for _, uri := range []string{URISessions, URIMe} {
			for _, cs := range s.conns.match(string(mcp.MethodNotificationResourceUpdated), uri, everyone) {
				s.notify(cs, string(mcp.MethodNotificationResourceUpdated), map[string]any{"uri": uri})
			}
		}
		// The set of concrete session resources changed too.
		m := string(mcp.MethodNotificationResourcesListChanged)
		for _, cs := range s.conns.match(m, "", ownerOf(ev.Principal)) {
			s.notify(cs, m, nil)
		}
	case MembersChanged:
		for _, cs := range s.conns.match(string(mcp.MethodNotificationResourceUpdated), URIMembers, everyone) {
			s.notify(cs, string(mcp.MethodNotificationResourceUpdated), map[string]any{"uri": URIMembers})
		}
	}
}

func (s *Server) notify(cs server.ClientSession, method string, params map[string]any) {
	s.notifyMeta(cs, method, params, nil)
}

// notifyMeta queues a notification on a registered connection, as mcp-go's
// SendNotificationToSpecificClient does, but keeping _meta (which that
// function drops).
func (s *Server) notifyMeta(cs server.ClientSession, method string, params, meta map[string]any) {
	if !cs.Initialized() {
		return
	}
	// No UpgradeToSSEWhenReceiveNotification, unlike mcp-go: its flag
	// never clears, so every later answer on the connection would be an
	// SSE stream that mcp-go keeps until the connection ends. A POST that
	// forwards this notification turns SSE by itself.
	n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{
		Method: method, Params: mcp.NotificationParams{Meta: meta, AdditionalFields: params}}}
	if s.deliver(cs, n) {
		s.metrics.notified(method)
	} else {
		s.log.Warn("notification dropped: the connection's queue is full", "conn", cs.SessionID(), "method", method)
	}
}
