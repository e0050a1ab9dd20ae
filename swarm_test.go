package mcpswarm_test

import (
	"context"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm"
)

// Alice starts a login session on node1, then drives it from node3; node2
// sees who owns it; Bob reaches none of it through any node.
func TestAnyNodeDrivesASessionOwnedElsewhere(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]

	alice1 := connect(t, n1, connOpts{token: aliceToken})
	if res := alice1.call("swarm_start", map[string]any{"app": "login", "id": "lg"}); res.IsError {
		t.Fatalf("swarm_start: %s", textOf(res))
	}
	// Read your writes: the very next request on the same node lists them.
	if !alice1.tools()["lg.submit.click"] {
		t.Fatal("tools/list right after swarm_start does not list the new session's tools")
	}

	alice3 := connect(t, n3, connOpts{token: aliceToken})
	eventually(t, 5*time.Second, "node3 lists lg's derived tools for alice", func() bool {
		return alice3.tools()["lg.submit.click"]
	})
	for _, step := range []struct {
		tool string
		args map[string]any
	}{
		{"lg.username.type_into", map[string]any{"text": "demo"}},
		{"lg.password.type_into", map[string]any{"text": "hunter2"}},
		{"lg.submit.click", nil},
	} {
		if res := alice3.call(step.tool, step.args); res.IsError {
			t.Fatalf("%s through node3: %s", step.tool, textOf(res))
		}
	}
	if got := metricValue(t, n3, `mcpswarm_swarm_forwards_total{outcome="ok"}`); got < 3 {
		t.Fatalf("node3 counted %v successful forwards, want at least the 3 calls", got)
	}
	// The owner made the start and the three writes durable, each in some
	// group commit of its journal.
	records, syncs := metricValue(t, n1, "mcpswarm_journal_records_total"), metricValue(t, n1, "mcpswarm_journal_syncs_total")
	if records < 4 || syncs < 1 || syncs > records {
		t.Fatalf("the owner's journal counts %v records in %v syncs, want at least the start and 3 writes", records, syncs)
	}
	model := textOf(alice1.call("swarm_get_model", map[string]any{"id": "lg"}))
	if !strings.Contains(model, "Signed in as demo") {
		t.Fatalf("model on the owner after driving it from node3: %s", model)
	}

	alice2 := connect(t, n2, connOpts{token: aliceToken})
	eventually(t, 5*time.Second, "node2 shows lg owned by node1", func() bool {
		return alice2.listed()["lg"] == "node1"
	})

	for _, n := range nodes {
		bob := connect(t, n, connOpts{token: bobToken})
		if _, ok := bob.listed()["lg"]; ok {
			t.Fatalf("bob lists alice's session through %s", n.HTTPAddr())
		}
		for name := range bob.tools() {
			if strings.HasPrefix(name, "lg.") {
				t.Fatalf("bob sees alice's tool %s through %s", name, n.HTTPAddr())
			}
		}
		for _, call := range []struct {
			tool string
			args map[string]any
		}{
			{"lg.submit.click", nil},
			{"swarm_stop", map[string]any{"id": "lg"}},
			{"swarm_get_model", map[string]any{"id": "lg"}},
			{"swarm_screenshot", map[string]any{"id": "lg"}},
		} {
			req := mcp.CallToolRequest{}
			req.Params.Name, req.Params.Arguments = call.tool, call.args
			res, err := bob.CallTool(context.Background(), req)
			if err == nil && !res.IsError {
				t.Fatalf("bob's %s on alice's session succeeded through %s: %s", call.tool, n.HTTPAddr(), textOf(res))
			}
		}
		rr := mcp.ReadResourceRequest{}
		rr.Params.URI = "swarm://session/lg/widgets"
		if res, err := bob.ReadResource(context.Background(), rr); err == nil {
			t.Fatalf("bob read alice's widgets through %s: %v", n.HTTPAddr(), res.Contents)
		}
	}
	// Alice's session survived Bob's attempts.
	if !strings.Contains(textOf(alice2.call("swarm_get_model", map[string]any{"id": "lg"})), "Signed in as demo") {
		t.Fatal("alice's session changed after bob's attempts")
	}
}

// metricValue reads one sample from node n's /metrics (0 when absent).
func metricValue(t *testing.T, n *mcpswarm.Node, series string) float64 {
	t.Helper()
	resp, err := httpClient(n).Get("http://" + n.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", series, err)
			}
			return f
		}
	}
	return 0
}
