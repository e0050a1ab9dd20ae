package mcp_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/mcp"
	"github.com/mcpswarm/mcpswarm/mcp/fixture"
	"github.com/mcpswarm/mcpswarm/session"
	"github.com/mcpswarm/mcpswarm/session/apps"
)

// TestConformanceFixtureThroughTheFront plugs the conformance fixture in
// with Config.Extend and checks its progress and logging tools deliver
// every notification through the whole front, repeatedly.
func TestConformanceFixtureThroughTheFront(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := session.NewRegistry()
	if err := apps.Register(reg); err != nil {
		t.Fatal(err)
	}
	mgr, err := session.NewManager(session.ManagerConfig{Registry: reg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := mcp.New(mcp.Config{Node: "n1", Backend: mcp.NewLocalBackend("n1", mgr), Cluster: mcp.LoneCluster(), Guard: authz.DevGuard(),
		SessionKey: []byte("0123456789abcdef0123456789abcdef"), Logger: log, Keepalive: time.Hour,
		Extend: fixture.Register, Completer: fixture.Completer{}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	tr, err := transport.NewStreamableHTTP(ts.URL+"/mcp", transport.WithHTTPLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcpgo.ProtocolVersion20251125))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close()
		_ = srv.Shutdown(ctx)
		ts.CloseClientConnections()
		ts.Close()
		_ = mgr.Close(ctx)
	})
	var mu sync.Mutex
	seen := map[string]int{}
	c.OnNotification(func(n mcpgo.JSONRPCNotification) {
		mu.Lock()
		seen[n.Method]++
		mu.Unlock()
	})
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcpgo.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetLevel(ctx, mcpgo.SetLevelRequest{Params: mcpgo.SetLevelParams{Level: mcpgo.LoggingLevelDebug}}); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListTools(ctx, mcpgo.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, tl := range list.Tools {
		have[tl.Name] = true
	}
	if !have[fixture.ToolProgress] || !have["swarm_start"] {
		t.Fatalf("fixture and front tools not both listed: %v", have)
	}
	const rounds = 10
	for i := 0; i < rounds; i++ {
		req := mcpgo.CallToolRequest{}
		req.Params.Name = fixture.ToolProgress
		req.Params.Meta = &mcpgo.Meta{ProgressToken: fmt.Sprint("t", i)}
		if _, err := c.CallTool(ctx, req); err != nil {
			t.Fatal(err)
		}
		req = mcpgo.CallToolRequest{}
		req.Params.Name = fixture.ToolLogging
		if _, err := c.CallTool(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := rounds * len(fixture.ProgressSteps()); seen["notifications/progress"] != want {
		t.Errorf("progress notifications %d, want %d", seen["notifications/progress"], want)
	}
	if want := rounds * len(fixture.LogMessages()); seen["notifications/message"] < want {
		t.Errorf("log notifications %d, want at least %d", seen["notifications/message"], want)
	}
}
