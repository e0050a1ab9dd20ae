package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mcpswarm/mcpswarm/internal/poll"
	"github.com/mcpswarm/mcpswarm/mcp/apps"
	"github.com/mcpswarm/mcpswarm/session"
)

// connectUI opens a 2025-11-25 client that declares the MCP Apps extension
// (or not) at initialize, with the given headers.
func (e *testEnv) connectUI(t testing.TB, declare bool, headers map[string]string) (*client.Client, *mcp.InitializeResult) {
	t.Helper()
	opts := []transport.StreamableHTTPCOption{transport.WithHTTPLogger(quietLogger())}
	if headers != nil {
		opts = append(opts, transport.WithHTTPHeaders(headers))
	}
	tr, err := transport.NewStreamableHTTP(e.url+"/mcp", opts...)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "apps-host", Version: "1"}
	if declare {
		req.Params.Capabilities.Extensions = map[string]any{apps.Extension: map[string]any{"mimeTypes": []string{apps.MIME}}}
	}
	res, err := c.Initialize(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return c, res
}

func listTools(t testing.TB, c *client.Client) map[string]mcp.Tool {
	t.Helper()
	res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]mcp.Tool{}
	for _, x := range res.Tools {
		out[x.Name] = x
	}
	return out
}

// uiMeta returns a tool's _meta.ui as JSON, or nil.
func uiMeta(t testing.TB, tool mcp.Tool) map[string]any {
	t.Helper()
	if tool.Meta == nil {
		return nil
	}
	ui, _ := tool.Meta.AdditionalFields[apps.MetaUI].(map[string]any)
	return ui
}

