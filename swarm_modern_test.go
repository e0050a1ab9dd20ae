package mcpswarm_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm"
)

// modernCall posts a 2026-07-28 tools/call to node n as alice, optionally
// answering an input_required round with state and responses.
func modernCall(t *testing.T, n *mcpswarm.Node, name, state string, responses map[string]any) map[string]any {
	t.Helper()
	params := map[string]any{"name": name, "arguments": map[string]any{}, "_meta": map[string]any{
		mcp.MetaKeyProtocolVersion:    mcp.ProtocolVersion20260728,
		mcp.MetaKeyClientInfo:         map[string]any{"name": "modern", "version": "1"},
		mcp.MetaKeyClientCapabilities: map[string]any{"elicitation": map[string]any{}},
	}}
	if state != "" {
		params["requestState"], params["inputResponses"] = state, responses
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
	req, _ := http.NewRequest(http.MethodPost, "http://"+n.HTTPAddr()+"/mcp", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
	req.Header.Set(mcp.HeaderMethod, "tools/call")
	req.Header.Set(mcp.HeaderName, name)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	resp, err := httpClient(n).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	text := string(raw)
	if i := strings.Index(text, "data: "); i >= 0 { // an SSE answer
		text = strings.TrimSpace(text[i+len("data: "):])
	}
	var v struct {
		Result map[string]any `json:"result"`
	}
	if err := json.Unmarshal([]byte(text), &v); err != nil || v.Result == nil {
		t.Fatalf("modern call %s on %s: %d %s", name, n.HTTPAddr(), resp.StatusCode, raw)
	}
	return v.Result
}

// A 2026-07-28 requestState approved on node1 cannot be replayed on node2:
// spent states are recorded cluster-wide.
func TestModernRequestStateIsSingleUseAcrossNodes(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(2)
	alice := connect(t, nodes[0], connOpts{token: aliceToken})
	if res := alice.call("swarm_start", map[string]any{"app": "login", "id": "askmd"}); res.IsError {
		t.Fatal(textOf(res))
	}
	first := modernCall(t, nodes[0], "askmd.submit.click", "", nil)
	state, _ := first["requestState"].(string)
	if first["resultType"] != "input_required" || state == "" {
		t.Fatalf("the Ask did not answer input_required: %v", first)
	}
	approve := map[string]any{"approve": map[string]any{"action": "accept", "content": map[string]any{"approve": true}}}
	if ok := modernCall(t, nodes[0], "askmd.submit.click", state, approve); ok["isError"] == true {
		t.Fatalf("the approved call was refused: %v", ok)
	}
	eventually(t, 5*time.Second, "node2 has the spent state replicated", func() bool {
		return metricValue(t, nodes[1], "mcpswarm_swarm_spent_request_states") >= 1
	})
	replay := modernCall(t, nodes[1], "askmd.submit.click", state, approve)
	if sc, _ := replay["structuredContent"].(map[string]any); replay["isError"] != true || sc["error"] != "request_state_replayed" {
		t.Fatalf("node2 accepted a state spent on node1: %v", replay)
	}
}

// TestSpentRequestStateOutlivesTheNodeThatRecordedIt is the defect "an
// approval ran again after the node that recorded the spend died": every
// node keeps its own copy of a spent state, so once the recorder (here the
// arbiter, node1, which owns the gated session) is dead and its entries are
// hidden, the survivors still hold it. (A replay of this state cannot show
// it: the gated session died with node1, so the call answers "owner
// unavailable" before any state is checked.)
func TestSpentRequestStateOutlivesTheNodeThatRecordedIt(t *testing.T) {
	e := newSwarmEnv(t)
	// One copy per session, so node1's death hides its session (the
	// visible-sessions gauge says when node3 has seen it die).
	e.tweak = func(c *mcpswarm.Config) { c.SessionReplicas = 0 }
	nodes := e.cluster(3)
	alice := connect(t, nodes[0], connOpts{token: aliceToken})
	if res := alice.call("swarm_start", map[string]any{"app": "login", "id": "askdie"}); res.IsError {
		t.Fatal(textOf(res))
	}
	first := modernCall(t, nodes[0], "askdie.submit.click", "", nil)
	state, _ := first["requestState"].(string)
	if first["resultType"] != "input_required" || state == "" {
		t.Fatalf("the Ask did not answer input_required: %v", first)
	}
	approve := map[string]any{"approve": map[string]any{"action": "accept", "content": map[string]any{"approve": true}}}
	if ok := modernCall(t, nodes[0], "askdie.submit.click", state, approve); ok["isError"] == true {
		t.Fatalf("the approved call was refused: %v", ok)
	}
	// node1's record plus node2's and node3's own copies.
	eventually(t, 5*time.Second, "node3 sees the spent state held by all three nodes", func() bool {
		return metricValue(t, nodes[2], "mcpswarm_swarm_spent_request_states") >= 3
	})
	e.kill("node1")
	eventually(t, 10*time.Second, "node3 hides node1's entries", func() bool {
		return metricValue(t, nodes[2], "mcpswarm_swarm_sessions_visible") == 0
	})
	// The gauge counts visible entries only: what is left is the
	// survivors' own copies, which the next arbiter (node2) decides by.
	if n := metricValue(t, nodes[2], "mcpswarm_swarm_spent_request_states"); n < 2 {
		t.Fatalf("node3 sees %v spent states once node1 is gone, want node2's and node3's own copies", n)
	}
}
