package mcpswarm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm"
)

// countOf reads a counter session's count through c.
func countOf(t *testing.T, c *conn, id string) (int, bool) {
	t.Helper()
	res := c.call("swarm_get_model", map[string]any{"id": id})
	if res.IsError {
		return 0, false
	}
	var m struct {
		Count int `json:"count"`
	}
	if err := json.Unmarshal([]byte(textOf(res)), &m); err != nil {
		t.Fatalf("decoding the model of %s %q: %v", id, textOf(res), err)
	}
	return m.Count, true
}

// countNow is countOf for a poll: a call the node cannot serve yet (it
// is behind a peer it has not yet declared dead) is a miss, not a failure.
func countNow(c *conn, id string) (int, bool) {
	req := mcp.CallToolRequest{}
	req.Params.Name = "swarm_get_model"
	req.Params.Arguments = map[string]any{"id": id}
	res, err := c.CallTool(context.Background(), req)
	if err != nil || res.IsError {
		return 0, false
	}
	var m struct {
		Count int `json:"count"`
	}
	if err := json.Unmarshal([]byte(textOf(res)), &m); err != nil {
		return 0, false
	}
	return m.Count, true
}

// startCounter starts counter session id through c and clicks it k times
// through d, each click acknowledged.
func startCounter(t *testing.T, c, d *conn, id string, k int) {
	t.Helper()
	if res := c.call("swarm_start", map[string]any{"app": "counter", "id": id}); res.IsError {
		t.Fatalf("swarm_start %s: %s", id, textOf(res))
	}
	eventually(t, 5*time.Second, d.id+" lists "+id+"'s tools", func() bool { return d.tools()[id+".inc.click"] })
	for i := range k {
		if res := d.call(id+".inc.click", nil); res.IsError {
			t.Fatalf("click %d of %s: %s", i, id, textOf(res))
		}
	}
}

// The owner's machine is lost (kill -9, data dir deleted, never back):
// each of its sessions is served again through the other nodes, by the
// standby that held it, with every acknowledged click, and keeps its id
// and tools; the new owner places a new standby.
func TestOwnerLossPromotesAStandbyWithEveryAcknowledgedWrite(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	alice1 := connect(t, nodes[0], connOpts{token: aliceToken})
	alice3 := connect(t, nodes[2], connOpts{token: aliceToken})
	const sessions, clicks = 4, 15
	for i := range sessions {
		startCounter(t, alice1, alice3, fmt.Sprintf("ct%d", i), clicks)
	}

	killed := time.Now()
	e.kill("node1")
	if err := os.RemoveAll(e.dataDir["node1"]); err != nil {
		t.Fatal(err)
	}
	var failover []time.Duration
	for i := range sessions {
		id := fmt.Sprintf("ct%d", i)
		var n int
		eventually(t, 15*time.Second, id+" is served again through node3", func() bool {
			var ok bool
			n, ok = countOf(t, alice3, id)
			return ok
		})
		failover = append(failover, time.Since(killed))
		if n != clicks {
			t.Fatalf("%s came back with count %d, want the %d acknowledged clicks", id, n, clicks)
		}
		if res := alice3.call(id+".inc.click", nil); res.IsError {
			t.Fatalf("clicking %s after the failover: %s", id, textOf(res))
		}
		if n, _ := countOf(t, alice3, id); n != clicks+1 {
			t.Fatalf("%s counts %d after one more click, want %d", id, n, clicks+1)
		}
		if owner := alice3.listed()[id]; owner != "node2" && owner != "node3" {
			t.Fatalf("%s is listed as owned by %q", id, owner)
		}
	}
	slices.Sort(failover)
	t.Logf("failover after the owner's loss: first %v, last %v", failover[0].Round(time.Millisecond), failover[len(failover)-1].Round(time.Millisecond))
}

// A standby dies: its owner keeps answering (on its own fsync while the
// standby is out), places a new standby once membership says the old one
// died, and loses nothing.
func TestStandbyDeathKeepsTheOwnerServing(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	alice1 := connect(t, nodes[0], connOpts{token: aliceToken})
	startCounter(t, alice1, alice1, "ct", 3)
	var standby string
	eventually(t, 5*time.Second, "ct's record names a standby", func() bool {
		standby = standbyOf(t, nodes[0], "ct")
		return standby != ""
	})
	e.kill(standby)
	for i := range 10 {
		if res := alice1.call("ct.inc.click", nil); res.IsError {
			t.Fatalf("click %d after the standby died: %s", i, textOf(res))
		}
	}
	other := "node2"
	if standby == "node2" {
		other = "node3"
	}
	eventually(t, 15*time.Second, "ct's record names "+other+" as its standby", func() bool {
		return standbyOf(t, nodes[0], "ct") == other
	})
	if n, _ := countOf(t, alice1, "ct"); n != 13 {
		t.Fatalf("ct counts %d, want 13", n)
	}
}

