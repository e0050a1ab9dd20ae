package swarm

import (
	"fmt"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm/crdt"
	"github.com/mcpswarm/mcpswarm/session"
	"pgregory.net/rapid"
)

var (
	n1 = crdt.Origin{Name: "node1", Epoch: 7}
	n2 = crdt.Origin{Name: "node2", Epoch: 9}
	t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
)

func tools(names ...string) []session.Tool {
	var out []session.Tool
	for _, n := range names {
		out = append(out, session.Tool{Name: n})
	}
	return out
}

func TestDuplicateIDResolvesToTheEarliestCreationOnEveryNode(t *testing.T) {
	for _, order := range [][]crdt.Origin{{n1, n2}, {n2, n1}} {
		x := newIndex()
		for _, o := range order {
			created := t0
			if o == n2 {
				created = t0.Add(time.Millisecond)
			}
			x.setSession("dup", o, &sessionRecord{Principal: "alice", Created: created, Node: o.Name})
			x.setTools("dup", o, &toolsRecord{Principal: "alice", Tools: tools("dup.from." + o.Name)})
		}
		loc, ok := x.locate("dup")
		if !ok || loc.origin != n1 {
			t.Fatalf("arrival order %v: located %v, want node1's earlier creation", order, loc.origin)
		}
		if got := x.toolsOf("alice", false); len(got) != 1 || got[0].Name != "dup.from.node1" {
			t.Fatalf("arrival order %v: alice's tools %v, want only the winner's", order, got)
		}
	}
}

func TestEqualCreationTimesAreBrokenByOrigin(t *testing.T) {
	if !earlier(t0, "a@1", t0, "b@1") || earlier(t0, "b@1", t0, "a@1") {
		t.Fatal("ties must break by origin string, the same way everywhere")
	}
}

func TestToolViewsArePerPrincipalAndFollowChanges(t *testing.T) {
	x := newIndex()
	x.setSession("a1", n1, &sessionRecord{Principal: "alice", Created: t0})
	x.setSession("b1", n2, &sessionRecord{Principal: "bob", Created: t0})
	x.setTools("a1", n1, &toolsRecord{Principal: "alice", Tools: tools("a1.x.click")})
	x.setTools("b1", n2, &toolsRecord{Principal: "bob", Tools: tools("b1.y.click")})

	if got := x.toolsOf("alice", false); len(got) != 1 || got[0].Name != "a1.x.click" {
		t.Fatalf("alice sees %v", got)
	}
	if got := x.toolsOf("anyone", true); len(got) != 2 {
		t.Fatalf("an admin sees %v, want both sessions' tools", got)
	}
	// A change invalidates the cached view.
	x.setTools("a1", n1, &toolsRecord{Principal: "alice", Tools: tools("a1.x.click", "a1.z.toggle")})
	if got := x.toolsOf("alice", false); len(got) != 2 {
		t.Fatalf("after a change alice sees %v", got)
	}
	// Hiding the owner (the registry reports the entries removed) empties it.
	x.setSession("a1", n1, nil)
	x.setTools("a1", n1, nil)
	if got := x.toolsOf("alice", false); len(got) != 0 {
		t.Fatalf("after hiding, alice sees %v", got)
	}
}

func TestTheSameToolSetTwiceIsOneChange(t *testing.T) {
	x := newIndex()
	rec := &toolsRecord{Principal: "alice", Tools: tools("s.a.click")}
	if !x.setTools("s", n1, rec) {
		t.Fatal("the first tool set is a change")
	}
	if x.setTools("s", n1, &toolsRecord{Principal: "alice", Tools: tools("s.a.click")}) {
		t.Fatal("an identical tool set must not count as a change")
	}
	if !x.setTools("s", n1, nil) || x.setTools("s", n1, nil) {
		t.Fatal("removal is a change once")
	}
}

// When a drained sender leaves before its adopter's tools record arrives,
// the session's tools stay listed (from the sender's last record) while
// the adopter's session record is visible, and go once the session does.
func TestToolsOutliveADepartedSenderUntilTheAdopters(t *testing.T) {
	x := newIndex()
	sender, adopter := crdt.Origin{Name: "n1", Epoch: 1}, crdt.Origin{Name: "n2", Epoch: 2}
	tool := session.Tool{Name: "s.inc.click", Session: "s"}
	x.setSession("s", sender, &sessionRecord{Principal: "p", Node: "n1", MovedTo: "n2"})
	x.setTools("s", sender, &toolsRecord{Principal: "p", Tools: []session.Tool{tool}})
	x.setSession("s", adopter, &sessionRecord{Principal: "p", Node: "n2", Handoff: 1})
	x.setSession("s", sender, nil) // the sender left
	x.setTools("s", sender, nil)
	if got := x.toolsOf("p", false); len(got) != 1 || got[0].Name != tool.Name {
		t.Fatalf("tools while the adopter's are on their way: %v", got)
	}
	x.setTools("s", adopter, &toolsRecord{Principal: "p", Tools: []session.Tool{tool}})
	if got := x.toolsOf("p", false); len(got) != 1 {
		t.Fatalf("tools once the adopter's arrived: %v", got)
	}
	x.setTools("s", adopter, nil)
	x.setSession("s", adopter, nil) // stopped
	if got := x.toolsOf("p", false); len(got) != 0 {
		t.Fatalf("tools of a stopped session: %v", got)
	}
}

