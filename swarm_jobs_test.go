package mcpswarm_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/grpc"

	"github.com/mcpswarm/mcpswarm"
	adminv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/admin/v1"
	"github.com/mcpswarm/mcpswarm/session"
	"github.com/mcpswarm/mcpswarm/session/apps"
)

// withEndlessJobs registers "endless", the jobs demo with steps an hour
// apart: its jobs run until their call is cancelled or the session stops.
func withEndlessJobs(e *swarmEnv) {
	e.apps = func(r *session.Registry) error {
		return r.Register("endless", "jobs that never take a step", func() session.App { return apps.Jobs{Step: time.Hour} })
	}
	e.startable = append(apps.DemoNames(), "endless")
}

// jobsModel reads a jobs session's model through c.
func jobsModel(t *testing.T, c *conn, id string) apps.JobsModel {
	t.Helper()
	var m apps.JobsModel
	if err := json.Unmarshal([]byte(textOf(c.call("swarm_get_model", map[string]any{"id": id}))), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// A job of a session on node1, run through node2, streams a progress
// notification per step back to the client, answers once the job is in
// the model, and is listed as a tool that may run as a task.
func TestAJobThroughAnotherNodeStreamsItsProgress(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(2)
	a1 := connect(t, nodes[0], connOpts{token: aliceToken})
	if res := a1.call("swarm_start", map[string]any{"app": "jobs", "id": "jb"}); res.IsError {
		t.Fatal(textOf(res))
	}
	a2 := connect(t, nodes[1], connOpts{token: aliceToken})
	eventually(t, 5*time.Second, "node2 lists jb", func() bool { return a2.tools()["jb.run.click"] })
	list, err := a2.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, tl := range list.Tools {
		switch tl.Name {
		case "jb.run.click":
			listed = true
			if tl.Execution == nil || tl.Execution.TaskSupport != mcp.TaskSupportOptional {
				t.Errorf("jb.run.click lists execution %+v, want taskSupport optional", tl.Execution)
			}
		case "jb.seconds.select":
			if tl.Execution != nil && tl.Execution.TaskSupport != mcp.TaskSupportForbidden {
				t.Errorf("jb.seconds.select lists execution %+v, want none", tl.Execution)
			}
		}
	}
	if !listed {
		t.Fatal("node2's tools/list has no jb.run.click")
	}
	var progress atomic.Int32
	a2.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" {
			progress.Add(1)
		}
	})
	req := mcp.CallToolRequest{}
	req.Params.Name = "jb.run.click"
	req.Params.Meta = &mcp.Meta{ProgressToken: mcp.ProgressToken("job")}
	res, err := a2.CallTool(context.Background(), req)
	if err != nil || res.IsError {
		t.Fatalf("run: %v %s", err, textOf(res))
	}
	if got := progress.Load(); got != 4 {
		t.Errorf("%d progress notifications before the result, want 4 (a 1 s job's steps)", got)
	}
	if m := jobsModel(t, a1, "jb"); len(m.Done) != 1 || m.Done[0].Outcome != "finished" || m.Done[0].Steps != 4 {
		t.Errorf("model after the call = %+v, want job 1 finished after 4 steps", m)
	}
}

// While a job runs on node1 for a call made on node2, the session serves
// other calls; the client's cancellation, sent to node3, reaches the job,
// and the model records it as cancelled.
func TestAJobLeavesItsSessionServingAndIsCancelledFromAnyNode(t *testing.T) {
	e := newSwarmEnv(t)
	withEndlessJobs(e)
	nodes := e.cluster(3)
	a1 := connect(t, nodes[0], connOpts{token: aliceToken})
	if res := a1.call("swarm_start", map[string]any{"app": "endless", "id": "ej"}); res.IsError {
		t.Fatal(textOf(res))
	}
	c := connect(t, nodes[1], connOpts{token: aliceToken})
	eventually(t, 5*time.Second, "node2 lists ej", func() bool { return c.tools()["ej.run.click"] })
	answered := c.callInBackground(nodes[1], `{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"ej.run.click","arguments":{}}}`)
	// The click is applied (job 2 is next) and job 1 runs; the session
	// takes another write meanwhile.
	eventually(t, 5*time.Second, "the run click is applied", func() bool { return jobsModel(t, a1, "ej").Next == 2 })
	if res := a1.call("ej.seconds.select", map[string]any{"option": "3 s"}); res.IsError {
		t.Fatalf("a call while the job runs: %s", textOf(res))
	}
	if m := jobsModel(t, a1, "ej"); m.Seconds != 3 || len(m.Done) != 0 {
		t.Fatalf("model while the job runs = %+v", m)
	}
	select {
	case got := <-answered:
		t.Fatalf("the job's call answered before it was cancelled: %s", got)
	default:
	}
	resp, err := c.post(nodes[2], `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":77,"reason":"enough"}}`)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled job's call never ended")
	}
	eventually(t, 5*time.Second, "the cancelled job is recorded", func() bool { return len(jobsModel(t, a1, "ej").Done) == 1 })
	if m := jobsModel(t, a1, "ej"); m.Done[0] != (apps.JobRecord{ID: 1, Seconds: 1, Total: 4, Outcome: "cancelled"}) {
		t.Errorf("cancelled job recorded as %+v", m.Done[0])
	}
}

// Draining the node that runs a job hands the session over without the
// job: the call fails saying its result was not applied, and is not
// retried on the new owner (the click that started the job was applied
// once: job 2 is next there, and no job ended).
func TestDrainingTheOwnerOfARunningJobFailsItsCallOnce(t *testing.T) {
	e := newSwarmEnv(t)
	withEndlessJobs(e)
	nodes := e.cluster(3)
	owner := connect(t, nodes[0], connOpts{token: aliceToken})
	if res := owner.call("swarm_start", map[string]any{"app": "endless", "id": "dj"}); res.IsError {
		t.Fatal(textOf(res))
	}
	c := connect(t, nodes[1], connOpts{token: aliceToken})
	eventually(t, 5*time.Second, "node2 lists dj", func() bool { return c.tools()["dj.run.click"] })
	answered := make(chan string, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name = "dj.run.click"
		res, err := c.CallTool(context.Background(), req)
		if err != nil {
			answered <- err.Error()
			return
		}
		answered <- textOf(res)
	}()
	eventually(t, 5*time.Second, "the run click is applied", func() bool { return jobsModel(t, c, "dj").Next == 2 })

	key, _ := mcpswarm.LoadClusterKey(e.keyFile)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin := adminv1.NewAdminServiceClient(dial(t, nodes[0], grpc.WithPerRPCCredentials(mcpswarm.AdminCredentials{Token: mcpswarm.AdminToken(key)})))
	if resp, err := admin.Drain(ctx, &adminv1.DrainRequest{}); err != nil || resp.GetSessionsMoved() != 1 {
		t.Fatalf("drain: moved %d, %v", resp.GetSessionsMoved(), err)
	}
	select {
	case got := <-answered:
		if !strings.Contains(got, "its result was not applied") {
			t.Errorf("the job's call answered %q, want it to say the result was not applied", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job's call never ended")
	}
	eventually(t, 5*time.Second, "dj has a new owner", func() bool {
		o := c.listed()["dj"]
		return o != "" && o != "node1"
	})
	if m := jobsModel(t, c, "dj"); m.Next != 2 || len(m.Done) != 0 {
		t.Errorf("model on the new owner = %+v; want the click applied once and no job ended", m)
	}
}
