package mcp

// Forget drops what this node holds for connection id — its entry for
// notifications, what waits for its next POST, its activity for the
// connection bound — once another node ended the connection (its DELETE
// ran there). It revokes nothing: the revocation is already in force
// cluster-wide.
func (s *Server) Forget(id string) {
	if id == "" {
		return
	}
	s.forgetLocal(id)
}

// LocalState counts what this node's front holds: connections registered
// here (their notification entries), cached derived
// tool definitions and connections whose last request here is remembered
// for the per-principal connection bound. All must fall back once
// connections end and sessions stop (issue #13's soak).
func (s *Server) LocalState() (conns, cachedTools, activity int) {
	return s.conns.size(), s.tools.size(), s.init.conns.size()
}
