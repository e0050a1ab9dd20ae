package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/session"
)

// bareServer is a plain mcp-go Streamable HTTP server with one trivial
// tool equivalent to swarm_members and n global tools.
func bareServer(b *testing.B, n int) string {
	s := server.NewMCPServer("bare", "1", server.WithToolCapabilities(true))
	s.AddTool(mcp.Tool{Name: "swarm_members", RawInputSchema: json.RawMessage(`{"type":"object","properties":{}}`)},
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			v := map[string]any{"members": []map[string]any{{"name": "n1", "state": "alive", "grpc": "", "version": "dev", "self": true}}}
			b, _ := json.Marshal(v)
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(string(b))}, StructuredContent: v}, nil
		})
	// The same definitions the front lists (annotations and _meta included).
	tools := make([]server.ServerTool, 0, n)
	for _, t := range newManyTools(n).tools {
		tools = append(tools, server.ServerTool{Tool: mcpTool(t)})
	}
	if n > 0 {
		s.AddTools(tools...)
	}
	ts := httptest.NewServer(server.NewStreamableHTTPServer(s))
	b.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

func benchClient(b *testing.B, url string) *client.Client {
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPLogger(quietLogger()))
	if err != nil {
		b.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return c
}

func benchCall(b *testing.B, c *client.Client, name string) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		r, err := c.CallTool(ctx, req)
		if err != nil || r.IsError {
			b.Fatalf("%v %v", err, r)
		}
	}
}

// BenchmarkToolsCall compares a trivial tools/call through the whole front
// (limits, sealed id check, read precheck, view install, authorizer, rate
// limiter) with the same tool on a bare mcp-go server, both over loopback
// HTTP with mcp-go's client.
func BenchmarkToolsCall(b *testing.B) {
	b.Run("bare-mcp-go", func(b *testing.B) {
		benchCall(b, benchClient(b, bareServer(b, 0)), "swarm_members")
	})
	b.Run("mcpswarm-static", func(b *testing.B) {
		e := newEnv(b, func(c *Config, _ *session.Registry) {
			c.RateLimiter = authz.NewRateLimiter(authz.Limits{CallsPerSecond: 1e9, CallBurst: 1 << 30})
		})
		benchCall(b, benchClient(b, e.url+"/mcp"), "swarm_members")
	})
	b.Run("mcpswarm-derived", func(b *testing.B) {
		e := newEnv(b, nil)
		c := benchClient(b, e.url+"/mcp")
		req := mcp.CallToolRequest{}
		req.Params.Name = "swarm_start"
		req.Params.Arguments = map[string]any{"app": "counter", "id": "bc"}
		if _, err := c.CallTool(context.Background(), req); err != nil {
			b.Fatal(err)
		}
		benchCall(b, c, "bc.inc.click")
	})
}

// manyTools is a Backend whose every principal has n derived tools.
type manyTools struct {
	LocalBackend
	tools []session.Tool
}

func (m *manyTools) Tools(authz.Principal) []session.Tool { return m.tools }
func (m *manyTools) Watch(func(Event)) func()             { return func() {} }
func (m *manyTools) Apps() []session.AppInfo              { return nil }

func newManyTools(n int) *manyTools {
	m := &manyTools{}
	for i := range n {
		sid := fmt.Sprintf("s%d", i/10)
		m.tools = append(m.tools, session.Tool{Name: fmt.Sprintf("%s.w%d.click", sid, i%10), Session: sid, Widget: fmt.Sprintf("w%d", i%10),
			Action: "click", Kind: "button", Description: "Click the button.", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`), Sensitive: true})
	}
	return m
}

// BenchmarkToolsList lists n derived tools per call: over HTTP through the
// front, over HTTP from a bare mcp-go server holding the same n tools as
// global tools, and the front's view building alone.
func BenchmarkToolsList(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("bare-mcp-go/%d", n), func(b *testing.B) {
			c := benchClient(b, bareServer(b, n))
			benchList(b, c, n+1)
		})
		b.Run(fmt.Sprintf("mcpswarm-http/%d", n), func(b *testing.B) {
			e := newEnv(b, func(c *Config, _ *session.Registry) { c.Backend = newManyTools(n) })
			benchList(b, benchClient(b, e.url+"/mcp"), n+len(staticDefs))
		})
		b.Run(fmt.Sprintf("mcpswarm-view/%d", n), func(b *testing.B) {
			e := newEnv(b, func(c *Config, _ *session.Registry) { c.Backend = newManyTools(n) })
			ctx := context.Background()
			c := authz.Context{Principal: authz.ConnPrincipal("x"), Transport: authz.TransportStreamableHTTP}
			for b.Loop() {
				if v := e.srv.listView(ctx, c, true); len(v) != n+len(staticDefs) {
					b.Fatalf("view of %d", len(v))
				}
			}
		})
	}
}

func benchList(b *testing.B, c *client.Client, want int) {
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		r, err := c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil || len(r.Tools) != want {
			b.Fatalf("%v: %d tools, want %d", err, len(r.Tools), want)
		}
	}
}

// BenchmarkToolsCallRatio alternates the same trivial call on a bare mcp-go
// server and on the front within one loop, so both see the same machine
// load; it reports each one's mean and their ratio.
func BenchmarkToolsCallRatio(b *testing.B) {
	bare := benchClient(b, bareServer(b, 0))
	e := newEnv(b, func(c *Config, _ *session.Registry) {
		c.RateLimiter = authz.NewRateLimiter(authz.Limits{CallsPerSecond: 1e9, CallBurst: 1 << 30})
	})
	ours := benchClient(b, e.url+"/mcp")
	req := mcp.CallToolRequest{}
	req.Params.Name = "swarm_members"
	ctx := context.Background()
	var tBare, tOurs time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if _, err := bare.CallTool(ctx, req); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if r, err := ours.CallTool(ctx, req); err != nil || r.IsError {
			b.Fatal(err)
		}
		tOurs += time.Since(t1)
		tBare += t1.Sub(t0)
	}
	b.ReportMetric(float64(tBare.Nanoseconds())/float64(b.N), "bare-ns/call")
	b.ReportMetric(float64(tOurs.Nanoseconds())/float64(b.N), "front-ns/call")
	b.ReportMetric(float64(tOurs)/float64(tBare), "ratio")
}

// BenchmarkToolsListRatio alternates tools/list of n tools on a bare mcp-go
// server (n global tools) and on the front (n derived tools of the caller,
// each checked by the authorizer), reporting both means and their ratio.
func BenchmarkToolsListRatio(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			bare := benchClient(b, bareServer(b, n))
			e := newEnv(b, func(c *Config, _ *session.Registry) { c.Backend = newManyTools(n) })
			ours := benchClient(b, e.url+"/mcp")
			ctx := context.Background()
			var tBare, tOurs time.Duration
			for b.Loop() {
				t0 := time.Now()
				if r, err := bare.ListTools(ctx, mcp.ListToolsRequest{}); err != nil || len(r.Tools) != n+1 {
					b.Fatal(err)
				}
				t1 := time.Now()
				if r, err := ours.ListTools(ctx, mcp.ListToolsRequest{}); err != nil || len(r.Tools) != n+len(staticDefs) {
					b.Fatal(err)
				}
				tOurs += time.Since(t1)
				tBare += t1.Sub(t0)
			}
			b.ReportMetric(float64(tBare.Microseconds())/float64(b.N), "bare-µs/list")
			b.ReportMetric(float64(tOurs.Microseconds())/float64(b.N), "front-µs/list")
			b.ReportMetric(float64(tOurs)/float64(tBare), "ratio")
		})
	}
}