// extSchema compiles one definition of the extension's own schema.json
// (copied from @modelcontextprotocol/ext-apps 2.0.4).
func extSchema(t testing.TB, def string) *jsonschema.Schema {
	t.Helper()
	b, err := os.ReadFile("testdata/ext-apps-2.0.4-schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var root map[string]any
	if err := json.Unmarshal(b, &root); err != nil {
		t.Fatal(err)
	}
	defs, _ := root["$defs"].(map[string]any)
	one, ok := defs[def].(map[string]any)
	if !ok {
		t.Fatalf("schema.json has no $defs/%s", def)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://"+def+".json", one); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("mem://" + def + ".json")
	if err != nil {
		t.Fatalf("compiling %s: %v", def, err)
	}
	return s
}

// validate checks v (any JSON-encodable value) against s.
func validate(t testing.TB, s *jsonschema.Schema, what string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(inst); err != nil {
		t.Errorf("%s does not match the extension's schema: %v\n%s", what, err, b)
	}
}

// TestAppsNegotiation: a session-based client that declares the extension
// is offered the app (capability, tool _meta, the app-only tool, the
// resource); one that does not is offered none of it.
func TestAppsNegotiation(t *testing.T) {
	e := newEnv(t, nil)
	ui, init := e.connectUI(t, true, nil)
	if _, ok := init.Capabilities.Extensions[apps.Extension]; !ok {
		t.Errorf("initialize capabilities lack %s: %+v", apps.Extension, init.Capabilities.Extensions)
	}
	tools := listTools(t, ui)
	for _, name := range []string{"swarm_start", "swarm_view", "swarm_screenshot"} {
		m := uiMeta(t, tools[name])
		if m["resourceUri"] != apps.URI || m["visibility"] != nil {
			t.Errorf("%s _meta.ui = %v, want resourceUri %s", name, m, apps.URI)
		}
		if tools[name].Meta.AdditionalFields[apps.MetaOpenAITemplate] != apps.URI {
			t.Errorf("%s lacks %s", name, apps.MetaOpenAITemplate)
		}
	}
	if v := uiMeta(t, tools["swarm_app_view"])["visibility"]; !equalJSON(v, []string{"app"}) {
		t.Errorf("swarm_app_view visibility = %v, want [app]", v)
	}
	if tools["swarm_start"].Meta.AdditionalFields[MetaSensitive] != true {
		t.Error("the UI form of swarm_start lost its sensitive mark")
	}
	res, err := ui.ListResources(context.Background(), mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasResource(res.Resources, apps.URI) {
		t.Errorf("resources/list lacks %s", apps.URI)
	}

	plain, init := e.connectUI(t, false, nil)
	if _, ok := init.Capabilities.Extensions[apps.Extension]; !ok {
		t.Error("the server's capabilities must not depend on the client's")
	}
	tools = listTools(t, plain)
	if _, ok := tools["swarm_app_view"]; ok {
		t.Error("a client without the extension lists the app-only tool")
	}
	for name, tool := range tools {
		if uiMeta(t, tool) != nil {
			t.Errorf("a client without the extension sees _meta.ui on %s", name)
		}
	}
	if _, ok := tools["swarm_view"]; !ok {
		t.Error("swarm_view must stay listed (it answers text) for clients without UI")
	}
	res, err = plain.ListResources(context.Background(), mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if hasResource(res.Resources, apps.URI) {
		t.Error("a client without the extension is offered the app resource")
	}
}

func hasResource(rs []mcp.Resource, uri string) bool {
	for _, r := range rs {
		if r.URI == uri {
			return true
		}
	}
	return false
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestAppsModernEra: server/discover lists the extension and a 2026-07-28
// tools/list carries the _meta.ui keys for everyone (its lists may not vary
// by connection; hosts without UI ignore them).
func TestAppsModernEra(t *testing.T) {
	e := newEnv(t, nil)
	_, body := e.rawPost(t, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+modernMeta+`}}`, modernHeaders("server/discover"))
	var disc struct {
		Result struct {
			Capabilities mcp.ServerCapabilities `json:"capabilities"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(rpcBody(body)), &disc); err != nil {
		t.Fatalf("server/discover: %v: %s", err, body)
	}
	if _, ok := disc.Result.Capabilities.Extensions[apps.Extension]; !ok {
		t.Errorf("server/discover lacks %s: %s", apps.Extension, body)
	}
	_, body = e.rawPost(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{`+modernMeta+`}}`, modernHeaders("tools/list"))
	var list struct {
		Result mcp.ListToolsResult `json:"result"`
	}
	if err := json.Unmarshal([]byte(rpcBody(body)), &list); err != nil {
		t.Fatalf("tools/list: %v: %s", err, body)
	}
	found := map[string]map[string]any{}
	for _, tool := range list.Result.Tools {
		found[tool.Name] = uiMeta(t, tool)
	}
	if found["swarm_start"]["resourceUri"] != apps.URI || found["swarm_app_view"] == nil {
		t.Errorf("modern tools/list lacks the app's _meta: %v", found)
	}
}

// rpcBody returns the JSON-RPC message of an answer sent as JSON or as one
// SSE event.
func rpcBody(body string) string {
	for _, line := range strings.Split(body, "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			return data
		}
	}
	return body
}

// TestAppsResourceMatchesSchema: the resource and every tool's _meta.ui
// match the extension's schema, the HTML is self-contained under a CSP
// that allows nothing but its own inlined bytes, and every app-related
// tool answers text.
func TestAppsResourceMatchesSchema(t *testing.T) {
	e := newEnv(t, nil)
	c, _ := e.connectUI(t, true, nil)
	rr := mcp.ReadResourceRequest{}
	rr.Params.URI = apps.URI
	res, err := c.ReadResource(context.Background(), rr)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Contents) != 1 {
		t.Fatalf("%d contents, want 1", len(res.Contents))
	}
	tc, ok := res.Contents[0].(mcp.TextResourceContents)
	if !ok {
		t.Fatalf("content is %T, want text", res.Contents[0])
	}
	if tc.MIMEType != apps.MIME || tc.URI != apps.URI {
		t.Errorf("content %s %s, want %s %s", tc.URI, tc.MIMEType, apps.URI, apps.MIME)
	}
	validate(t, extSchema(t, "McpUiResourceMeta"), "the content's _meta.ui", tc.Meta[apps.MetaUI])
	csp, _ := tc.Meta[apps.MetaUI].(map[string]any)["csp"].(map[string]any)
	for _, k := range []string{"connectDomains", "resourceDomains", "frameDomains", "baseUriDomains"} {
		if v, ok := csp[k].([]any); !ok || len(v) != 0 {
			t.Errorf("csp.%s = %v, want declared and empty", k, csp[k])
		}
	}
	html := tc.Text
	if !strings.HasPrefix(html, "<!DOCTYPE html>") || !strings.Contains(html, "</html>") {
		t.Error("the resource is not a complete HTML5 document")
	}
	if m := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|\ssrc=|\shref=|@import|url\(`).FindString(html); m != "" {
		t.Errorf("the document refers to something outside itself: %q", m)
	}
	meta := regexp.MustCompile(`http-equiv="Content-Security-Policy" content="([^"]+)"`).FindStringSubmatch(html)
	if meta == nil {
		t.Fatal("the document declares no CSP of its own")
	}
	for _, want := range []string{"default-src 'none'", "connect-src 'none'", "script-src 'sha256-", "frame-src 'none'"} {
		if !strings.Contains(meta[1], want) {
			t.Errorf("the document's CSP %q lacks %q", meta[1], want)
		}
	}
	if strings.Contains(meta[1], "unsafe") {
		t.Errorf("the document's CSP allows unsafe sources: %q", meta[1])
	}

	toolMeta := extSchema(t, "McpUiToolMeta")
	for name, tool := range listTools(t, c) {
		if m := uiMeta(t, tool); m != nil {
			validate(t, toolMeta, name+" _meta.ui", m)
		}
	}
	// Every tool that shows the app answers text too.
	start := callTool(t, c, "swarm_start", map[string]any{"app": "counter", "id": "cs"})
	for name, r := range map[string]*mcp.CallToolResult{
		"swarm_start":      start,
		"swarm_view":       callTool(t, c, "swarm_view", map[string]any{"id": "cs"}),
		"swarm_screenshot": callTool(t, c, "swarm_screenshot", map[string]any{"id": "cs"}),
		"swarm_app_view":   callTool(t, c, "swarm_app_view", map[string]any{"id": "cs"}),
	} {
		if r.IsError || strings.TrimSpace(text(r)) == "" {
			t.Errorf("%s answered no text: %+v", name, r)
		}
	}
	if !strings.Contains(text(callTool(t, c, "swarm_view", map[string]any{"id": "cs"})), "Count: 0") {
		t.Error("swarm_view's text does not show the session")
	}
}

type appViewResult struct {
	Session  appSession      `json:"session"`
	Revision string          `json:"revision"`
	Widgets  json.RawMessage `json:"widgets"`
	Problem  string          `json:"problem"`
}

func appViewOf(t testing.TB, r *mcp.CallToolResult) appViewResult {
	t.Helper()
	var v appViewResult
	if err := json.Unmarshal([]byte(text(r)), &v); err != nil {
		t.Fatalf("swarm_app_view text is not its view: %v: %s", err, text(r))
	}
	return v
}

// TestAppViewWaitsForChange: swarm_app_view answers at once without since,
// waits while the revision is the one given, and wakes on a change made by
// another connection (the agent).
func TestAppViewWaitsForChange(t *testing.T) {
	e := newEnv(t, nil)
	app, _ := e.connectUI(t, true, nil)
	callTool(t, app, "swarm_start", map[string]any{"app": "counter", "id": "cw"})
	v := appViewOf(t, callTool(t, app, "swarm_app_view", map[string]any{"id": "cw"}))
	if v.Revision == "" || !strings.Contains(string(v.Widgets), "Count: 0") {
		t.Fatalf("first view: %+v", v)
	}
	// Unchanged: the call waits the whole wait_ms.
	t0 := time.Now()
	same := appViewOf(t, callTool(t, app, "swarm_app_view", map[string]any{"id": "cw", "since": v.Revision, "wait_ms": 300}))
	if d := time.Since(t0); d < 250*time.Millisecond || same.Revision != v.Revision {
		t.Errorf("an unchanged view answered after %v with revision %s (want ≥300ms, %s)", d, same.Revision, v.Revision)
	}
	// A change wakes the waiting call.
	done := make(chan appViewResult, 1)
	go func() {
		done <- appViewOf(t, callTool(t, app, "swarm_app_view", map[string]any{"id": "cw", "since": v.Revision, "wait_ms": 10000}))
	}()
	awaitAppWaiter(t, e.srv, "cw")
	if r := callTool(t, app, "cw.inc.click", nil); r.IsError {
		t.Fatal(text(r))
	}
	select {
	case nv := <-done:
		if nv.Revision == v.Revision || !strings.Contains(string(nv.Widgets), "Count: 1") {
			t.Errorf("woken view: %+v", nv)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a change did not wake swarm_app_view")
	}
}

// TestAppViewIsolationAndMasks: another principal's session never renders
// (bob gets the same problem as for a session that does not exist), and a
// masked field's value never reaches the app.
func TestAppViewIsolationAndMasks(t *testing.T) {
	e := newEnv(t, func(c *Config, _ *session.Registry) { c.Guard = tokenGuard(t) })
	alice, _ := e.connectUI(t, true, bearer("alice-token"))
	carol, _ := e.connectUI(t, true, bearer("carol-token"))
	if r := callTool(t, alice, "swarm_start", map[string]any{"app": "login", "id": "lg"}); r.IsError {
		t.Fatal(text(r))
	}
	if r := callTool(t, alice, "lg.password.type_into", map[string]any{"text": "s3cr3t-pw"}); r.IsError {
		t.Fatal(text(r))
	}
	own := callTool(t, alice, "swarm_app_view", map[string]any{"id": "lg"})
	if strings.Contains(text(own), "s3cr3t-pw") || strings.Contains(string(mustJSON(t, own)), "s3cr3t-pw") {
		t.Error("the app view carries a masked value")
	}
	if v := appViewOf(t, own); v.Problem != "" || !strings.Contains(string(v.Widgets), `"password"`) {
		t.Errorf("alice's own view: %+v", v)
	}
	other := appViewOf(t, callTool(t, carol, "swarm_app_view", map[string]any{"id": "lg"}))
	none := appViewOf(t, callTool(t, carol, "swarm_app_view", map[string]any{"id": "nosuch"}))
	if other.Widgets != nil || other.Problem == "" || other.Session.App != "" {
		t.Errorf("carol sees alice's session: %+v", other)
	}
	if strings.ReplaceAll(other.Problem, "lg", "x") != strings.ReplaceAll(none.Problem, "nosuch", "x") {
		t.Errorf("carol can tell alice's session from a missing one: %q vs %q", other.Problem, none.Problem)
	}
	if r := callTool(t, carol, "swarm_view", map[string]any{"id": "lg"}); !r.IsError {
		t.Error("carol viewed alice's session")
	}
	if r := callTool(t, carol, "lg.submit.click", nil); !r.IsError {
		t.Error("carol acted in alice's session")
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAppViewShutdownReleasesWaits: a node shutting down releases every
// waiting swarm_app_view, and later calls do not wait, so no long poll
// holds the drain of requests in flight.
func TestAppViewShutdownReleasesWaits(t *testing.T) {
	e := newEnv(t, nil)
	app, _ := e.connectUI(t, true, nil)
	callTool(t, app, "swarm_start", map[string]any{"app": "counter", "id": "cd"})
	v := appViewOf(t, callTool(t, app, "swarm_app_view", map[string]any{"id": "cd"}))
	done := make(chan time.Duration, 1)
	go func() {
		t0 := time.Now()
		callTool(t, app, "swarm_app_view", map[string]any{"id": "cd", "since": v.Revision, "wait_ms": 20000})
		done <- time.Since(t0)
	}()
	awaitAppWaiter(t, e.srv, "cd")
	e.srv.appWaits.CloseAll()
	select {
	case d := <-done:
		t.Logf("released after %v", d)
	case <-time.After(5 * time.Second):
		t.Fatal("closeAll did not release a waiting swarm_app_view")
	}
	t0 := time.Now()
	callTool(t, app, "swarm_app_view", map[string]any{"id": "cd", "since": v.Revision, "wait_ms": 20000})
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("after closeAll a call still waited %v", d)
	}
}

// awaitAppWaiter waits until a swarm_app_view call waits on session id. It
// registers before it reads the view, so a change made after this returns
// wakes it (or is in the view it reads).
func awaitAppWaiter(t *testing.T, s *Server, id string) {
	t.Helper()
	poll.True(t, 5*time.Second, "a swarm_app_view call waits on "+id, func() bool {
		return s.appWaits.Waiting(id) > 0
	})
}
