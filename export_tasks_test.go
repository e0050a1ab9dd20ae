package mcpswarm

import (
	"context"
	"encoding/json"
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

// PutAwait writes key in n's partition of registry reg and waits until
// every live peer applied it: the plain replicated write a task's Create
// is measured against.
func PutAwait(ctx context.Context, n *Node, reg, key string, value []byte) error {
	r, err := n.cluster.Registry(reg)
	if err != nil {
		return err
	}
	if err := r.Put(key, value); err != nil {
		return err
	}
	return r.AwaitPeers(ctx)
}

// TaskCopies returns, for each node whose partition of the task table
// holds a visible record of task id as n sees them, that record's status.
func TaskCopies(n *Node, id string) map[string]task.Status {
	r, err := n.cluster.Registry("tasks")
	if err != nil {
		return nil
	}
	out := map[string]task.Status{}
	for _, e := range r.Lookup("t/" + id) {
		var rec task.Record
		if json.Unmarshal(e.Value, &rec) == nil {
			out[e.Origin.Name] = rec.Status
		}
	}
	return out
}
