package mcpswarm

import "github.com/mcpswarm/mcpswarm/swarm"

// Footprint is what a node holds for connections and sessions, counted:
// the replicated registries and this node's MCP front.
type Footprint struct {
	swarm.Footprint
	// FrontConns counts connections registered with this node's MCP front.
	FrontConns int
	// CachedTools counts derived tool definitions the front keeps converted.
	CachedTools int
	// ConnActivity counts connections whose last request here the front
	// remembers (the per-principal connection bound's recency).
	ConnActivity int
	// UIActions counts entries of the UI action journal ("uiactions").
	UIActions int
}

// Footprint counts what the node holds now (zero before Start).
func (n *Node) Footprint() Footprint {
	var f Footprint
	if n.swarm != nil {
		f.Footprint = n.swarm.Footprint()
	}
	if n.front != nil {
		f.FrontConns, f.CachedTools, f.ConnActivity = n.front.LocalState()
	}
	if n.journal != nil {
		f.UIActions = n.journal.Len()
	}
	return f
}
