package mcp

import (
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/session"
)

// takenID answers a swarm_start whose explicit id is already in use. The
// caller's own session is named as such; anyone else's gets an answer that
// says neither that a session exists nor where or whose it is (issue #13:
// it said "already exists in the swarm" and named the owner node, where
// every other surface says "not running (or is not yours)"). Session ids
// are one namespace across principals, so that the id is unavailable is
// all it still reveals; generated ids avoid even that.
func (s *Server) takenID(c authz.Context, id string, err error) *mcp.CallToolResult {
	if id == "" {
		return nil
	}
	info, found := s.cfg.Backend.Lookup(id)
	if !found && !errors.Is(err, session.ErrExists) {
		return nil
	}
	if found && authz.Owns(c.Principal, info.Principal) {
		return toolError(fmt.Sprintf("session %q is already yours; call swarm_list to see your sessions", id),
			map[string]any{"error": "session_id_yours", "id": id})
	}
	return toolError(fmt.Sprintf("session id %q is not available; start without an id to get a generated one", id),
		map[string]any{"error": "session_id_unavailable", "id": id})
}