// The owner is killed and comes back with its old data after its standby
// took over: it demotes itself (its old copy is never served again), and
// every node answers the one history.
func TestAReturningOwnerDemotesItself(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	alice1 := connect(t, nodes[0], connOpts{token: aliceToken})
	alice3 := connect(t, nodes[2], connOpts{token: aliceToken})
	startCounter(t, alice1, alice3, "ct", 5)
	e.kill("node1")
	eventually(t, 15*time.Second, "ct is served again through node3", func() bool {
		_, ok := countOf(t, alice3, "ct")
		return ok
	})
	for range 2 {
		if res := alice3.call("ct.inc.click", nil); res.IsError {
			t.Fatalf("click after the failover: %s", textOf(res))
		}
	}
	n1 := e.start("node1", nodes[1].GossipAddr())
	eventually(t, 15*time.Second, "the returning node1 no longer runs ct", func() bool {
		return !slices.Contains(n1.LocalSessions(), "ct")
	})
	// Restarted, it serves once it heard the members it knew.
	var back *conn
	eventually(t, 15*time.Second, "the returning node1 serves connections", func() bool {
		var err error
		back, err = tryConnect(t, n1, connOpts{token: aliceToken})
		return err == nil
	})
	eventually(t, 15*time.Second, "node1 answers ct's one history", func() bool {
		n, ok := countOf(t, back, "ct")
		return ok && n == 7
	})
	if n, _ := countOf(t, alice3, "ct"); n != 7 {
		t.Fatalf("node3 reads ct at %d, want 7", n)
	}
	if owner := back.listed()["ct"]; owner == "node1" {
		t.Fatalf("ct is listed as owned by the returning node1")
	}
}

// standbyOf returns the first in-sync standby that n's admin view of
// session id shows.
func standbyOf(t *testing.T, n interface{ SessionStandbys(string) []string }, id string) string {
	t.Helper()
	s := n.SessionStandbys(id)
	if len(s) == 0 {
		return ""
	}
	return strings.Join(s, ",")
}

// The owner is cut off from the majority (a partition, not a crash: it
// keeps running and its client still reaches it). It stops acknowledging
// at once: its writes answer a retryable error. The majority promotes the
// standby with every acknowledged write. After the heal the old owner
// demotes itself and every node reads the one history.
func TestACutOffOwnerStopsAcknowledgingAndTheMajorityPromotes(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	alice1 := connect(t, nodes[0], connOpts{token: aliceToken})
	alice3 := connect(t, nodes[2], connOpts{token: aliceToken})
	alice2 := connect(t, nodes[1], connOpts{token: aliceToken})
	const acked = 5
	startCounter(t, alice1, alice3, "ct", acked)

	e.cut("node1")
	// Its standby is unreachable but not known down: the owner cannot
	// tell whether it is the one cut off, so it refuses.
	if refusal := clickNow(alice1, "ct"); !strings.Contains(refusal, mcpswarm.ErrFenced.Error()) {
		t.Fatalf("the cut-off owner answered its first write with %q, want the retryable %q", refusal, mcpswarm.ErrFenced)
	}
	eventually(t, 15*time.Second, "the majority serves ct again", func() bool {
		if refusal := clickNow(alice1, "ct"); refusal == "" {
			t.Fatal("the cut-off owner acknowledged a write")
		}
		_, ok := countNow(alice3, "ct")
		return ok
	})
	if n, _ := countOf(t, alice3, "ct"); n != acked {
		t.Fatalf("the majority promoted ct at %d, want the %d acknowledged clicks", n, acked)
	}
	if owner := alice3.listed()["ct"]; owner == "node1" || owner == "" {
		t.Fatalf("ct is listed as owned by %q after the promotion", owner)
	}
	for range 2 {
		if res := alice3.call("ct.inc.click", nil); res.IsError {
			t.Fatalf("click on the majority's side: %s", textOf(res))
		}
	}
	if refusal := clickNow(alice1, "ct"); refusal == "" {
		t.Fatal("the cut-off owner acknowledged a write after the majority promoted its standby")
	}

	e.heal("node1")
	eventually(t, 20*time.Second, "the old owner no longer runs ct", func() bool {
		return !slices.Contains(nodes[0].LocalSessions(), "ct")
	})
	for _, c := range []*conn{alice1, alice2, alice3} {
		eventually(t, 15*time.Second, "every node reads ct's one history", func() bool {
			n, ok := countNow(c, "ct")
			return ok && n == acked+2
		})
	}
}

