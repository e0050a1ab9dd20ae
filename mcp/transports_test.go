package mcp

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/mcp/seal"
	"github.com/mcpswarm/mcpswarm/session"
)

func denyResourceReads(t testing.TB) func(*Config, *session.Registry) {
	return func(c *Config, _ *session.Registry) {
		reads := authz.ReadAuthorizerFunc(func(_ context.Context, method string, _ any, _ authz.Context) authz.Decision {
			if method == "resources/read" {
				return authz.Deny("no reading", "test:1")
			}
			return authz.Allow("test:2")
		})
		g, err := authz.NewGuard(authz.DevGuard().Tools, reads)
		if err != nil {
			t.Fatal(err)
		}
		c.Guard = g
	}
}

// exercise drives a connected client through the common surface.
func exercise(t *testing.T, c *client.Client, id string) {
	t.Helper()
	ctx := context.Background()
	if r := callTool(t, c, "swarm_start", map[string]any{"app": "counter", "id": id}); r.IsError {
		t.Fatal(text(r))
	}
	if !toolNames(t, c)[id+".inc.click"] {
		t.Fatal("derived tool not listed")
	}
	if r := callTool(t, c, id+".inc.click", nil); r.IsError {
		t.Fatal(text(r))
	}
	if s := callTool(t, c, "swarm_screenshot", map[string]any{"id": id}); !strings.Contains(text(s), "Count: 1") {
		t.Errorf("screenshot: %s", text(s))
	}
	prompts, err := c.ListPrompts(ctx, mcp.ListPromptsRequest{})
	if err != nil || len(prompts.Prompts) < 7 {
		t.Errorf("prompts: %v %v", prompts, err)
	}
	rr := mcp.ReadResourceRequest{}
	rr.Params.URI = URIMe
	_, err = c.ReadResource(ctx, rr)
	if err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("denied read: %v", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// sseClient connects over legacy HTTP+SSE, pinned to 2025-11-25.
func sseClient(t *testing.T, url string, opts ...client.ClientOption) *client.Client {
	t.Helper()
	tr, err := transport.NewSSE(url+"/sse", transport.WithSSELogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, append([]client.ClientOption{client.WithProtocolVersion(mcp.ProtocolVersion20251125)}, opts...)...)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestSSETransport(t *testing.T) {
	e := newEnv(t, denyResourceReads(t))
	c := sseClient(t, e.url)
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	exercise(t, c, "ss")
	// The SSE connection's principal is its sealed (serial) id.
	if info, _ := e.srv.cfg.Backend.Lookup("ss"); !strings.HasPrefix(info.Principal, "conn:"+seal.SerialPrefix) {
		t.Errorf("owner %q", info.Principal)
	}
	// A message for an id nobody minted is refused.
	status, _ := postTo(t, e.url+"/message?sessionId=s1.forged", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if status != 404 {
		t.Errorf("forged sse session: %d", status)
	}
}

func TestStdioTransport(t *testing.T) {
	e := newEnv(t, denyResourceReads(t))
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- e.srv.ServeStdio(ctx, inR, outW)
		_ = outW.Close()
	}()
	tr := transport.NewIO(outR, inW, nil)
	c := client.NewClient(tr)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	exercise(t, c, "so")
	if info, _ := e.srv.cfg.Backend.Lookup("so"); info.Principal != "stdio" {
		t.Errorf("owner %q", info.Principal)
	}
	// Limits apply on stdio too: a batch is refused with a JSON-RPC error
	// and the server keeps serving.
	if _, err := inW.Write([]byte(`[{"jsonrpc":"2.0","id":99,"method":"ping"}]` + "\n")); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	_ = inW.Close()
	// The client is gone, as a client process that exits: a late
	// notification the server writes must fail, not wait for a reader.
	_ = outR.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeStdio did not return")
	}
}

func TestSSECannotElicitSoAskIsAuthorizationRequired(t *testing.T) {
	e := newEnv(t, askClicks(t, time.Second))
	c := sseClient(t, e.url, client.WithElicitationHandler(answer(mcp.ElicitationResponseActionAccept, true)))
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	callTool(t, c, "swarm_start", map[string]any{"app": "counter", "id": "se"})
	r := callTool(t, c, "se.inc.click", nil)
	if data, _ := r.StructuredContent.(map[string]any); !r.IsError || data["error"] != "authorization_required" {
		t.Errorf("ask over sse: %v %s", r.IsError, text(r))
	}
}
