package mcp

import (
	"net/http"

	"github.com/mark3labs/mcp-go/server"
)

// checkedResolver is resolver for a front whose transport validates a
// request's Mcp-Session-Id before mcp-go sees it (checkSessionID: sealed,
// bound to the principal, not revoked, servable here). mcp-go validates
// the same id again through the manager; for the id the front has just
// checked, that second check (an AES-GCM open and a revocation lookup per
// request) is skipped. Any other id is validated in full.
type checkedResolver struct{ resolver }

func (r checkedResolver) ResolveSessionIdManager(req *http.Request) server.SessionIdManager {
	m := r.resolver.ResolveSessionIdManager(req)
	if req == nil {
		return m
	}
	sm, ok := m.(*sidManager)
	if rq := requestFrom(req.Context()); ok && rq != nil && rq.checkedSID != "" {
		return &checkedManager{sidManager: sm, id: rq.checkedSID}
	}
	return m
}

// checkedManager is a sidManager that knows id passed the front's check
// for this request.
type checkedManager struct {
	*sidManager
	id string
}

// Validate answers for the checked id what the front found (valid, not
// terminated) and validates any other id in full.
func (m *checkedManager) Validate(id string) (bool, error) {
	if id == m.id {
		return false, nil
	}
	return m.sidManager.Validate(id)
}
