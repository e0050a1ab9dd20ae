package mcpswarm

import (
	"strings"

	"github.com/mcpswarm/mcpswarm/crdt"
	"github.com/mcpswarm/mcpswarm/mcp/task"
)

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

// TaskRequests counts the visible request entries of task id in n's task
// table.
func TaskRequests(n *Node, id string) int {
	r, err := n.cluster.Registry("tasks")
	if err != nil {
		return 0
	}
	count := 0
	r.Range(func(e crdt.Entry) bool {
		if strings.HasPrefix(e.Key, "r/"+id+"/") {
			count++
		}
		return true
	})
	return count
}
