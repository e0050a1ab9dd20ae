package swarm

// CanServe implements mcp.Connections. This node may serve every
// connection: a placeholder for the real check (a node whose replication
// lease from some live peer lapsed refuses connections until it has caught
// up), which the "determ" work on issue #11 writes in this file; the
// coordinator takes that version at merge.
func (c *Conns) CanServe(connID string) error { return nil }
