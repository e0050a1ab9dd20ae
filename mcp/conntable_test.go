package mcp

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/authz"
)

// tableSink is a connection's stream for connTable tests.
type tableSink struct{ id string }

func (*tableSink) send([]byte) error   { return nil }
func (*tableSink) enqueue([]byte) bool { return true }

// scanMatch is match as it was before the index: every connection visited,
// the principal tested by keep. It is the reference the index must agree
// with.
func scanMatch(t *connTable, method, uri string, keep func(authz.Principal) bool) []*conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*conn
	for _, c := range t.conns {
		if !keep(c.principal) {
			continue
		}
		if c.listen != nil {
			if listenWants(*c.listen, method, uri) {
				out = append(out, c)
			}
			continue
		}
		if (c.out == nil && !c.home) || (t.registry != nil && !t.registry.NotifyHere(c.id)) {
			continue
		}
		if uri == "" || c.subs[uri] || subscribedVia(t.registry, c.id, uri) {
			out = append(out, c)
		}
	}
	return out
}

func connIDs(cs []*conn) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s/%p", c.id, c))
	}
	slices.Sort(out)
	return out
}

// The indexed match answers exactly what scanning every connection
// answered, over random registrations, re-registrations under another
// principal, subscriptions (here and through other nodes), listen streams
// and removals.
func TestConnTableMatchAgreesWithAScan(t *testing.T) {
	uris := []string{"mcpswarm://session/a/widgets", "mcpswarm://session/b/context", URISessions, URIMembers}
	principals := []authz.Principal{{Subject: "alice"}, {Subject: "bob"}, {Subject: ""},
		{Subject: "root", Roles: []string{authz.RoleAdmin}}, {Subject: "alice", Roles: []string{authz.RoleAdmin}}}
	methods := []string{string(mcp.MethodNotificationResourceUpdated), string(mcp.MethodNotificationToolsListChanged), string(mcp.MethodNotificationResourcesListChanged)}
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 17))
		notHere := map[string]bool{}
		remote := map[string]bool{} // connID + " " + uri subscribed through another node
		tbl := newConnTable(fakeRegistry{notHere: notHere, remote: remote}, time.Hour)
		ids := []string{"c0", "c1", "c2", "c3", "c4", "c5"}
		for op := range 50 {
			id := ids[rng.IntN(len(ids))]
			p := principals[rng.IntN(len(principals))]
			switch rng.IntN(9) {
			case 0, 1:
				tbl.add(id, p, rng.IntN(2) == 0, &tableSink{id: id})
			case 2:
				tbl.subscribe(id, p, uris[rng.IntN(len(uris))], rng.IntN(3) > 0)
			case 3:
				tbl.remove(id)
			case 4:
				f := mcp.SubscriptionFilter{ToolsListChanged: rng.IntN(2) == 0, ResourcesListChanged: rng.IntN(2) == 0,
					ResourceSubscriptions: []string{uris[rng.IntN(len(uris))]}}
				tbl.addListen(fmt.Sprintf("listen:%d", op), p, f, op, &tableSink{id: id})
			case 5:
				remote[id+" "+uris[rng.IntN(len(uris))]] = rng.IntN(2) == 0
			case 6:
				notHere[id] = rng.IntN(2) == 0
			case 7:
				tbl.release(id, tbl.out(id))
			}
			for _, m := range methods {
				for _, uri := range append([]string{""}, uris...) {
					for _, owner := range []string{"alice", "bob", "root", ""} {
						cases := []struct {
							aud  audience
							keep func(authz.Principal) bool
						}{
							{ownerOf(owner), func(q authz.Principal) bool { return authz.Owns(q, owner) }},
							{principalOnly(owner), func(q authz.Principal) bool { return q.Subject == owner }},
							{everyone, func(authz.Principal) bool { return true }},
						}
						for _, c := range cases {
							got, want := connIDs(tbl.match(m, uri, c.aud)), connIDs(scanMatch(tbl, m, uri, c.keep))
							if !slices.Equal(got, want) {
								t.Fatalf("seed %d op %d: match(%s, %q, %+v) = %v, a scan gives %v", seed, op, m, uri, c.aud, got, want)
							}
						}
					}
				}
			}
		}
	}
}

// BenchmarkConnTableMatch is one resource event for a session of one
// principal on a node holding conns connections of 64 principals (none
// subscribed): the scan (the old path, as baseline) against the index. The
// registry lookups are counted, as they copy records in the swarm.
func BenchmarkConnTableMatch(b *testing.B) {
	for _, n := range []int{16, 1024} {
		lookups := 0
		tbl := newConnTable(fakeRegistry{lookups: &lookups}, time.Hour)
		for i := range n {
			id := fmt.Sprintf("c%d", i)
			tbl.add(id, authz.Principal{Subject: fmt.Sprintf("p%d", i%64)}, true, &tableSink{id: id})
		}
		uri := SessionURI("s1", "widgets")
		m := string(mcp.MethodNotificationResourceUpdated)
		b.Run(fmt.Sprintf("conns=%d/scan", n), func(b *testing.B) {
			lookups = 0
			for b.Loop() {
				scanMatch(tbl, m, uri, func(p authz.Principal) bool { return authz.Owns(p, "p1") })
			}
			b.ReportMetric(float64(lookups)/float64(b.N), "lookups/op")
		})
		b.Run(fmt.Sprintf("conns=%d/index", n), func(b *testing.B) {
			lookups = 0
			for b.Loop() {
				tbl.match(m, uri, ownerOf("p1"))
			}
			b.ReportMetric(float64(lookups)/float64(b.N), "lookups/op")
		})
	}
}

// A connection with no stream here that this node has not served for the
// idle window is forgotten once the table has grown; one with a stream
// here, or served lately, stays.
func TestIdleConnectionsArePrunedAsTheTableGrows(t *testing.T) {
	tbl := newConnTable(nil, time.Minute)
	start := time.Now()
	p := authz.Principal{Subject: "alice"}
	tbl.add("streaming", p, true, &tableSink{id: "streaming"})
	tbl.add("recent", p, true, nil)
	for i := range minPrune - 3 {
		tbl.add(fmt.Sprintf("old%d", i), p, true, nil)
	}
	later := start.Add(2 * time.Minute)
	if early := tbl.touch("recent", later); len(early) != 0 {
		t.Fatalf("a table below the prune size forgot %d connections", len(early))
	}
	tbl.add("old-last", p, true, nil)
	tbl.conns["old-last"].seen.Store(start.UnixNano())
	forgotten := tbl.touch("recent", later)
	if len(forgotten) != minPrune-2 {
		t.Fatalf("forgot %d connections, want the %d idle ones", len(forgotten), minPrune-2)
	}
	if !tbl.known("streaming") || !tbl.known("recent") || tbl.known("old0") {
		t.Errorf("after the prune: streaming %v, recent %v, old0 %v", tbl.known("streaming"), tbl.known("recent"), tbl.known("old0"))
	}
	if more := tbl.touch("recent", later.Add(time.Hour)); len(more) != 0 {
		t.Errorf("a table below its next prune size pruned %v", more)
	}
}
