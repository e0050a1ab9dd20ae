package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/authz"
)

// The session app stays live by calling swarm_app_view through the host in
// a loop: each call names the revision the app shows and waits, on the node
// that serves it, until the session's widgets differ from it. That node
// learns of changes from the backend's events, which every node receives
// for every session (the owner's revisions are replicated), so the app is
// live through any node. Hosts built on the extension's app-bridge forward
// no resource notifications to the app, and an app opens no connection of
// its own (its CSP declares none): this long poll through the host is the
// one path that works everywhere.

// maxAppWait bounds how long one swarm_app_view call waits for a change,
// under the usual 30 s and 60 s request timeouts of hosts.
const maxAppWait = 25 * time.Second

// appWaiters wakes the swarm_app_view calls waiting on a session.
type appWaiters struct {
	mu sync.Mutex
	// bySession holds one channel per waiting call, closed on a change.
	bySession map[string]map[chan struct{}]struct{}
	// closed is set at shutdown: no call waits any more, so none holds
	// the drain of requests in flight.
	closed bool
}

func newAppWaiters() *appWaiters {
	return &appWaiters{bySession: map[string]map[chan struct{}]struct{}{}}
}

// wait registers a waiter on session id; done must be called once.
func (a *appWaiters) wait(id string) (changed <-chan struct{}, done func()) {
	ch := make(chan struct{})
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		close(ch)
		return ch, func() {}
	}
	set := a.bySession[id]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		a.bySession[id] = set
	}
	set[ch] = struct{}{}
	a.mu.Unlock()
	return ch, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if set, ok := a.bySession[id]; ok {
			if _, waiting := set[ch]; waiting {
				delete(set, ch)
				if len(set) == 0 {
					delete(a.bySession, id)
				}
			}
		}
	}
}

func (a *appWaiters) isClosed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closed
}

// wake releases every call waiting on session id.
func (a *appWaiters) wake(id string) {
	a.mu.Lock()
	set := a.bySession[id]
	delete(a.bySession, id)
	a.mu.Unlock()
	for ch := range set {
		close(ch)
	}
}

// closeAll releases every waiting call and keeps later ones from waiting.
func (a *appWaiters) closeAll() {
	a.mu.Lock()
	all := a.bySession
	a.bySession, a.closed = map[string]map[chan struct{}]struct{}{}, true
	a.mu.Unlock()
	for _, set := range all {
		for ch := range set {
			close(ch)
		}
	}
}

// appView is what swarm_app_view answers: the session's widgets as the
// widgets resource has them (masked values are never in it) and their
// revision, or the problem that stands in for them.
type appView struct {
	Session  appSession      `json:"session"`
	Revision string          `json:"revision"`
	Widgets  json.RawMessage `json:"widgets,omitempty"`
	Problem  string          `json:"problem,omitempty"`
}

type appSession struct {
	ID        string `json:"id"`
	App       string `json:"app,omitempty"`
	Owner     string `json:"owner,omitempty"`
	Node      string `json:"node"`
	Available bool   `json:"available"`
}

// readAppView reads session id for c. A session c does not own reads as
// not running, like every other tool.
func (s *Server) readAppView(ctx context.Context, c authz.Context, id string) appView {
	v := appView{Session: appSession{ID: id, Node: s.cfg.Node}}
	info, ok := s.cfg.Backend.Lookup(id)
	switch {
	case !ok || !authz.Owns(c.Principal, info.Principal):
		v.Problem = "session " + id + " is not running (or is not yours)"
	case !info.Available:
		v.Session.App, v.Session.Owner = info.App, info.Owner
		v.Problem = "the owner node " + info.Owner + " is unavailable; the view returns when it does"
	default:
		v.Session.App, v.Session.Owner, v.Session.Available = info.App, info.Owner, true
		raw, err := s.cfg.Backend.ReadResource(ctx, c, id, "widgets")
		if err != nil {
			v.Problem = "reading the view: " + err.Error()
		} else {
			v.Widgets = raw
		}
	}
	sum := sha256.New()
	sum.Write([]byte(v.Problem))
	sum.Write([]byte{0})
	sum.Write([]byte(v.Session.Owner))
	sum.Write([]byte{0})
	sum.Write(v.Widgets)
	v.Revision = hex.EncodeToString(sum.Sum(nil)[:12])
	return v
}

func (s *Server) toolAppView(ctx context.Context, c authz.Context, req mcp.CallToolRequest) *mcp.CallToolResult {
	id := req.GetString("id", "")
	if id == "" {
		return toolError("swarm_app_view needs a session id", nil)
	}
	since := req.GetString("since", "")
	wait := time.Duration(req.GetInt("wait_ms", 0)) * time.Millisecond
	wait = min(max(wait, 0), maxAppWait)
	// Register before reading, so a change between the read and the wait
	// still wakes the call.
	changed, done := s.appWaits.wait(id)
	defer func() { done() }()
	v := s.readAppView(ctx, c, id)
	if since != "" && v.Revision == since && wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		for v.Revision == since {
			select {
			case <-ctx.Done():
				return jsonResult(v)
			case <-t.C:
				return jsonResult(v)
			case <-changed:
				if s.appWaits.isClosed() {
					return jsonResult(s.readAppView(ctx, c, id))
				}
			}
			done()
			changed, done = s.appWaits.wait(id)
			v = s.readAppView(ctx, c, id)
		}
	}
	return jsonResult(v)
}

func (s *Server) toolView(ctx context.Context, c authz.Context, req mcp.CallToolRequest) *mcp.CallToolResult {
	id := req.GetString("id", "")
	info, res := s.ownedSession(c, id)
	if res != nil {
		return res
	}
	text, err := s.cfg.Backend.Screenshot(ctx, c, id)
	if err != nil {
		return backendError(id, err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(text)}, StructuredContent: sessionJSON(info)}
}
