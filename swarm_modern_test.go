package mcpswarm_test

import (
	"encoding/json"
	"fmt"
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
	params := map[string]any{"name": name, "arguments": map[string]any{}}
	if state != "" {
		params["requestState"], params["inputResponses"] = state, responses
	}
	res, rpcErr := modernRequest(t, n, "tools/call", name, params, map[string]any{"elicitation": map[string]any{}})
	if res == nil {
		t.Fatalf("modern call %s on %s: %v", name, n.HTTPAddr(), rpcErr)
	}
	return res
}

// modernRequest posts a 2026-07-28 request to node n as alice, with
// Mcp-Name name and the client capabilities caps in its _meta, and returns
// its result (nil on an error answer) and its error object.
func modernRequest(t *testing.T, n *mcpswarm.Node, method, name string, params, caps map[string]any) (result, rpcErr map[string]any) {
	t.Helper()
	params["_meta"] = map[string]any{
		mcp.MetaKeyProtocolVersion:    mcp.ProtocolVersion20260728,
		mcp.MetaKeyClientInfo:         map[string]any{"name": "modern", "version": "1"},
		mcp.MetaKeyClientCapabilities: caps,
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, "http://"+n.HTTPAddr()+"/mcp", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
	req.Header.Set(mcp.HeaderMethod, method)
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
		text = strings.TrimSpace(strings.SplitN(text[i+len("data: "):], "\n", 2)[0])
	}
	var v struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("%s on %s: %d %s", method, n.HTTPAddr(), resp.StatusCode, raw)
	}
	return v.Result, v.Error
}

// A 2026-07-28 requestState approved on node1 cannot be replayed on node2:
// spent states are recorded by their holders, which every node asks.
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
	replay := modernCall(t, nodes[1], "askmd.submit.click", state, approve)
	if sc, _ := replay["structuredContent"].(map[string]any); replay["isError"] != true || sc["error"] != "request_state_replayed" {
		t.Fatalf("node2 accepted a state spent on node1: %v", replay)
	}
}

// TestSpentRequestStateOutlivesTheNodeThatRecordedIt is the defect "an
// approval ran again after the node that recorded the spend died", with
// the spent state kept by two holders only (of three nodes, never every
// node): node1, which owns the gated session and took the approval, dies;
// once the session has failed over to its standby, the same approval is
// refused as replayed on both survivors, never run again.
func TestSpentRequestStateOutlivesTheNodeThatRecordedIt(t *testing.T) {
	e := newSwarmEnv(t)
	nodes := e.cluster(3)
	alice := connect(t, nodes[0], connOpts{token: aliceToken})
	if res := alice.call("swarm_start", map[string]any{"app": "login", "id": "askdie"}); res.IsError {
		t.Fatal(textOf(res))
	}
	eventually(t, 10*time.Second, "askdie has an in-sync standby", func() bool { return standbyOf(t, nodes[0], "askdie") != "" })
	first := modernCall(t, nodes[0], "askdie.submit.click", "", nil)
	state, _ := first["requestState"].(string)
	if first["resultType"] != "input_required" || state == "" {
		t.Fatalf("the Ask did not answer input_required: %v", first)
	}
	approve := map[string]any{"approve": map[string]any{"action": "accept", "content": map[string]any{"approve": true}}}
	if ok := modernCall(t, nodes[0], "askdie.submit.click", state, approve); ok["isError"] == true {
		t.Fatalf("the approved call was refused: %v", ok)
	}
	held := func() (sum float64) {
		for _, n := range nodes {
			sum += metricValue(t, n, "mcpswarm_swarm_spent_request_states")
		}
		return sum
	}
	if got := held(); got != 2 {
		t.Fatalf("the spent state is held %v times across three nodes, want twice (its two holders)", got)
	}
	e.kill("node1")
	for _, n := range nodes[1:] {
		eventually(t, 20*time.Second, "a survivor refuses the approval as replayed", func() bool {
			r := modernCall(t, n, "askdie.submit.click", state, approve)
			sc, _ := r["structuredContent"].(map[string]any)
			if text := fmt.Sprint(r["content"]); strings.Contains(text, "click applied") || strings.Contains(text, "no longer offers") || r["isError"] != true {
				t.Fatalf("the approval ran again after node1 died: %v", r)
			}
			// Until the standby is promoted the call answers that the
			// session's owner is unavailable, before any state is checked.
			return sc["error"] == "request_state_replayed"
		})
	}
}
