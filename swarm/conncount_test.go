package swarm

import (
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm/crdt"
	mcpfront "github.com/mcpswarm/mcpswarm/mcp"
)

// OfPrincipal counts a principal's live connections from every node's
// records: the newest hello names the principal, a stream record elsewhere
// marks it streaming, and a revocation anywhere leaves it out.
func TestOfPrincipalCountsLiveConnectionsAcrossNodes(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	hello := func(id, principal string, at time.Time) connRecord {
		return connRecord{Info: mcpfront.ConnInfo{ID: id, Principal: principal, Node: "node1"}, HelloAt: at, Touched: at}
	}
	c := newConnsState(nil)
	n2 := crdt.Origin{Name: "node2", Epoch: 1}
	c.mine["a1"] = hello("a1", "alice", t0)
	c.others["a2"] = map[crdt.Origin]connRecord{n2: hello("a2", "alice", t0.Add(time.Minute))}
	// a3: initialized here; node2 holds its GET stream and wrote later.
	c.mine["a3"] = hello("a3", "alice", t0.Add(-time.Hour))
	c.others["a3"] = map[crdt.Origin]connRecord{n2: {Info: mcpfront.ConnInfo{ID: "a3"}, StreamNode: "node2", Touched: t0.Add(2 * time.Minute)}}
	c.mine["b1"] = hello("b1", "bob", t0)
	// a4 was ended by this node, a5 by another.
	c.ended[revocationOf("a4")] = t0.UnixNano()
	c.others["a5"] = map[crdt.Origin]connRecord{n2: hello("a5", "alice", t0)}
	c.elsewhere[revocationOf("a5")] = struct{}{}

	got := c.OfPrincipal("alice")
	want := []mcpfront.ConnActivity{
		{ID: "a1", LastWrite: t0},
		{ID: "a2", LastWrite: t0.Add(time.Minute)},
		{ID: "a3", LastWrite: t0.Add(2 * time.Minute), Streaming: true},
	}
	if len(got) != len(want) {
		t.Fatalf("alice's connections %+v; want %+v", got, want)
	}
	for i := range want {
		if got[i].ID != want[i].ID || !got[i].LastWrite.Equal(want[i].LastWrite) || got[i].Streaming != want[i].Streaming {
			t.Errorf("connection %d: %+v; want %+v", i, got[i], want[i])
		}
	}
	if got := c.OfPrincipal(""); got != nil {
		t.Errorf("the empty principal matched %+v", got)
	}
}
