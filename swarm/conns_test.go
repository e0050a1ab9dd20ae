package swarm

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/crdt"
	"github.com/mcpswarm/mcpswarm/internal/coalesce"
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
	c := &Conns{mine: map[string]connRecord{}, ended: map[string]int64{}, dirty: map[string]bool{}}
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

// Issue #13: a revocation keeps only its time, is swept like any record
// once older than the ids' maximum age, and learns nothing more: a late
// request's client facts must not grow it back.
func TestRevocationsStaySmallAndExpire(t *testing.T) {
	c := &Conns{mine: map[string]connRecord{}, ended: map[string]int64{}, dirty: map[string]bool{}, kick: coalesce.NewSignal()}
	big := mcpfront.ConnInfo{ID: "c1", Principal: "alice", ClientInfo: mcp.Implementation{Name: strings.Repeat("x", 4096)}}
	c.update("c1", func(r *connRecord) { stamp(r, mcpfront.ConnInfo{}, big, time.Now()) })
	c.update("c1", func(r *connRecord) { *r = revoked(time.Time{}) })
	c.update("c1", func(r *connRecord) { stamp(r, mcpfront.ConnInfo{}, big, time.Now()) })
	if len(c.mine) != 0 || len(c.ended) != 1 {
		t.Fatalf("after the revocation: %d live records, %d revocations; want 0 and 1", len(c.mine), len(c.ended))
	}
	r, _ := c.mineLocked("c1")
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Revoked || len(b) > 64 {
		t.Fatalf("the revoked record is %d bytes: %s; want revoked and at most 64 bytes", len(b), b)
	}
	if _, ok := merge([]connRecord{r}); ok {
		t.Fatal("a revoked connection reads as known")
	}
	now := time.Now()
	c.ended["gone-old"] = now.Add(-8 * 24 * time.Hour).UnixNano()
	var removed []string
	c.sweepWith(now, 7*24*time.Hour, func(id string) error { removed = append(removed, id); return nil })
	if _, ok := c.ended["gone-old"]; ok || len(removed) != 1 || removed[0] != "gone-old" {
		t.Fatalf("after the sweep: revocations %v, removed %v", c.ended, removed)
	}
	if _, ok := c.ended["c1"]; !ok {
		t.Fatal("a recent revocation was forgotten")
	}
}

// A revocation lives in its revoker's partition only; when that partition
// goes while the id is still valid (its node died or restarted), this node
// takes the revocation into its own, with the original time. One removed
// at its expiry is not copied, so nodes never copy each other's back.
func TestARevocationLeavingAnotherPartitionIsKeptHere(t *testing.T) {
	maxAge := 7 * 24 * time.Hour
	c := &Conns{s: &Swarm{connMaxAge: maxAge}, mine: map[string]connRecord{}, ended: map[string]int64{},
		elsewhere: map[string]int64{}, dirty: map[string]bool{}, kick: coalesce.NewSignal()}
	at := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	fresh, _ := json.Marshal(revoked(at))
	c.elsewhere["c1"] = at.UnixNano()
	c.lostRevocation(crdt.Change{Key: "c1", Old: fresh})
	if got, ok := c.ended["c1"]; !ok || got != at.UnixNano() || !c.dirty["c1"] {
		t.Fatalf("a valid revocation that left another partition: ended %v, dirty %v; want it kept with its time and published", c.ended, c.dirty)
	}
	if !c.Revoked("c1") {
		t.Fatal("the id reads as not revoked")
	}
	old, _ := json.Marshal(revoked(time.Now().Add(-maxAge + time.Second)))
	c.elsewhere["c2"] = 1
	c.lostRevocation(crdt.Change{Key: "c2", Old: old})
	if _, ok := c.ended["c2"]; ok {
		t.Fatal("a revocation removed at its expiry was copied")
	}
	if _, ok := c.elsewhere["c2"]; ok {
		t.Fatal("an expired revocation is still known")
	}
	live, _ := json.Marshal(connRecord{Info: mcpfront.ConnInfo{ID: "c3"}})
	c.lostRevocation(crdt.Change{Key: "c3", Old: live})
	if _, ok := c.ended["c3"]; ok {
		t.Fatal("a live record's removal became a revocation")
	}
}
