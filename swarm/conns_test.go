package swarm

import (
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	mcpfront "github.com/mcpswarm/mcpswarm/mcp"
)

func TestConnectionKnowledgeMergesPartByPart(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	hello := mcpfront.ConnInfo{ID: "c1", Node: "node1", Principal: "alice", ProtocolVersion: "2025-11-25",
		Capabilities: mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}}}

	// The home node learnt initialize; node2 later saw only a subscribe,
	// before the home node's record had reached it.
	var home, other connRecord
	stamp(&home, mcpfront.ConnInfo{}, hello, t0)
	stamp(&other, mcpfront.ConnInfo{}, mcpfront.ConnInfo{ID: "c1", Subscriptions: []string{"swarm://me"}}, t0.Add(time.Second))

	got, ok := merge([]connRecord{other, home})
	if !ok {
		t.Fatal("nothing merged")
	}
	if got.Capabilities.Elicitation == nil || got.Node != "node1" {
		t.Fatalf("a later, partial record erased what initialize taught: %+v", got)
	}
	if len(got.Subscriptions) != 1 {
		t.Fatalf("the subscription made through node2 is lost: %+v", got)
	}

	// An unsubscribe anywhere is newer than the subscribe and wins.
	stamp(&home, got, mcpfront.ConnInfo{ID: "c1", Node: "node1", Principal: "alice", ProtocolVersion: "2025-11-25",
		Capabilities: hello.Capabilities}, t0.Add(2*time.Second))
	if got, _ = merge([]connRecord{home, other}); len(got.Subscriptions) != 0 {
		t.Fatalf("an unsubscribe did not win: %+v", got)
	}

	// A revocation by any node ends it.
	if _, ok := merge([]connRecord{home, {Info: mcpfront.ConnInfo{ID: "c1"}, Revoked: true}}); ok {
		t.Fatal("a revoked connection still reads as known")
	}
}

func TestExpiredConnectionRecordsAreForgotten(t *testing.T) {
	c := &Conns{mine: map[string]connRecord{}, dirty: map[string]bool{}}
	now := time.Now()
	c.mine["old"] = connRecord{Info: mcpfront.ConnInfo{ID: "old"}, Touched: now.Add(-8 * 24 * time.Hour)}
	c.mine["new"] = connRecord{Info: mcpfront.ConnInfo{ID: "new"}, Touched: now.Add(-time.Hour)}
	var removed []string
	c.sweepWith(now, 7*24*time.Hour, func(id string) error { removed = append(removed, id); return nil })
	if _, ok := c.mine["old"]; ok || len(removed) != 1 || removed[0] != "old" {
		t.Fatalf("after the sweep: mine %v, removed %v", c.mine, removed)
	}
	if _, ok := c.mine["new"]; !ok {
		t.Fatal("a recent record was forgotten")
	}
}
