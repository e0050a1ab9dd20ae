package mcpswarm_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/session"
	"github.com/mcpswarm/mcpswarm/session/apps"
)

// slowApp has a button that reports progress three times and one that
// waits until its call is cancelled, telling the test what it saw.
type slowApp struct{ outcome chan string }

func (slowApp) Init() (session.Model, error) { return map[string]any{"runs": 0}, nil }

func (slowApp) Update(m session.Model, _ session.Msg) (session.Model, error) { return m, nil }

func (a slowApp) UpdateContext(ctx context.Context, m session.Model, msg session.Msg) (session.Model, error) {
	switch msg {
	case "steps":
		report := session.ProgressFrom(ctx)
		for i := 1; i <= 3; i++ {
			report(float64(i), 3, "step")
		}
		return m, nil
	case "wait":
		a.outcome <- "started"
		select {
		case <-ctx.Done():
			a.outcome <- "cancelled"
			return m, ctx.Err()
		case <-time.After(4 * time.Second):
			a.outcome <- "not cancelled"
			return m, nil
		}
	case "hang":
		// Longer than the owner's 5 s call timeout; ends when the call's
		// context does.
		select {
		case <-ctx.Done():
		case <-time.After(15 * time.Second):
		}
		return m, nil
	}
	return m, nil
}

func (slowApp) View(session.Model) session.Node {
	return session.Row{Items: []session.Node{
		session.Button{ID: "steps", Label: "Steps", OnClick: "steps"},
		session.Button{ID: "wait", Label: "Wait", OnClick: "wait"},
		session.Button{ID: "hang", Label: "Hang", OnClick: "hang"},
	}}
}

func withSlowApp(e *swarmEnv) chan string {
	outcome := make(chan string, 4)
	e.apps = func(r *session.Registry) error {
		return r.Register("slow", "reports progress; waits for cancellation", func() session.App { return slowApp{outcome} })
	}
	e.startable = append(apps.DemoNames(), "slow")
	return outcome
}

// Progress reported by a session on node1 reaches a client of node2 whose
// call was forwarded, before the result, every time.
func TestForwardedCallStreamsProgressBack(t *testing.T) {
	e := newSwarmEnv(t)
	withSlowApp(e)
	nodes := e.cluster(2)
	a1 := connect(t, nodes[0], connOpts{token: aliceToken})
	if res := a1.call("swarm_start", map[string]any{"app": "slow", "id": "sl"}); res.IsError {
		t.Fatal(textOf(res))
	}
	a2 := connect(t, nodes[1], connOpts{token: aliceToken})
	eventually(t, 5*time.Second, "node2 lists sl", func() bool { return a2.tools()["sl.steps.click"] })
	var progress atomic.Int32
	a2.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" {
			progress.Add(1)
		}
	})
	const calls = 20
	for i := range calls {
		req := mcp.CallToolRequest{}
		req.Params.Name = "sl.steps.click"
		req.Params.Meta = &mcp.Meta{ProgressToken: mcp.ProgressToken(i)}
		before := progress.Load()
		res, err := a2.CallTool(context.Background(), req)
		if err != nil || res.IsError {
			t.Fatalf("call %d: %v %v", i, err, res)
		}
		if got := progress.Load() - before; got != 3 {
			t.Fatalf("call %d: %d progress notifications before the result, want 3", i, got)
		}
	}
}

// A call runs on node2 (forwarded to the owner, node1) while the client's
// notifications/cancelled reaches node3, as a load balancer may send it:
// node3 hands it to every node, node2 cancels the call, and the cancellation
// reaches the session on node1 through the forwarded call's context. The
// call's own POST stays open throughout, so nothing but the notification
// can cancel it.
func TestCancellationReachesTheOwnerFromAnyNode(t *testing.T) {
	e := newSwarmEnv(t)
	outcome := withSlowApp(e)
	nodes := e.cluster(3)
	c := connect(t, nodes[1], connOpts{token: aliceToken})
	// The session is node1's; the client's connection is node2's.
	a1 := connect(t, nodes[0], connOpts{token: aliceToken})
	if res := a1.call("swarm_start", map[string]any{"app": "slow", "id": "cy"}); res.IsError {
		t.Fatal(textOf(res))
	}
	eventually(t, 5*time.Second, "node2 lists cy", func() bool { return c.tools()["cy.wait.click"] })

	answered := c.callInBackground(nodes[1], `{"jsonrpc":"2.0","id":4242,"method":"tools/call","params":{"name":"cy.wait.click","arguments":{}}}`)
	if got := <-outcome; got != "started" {
		t.Fatalf("the session reported %q before starting", got)
	}
	resp, err := c.post(nodes[2], `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4242,"reason":"user stopped it"}}`)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case got := <-outcome:
		if got != "cancelled" {
			t.Fatalf("the session on the owner saw %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the session never finished")
	}
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call's POST never ended")
	}
}

// A forwarded write whose owner does not answer in time tells the client
// that the update may still have applied, rather than hanging or claiming
// it failed.
func TestForwardedTimeoutSaysTheUpdateMayHaveApplied(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the 5 s call timeout")
	}
	e := newSwarmEnv(t)
	withSlowApp(e)
	nodes := e.cluster(2)
	a1 := connect(t, nodes[0], connOpts{token: aliceToken})
	if res := a1.call("swarm_start", map[string]any{"app": "slow", "id": "hg"}); res.IsError {
		t.Fatal(textOf(res))
	}
	a2 := connect(t, nodes[1], connOpts{token: aliceToken})
	eventually(t, 5*time.Second, "node2 lists hg", func() bool { return a2.tools()["hg.hang.click"] })
	began := time.Now()
	res := a2.call("hg.hang.click", nil)
	if !res.IsError || !strings.Contains(textOf(res), "may still have applied") {
		t.Fatalf("a forwarded call past the owner's timeout answered %q", textOf(res))
	}
	if took := time.Since(began); took > 8*time.Second {
		t.Fatalf("the timeout took %v to reach the client", took)
	}
}

// The owner dies while it runs a forwarded call: the client hears at once
// that the owner is unavailable and that the update may still have applied.
func TestOwnerDyingMidCallAnswersPromptly(t *testing.T) {
	e := newSwarmEnv(t)
	outcome := withSlowApp(e)
	nodes := e.cluster(2)
	a1 := connect(t, nodes[0], connOpts{token: aliceToken})
	if res := a1.call("swarm_start", map[string]any{"app": "slow", "id": "md"}); res.IsError {
		t.Fatal(textOf(res))
	}
	a2 := connect(t, nodes[1], connOpts{token: aliceToken})
	eventually(t, 5*time.Second, "node2 lists md", func() bool { return a2.tools()["md.wait.click"] })
	answer := make(chan string, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name = "md.wait.click"
		res, err := a2.CallTool(context.Background(), req)
		if err != nil {
			answer <- err.Error()
			return
		}
		answer <- textOf(res)
	}()
	if got := <-outcome; got != "started" {
		t.Fatalf("the session reported %q", got)
	}
	killed := time.Now()
	e.kill("node1")
	select {
	case got := <-answer:
		if !strings.Contains(got, "owner unavailable") || !strings.Contains(got, "may still have applied") {
			t.Fatalf("the call answered %q", got)
		}
		if took := time.Since(killed); took > 2*time.Second {
			t.Fatalf("the answer took %v after the owner died", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call hung after its owner died")
	}
}
