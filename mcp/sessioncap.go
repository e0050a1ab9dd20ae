package mcp

import (
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/authz"
)

// sessionCap refuses a swarm_start that would give c's principal more than
// limits.sessions_per_principal sessions in the whole swarm. It counts the
// sessions the replicated registry shows (hidden ones of an unreachable
// node included), so the cap holds across nodes, not per node as the
// session manager's own count does (issue #13: a cap of 2 gave 6 sessions
// on 3 nodes). Two starts on different nodes within one replication
// window can each see the other's absent and both pass: with N nodes the
// cap can be exceeded by at most N-1 (each node's own count still stops
// it at the cap), until the principal stops sessions.
func (s *Server) sessionCap(c authz.Context) *mcp.CallToolResult {
	limit := s.cfg.Guard.Limits.SessionsPerPrincipal
	if limit <= 0 {
		return nil
	}
	held := s.cfg.Backend.CountSessions(c.Principal.Subject)
	if held < limit {
		return nil
	}
	return toolError(fmt.Sprintf("you run %d sessions across the swarm, the policy's cap (limits.sessions_per_principal: %d); stop one with swarm_stop first", held, limit),
		map[string]any{"error": "session_limit", "held": held, "limit": limit})
}