// clickNow clicks id's inc through c and returns why it was refused, or
// "" when it was acknowledged.
func clickNow(c *conn, id string) string {
	req := mcp.CallToolRequest{}
	req.Params.Name = id + ".inc.click"
	res, err := c.CallTool(context.Background(), req)
	switch {
	case err != nil:
		return err.Error()
	case res.IsError:
		return textOf(res)
	}
	return ""
}

// A standby is cut off, alive but unreachable: its owner cannot tell that
// from being cut off itself, so it refuses writes (saying they may have
// applied) until memberlist declares the standby dead. Then, in the
// majority, it answers again and places a new standby (R is restored).
// The breaker of the refused tool does not open: the refusals were not
// the tool's fault. Once the partition heals and the owner dies, the
// session comes back exactly as the owner last had it, with every
// acknowledged write.
func TestACutOffStandbyIsReplaced(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	alice1 := connect(t, nodes[0], connOpts{token: aliceToken})
	acked, maybe := 3, 0 // acknowledged clicks; refused ones that may have applied
	startCounter(t, alice1, alice1, "ct", acked)
	var standby string
	eventually(t, 5*time.Second, "ct's record names a standby", func() bool {
		standby = standbyOf(t, nodes[0], "ct")
		return standby != ""
	})
	other := map[string]string{"node2": "node3", "node3": "node2"}[standby]
	click := func() {
		switch refusal := clickNow(alice1, "ct"); {
		case refusal == "":
			acked++
		case strings.Contains(refusal, mcpswarm.ErrFenced.Error()):
			maybe++
		}
	}

	e.cut(standby)
	if refusal := clickNow(alice1, "ct"); !strings.Contains(refusal, mcpswarm.ErrFenced.Error()) {
		t.Fatalf("with its standby just cut off, the owner answered %q, want the retryable %q", refusal, mcpswarm.ErrFenced)
	}
	maybe++
	eventually(t, 15*time.Second, "the owner names "+other+" as ct's standby", func() bool {
		click()
		return standbyOf(t, nodes[0], "ct") == other
	})
	for want := acked + 3; acked < want; {
		eventually(t, 15*time.Second, "the owner acknowledges a click with its new standby", func() bool {
			before := acked
			click()
			return acked > before
		})
	}

	e.heal(standby)
	for _, n := range nodes {
		eventually(t, 15*time.Second, "every node sees all three alive again", func() bool { return n.AliveMembers() == 3 })
	}
	// Placement is a function of membership: the returning node is ct's
	// standby again. The failover acts on the record's in-sync set, so
	// the owner dies only once every node's record names it.
	eventually(t, 15*time.Second, "every node's record names "+standby+" as ct's standby again", func() bool {
		if !slices.Equal(nodes[0].SessionStandbys("ct"), []string{standby}) {
			return false
		}
		for _, n := range nodes {
			if !slices.Equal(mcpswarm.RecordedStandbys(n, "ct"), []string{standby}) {
				return false
			}
		}
		return true
	})
	// The standby that stood in is released once the record that drops it
	// reached every peer (not before: its copy was the named one).
	eventually(t, 15*time.Second, other+" releases its copy of ct", func() bool {
		return !slices.Contains(mcpswarm.StandbyCopies(e.nodes[other]), "ct")
	})
	var last int
	eventually(t, 15*time.Second, "the owner reads ct", func() bool {
		var ok bool
		last, ok = countNow(alice1, "ct")
		return ok
	})
	if last < acked || last > acked+maybe {
		t.Fatalf("the owner reads ct at %d after %d acknowledged clicks and %d that may have applied", last, acked, maybe)
	}
	e.kill("node1")
	survivor := connect(t, e.nodes[other], connOpts{token: aliceToken})
	eventually(t, 15*time.Second, "ct is served again after its owner died", func() bool {
		_, ok := countNow(survivor, "ct")
		return ok
	})
	if n, _ := countOf(t, survivor, "ct"); n != last {
		t.Fatalf("ct came back at %d, want %d as its owner last had it (%d acknowledged)", n, last, acked)
	}
}
