package mcp

import (
	"context"
	"net/http"
)

// localCleanupKey marks a request the front makes to itself to drop a
// connection's node-local state: its session id manager must not revoke.
type localCleanupKey struct{}

func isLocalCleanup(ctx context.Context) bool {
	v, _ := ctx.Value(localCleanupKey{}).(bool)
	return v
}

// Forget drops what this node holds for Streamable HTTP connection id —
// mcp-go's session, the tools, resources and log level installed for it,
// its idle clock and our notification entry — once another node has ended
// the connection (its DELETE ran there). Without it, every node that served
// one request of the connection kept that state until the idle TTL (30 min
// by default): ~14 KiB per connection per node in the soak. It revokes
// nothing: the revocation is already in force cluster-wide.
func (s *Server) Forget(id string) {
	if id == "" {
		return
	}
	s.init.conns.forget(id)
	s.touched.forget(id)
	ctx := context.WithValue(context.Background(), localCleanupKey{}, true)
	r, err := http.NewRequestWithContext(ctx, http.MethodDelete, "http://localhost/mcp", nil)
	if err != nil {
		return
	}
	r.Header.Set(headerSessionID, id)
	// mcp-go's DELETE runs cleanupSessionState, the same as its idle
	// sweeper: the only way to reach its private per-session stores.
	rec := &statusRecorder{header: http.Header{}, status: http.StatusOK}
	s.stream.ServeHTTP(rec, r)
	if rec.status != http.StatusOK {
		s.log.Debug("forgetting an ended connection", "conn", id, "status", rec.status, "body", rec.body.String())
	}
}

// LocalState counts what this node's front holds: connections registered
// here (mcp-go sessions with their notification entries), cached derived
// tool definitions and connections whose last request here is remembered
// for the per-principal connection bound. All must fall back once
// connections end and sessions stop (issue #13's soak).
func (s *Server) LocalState() (conns, cachedTools, activity int) {
	return s.conns.size(), s.tools.size(), s.init.conns.size()
}
