package mcpswarm_test

import (
	"fmt"
	"testing"
)

// Issue #11, any node behaves as one node: a session started, or a call
// that gave a session a new tool (typing enabled the todo's Add button), is
// answered only once every node has the session and its tools, so the
// client's next request finds them on whichever node it reaches. Here each
// step goes to the next node, as a balancer with no stickiness sends them;
// before, the third node often had not heard of the session or of its Add
// button yet ("not running", "has no tool").
func TestSessionsAndNewToolsAreEverywhereOnceTheCallAnswers(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	var clients []*conn
	for _, n := range nodes {
		clients = append(clients, connect(t, n, connOpts{token: aliceToken}))
	}
	for i := range 15 {
		id := fmt.Sprintf("form%d", i)
		starter, typer, presser := clients[i%3], clients[(i+1)%3], clients[(i+2)%3]
		if res := starter.call("swarm_start", map[string]any{"app": "todo", "id": id}); res.IsError {
			t.Fatalf("start %s: %s", id, textOf(res))
		}
		if res := typer.call(id+".new.type_into", map[string]any{"text": "milk"}); res.IsError {
			t.Fatalf("round %d: the session started on node %d, typed into through node %d: %s", i, i%3, (i+1)%3, textOf(res))
		}
		if res := presser.call(id+".add.click", nil); res.IsError {
			t.Fatalf("round %d: the Add button enabled through node %d, pressed through node %d: %s", i, (i+1)%3, (i+2)%3, textOf(res))
		}
	}
}
