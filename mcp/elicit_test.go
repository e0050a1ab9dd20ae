package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/session"
)

// askClicks asks before every click and allows everything else.
func askClicks(t testing.TB, timeout time.Duration) func(*Config, *session.Registry) {
	return func(c *Config, _ *session.Registry) {
		tools := authz.AuthorizerFunc(func(_ context.Context, tool string, _ map[string]any, _ authz.Context) authz.Decision {
			if strings.HasSuffix(tool, ".click") {
				return authz.Ask("Run "+tool+"?", "test:ask")
			}
			return authz.Allow("test:allow")
		})
		g := c.Guard
		if g.Authenticator == nil {
			var err error
			if g, err = authz.NewGuard(tools, authz.DevGuard().Reads); err != nil {
				t.Fatal(err)
			}
		}
		g.Tools = tools
		c.Guard = g
		if timeout > 0 {
			c.ElicitationTimeout = timeout
		}
	}
}

type elicitFunc func(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error)

func (f elicitFunc) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return f(ctx, req)
}

func answer(action mcp.ElicitationResponseAction, approve bool) elicitFunc {
	return func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: action, Content: map[string]any{"approve": approve}}}, nil
	}
}

func count(t *testing.T, e *testEnv, id string) string {
	t.Helper()
	m, err := e.mgr.Model(id)
	if err != nil {
		t.Fatal(err)
	}
	return string(m)
}

func TestElicitation(t *testing.T) {
	e := newEnv(t, askClicks(t, 300*time.Millisecond))
	cases := []struct {
		name    string
		handler elicitFunc
		runs    bool
		detail  string
	}{
		{"approve", answer(mcp.ElicitationResponseActionAccept, true), true, ""},
		{"accept without approval", answer(mcp.ElicitationResponseActionAccept, false), false, "declined"},
		{"decline", answer(mcp.ElicitationResponseActionDecline, false), false, "declined"},
		{"cancel", answer(mcp.ElicitationResponseActionCancel, false), false, "cancelled"},
		{"error", func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
			return nil, fmt.Errorf("no user")
		}, false, "failed"},
		{"timeout", func(ctx context.Context, _ mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, false, "timed out"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var asked atomic.Int32
			h := func(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
				asked.Add(1)
				if !strings.Contains(req.Params.Message, ".inc.click") {
					t.Errorf("prompt %q", req.Params.Message)
				}
				return tc.handler(ctx, req)
			}
			c, _ := e.connect(t, clientOpts{elicit: elicitFunc(h)})
			id := fmt.Sprintf("c%d", i)
			if r := callTool(t, c, "swarm_start", map[string]any{"app": "counter", "id": id}); r.IsError {
				t.Fatal(text(r))
			}
			// Only Deny hides: an Ask tool is listed, marked as needing
			// approval, so clients that call only listed tools reach it.
			assertAskListed(t, c, id+".inc.click")
			r := callTool(t, c, id+".inc.click", nil)
			if asked.Load() != 1 {
				t.Errorf("asked %d times", asked.Load())
			}
			ran := strings.Contains(count(t, e, id), `"count":1`)
			if ran != tc.runs || r.IsError == tc.runs {
				t.Fatalf("ran=%v isError=%v: %s", ran, r.IsError, text(r))
			}
			if !tc.runs {
				data, _ := r.StructuredContent.(map[string]any)
				if data["error"] != authz.ErrorAuthorizationRequired || !strings.Contains(fmt.Sprint(data["detail"]), tc.detail) {
					t.Errorf("denial data %v", data)
				}
			}
		})
	}
	if n := e.srv.parked.pending(); n != 0 {
		t.Errorf("%d calls still parked", n)
	}
}

