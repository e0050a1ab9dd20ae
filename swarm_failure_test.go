package mcpswarm_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm"
)

// deadBound is how long after a crash the survivors must have hidden the
// dead node's sessions: memberlist's longest suspicion under the test
// timers (cluster.LocalMemberlist: 6 × 2 × 200 ms = 2.4 s) plus one probe
// interval to start suspecting, plus the 1 s the issue allows.
const deadBound = 2400*time.Millisecond + 200*time.Millisecond + time.Second

// With one copy per session (--session-replicas 0), the owner of a session
// crashes: the others stop listing its session and tools within the bound
// and calls answer "owner unavailable" at once; the owner restarts from its
// data dir and the session comes back, model and tools intact, everywhere.
// (With standbys a standby takes it over: swarm_standby_test.go.)
func TestOwnerDeathHidesSessionsAndRestartRestoresThem(t *testing.T) {
	e := newSwarmEnv(t)
	e.tweak = func(c *mcpswarm.Config) { c.SessionReplicas = 0 }
	nodes := e.cluster(3)
	n1, n2 := nodes[0], nodes[1]

	alice2 := connect(t, n2, connOpts{token: aliceToken})
	if res := alice2.call("swarm_start", map[string]any{"app": "counter", "id": "ct"}); res.IsError {
		t.Fatalf("swarm_start: %s", textOf(res))
	}
	for range 3 {
		if res := alice2.call("ct.inc.click", nil); res.IsError {
			t.Fatalf("ct.inc.click: %s", textOf(res))
		}
	}
	alice1 := connect(t, n1, connOpts{token: aliceToken})
	eventually(t, 5*time.Second, "node1 lists ct's tools", func() bool { return alice1.tools()["ct.inc.click"] })

	killed := time.Now()
	e.kill("node2")
	eventually(t, deadBound+time.Second, "node1 stops listing ct", func() bool {
		_, listed := alice1.listed()["ct"]
		return !listed && !alice1.tools()["ct.inc.click"]
	})
	hiddenAfter := time.Since(killed)
	t.Logf("node2's session hidden on node1 %v after the crash (bound %v)", hiddenAfter.Round(time.Millisecond), deadBound)
	if hiddenAfter > deadBound {
		t.Fatalf("session hidden %v after the crash, over the %v bound", hiddenAfter, deadBound)
	}

	began := time.Now()
	res := alice1.call("swarm_get_model", map[string]any{"id": "ct"})
	if took := time.Since(began); took > time.Second {
		t.Fatalf("a call for the dead owner's session took %v", took)
	}
	if !res.IsError || !strings.Contains(textOf(res), "owner unavailable: node node2") {
		t.Fatalf("call for a session of a dead owner answered %q, want owner unavailable: node node2", textOf(res))
	}

	// The id stays taken while its owner is away.
	if res := alice1.call("swarm_start", map[string]any{"app": "counter", "id": "ct"}); !res.IsError || !strings.Contains(textOf(res), "already yours") {
		t.Fatalf("starting ct elsewhere while its owner is away answered %q", textOf(res))
	}

	restarted := e.start("node2", n1.GossipAddr())
	// Until node1's membership has the new incarnation, its link to the
	// old one may reach the new process at the same address, and closing
	// that link when the new incarnation arrives cancels a call on it.
	eventually(t, 10*time.Second, "node1 knows the restarted node2", func() bool {
		return mcpswarm.Incarnation(n1, "node2") == mcpswarm.Incarnation(restarted, "node2")
	})
	eventually(t, 10*time.Second, "ct is listed again on node1, owned by node2", func() bool {
		return alice1.listed()["ct"] == "node2" && alice1.tools()["ct.inc.click"]
	})
	// The records can arrive a moment before node1's membership view has
	// the new incarnation; until then a call says "owner unavailable".
	var model string
	eventually(t, 20*time.Second, "node1 reaches the restarted owner", func() bool {
		res := alice1.call("swarm_get_model", map[string]any{"id": "ct"})
		model = textOf(res)
		return !res.IsError
	})
	if !strings.Contains(model, `"count":3`) && !strings.Contains(model, `"Count":3`) {
		t.Fatalf("restored model %s does not hold the count of 3", model)
	}
	if res := alice1.call("ct.inc.click", nil); res.IsError {
		t.Fatalf("driving the restored session from node1: %s", textOf(res))
	}
}

