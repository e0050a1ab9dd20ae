package swarm

import (
	"fmt"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"pgregory.net/rapid"

	"github.com/mcpswarm/mcpswarm/crdt"
	mcpfront "github.com/mcpswarm/mcpswarm/mcp"
)

// The lookups as they were before they read records in place: a copy of
// every visible record of id, this node's own first, then a pass over it.
// They are the specification the in-place lookups are held to.

func (c *Conns) recordsCopy(id string) []connRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]connRecord, 0, 1+len(c.others[id]))
	if r, ok := c.mineLocked(id); ok {
		out = append(out, r)
	}
	for _, r := range c.others[id] {
		out = append(out, r)
	}
	return out
}

func (c *Conns) getByCopy(id string) (mcpfront.ConnInfo, bool) { return merge(c.recordsCopy(id)) }

func (c *Conns) revokedByCopy(id string) bool {
	for _, r := range c.recordsCopy(id) {
		if r.Revoked {
			return true
		}
	}
	return false
}

func (c *Conns) notifyHereByCopy(id string) bool {
	home := ""
	for _, r := range c.recordsCopy(id) {
		if r.Revoked {
			return false
		}
		if r.StreamNode != "" && r.StreamNode != c.s.self {
			return false
		}
		if r.Info.Node != "" {
			home = r.Info.Node
		}
	}
	return home == c.s.self
}

func emptyConns(self string) *Conns {
	return newConnsState(&Swarm{self: self})
}

// TestPropConnLookupsAnswerAsTheCopies draws what this node and two
// others hold of a few connections (live records with parts stamped at
// a few distinct times, revocations here or elsewhere) and checks Get,
// Revoked and NotifyHere against the copying lookups they replaced.
func TestPropConnLookupsAnswerAsTheCopies(t *testing.T) {
	nodes := []string{"n1", "n2", "n3"}
	t0 := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	// home is the connection's home node: its sealed id names it, so
	// every record that knows a home knows the same one.
	record := func(t *rapid.T, id, home, label string, k int) connRecord {
		// Parts are stamped a few seconds apart; record k's times are
		// offset by k ns, so two records never tie and the copies'
		// map order cannot decide a part.
		at := func(t *rapid.T, label string) time.Time {
			return t0.Add(time.Duration(rapid.IntRange(0, 3).Draw(t, label))*time.Second + time.Duration(k))
		}
		return connRecord{
			Info: mcpfront.ConnInfo{ID: rapid.SampledFrom([]string{id, ""}).Draw(t, label+"id"),
				Node:          rapid.SampledFrom([]string{"", home}).Draw(t, label+"node"),
				Principal:     rapid.SampledFrom([]string{"alice", "bob"}).Draw(t, label+"principal"),
				ClientInfo:    mcp.Implementation{Name: rapid.SampledFrom([]string{"a", "b"}).Draw(t, label+"client")},
				LogLevel:      rapid.SampledFrom([]mcp.LoggingLevel{"", "debug", "info"}).Draw(t, label+"level"),
				Subscriptions: rapid.SliceOfN(rapid.SampledFrom([]string{"swarm://me", "swarm://x"}), 0, 2).Draw(t, label+"subs")},
			HelloAt:    at(t, label+"hello"),
			LevelAt:    at(t, label+"levelAt"),
			SubsAt:     at(t, label+"subsAt"),
			StreamNode: rapid.SampledFrom(append([]string{""}, nodes...)).Draw(t, label+"stream"),
			Revoked:    rapid.IntRange(0, 5).Draw(t, label+"revoked") == 0,
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		c := emptyConns("n1")
		ids := []string{"c0", "c1", "c2", "c3"}
		for _, id := range ids {
			home := rapid.SampledFrom(nodes).Draw(t, id+"home")
			switch rapid.IntRange(0, 4).Draw(t, id+"mine") {
			case 0: // none
			case 1:
				c.ended.put(revocationOf(id), revTimeOf(t0.UnixNano()))
			case 2:
				c.elsewhere.put(revocationOf(id), struct{}{})
			default:
				r := record(t, id, home, id+"mine", 0)
				r.Revoked = false
				c.mine[id] = r
			}
			for k, o := range []crdt.Origin{{Name: "n2", Epoch: 1}, {Name: "n3", Epoch: 1}} {
				if rapid.Bool().Draw(t, fmt.Sprint(id, o.Name)) {
					r := record(t, id, home, fmt.Sprint(id, o.Name), k+1)
					if r.Revoked {
						// Another node's revocation is known by its
						// digest (onChange), never kept as a record.
						c.elsewhere.put(revocationOf(id), struct{}{})
						continue
					}
					if c.others[id] == nil {
						c.others[id] = map[crdt.Origin]connRecord{}
					}
					c.others[id][o] = r
				}
			}
		}
		for _, id := range append(ids, "unknown") {
			got, gotOK := c.Get(id)
			want, wantOK := c.getByCopy(id)
			if gotOK != wantOK || fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
				t.Fatalf("Get(%s) = %+v, %v; the copy says %+v, %v", id, got, gotOK, want, wantOK)
			}
			if g, w := c.Revoked(id), c.revokedByCopy(id); g != w {
				t.Fatalf("Revoked(%s) = %v; the copy says %v", id, g, w)
			}
			if g, w := c.NotifyHere(id), c.notifyHereByCopy(id); g != w {
				t.Fatalf("NotifyHere(%s) = %v; the copy says %v", id, g, w)
			}
		}
	})
}

// lookupConns is a node's view of one connection as the click load has
// it: this node's record from initialize (client info, capabilities) and
// another node's record of a subscription.
func lookupConns() *Conns {
	c := emptyConns("n1")
	hello := mcpfront.ConnInfo{ID: "c1", Node: "n1", Principal: "alice", ProtocolVersion: "2025-11-25",
		ClientInfo: mcp.Implementation{Name: "bench-client", Version: "1.0.0"},
		Capabilities: mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}, Roots: &struct {
			ListChanged bool `json:"listChanged,omitempty"`
		}{ListChanged: true}}}
	now := time.Now()
	var mine, other connRecord
	stamp(&mine, mcpfront.ConnInfo{}, hello, now)
	stamp(&other, mcpfront.ConnInfo{}, mcpfront.ConnInfo{ID: "c1", Subscriptions: []string{"swarm://me"}}, now.Add(time.Millisecond))
	c.mine["c1"] = mine
	c.others["c1"] = map[crdt.Origin]connRecord{{Name: "n2", Epoch: 1}: other}
	return c
}

// BenchmarkConnLookup is the registry lookups every request (Revoked)
// and every resource event's visited connection (Get, for subscriptions
// made elsewhere) make, in place against the copying baseline.
func BenchmarkConnLookup(b *testing.B) {
	c := lookupConns()
	var sink bool
	for _, bm := range []struct {
		name string
		fn   func() bool
	}{
		{"Get/copy", func() bool { _, ok := c.getByCopy("c1"); return ok }},
		{"Get/inplace", func() bool { _, ok := c.Get("c1"); return ok }},
		{"Revoked/copy", func() bool { return c.revokedByCopy("c1") }},
		{"Revoked/inplace", func() bool { return c.Revoked("c1") }},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink = bm.fn()
			}
		})
	}
	_ = sink
}