// The same when the sender's session record goes before its tools record
// and before the adopter's record arrives (the sender left, its origin
// hidden): the tools stay listed until the adopter's records arrive.
func TestToolsStayWhileTheAdopterIsPending(t *testing.T) {
	x := newIndex()
	sender, adopter := crdt.Origin{Name: "n1", Epoch: 1}, crdt.Origin{Name: "n2", Epoch: 2}
	tool := session.Tool{Name: "s.inc.click", Session: "s"}
	x.setSession("s", sender, &sessionRecord{Principal: "p", Node: "n1", MovedTo: "n2"})
	x.setTools("s", sender, &toolsRecord{Principal: "p", Tools: []session.Tool{tool}})
	_ = x.toolsOf("p", false) // cached
	x.awaitAdopter("s")
	x.setSession("s", sender, nil)
	x.setTools("s", sender, nil)
	if got := x.toolsOf("p", false); len(got) != 1 {
		t.Fatalf("tools while the adopter is pending: %v", got)
	}
	x.setSession("s", adopter, &sessionRecord{Principal: "p", Node: "n2", Handoff: 1})
	x.setTools("s", adopter, &toolsRecord{Principal: "p", Tools: []session.Tool{tool}})
	if got := x.toolsOf("p", false); len(got) != 1 {
		t.Fatalf("tools once the adopter's arrived: %v", got)
	}
	x.setTools("s", adopter, nil)
	x.setSession("s", adopter, nil)
	if got := x.toolsOf("p", false); len(got) != 0 {
		t.Fatalf("tools of a stopped session: %v", got)
	}
}

// What one principal holds is found through the principal index and
// answers as a visit of every session would: through records arriving from
// two origins, changing principal, and going; and once every record went,
// the index holds nothing.
func TestPrincipalIndexAnswersAsAScanOfEverySession(t *testing.T) {
	origins := []crdt.Origin{n1, n2}
	principals := []string{"alice", "bob"}
	ids := []string{"s1", "s2", "s3"}
	rapid.Check(t, func(t *rapid.T) {
		x := newIndex()
		for step := range rapid.IntRange(1, 50).Draw(t, "steps") {
			id := rapid.SampledFrom(ids).Draw(t, "id")
			o := rapid.SampledFrom(origins).Draw(t, "origin")
			p := rapid.SampledFrom(principals).Draw(t, "principal")
			gone := rapid.IntRange(0, 3).Draw(t, "gone") == 0
			if rapid.Bool().Draw(t, "tools") {
				var rec *toolsRecord
				if !gone {
					rec = &toolsRecord{Principal: p, Tools: tools(id + "." + p + ".click")}
				}
				x.setTools(id, o, rec)
			} else {
				var rec *sessionRecord
				if !gone {
					rec = &sessionRecord{Principal: p, Created: t0.Add(time.Duration(step) * time.Millisecond)}
				}
				x.setSession(id, o, rec)
			}
			for _, p := range principals {
				naming := map[string]bool{}
				for _, id := range x.idsNaming(p) {
					naming[id] = true
				}
				owned := 0
				for _, id := range x.ids() {
					if loc, _ := x.locate(id); loc.rec.Principal == p {
						owned++
						if !naming[id] {
							t.Fatalf("step %d: %s owns %s but the index does not name it", step, p, id)
						}
					}
				}
				if got := x.owned(p); got != owned {
					t.Fatalf("step %d: %s owns %d sessions, counted %d", step, p, owned, got)
				}
				if got, want := x.toolsOf(p, false), toolsOfByScan(x, p); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("step %d: %s's tools %v; a scan of every session says %v", step, p, got, want)
				}
			}
		}
		for _, id := range ids {
			for _, o := range origins {
				x.setSession(id, o, nil)
				x.setTools(id, o, nil)
			}
		}
		if len(x.named) != 0 {
			t.Fatalf("every record went and the index still names %v", x.named)
		}
	})
}

// toolsOfByScan is toolsOf without the principal index: every session
// visited, the view not cached.
func toolsOfByScan(x *index, principal string) []session.Tool {
	saved := x.named
	x.named = map[string]map[string]int{principal: {}}
	for id := range x.tools {
		x.named[principal][id] = 1
	}
	delete(x.views, principal)
	defer func() {
		x.named = saved
		delete(x.views, principal)
	}()
	return x.toolsOf(principal, false)
}
