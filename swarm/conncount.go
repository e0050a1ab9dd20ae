package swarm

import (
	"slices"
	"strings"
	"time"

	"github.com/mcpswarm/mcpswarm/mcp"
)

// OfPrincipal implements mcp.Connections: the live (not revoked)
// connections whose merged record names principal, across the swarm, each
// with the last time any node wrote its record (initialize, log level,
// subscriptions, a GET stream opened or closed) and whether a node holds
// its GET stream, least recently written first.
//
// It reads what this node holds of the replicated "conns" registry, so a
// connection initialized on another node counts once that node's write
// reached this one: initialize waits until every live peer applied it
// (Conns.Put), so the window is two initializes on different nodes at the
// same moment. It reads only the connections whose records name
// principal (Conns.byPrincipal), not every record.
//
// With atLeast above zero it answers nil, without reading any record,
// when fewer than atLeast connections name principal at all: the bound
// admits most initializes so, and a principal allowed thousands of
// connections does not pay for all of them on each new one.
func (c *Conns) OfPrincipal(principal string, atLeast int) []mcp.ConnActivity {
	if principal == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.byPrincipal[principal]) < atLeast {
		return nil
	}
	type acc struct {
		hello, touched time.Time
		principal      string
		revoked        bool
		streaming      bool
	}
	seen := map[string]*acc{}
	add := func(id string, r connRecord) {
		a := seen[id]
		if a == nil {
			a = &acc{}
			seen[id] = a
		}
		if r.Revoked {
			a.revoked = true
			return
		}
		if r.Info.ID != "" && !r.HelloAt.Before(a.hello) {
			a.hello, a.principal = r.HelloAt, r.Info.Principal
		}
		if r.StreamNode != "" {
			a.streaming = true
		}
		if r.Touched.After(a.touched) {
			a.touched = r.Touched
		}
	}
	for id := range c.byPrincipal[principal] {
		if r, ok := c.mine[id]; ok {
			add(id, r)
		}
		for _, r := range c.others[id] {
			add(id, r)
		}
	}
	var out []mcp.ConnActivity
	for id, a := range seen {
		if a.revoked || a.principal != principal {
			continue
		}
		if c.revokedLocked(id) {
			continue
		}
		out = append(out, mcp.ConnActivity{ID: id, LastWrite: a.touched, Streaming: a.streaming})
	}
	slices.SortFunc(out, func(a, b mcp.ConnActivity) int {
		if c := a.LastWrite.Compare(b.LastWrite); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

var _ mcp.Connections = (*Conns)(nil)
