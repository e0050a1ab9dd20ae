package mcp

import (
	"context"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

func TestStaticAndDerivedTools(t *testing.T) {
	e := newEnv(t, nil)
	c, _ := e.connect(t, clientOpts{})

	names := toolNames(t, c)
	for _, d := range staticDefs {
		if !names[d.name] && d.ui != uiAppOnly {
			t.Errorf("static tool %s not listed", d.name)
		}
	}
	res := callTool(t, c, "swarm_apps", nil)
	if res.IsError || !strings.Contains(text(res), `"login"`) {
		t.Fatalf("swarm_apps: %v %s", res.IsError, text(res))
	}
	res = callTool(t, c, "swarm_start", map[string]any{"app": "login", "id": "lg"})
	if res.IsError {
		t.Fatalf("swarm_start: %s", text(res))
	}
	names = toolNames(t, c)
	for _, want := range []string{"lg.username.type_into", "lg.submit.click", "lg.discover_tools"} {
		if !names[want] {
			t.Errorf("derived tool %s not listed (have %v)", want, names)
		}
	}
	callTool(t, c, "lg.username.type_into", map[string]any{"text": "demo"})
	callTool(t, c, "lg.password.type_into", map[string]any{"text": "hunter2"})
	res = callTool(t, c, "lg.submit.click", nil)
	if res.IsError {
		t.Fatalf("submit: %s", text(res))
	}
	shot := callTool(t, c, "swarm_screenshot", map[string]any{"id": "lg"})
	if !strings.Contains(text(shot), "Signed in as demo") {
		t.Errorf("screenshot after login:\n%s", text(shot))
	}
	list := callTool(t, c, "swarm_list", nil)
	if !strings.Contains(text(list), `"id":"lg"`) || !strings.Contains(text(list), `"owner":"n1"`) {
		t.Errorf("swarm_list: %s", text(list))
	}
	model := callTool(t, c, "swarm_get_model", map[string]any{"id": "lg"})
	if model.IsError || !strings.Contains(text(model), "Signed in") {
		t.Errorf("swarm_get_model: %s", text(model))
	}
	key := callTool(t, c, "swarm_send_key", map[string]any{"id": "lg", "key": "enter"})
	if key.IsError {
		t.Errorf("swarm_send_key: %s", text(key))
	}
	mem := callTool(t, c, "swarm_members", nil)
	if !strings.Contains(text(mem), `"name":"n1"`) {
		t.Errorf("swarm_members: %s", text(mem))
	}
	if r := callTool(t, c, "swarm_stop", map[string]any{"id": "lg"}); r.IsError {
		t.Fatalf("swarm_stop: %s", text(r))
	}
	// A derived name whose session is gone: a tool error naming the session
	// and pointing to swarm_list, not -32601.
	stale := callTool(t, c, "lg.submit.click", nil)
	if !stale.IsError || !strings.Contains(text(stale), `"lg"`) || !strings.Contains(text(stale), "swarm_list") {
		t.Errorf("stale call: %v %s", stale.IsError, text(stale))
	}
	// An unknown non-derived name is a JSON-RPC error.
	req := mcp.CallToolRequest{}
	req.Params.Name = "no_such_tool"
	if _, err := c.CallTool(context.Background(), req); err == nil {
		t.Error("unknown tool: want an error")
	}
}

func TestStartIDs(t *testing.T) {
	e := newEnv(t, nil)
	c, _ := e.connect(t, clientOpts{})
	for _, id := range []string{"swarm", "agent", "Ab", "a_b", "a.b", "abcdefgh", "1a"} {
		r := callTool(t, c, "swarm_start", map[string]any{"app": "counter", "id": id})
		if !r.IsError {
			t.Errorf("id %q accepted", id)
		}
	}
	r := callTool(t, c, "swarm_start", map[string]any{"app": "counter"})
	if r.IsError {
		t.Fatalf("generated id: %s", text(r))
	}
	id, _ := r.StructuredContent.(map[string]any)["id"].(string)
	if !startIDPattern.MatchString(id) || reservedIDs[id] {
		t.Errorf("generated id %q", id)
	}
	if r := callTool(t, c, "swarm_start", map[string]any{"app": "nope", "id": "x"}); !r.IsError {
		t.Error("unknown app accepted")
	}
}

func TestOwnershipIsolation(t *testing.T) {
	e := newEnv(t, nil)
	a, _ := e.connect(t, clientOpts{})
	b, _ := e.connect(t, clientOpts{})
	if r := callTool(t, a, "swarm_start", map[string]any{"app": "counter", "id": "ca"}); r.IsError {
		t.Fatal(text(r))
	}
	for n := range toolNames(t, b) {
		if strings.HasPrefix(n, "ca.") {
			t.Errorf("b lists a's tool %s", n)
		}
	}
	if r := callTool(t, b, "ca.inc.click", nil); !r.IsError {
		t.Error("b called a's tool")
	}
	for _, name := range []string{"swarm_stop", "swarm_screenshot", "swarm_get_model"} {
		if r := callTool(t, b, name, map[string]any{"id": "ca"}); !r.IsError {
			t.Errorf("b ran %s on a's session", name)
		}
	}
	if r := callTool(t, b, "swarm_list", nil); strings.Contains(text(r), "ca") {
		t.Errorf("b sees a's session: %s", text(r))
	}
	rr := mcp.ReadResourceRequest{}
	rr.Params.URI = SessionURI("ca", "widgets")
	if _, err := b.ReadResource(context.Background(), rr); err == nil {
		t.Error("b read a's resource")
	}
	if _, err := a.ReadResource(context.Background(), rr); err != nil {
		t.Errorf("a cannot read its own resource: %v", err)
	}
	// a's session still runs.
	if r := callTool(t, a, "ca.inc.click", nil); r.IsError {
		t.Errorf("a's call: %s", text(r))
	}
}
