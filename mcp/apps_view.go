package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	changed, done := s.appWaits.Wait(id)
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
				if s.appWaits.IsClosed() {
					return jsonResult(s.readAppView(ctx, c, id))
				}
			}
			done()
			changed, done = s.appWaits.Wait(id)
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
