package swarm

import (
	"fmt"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm/crdt"
	mcpfront "github.com/mcpswarm/mcpswarm/mcp"
	"pgregory.net/rapid"
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
	c.ended.put(revocationOf("a4"), revTimeOf(t0.UnixNano()))
	c.others["a5"] = map[crdt.Origin]connRecord{n2: hello("a5", "alice", t0)}
	c.elsewhere.put(revocationOf("a5"), struct{}{})
	indexAll(c)

	got := c.OfPrincipal("alice", 0)
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
	if got := c.OfPrincipal("", 0); got != nil {
		t.Errorf("the empty principal matched %+v", got)
	}
}

// indexAll indexes every record of c, as the writes that put them there do.
func indexAll(c *Conns) {
	for id, r := range c.mine {
		c.indexLocked(id, r.Info.Principal)
	}
	for id, byOrigin := range c.others {
		for _, r := range byOrigin {
			c.indexLocked(id, r.Info.Principal)
		}
	}
}

// OfPrincipal reads a principal's connections through the index, and
// answers as a scan of every record would, through records arriving,
// changing principal-less parts, being removed and revoked; with a lower
// bound it skips only a principal that holds fewer.
func TestOfPrincipalIndexAnswersAsAFullScan(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	origins := []crdt.Origin{{Name: "n2", Epoch: 1}, {Name: "n3", Epoch: 1}}
	rapid.Check(t, func(t *rapid.T) {
		c := newConnsState(&Swarm{self: "n1"})
		ids := []string{"c0", "c1", "c2", "c3", "c4"}
		principals := []string{"alice", "bob", ""}
		for step := range rapid.IntRange(1, 60).Draw(t, "steps") {
			id := rapid.SampledFrom(ids).Draw(t, "id")
			at := t0.Add(time.Duration(step) * time.Second)
			r := connRecord{Info: mcpfront.ConnInfo{ID: id, Principal: rapid.SampledFrom(principals).Draw(t, "principal")},
				HelloAt: at, Touched: at, StreamNode: rapid.SampledFrom([]string{"", "n2"}).Draw(t, "stream")}
			switch rapid.IntRange(0, 4).Draw(t, "action") {
			case 0: // this node's record
				c.mine[id] = r
				c.indexLocked(id, r.Info.Principal)
			case 1: // another node's record arrives
				o := rapid.SampledFrom(origins).Draw(t, "origin")
				if c.others[id] == nil {
					c.others[id] = map[crdt.Origin]connRecord{}
				}
				c.others[id][o] = r
				c.indexLocked(id, r.Info.Principal)
			case 2: // another node's record goes
				c.dropOtherLocked(id, rapid.SampledFrom(origins).Draw(t, "origin"))
			case 3: // this node's record goes
				delete(c.mine, id)
				c.unindexLocked(id)
			case 4: // revoked here
				c.endLocked(id, at.UnixNano(), false)
			}
			for _, p := range principals[:2] {
				got, want := c.OfPrincipal(p, 0), ofPrincipalByScan(c, p)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("step %d: OfPrincipal(%s) = %v; a full scan says %v", step, p, got, want)
				}
				// A bound only ever skips a principal that holds fewer.
				atLeast := rapid.IntRange(1, len(ids)+1).Draw(t, "atLeast")
				bounded := c.OfPrincipal(p, atLeast)
				if bounded == nil && len(want) >= atLeast || bounded != nil && fmt.Sprint(bounded) != fmt.Sprint(want) {
					t.Fatalf("step %d: OfPrincipal(%s, %d) = %v; a full scan says %v", step, p, atLeast, bounded, want)
				}
			}
		}
	})
}

// ofPrincipalByScan is OfPrincipal as it was: every record scanned.
func ofPrincipalByScan(c *Conns, principal string) []mcpfront.ConnActivity {
	saved := c.byPrincipal
	c.byPrincipal = map[string]map[string]struct{}{principal: {}}
	for id := range c.mine {
		c.byPrincipal[principal][id] = struct{}{}
	}
	for id := range c.others {
		c.byPrincipal[principal][id] = struct{}{}
	}
	defer func() { c.byPrincipal = saved }()
	return c.OfPrincipal(principal, 0)
}
