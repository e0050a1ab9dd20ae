package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// An MCP client that spawns `mcpswarm serve --stdio`, as desktop clients
// do, drives the login demo over standard input and output; closing stdin
// ends the process cleanly.
func TestStdioClientDrivesLoginThroughTheBinary(t *testing.T) {
	bin := buildNode(t)
	dir := t.TempDir()
	args := []string{"serve", "--dev", "--stdio", "--name", "stdio1",
		"--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--gossip", "127.0.0.1:0",
		"--data-dir", dir, "--log-format", "json"}
	c, err := client.NewStdioMCPClient(bin, nil, args...)
	if err != nil {
		t.Fatalf("starting %s over stdio: %v", bin, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	init.Params.ClientInfo = mcp.Implementation{Name: "stdio-e2e", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize over stdio: %v", err)
	}
	call := func(name string, args map[string]any) string {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, args
		res, err := c.CallTool(ctx, req)
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %v", name, err, res)
		}
		var b strings.Builder
		for _, ct := range res.Content {
			if tc, ok := ct.(mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String()
	}
	call("swarm_start", map[string]any{"app": "login", "id": "io"})
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tl := range tools.Tools {
		found = found || tl.Name == "io.submit.click"
	}
	if !found {
		t.Fatal("tools/list over stdio lacks io.submit.click")
	}
	call("io.username.type_into", map[string]any{"text": "demo"})
	call("io.password.type_into", map[string]any{"text": "hunter2"})
	call("io.submit.click", nil)
	rr := mcp.ReadResourceRequest{}
	rr.Params.URI = "swarm://session/io/model/status"
	res, err := c.ReadResource(ctx, rr)
	if err != nil {
		t.Fatal(err)
	}
	if txt := res.Contents[0].(mcp.TextResourceContents).Text; !strings.Contains(txt, "Signed in as demo") {
		t.Fatalf("status over stdio: %s", txt)
	}
	// Closing the client closes the child's stdin; the node shuts down and
	// exits 0 (Close waits for the process and reports a failed exit).
	if err := c.Close(); err != nil {
		t.Fatalf("the node did not exit cleanly after stdin closed: %v", err)
	}
}
