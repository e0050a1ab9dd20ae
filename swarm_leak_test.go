package mcpswarm_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm"
)

// Issue #13's soak: each load cycle (a connection and a session, started,
// driven through other nodes, stopped, DELETEd on a third node) left ~41 KiB
// on every node. What a cycle may leave is pinned here by counting, not by
// heap size: every node forgets the connection's MCP state and the
// session's converted tools, and the only thing kept is the connection's
// revocation, in the partition of the node that took its DELETE (for the
// id's maximum age; the others know it by id alone). Ids are numbered in
// order by the node that mints them, and revocations of neighbouring ids
// share one entry, a bitmap: here each node took the DELETEs of one
// node's ids, so the twelve revocations are three entries.
func TestEndedConnectionsAndStoppedSessionsLeaveOnlySmallRevocations(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	const cycles = 12
	for i := range cycles {
		home, via, end := nodes[i%3], nodes[(i+1)%3], nodes[(i+2)%3]
		id := fmt.Sprintf("lk%02d", i)
		c := connect(t, home, connOpts{token: aliceToken})
		if res := c.call("swarm_start", map[string]any{"app": "counter", "id": id}); res.IsError {
			t.Fatal(textOf(res))
		}
		// Driven through another node: its front converts and caches
		// the session's tools and keeps state for the connection.
		o := connect(t, via, connOpts{token: aliceToken, sessionID: c.id})
		eventually(t, 30*time.Second, via.HTTPAddr()+" lists "+id+"'s tools", func() bool { return o.tools()[id+".inc.click"] })
		if res := o.call(id+".inc.click", nil); res.IsError {
			t.Fatal(textOf(res))
		}
		if res := c.call("swarm_stop", map[string]any{"id": id}); res.IsError {
			t.Fatal(textOf(res))
		}
		// The DELETE lands on the third node.
		deleteConn(t, end, aliceToken, c.id)
	}
	for k, n := range nodes {
		var f mcpswarm.Footprint
		await(t, 30*time.Second, fmt.Sprintf("node %d holds only what %d ended cycles must leave: no front connections, no cached tools, "+
			"no remembered activity, no session, tool or UI journal records, one revocation per connection, held by the node that took "+
			"its DELETE (a third of them here) in one block entry per node, and none of the other nodes' records kept decoded", k, cycles), func() error {
			f = n.Footprint()
			if f.FrontConns == 0 && f.CachedTools == 0 && f.ConnActivity == 0 && f.Sessions == 0 && f.Tools == 0 && f.UIActions == 0 &&
				f.ConnsRevoked == cycles/3 && f.RevokedElsewhere == cycles-cycles/3 && f.Conns == 3 && f.ConnsDecoded == 0 && f.ConnsIndexed == 0 {
				return nil
			}
			return fmt.Errorf("it holds %+v", f)
		})
		per := (f.ConnKeyBytes + f.ConnBytes) / f.Conns
		t.Logf("node %d after %d cycles: %+v (%d bytes of key and value per entry)", k, cycles, f, per)
		// An entry is a block's key (19 bytes) and its time and bitmap (8
		// and 64): not the ~105-byte id, and no client facts.
		if per > 19+8+64 {
			t.Errorf("node %d: a revocation block's entry is %d bytes, want at most 91 (key, time and bitmap)", k, per)
		}
	}
}

// deleteConn ends connection id with a DELETE on node n, as its client
// would (mcp-go's client sends its DELETE without the bearer token).
func deleteConn(t testing.TB, n *mcpswarm.Node, token, id string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodDelete, "http://"+n.HTTPAddr()+"/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := httpClient(n).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE of connection %s on %s: %s", id, n.HTTPAddr(), resp.Status)
	}
}
