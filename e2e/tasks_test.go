package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestExtensionTasksAnswerOnEveryNodeAndOutliveTheirNode drives the
// 2026-07-28 tasks extension (SEP-2663) with a raw client over three real
// nodes: a task created through node1 is read at once and polled through
// node2 and node3, one is cancelled from node3, one is answered
// (tasks/update) through node2, and after node1 is killed -9 its finished
// task still reads completed with its result on the survivors, while the
// one it was running ends failed, naming the lost node.
func TestExtensionTasksAnswerOnEveryNodeAndOutliveTheirNode(t *testing.T) {
	nodes := newTaskCluster(t)
	c1, c2, c3 := modernClient(t, nodes[0], aliceToken), modernClient(t, nodes[1], aliceToken), modernClient(t, nodes[2], aliceToken)
	survivors := []*taskClient{c2, c3}

	for _, c := range []*taskClient{c1, c2, c3} {
		var d struct {
			Capabilities map[string]json.RawMessage `json:"capabilities"`
		}
		c.result("server/discover", c.do("server/discover", map[string]any{}), &d)
		var ext map[string]json.RawMessage
		_ = json.Unmarshal(d.Capabilities["extensions"], &ext)
		if ext[tasksExtension] == nil || d.Capabilities["tasks"] != nil {
			t.Errorf("%s: server/discover capabilities %s: want extensions[%q] and no v1 tasks slot", c.node.Name, mustMarshal(d.Capabilities), tasksExtension)
		}
	}

	// A: created through node1, readable through the others before any
	// poll could have waited for replication.
	a := c1.startTask("slow_compute", map[string]any{"seconds": 2, "label": "a"})
	if a.Status != "working" || a.TTLMs == nil || *a.TTLMs <= 0 || a.CreatedAt == "" || a.LastUpdatedAt == "" {
		t.Errorf("CreateTaskResult of A: %+v", a)
	}
	for _, c := range survivors {
		if w := c.mustGet(a.TaskID); w.Status != "working" && w.Status != "completed" {
			t.Errorf("A read through %s right after its creation: %+v", c.node.Name, w)
		}
	}
	doneA := awaitTask(t, 20*time.Second, a.TaskID, "completed", statusIs("completed"), survivors...)
	textA := textOf(doneA.Result)
	if !strings.Contains(textA, `"a"`) || doneA.Result.IsError || doneA.Error != nil {
		t.Errorf("A completed with %+v (text %q)", doneA, textA)
	}

	// Mcp-Name must name the task the body names.
	bad, err := c3.send("tasks/get", map[string]any{"taskId": a.TaskID}, map[string]string{"Mcp-Method": "tasks/get", "Mcp-Name": a.TaskID + "x"})
	if err != nil || bad.Status != http.StatusBadRequest || bad.code() != -32020 {
		t.Errorf("tasks/get with a mismatched Mcp-Name: %v, %v; want HTTP 400, -32020", bad, err)
	}

	// B: running on node1, cancelled from node3; every node reads it
	// cancelled, and it stays so.
	b := c1.startTask("slow_compute", map[string]any{"seconds": 60, "label": "b"})
	ackOnly(t, c3, "tasks/cancel", map[string]any{"taskId": b.TaskID})
	awaitTask(t, 10*time.Second, b.TaskID, "cancelled", statusIs("cancelled"), c2, c1, c3)
	ackOnly(t, c3, "tasks/cancel", map[string]any{"taskId": b.TaskID}) // a terminal task: the same ack

	// C: waits on node1 for an elicitation, answered through node2.
	cTask := c1.startTask("confirm_delete", map[string]any{"filename": "c.txt"})
	parked := awaitTask(t, 10*time.Second, cTask.TaskID, "input_required", statusIs("input_required"), c3, c2)
	if len(parked.InputRequests) != 1 {
		t.Fatalf("C asks %d inputs, want 1: %+v", len(parked.InputRequests), parked)
	}
	responses := map[string]any{}
	for k := range parked.InputRequests {
		responses[k] = map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}
	}
	ackOnly(t, c2, "tasks/update", map[string]any{"taskId": cTask.TaskID, "inputResponses": responses})
	doneC := awaitTask(t, 10*time.Second, cTask.TaskID, "completed", statusIs("completed"), c3, c1, c2)
	if !strings.Contains(textOf(doneC.Result), "was confirmed") {
		t.Errorf("C completed with %q, want the confirmation", textOf(doneC.Result))
	}

	// D is still running on node1 when it dies.
	d := c1.startTask("slow_compute", map[string]any{"seconds": 600, "label": "d"})
	for _, c := range survivors {
		c.mustGet(d.TaskID)
	}
	nodes[0].kill()

	// Through the failover, every read of A answers it completed with its
	// result, and D reads working until a survivor settles it failed.
	failed := awaitTask(t, 30*time.Second, d.TaskID, "failed", func(w wireTask) bool {
		if w.Status != "working" && w.Status != "failed" {
			t.Fatalf("D, whose node died, reads %+v", w)
		}
		for _, c := range survivors {
			if got := c.mustGet(a.TaskID); got.Status != "completed" || textOf(got.Result) != textA {
				t.Fatalf("A read through %s after node1's loss: %+v", c.node.Name, got)
			}
		}
		return w.Status == "failed"
	}, survivors...)
	if failed.Error == nil || !strings.Contains(failed.Error.Message, "node1") || failed.Result != nil {
		t.Errorf("D failed with %+v, want an error naming node1 and no result", failed)
	}
	for _, c := range survivors {
		if w := c.mustGet(d.TaskID); w.Status != "failed" {
			t.Errorf("D reads %s through %s after it failed", w.Status, c.node.Name)
		}
		if w := c.mustGet(b.TaskID); w.Status != "cancelled" {
			t.Errorf("B reads %s through %s after node1's loss", w.Status, c.node.Name)
		}
	}
}

// ackOnly sends a tasks/cancel or tasks/update and checks it is acked with
// resultType complete and no task envelope (the task is read by tasks/get).
func ackOnly(t *testing.T, c *taskClient, method string, params map[string]any) {
	t.Helper()
	var ack map[string]any
	c.result(method, c.do(method, params), &ack)
	if ack["resultType"] != "complete" {
		t.Errorf("%s through %s acked %v, want resultType complete", method, c.node.Name, ack)
	}
	for _, k := range []string{"taskId", "status", "result", "error", "inputRequests"} {
		if _, ok := ack[k]; ok {
			t.Errorf("%s through %s acked with %s: %v", method, c.node.Name, k, ack)
		}
	}
}

func mustMarshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