// Two nodes that cannot see each other both create session "dup" for
// alice; when they meet, every node settles on the earlier creation and the
// later copy is stopped, with its client told through list_changed.
func TestConcurrentSameIDCreationKeepsTheEarlierOne(t *testing.T) {
	e := newSwarmEnv(t)
	n1 := e.start("node1")
	n2 := e.start("node2") // alone: no join yet

	a1 := connect(t, n1, connOpts{token: aliceToken, listen: true})
	a2 := connect(t, n2, connOpts{token: aliceToken, listen: true})
	first := a1.call("swarm_start", map[string]any{"app": "counter", "id": "dup"})
	if first.IsError {
		t.Fatalf("start on node1: %s", textOf(first))
	}
	second := a2.call("swarm_start", map[string]any{"app": "counter", "id": "dup"})
	if second.IsError {
		t.Fatalf("start on node2 (which cannot see node1 yet): %s", textOf(second))
	}
	// The calls ran one after the other, so node2's creation is the later
	// one; check it rather than assume it.
	created := func(r *mcp.CallToolResult) time.Time {
		var v struct{ Created time.Time }
		if err := json.Unmarshal([]byte(textOf(r)), &v); err != nil {
			t.Fatalf("decoding swarm_start's answer: %v", err)
		}
		return v.Created
	}
	if !created(first).Before(created(second)) {
		t.Fatalf("node1's creation %v is not before node2's %v", created(first), created(second))
	}
	if res := a2.call("dup.inc.click", nil); res.IsError {
		t.Fatalf("click on node2's copy: %s", textOf(res))
	}
	a2.notes.count("") // forget what came before the merge

	// node3 joins both, merging the two clusters.
	n3 := e.start("node3", n1.GossipAddr(), n2.GossipAddr())
	for _, n := range []interface{ AliveMembers() int }{n1, n2, n3} {
		eventually(t, 10*time.Second, "the clusters merge", func() bool { return n.AliveMembers() == 3 })
	}
	a3 := connect(t, n3, connOpts{token: aliceToken})
	for _, c := range []*conn{a1, a2, a3} {
		eventually(t, 10*time.Second, "every node says dup is node1's", func() bool {
			owners := c.listed()
			return owners["dup"] == "node1"
		})
	}
	eventually(t, 5*time.Second, "node2 stops its copy", func() bool { return len(n2.LocalSessions()) == 0 })
	// The survivor is node1's copy, untouched by the click on node2's.
	if m := textOf(a3.call("swarm_get_model", map[string]any{"id": "dup"})); !strings.Contains(m, `"count":0`) && !strings.Contains(m, `"Count":0`) {
		t.Fatalf("the surviving dup is not node1's copy: %s", m)
	}
	eventually(t, 5*time.Second, "node2's client hears its tools changed", func() bool {
		return a2.notes.count("notifications/tools/list_changed") > 0
	})
}

// A connection outlives its home node: after the node that minted its id
// dies, the client carries on with the same id through another node.
func TestConnectionOutlivesItsHomeNode(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	owner := connect(t, nodes[0], connOpts{token: aliceToken})
	if res := owner.call("swarm_start", map[string]any{"app": "counter", "id": "ol"}); res.IsError {
		t.Fatal(textOf(res))
	}
	home := connect(t, nodes[1], connOpts{token: aliceToken})
	eventually(t, 5*time.Second, "node2 lists ol", func() bool { return home.tools()["ol.inc.click"] })
	id := home.id

	e.kill("node2")
	moved := connect(t, nodes[2], connOpts{token: aliceToken, sessionID: id})
	// node1's tools reach node3 by replication, independently of node2: wait
	// for them rather than reading once right after the kill.
	eventually(t, 5*time.Second, "the moved connection lists its principal's tools on node3",
		func() bool { return moved.tools()["ol.inc.click"] })
	if res := moved.call("ol.inc.click", nil); res.IsError {
		t.Fatalf("calling through node3 with node2's id: %s", textOf(res))
	}
	if m := textOf(moved.call("swarm_get_model", map[string]any{"id": "ol"})); !strings.Contains(m, `"count":1`) {
		t.Fatalf("model after the click: %s", m)
	}
}
