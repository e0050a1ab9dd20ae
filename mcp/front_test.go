package mcp

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/mcp/seal"
	"github.com/mcpswarm/mcpswarm/session"
)

func (e *testEnv) do(t *testing.T, method, path string, headers map[string]string) int {
	t.Helper()
	req, _ := http.NewRequest(method, e.url+path, nil)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestBadInputKeepsServing(t *testing.T) {
	e := newEnv(t, nil)
	c, _ := e.connect(t, clientOpts{})
	sid := c.GetSessionId()
	h := map[string]string{headerSessionID: sid, headerProtocolVersion: mcp.ProtocolVersion20251125}
	forged := map[string]string{headerSessionID: "s1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", headerProtocolVersion: mcp.ProtocolVersion20251125}
	other, _ := seal.NewSessionIDs([]byte("another-key-another-key-another-"), "n1")
	unminted := map[string]string{headerSessionID: other.Mint(""), headerProtocolVersion: mcp.ProtocolVersion20251125}

	cases := []struct {
		name    string
		body    string
		headers map[string]string
		status  int
		code    int
	}{
		{"malformed json", `{"jsonrpc":`, h, 400, codeParseError},
		{"deep json", `{"jsonrpc":"2.0","id":1,"method":"ping","params":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, h, 400, codeInvalidRequest},
		{"batch too large", "[" + strings.Repeat(`{"jsonrpc":"2.0","id":1,"method":"ping"},`, 40) + `{"jsonrpc":"2.0","id":2,"method":"ping"}]`, h, 400, codeInvalidRequest},
		{"invalid id", `{"jsonrpc":"2.0","id":[1],"method":"ping"}`, h, 400, codeInvalidRequest},
		{"huge body", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", DefaultMaxBodyBytes) + `"}}`, h, 413, codeInvalidRequest},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"no/such"}`, h, 200, codeMethodNotFound},
		{"unknown tool", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope"}}`, h, 200, codeInvalidParams},
	}
	for _, tc := range cases {
		status, body := e.rawPost(t, tc.body, tc.headers)
		if status != tc.status {
			t.Errorf("%s: status %d, want %d (%.200s)", tc.name, status, tc.status, body)
			continue
		}
		if code, _, _ := rpcErrorOf(t, body); code != tc.code {
			t.Errorf("%s: code %d, want %d", tc.name, code, tc.code)
		}
	}
	// A session id nobody minted: 404 on POST, GET and DELETE.
	for _, hh := range []map[string]string{forged, unminted} {
		if status, _ := e.rawPost(t, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, hh); status != 404 {
			t.Errorf("POST with unminted id: %d", status)
		}
		for _, m := range []string{http.MethodGet, http.MethodDelete} {
			if got := e.do(t, m, "/mcp", hh); got != 404 {
				t.Errorf("%s with unminted id: %d", m, got)
			}
		}
	}
	// Still serving, and the real session is intact.
	if err := c.Ping(context.Background()); err != nil {
		t.Fatalf("ping after bad input: %v", err)
	}
	if r := callTool(t, c, "swarm_apps", nil); r.IsError {
		t.Fatal(text(r))
	}
	// DELETE ends the session; the id is then refused.
	if got := e.do(t, http.MethodDelete, "/mcp", h); got != 200 {
		t.Fatalf("DELETE: %d", got)
	}
	if status, _ := e.rawPost(t, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, h); status != 404 {
		t.Errorf("POST after DELETE: %d", status)
	}
}

func TestDNSRebindingRefused(t *testing.T) {
	e := newEnv(t, nil)
	for _, hdr := range []map[string]string{{"Host": "evil.example"}, {"Origin": "http://evil.example"}} {
		req, _ := http.NewRequest(http.MethodPost, e.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%v: status %d", hdr, resp.StatusCode)
		}
	}
}

func TestReadAuthorizerDenies(t *testing.T) {
	reads := authz.ReadAuthorizerFunc(func(_ context.Context, method string, _ any, _ authz.Context) authz.Decision {
		if method == "resources/read" || method == "prompts/get" || method == "logging/setLevel" || method == "completion/complete" {
			return authz.Deny("not for you", "test:1")
		}
		return authz.Allow("test:2")
	})
	e := newEnv(t, func(c *Config, _ *session.Registry) {
		g, err := authz.NewGuard(authz.DevGuard().Tools, reads)
		if err != nil {
			t.Fatal(err)
		}
		c.Guard = g
	})
	c, _ := e.connect(t, clientOpts{})
	h := map[string]string{headerSessionID: c.GetSessionId(), headerProtocolVersion: mcp.ProtocolVersion20251125}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"swarm://me"}}`,
		`{"jsonrpc":"2.0","id":7,"method":"prompts/get","params":{"name":"login"}}`,
		`{"jsonrpc":"2.0","id":7,"method":"logging/setLevel","params":{"level":"debug"}}`,
		`{"jsonrpc":"2.0","id":7,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"login"},"argument":{"name":"id","value":""}}}`,
	} {
		status, resp := e.rawPost(t, body, h)
		code, _, data := rpcErrorOf(t, resp)
		if status != 200 || code != authz.ReadDeniedCode || data["error"] != "forbidden" || data["method"] == "" || data["detail"] == "" {
			t.Errorf("%s: %d %d %v", body, status, code, data)
		}
	}
	// The client sees an error too; allowed reads still work.
	rr := mcp.ReadResourceRequest{}
	rr.Params.URI = URIMe
	if _, err := c.ReadResource(context.Background(), rr); err == nil {
		t.Error("denied read succeeded")
	}
	if _, err := c.ListResources(context.Background(), mcp.ListResourcesRequest{}); err != nil {
		t.Errorf("allowed list: %v", err)
	}
}

func TestAuthentication(t *testing.T) {
	e := newEnv(t, func(c *Config, _ *session.Registry) { c.Guard = tokenGuard(t) })
	// No token: 401 with a challenge naming the metadata.
	req, _ := http.NewRequest(http.MethodPost, e.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "resource_metadata") {
		t.Errorf("no token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	if got := e.do(t, http.MethodGet, wellKnownPRM, nil); got != 200 {
		t.Errorf("protected resource metadata: %d", got)
	}
	if st, _ := e.rawPost(t, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, bearer("wrong")); st != 401 {
		t.Errorf("bad token: %d", st)
	}
	alice, _ := e.connect(t, clientOpts{headers: bearer("alice-token")})
	if r := callTool(t, alice, "swarm_start", map[string]any{"app": "counter", "id": "al"}); r.IsError {
		t.Fatal(text(r))
	}
	if info, _ := e.srv.cfg.Backend.Lookup("al"); info.Principal != "alice" {
		t.Errorf("owner %q, want alice", info.Principal)
	}
	// Carol presenting alice's connection id is refused.
	h := bearer("carol-token")
	h[headerSessionID] = alice.GetSessionId()
	h[headerProtocolVersion] = mcp.ProtocolVersion20251125
	if st, _ := e.rawPost(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, h); st != 404 {
		t.Errorf("carol with alice's id: %d", st)
	}
	if got := e.do(t, http.MethodGet, "/mcp", h); got != 404 {
		t.Errorf("carol GET with alice's id: %d", got)
	}
	// Alice on a second connection sees her session (principal, not connection).
	alice2, _ := e.connect(t, clientOpts{headers: bearer("alice-token")})
	if !toolNames(t, alice2)["al.inc.click"] {
		t.Error("alice's second connection does not see her session")
	}
}
