package mcpswarm

import "github.com/mcpswarm/mcpswarm/mcp/task"

// TaskStore returns n's task table.
func TaskStore(n *Node) task.Store { return n.swarm.Tasks() }

// TaskHolders returns the nodes whose partition of the task table holds a
// visible record of task id, as n sees them, sorted by name.
func TaskHolders(n *Node, id string) []string {
	r, err := n.cluster.Registry("tasks")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range r.Lookup("t/" + id) {
		out = append(out, e.Origin.Name)
	}
	return out
}

// NodeName returns n's name.
func NodeName(n *Node) string { return n.cfg.Name }
