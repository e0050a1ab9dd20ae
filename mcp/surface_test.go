package mcp

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/session"
)

func TestKeepaliveOnGETStream(t *testing.T) {
	e := newEnv(t, func(c *Config, _ *session.Registry) { c.Keepalive = 20 * time.Millisecond })
	c, _ := e.connect(t, clientOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/mcp", nil)
	req.Header.Set(headerSessionID, c.GetSessionId())
	req.Header.Set(headerProtocolVersion, mcp.ProtocolVersion20251125)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if !e.srv.HoldsStream(c.GetSessionId()) {
		t.Error("the node does not record the GET stream it holds")
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"method":"ping"`) {
			return
		}
	}
	t.Fatalf("no keepalive ping on the stream: %v", sc.Err())
}

func TestRateLimitAndSensitiveGuard(t *testing.T) {
	e := newEnv(t, func(c *Config, _ *session.Registry) {
		c.RateLimiter = authz.NewRateLimiter(authz.Limits{CallsPerSecond: 0.001, CallBurst: 2})
	})
	c, _ := e.connect(t, clientOpts{})
	callTool(t, c, "swarm_apps", nil)
	callTool(t, c, "swarm_apps", nil)
	r := callTool(t, c, "swarm_apps", nil)
	if data, _ := r.StructuredContent.(map[string]any); !r.IsError || data["error"] != "rate_limited" {
		t.Errorf("third call: %v %s", r.IsError, text(r))
	}

	// An embedder with no tool authorizer: sensitive tools never run.
	open := newEnv(t, func(c *Config, _ *session.Registry) { c.Guard = authz.Guard{} })
	oc, _ := open.connect(t, clientOpts{})
	for _, name := range []string{"swarm_start", "swarm_stop", "swarm_send_key", "swarm_get_model"} {
		r := callTool(t, oc, name, map[string]any{"app": "counter", "id": "x", "key": "a"})
		if data, _ := r.StructuredContent.(map[string]any); !r.IsError || data["error"] != authz.ErrSensitiveUnguarded.Error() {
			t.Errorf("%s without an authorizer: %v %s", name, r.IsError, text(r))
		}
	}
	if r := callTool(t, oc, "swarm_apps", nil); r.IsError {
		t.Errorf("read tool without an authorizer: %s", text(r))
	}
	want := map[string]bool{"swarm_start": true, "swarm_stop": true, "swarm_send_key": true, "swarm_get_model": true}
	got := open.srv.SensitiveStaticTools()
	if len(got) != len(want) {
		t.Errorf("SensitiveStaticTools %v", got)
	}
	for _, n := range got {
		if !want[n] {
			t.Errorf("%s reported sensitive", n)
		}
	}
}

func TestPromptsAndCompletion(t *testing.T) {
	e := newEnv(t, nil)
	c, _ := e.connect(t, clientOpts{})
	ctx := context.Background()
	callTool(t, c, "swarm_start", map[string]any{"app": "counter", "id": "cpa"})
	callTool(t, c, "swarm_start", map[string]any{"app": "login", "id": "cpb"})
	list, err := c.ListPrompts(ctx, mcp.ListPromptsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, p := range list.Prompts {
		names[p.Name] = true
	}
	for _, app := range []string{"counter", "login", "todo", "table", "files", "player", "wizard"} {
		if !names[app] {
			t.Errorf("no prompt for demo app %s", app)
		}
	}
	gp := mcp.GetPromptRequest{}
	gp.Params.Name = "login"
	gp.Params.Arguments = map[string]string{"id": "lg1"}
	res, err := c.GetPrompt(ctx, gp)
	if err != nil || !strings.Contains(res.Messages[0].Content.(mcp.TextContent).Text, "lg1.username.type_into") {
		t.Errorf("get prompt: %v %v", res, err)
	}
	complete := func(ref any, arg, value string, cargs map[string]string) []string {
		t.Helper()
		req := mcp.CompleteRequest{}
		req.Params.Ref = ref
		req.Params.Argument.Name = arg
		req.Params.Argument.Value = value
		if cargs != nil {
			req.Params.Context.Arguments = cargs
		}
		r, err := c.Complete(ctx, req)
		if err != nil {
			t.Fatalf("complete %s: %v", arg, err)
		}
		return r.Completion.Values
	}
	if v := complete(mcp.PromptReference{Type: "ref/prompt", Name: "login"}, "id", "cp", nil); strings.Join(v, ",") != "cpa,cpb" {
		t.Errorf("session ids: %v", v)
	}
	if v := complete(mcp.PromptReference{Type: "ref/prompt", Name: "drive_app"}, "app", "lo", nil); strings.Join(v, ",") != "login" {
		t.Errorf("apps: %v", v)
	}
	tmpl := mcp.ResourceReference{Type: "ref/resource", URI: uriSession + "{id}/model/{key}"}
	if v := complete(tmpl, "key", "", map[string]string{"id": "cpa"}); strings.Join(v, ",") != "count" {
		t.Errorf("model keys: %v", v)
	}
	// Another connection completes none of these sessions.
	o, _ := e.connect(t, clientOpts{})
	req := mcp.CompleteRequest{}
	req.Params.Ref = mcp.PromptReference{Type: "ref/prompt", Name: "login"}
	req.Params.Argument.Name = "id"
	if r, err := o.Complete(ctx, req); err != nil || len(r.Completion.Values) != 0 {
		t.Errorf("other connection completes %v %v", r, err)
	}
}

func TestShutdownDeniesParkedCalls(t *testing.T) {
	e := newEnv(t, askClicks(t, time.Minute))
	asked := make(chan struct{})
	c, _ := e.connect(t, clientOpts{elicit: elicitFunc(func(ctx context.Context, _ mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		close(asked)
		<-ctx.Done()
		return nil, ctx.Err()
	})})
	callTool(t, c, "swarm_start", map[string]any{"app": "counter", "id": "sd"})
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name = "sd.inc.click"
		r, _ := c.CallTool(context.Background(), req)
		done <- r
	}()
	<-asked
	e.srv.parked.closeAll(outcomeShutdown)
	select {
	case r := <-done:
		if r == nil || !r.IsError || !strings.Contains(text(r), "shutting down") {
			t.Errorf("parked call after shutdown: %v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("parked call not closed")
	}
}

func TestMetricsAreRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, func(c *Config, _ *session.Registry) { c.Registerer = reg })
	c, _ := e.connect(t, clientOpts{})
	callTool(t, c, "swarm_apps", nil)
	e.rawPost(t, `{"jsonrpc":`, map[string]string{headerSessionID: c.GetSessionId(), headerProtocolVersion: mcp.ProtocolVersion20251125})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			got[f.GetName()] += m.GetCounter().GetValue()
		}
	}
	for _, name := range []string{"mcpswarm_mcp_tool_calls_total", "mcpswarm_mcp_rejected_requests_total"} {
		if got[name] < 1 {
			t.Errorf("%s = %v", name, got[name])
		}
	}
	if _, err := New(Config{Node: "n", Backend: e.srv.cfg.Backend, SessionKey: testKey, Registerer: reg, Cluster: &testCluster{}}); err == nil {
		t.Error("registering the metrics twice succeeded")
	}
}
