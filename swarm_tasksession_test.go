package mcpswarm_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm"
	"github.com/mcpswarm/mcpswarm/mcp/task"
)

// tasksRPC is modernRequest declaring the tasks extension.
func tasksRPC(t *testing.T, n *mcpswarm.Node, method, name string, params map[string]any) (result, rpcErr map[string]any) {
	t.Helper()
	return modernRequest(t, n, method, name, params, map[string]any{"extensions": map[string]any{task.ExtensionName: map[string]any{}}})
}

// A task of a session's tool runs on the node that took the call, which
// forwards the call to the session's owner. When that owner dies mid-task
// (a job that never ends on its own), the task ends on every node — with
// the call's own answer naming what happened — and is never left working.
func TestATaskOfASessionWhoseOwnerDiesEnds(t *testing.T) {
	e := newSwarmEnv(t)
	withEndlessJobs(e)
	nodes := e.cluster(3)
	a1 := connect(t, nodes[0], connOpts{token: aliceToken})
	if res := a1.call("swarm_start", map[string]any{"app": "endless", "id": "jb"}); res.IsError {
		t.Fatal(textOf(res))
	}
	a2 := connect(t, nodes[1], connOpts{token: aliceToken})
	eventually(t, 5*time.Second, "node2 lists jb.run.click", func() bool { return a2.tools()["jb.run.click"] })

	created, rpcErr := tasksRPC(t, nodes[1], "tools/call", "jb.run.click", map[string]any{"name": "jb.run.click", "arguments": map[string]any{}})
	id, _ := created["taskId"].(string)
	if created["resultType"] != "task" || id == "" {
		t.Fatalf("a job that does not end within the grace: %v %v, want a CreateTaskResult", created, rpcErr)
	}
	if got, _ := tasksRPC(t, nodes[2], "tasks/get", id, map[string]any{"taskId": id}); got["status"] != string(task.Working) {
		t.Fatalf("node3 reads the running job's task as %v, want working", got)
	}

	e.kill("node1")
	var last map[string]any
	eventually(t, 30*time.Second, "the task ends once the session's owner died", func() bool {
		last, _ = tasksRPC(t, nodes[2], "tasks/get", id, map[string]any{"taskId": id})
		s, _ := last["status"].(string)
		return task.Status(s).Terminal()
	})
	b, _ := json.Marshal(last)
	t.Logf("the task after node1's death: %s", b)
	if last["status"] == string(task.Cancelled) {
		t.Fatalf("nobody cancelled the task, yet it reads %s", b)
	}
	if got, _ := tasksRPC(t, nodes[1], "tasks/get", id, map[string]any{"taskId": id}); got["status"] != last["status"] {
		t.Fatalf("node2 reads %v, node3 %v", got["status"], last["status"])
	}
}