func TestAskWithoutElicitationIsAuthorizationRequired(t *testing.T) {
	e := newEnv(t, askClicks(t, 0))
	c, _ := e.connect(t, clientOpts{})
	callTool(t, c, "swarm_start", map[string]any{"app": "counter", "id": "nc"})
	r := callTool(t, c, "nc.inc.click", nil)
	data, _ := r.StructuredContent.(map[string]any)
	if !r.IsError || data["error"] != "authorization_required" || data["decision"] != "ask" || data["tool"] != "nc.inc.click" {
		t.Fatalf("%v %v", r.IsError, data)
	}
	if strings.Contains(count(t, e, "nc"), `"count":1`) {
		t.Error("the call ran")
	}
}

func TestElicitationAnswerFromAnotherConnectionIsIgnored(t *testing.T) {
	e := newEnv(t, askClicks(t, 5*time.Second))
	asked := make(chan struct{})
	release := make(chan struct{})
	a, _ := e.connect(t, clientOpts{elicit: elicitFunc(func(ctx context.Context, _ mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		close(asked)
		<-release
		return answer(mcp.ElicitationResponseActionDecline, false)(ctx, mcp.ElicitationRequest{})
	})})
	b, _ := e.connect(t, clientOpts{})
	callTool(t, a, "swarm_start", map[string]any{"app": "counter", "id": "wa"})
	var wg sync.WaitGroup
	var res *mcp.CallToolResult
	wg.Add(1)
	go func() {
		defer wg.Done()
		req := mcp.CallToolRequest{}
		req.Params.Name = "wa.inc.click"
		res, _ = a.CallTool(context.Background(), req)
	}()
	<-asked
	// b answers every plausible elicitation id with an approval.
	h := map[string]string{headerSessionID: b.GetSessionId(), headerProtocolVersion: mcp.ProtocolVersion20251125}
	for id := 0; id < 20; id++ {
		e.rawPost(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"action":"accept","content":{"approve":true}}}`, id), h)
	}
	close(release)
	wg.Wait()
	if res == nil || !res.IsError || strings.Contains(count(t, e, "wa"), `"count":1`) {
		t.Fatalf("b's approval was taken: %v", res)
	}
}

func TestParkedClosesExactlyOnce(t *testing.T) {
	for i := 0; i < 100; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		p := &parked{done: make(chan struct{}), cancel: cancel}
		var wins atomic.Int32
		var wg sync.WaitGroup
		for _, o := range []outcome{outcomeApproved, outcomeDeclined, outcomeTimeout, outcomeCancelled, outcomeShutdown} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if p.close(o) {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 || p.closes.Load() != 5 || ctx.Err() == nil || p.result == outcomePending {
			t.Fatalf("wins=%d closes=%d result=%v", wins.Load(), p.closes.Load(), p.result)
		}
	}
}

// modernCall posts a 2026-07-28 tools/call by hand.
func (e *testEnv) modernCall(t *testing.T, token, name string, args map[string]any, state string, responses map[string]any) (int, map[string]any) {
	t.Helper()
	params := map[string]any{"name": name, "arguments": args, "_meta": map[string]any{
		mcp.MetaKeyProtocolVersion:    mcp.ProtocolVersion20260728,
		mcp.MetaKeyClientInfo:         map[string]any{"name": "raw", "version": "1"},
		mcp.MetaKeyClientCapabilities: map[string]any{"elicitation": map[string]any{}},
	}}
	if state != "" {
		params["requestState"] = state
		params["inputResponses"] = responses
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
	h := map[string]string{mcp.HeaderProtocolVersion: mcp.ProtocolVersion20260728, mcp.HeaderMethod: "tools/call", mcp.HeaderName: name}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	status, resp := e.rawPost(t, string(body), h)
	var v struct {
		Result map[string]any `json:"result"`
	}
	if err := json.Unmarshal([]byte(resp), &v); err != nil || v.Result == nil {
		t.Fatalf("modern call %s: %d %s", name, status, resp)
	}
	return status, v.Result
}

func TestModernEra(t *testing.T) {
	e := newEnv(t, func(c *Config, r *session.Registry) {
		c.Guard = tokenGuard(t)
		askClicks(t, 0)(c, r)
	})
	// Anonymous (no authentication configured): read tools work,
	// ownership needs authentication.
	open := newEnv(t, nil)
	anon, _ := open.connect(t, clientOpts{modern: true})
	if r := callTool(t, anon, "swarm_apps", nil); r.IsError {
		t.Fatalf("anonymous swarm_apps: %s", text(r))
	}
	if r := callTool(t, anon, "swarm_start", map[string]any{"app": "counter", "id": "an"}); !r.IsError || !strings.Contains(text(r), "ownership needs authentication") {
		t.Fatalf("anonymous swarm_start: %s", text(r))
	}
	// Authenticated: alice owns sessions; her derived tools are listed.
	alice, _ := e.connect(t, clientOpts{modern: true, headers: bearer("alice-token"),
		elicit: answer(mcp.ElicitationResponseActionAccept, true)})
	if r := callTool(t, alice, "swarm_start", map[string]any{"app": "counter", "id": "mo"}); r.IsError {
		t.Fatal(text(r))
	}
	if !toolNames(t, alice)["mo.dec.click"] && !toolNames(t, alice)["mo.discover_tools"] {
		t.Error("alice's derived tools are not listed")
	}
	carol, _ := e.connect(t, clientOpts{modern: true, headers: bearer("carol-token")})
	for n := range toolNames(t, carol) {
		if strings.HasPrefix(n, "mo.") {
			t.Errorf("carol sees %s", n)
		}
	}
	// An Ask goes through input_required; the client approves and it runs.
	if r := callTool(t, alice, "mo.inc.click", nil); r.IsError {
		t.Fatalf("approved modern call: %s", text(r))
	}
	if !strings.Contains(count(t, e, "mo"), `"count":1`) {
		t.Fatal("approved call did not run")
	}

	// By hand: the first round answers input_required with a sealed state.
	_, first := e.modernCall(t, "alice-token", "mo.inc.click", map[string]any{}, "", nil)
	state, _ := first["requestState"].(string)
	if first["resultType"] != "input_required" || state == "" {
		t.Fatalf("first round: %v", first)
	}
	approve := map[string]any{"approve": map[string]any{"action": "accept", "content": map[string]any{"approve": true}}}
	refused := func(res map[string]any, code string) {
		t.Helper()
		sc, _ := res["structuredContent"].(map[string]any)
		if res["isError"] != true || sc["error"] != code {
			t.Errorf("want %s, got %v", code, res)
		}
	}
	_, tampered := e.modernCall(t, "alice-token", "mo.inc.click", map[string]any{}, state[:len(state)-3]+"AAA", approve)
	refused(tampered, "invalid_request_state")
	_, stolen := e.modernCall(t, "carol-token", "mo.inc.click", map[string]any{}, state, approve)
	if stolen["isError"] != true {
		t.Errorf("carol used alice's state: %v", stolen)
	}
	_, otherArgs := e.modernCall(t, "alice-token", "mo.inc.click", map[string]any{"x": 1}, state, approve)
	refused(otherArgs, "invalid_request_state")
	_, ok := e.modernCall(t, "alice-token", "mo.inc.click", map[string]any{}, state, approve)
	if ok["isError"] == true {
		t.Fatalf("valid retry refused: %v", ok)
	}
	_, replay := e.modernCall(t, "alice-token", "mo.inc.click", map[string]any{}, state, approve)
	refused(replay, "request_state_replayed")
	if !strings.Contains(count(t, e, "mo"), `"count":2`) {
		t.Errorf("model after one approved retry: %s", count(t, e, "mo"))
	}
	_, first2 := e.modernCall(t, "alice-token", "mo.inc.click", map[string]any{}, "", nil)
	decline := map[string]any{"approve": map[string]any{"action": "decline"}}
	_, declined := e.modernCall(t, "alice-token", "mo.inc.click", map[string]any{}, first2["requestState"].(string), decline)
	refused(declined, "authorization_required")
}

func TestModernAnonymousInDevOwnsAsAnonymous(t *testing.T) {
	e := newEnv(t, func(c *Config, _ *session.Registry) { c.Dev = true })
	c, _ := e.connect(t, clientOpts{modern: true})
	if r := callTool(t, c, "swarm_start", map[string]any{"app": "counter", "id": "dv"}); r.IsError {
		t.Fatal(text(r))
	}
	if info, _ := e.srv.cfg.Backend.Lookup("dv"); info.Principal != AnonymousSubject {
		t.Errorf("owner %q", info.Principal)
	}
	if !toolNames(t, c)["dv.inc.click"] {
		t.Error("dev anonymous does not see its tools")
	}
}

func TestModernListenStreams(t *testing.T) {
	e := newEnv(t, func(c *Config, _ *session.Registry) { c.Guard = tokenGuard(t) })
	alice, an := e.connect(t, clientOpts{modern: true, headers: bearer("alice-token")})
	carol, cn := e.connect(t, clientOpts{modern: true, headers: bearer("carol-token")})
	if r := callTool(t, alice, "swarm_start", map[string]any{"app": "counter", "id": "ml"}); r.IsError {
		t.Fatal(text(r))
	}
	ctx := context.Background()
	const ack = "notifications/subscriptions/acknowledged"
	stopA, err := alice.ListenAsync(ctx, mcp.SubscriptionFilter{ToolsListChanged: true,
		ResourceSubscriptions: []string{SessionURI("ml", "model/count")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stopA()
	stopC, err := carol.ListenAsync(ctx, mcp.SubscriptionFilter{ToolsListChanged: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stopC()
	an.waitFor(t, ack, 1)
	cn.waitFor(t, ack, 1)
	// The click updates the projection and enables reset (a new tool).
	callTool(t, alice, "ml.inc.click", nil)
	an.waitFor(t, "notifications/resources/updated", 1)
	if up := an.all("notifications/resources/updated")[0]; up.Params.Meta[mcp.MetaKeySubscriptionID] == nil {
		t.Errorf("resources/updated on a listen stream lacks its subscription id: %v", up.Params.Meta)
	}
	an.waitFor(t, "notifications/tools/list_changed", 1)
	callTool(t, alice, "swarm_start", map[string]any{"app": "counter", "id": "m2"})
	an.waitFor(t, "notifications/tools/list_changed", 2)
	callTool(t, carol, "swarm_start", map[string]any{"app": "counter", "id": "m3"})
	cn.waitFor(t, "notifications/tools/list_changed", 1)
	if got := an.count("notifications/tools/list_changed"); got != 2 {
		t.Errorf("alice saw %d list_changed, want 2", got)
	}
	if got := cn.count("notifications/tools/list_changed"); got != 1 {
		t.Errorf("carol saw %d list_changed", got)
	}
	if got := cn.count("notifications/resources/updated"); got != 0 {
		t.Errorf("carol saw alice's resource updates")
	}
	// Listening to another principal's resource is refused.
	if err := carol.Listen(ctx, mcp.SubscriptionFilter{ResourceSubscriptions: []string{SessionURI("ml", "widgets")}}); err == nil {
		t.Error("carol listened to alice's resource")
	}
}

// assertAskListed checks that tools/list shows name marked with MetaApproval
// and that no Allow tool (askClicks allows all but clicks) carries the mark.
func assertAskListed(t *testing.T, c *client.Client, name string) {
	t.Helper()
	res, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	found := false
	for _, tool := range res.Tools {
		var mark any
		if tool.Meta != nil {
			mark = tool.Meta.AdditionalFields[MetaApproval]
		}
		switch {
		case tool.Name == name:
			found = true
			if p, _ := mark.(string); !strings.Contains(p, name) {
				t.Errorf("%s is listed without the approval mark naming it: _meta %v", name, tool.Meta)
			}
		case mark != nil && !strings.HasSuffix(tool.Name, ".click"):
			t.Errorf("%s is allowed but marked as needing approval", tool.Name)
		}
	}
	if !found {
		t.Errorf("the Ask tool %s is not listed", name)
	}
}
